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


APP_TOKENS = 2600  # the largest app (translate.py) had 2,555 when lines were counted


def test_every_app_is_thin():
    """Each app is a command line over the library (the library-worthy
    code lives in seqkeras): at most APP_TOKENS Python tokens, comments
    and layout not counted. A rule of 300 lines was met by packing
    statements (`a, b = x, y`) and lambdas; tokens do not change with
    layout, so only moving code makes an app thinner."""
    import io
    import tokenize

    layout = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT}
    layout |= {tokenize.DEDENT, tokenize.ENDMARKER}
    sizes = {}
    for name in sorted(os.listdir(APPS)):
        if name.endswith(".py"):
            with open(os.path.join(APPS, name), encoding="utf-8") as f:
                tokens = tokenize.generate_tokens(io.StringIO(f.read()).readline)
                sizes[name] = sum(1 for t in tokens if t.type not in layout)
    assert len(sizes) >= 10
    assert all(n <= APP_TOKENS for n in sizes.values()), {
        k: n for k, n in sizes.items() if n > APP_TOKENS
    }


def test_the_apps_have_no_packed_statements_or_lambdas():
    """The apps read top to bottom: one name per assignment of a tuple of
    values (not `a, b = x, y`; unpacking what a call returns is fine) and
    functions with names instead of lambdas bound to names."""
    found = []
    for name in sorted(os.listdir(APPS)):
        if name.endswith(".py"):
            with open(os.path.join(APPS, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if not isinstance(node, ast.Assign):
                    continue
                packed = isinstance(node.targets[0], ast.Tuple) and isinstance(
                    node.value, ast.Tuple
                )
                if packed or isinstance(node.value, ast.Lambda):
                    found.append(f"{name}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert not found, found


def test_every_name_the_apps_take_from_common_is_there():
    """`common.x` in an app is defined or imported in common.py (the
    exports that use them run only in the slow tests)."""
    import re

    with open(os.path.join(APPS, "common.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom):
            defined |= {a.asname or a.name for a in node.names}
    used = set()
    for name in os.listdir(APPS):
        if name.endswith(".py") and name != "common.py":
            with open(os.path.join(APPS, name), encoding="utf-8") as f:
                used |= set(re.findall(r"\bcommon\.([A-Za-z_]\w*)", f.read()))
    assert used and not used - defined, sorted(used - defined)
