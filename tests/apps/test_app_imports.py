"""The apps import each other without a circle (a module's imports,
top-level and inside functions, form a graph with no cycle)."""

import ast
import os

APPS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "apps")


def _graph():
    modules = {f[:-3] for f in os.listdir(APPS) if f.endswith(".py")}
    graph = {}
    for name in modules:
        with open(os.path.join(APPS, name + ".py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
        graph[name] = sorted(found & modules - {name})
    return graph


def test_the_apps_import_graph_has_no_circle():
    graph, state, path = _graph(), {}, []

    def visit(name):
        state[name] = "open"
        path.append(name)
        for other in graph[name]:
            assert state.get(other) != "open", f"import circle: {' -> '.join(path + [other])}"
            if other not in state:
                visit(other)
        path.pop()
        state[name] = "done"

    assert "common" in graph and "cli" in graph
    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_every_app_is_thin():
    """Each app is a command line over the library: under 300 lines (the
    library-worthy code lives in seqkeras)."""
    sizes = {}
    for name in sorted(os.listdir(APPS)):
        if name.endswith(".py"):
            with open(os.path.join(APPS, name), encoding="utf-8") as f:
                sizes[name] = sum(1 for _ in f)
    assert len(sizes) >= 10
    assert all(n < 300 for n in sizes.values()), {k: n for k, n in sizes.items() if n >= 300}
