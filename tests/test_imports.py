"""The package's import graph has no circle and imports only downward
(layers < data, decoding < models < metrics, export, pretrained < training),
and every module imports on
its own in a fresh process, with no other seqkeras module loaded first."""

import ast
import json
import os
import subprocess
import sys

import seqkeras

PACKAGE = os.path.dirname(os.path.abspath(seqkeras.__file__))
#: Which subpackages each may import (a module's own subpackage always).
#: `seqkeras/__init__.py` is left out: it only gathers the namespaces.
ALLOWED = {
    "_atomic": set(),
    "_traced": set(),
    "_gguf": set(),
    "plots": set(),
    "layers": set(),
    "distribute": set(),
    "decoding": {"layers"},
    "data": {"layers", "_traced", "_gguf"},
    "models": {"layers", "data", "decoding", "distribute", "_atomic", "_traced"},
    "metrics": {"layers", "data", "models"},
    "export": {"layers", "data", "decoding", "models", "distribute", "_atomic", "metrics"},
    "pretrained": {"layers", "data", "decoding", "models", "distribute", "_gguf"},
    "training": {"layers", "data", "decoding", "models", "distribute", "pretrained", "_atomic"},
}


def modules():
    """`{module name: path}` of every module of the installed package."""
    found = {}
    for directory, _, files in os.walk(PACKAGE):
        for file in files:
            if not file.endswith(".py"):
                continue
            path = os.path.join(directory, file)
            parts = os.path.relpath(path, os.path.dirname(PACKAGE))
            parts = parts[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def import_graph():
    """`{module: set of seqkeras modules it imports}`, imports inside
    functions included (a lazy import is an edge too)."""
    mods = modules()

    def resolve(name):
        while name not in mods and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    graph = {}
    for name, path in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        edges = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and (node.module.split(".")[0] == "seqkeras")
            ):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    edges.add(full if full in mods else resolve(node.module))
            elif isinstance(node, ast.Import):
                edges |= {resolve(a.name) for a in node.names if a.name.split(".")[0] == "seqkeras"}
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def subpackage(name):
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def test_the_graph_finds_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    graph = import_graph()
    assert "seqkeras.models.base" in graph
    assert cycles(graph) == []


def test_subpackages_import_downward():
    wrong = []
    for name, edges in import_graph().items():
        own = subpackage(name)
        if own is None or own == "__main__":
            continue
        for edge in edges:
            other = subpackage(edge)
            if other not in (None, own) and other not in ALLOWED[own]:
                wrong.append(f"{name} imports {edge}")
    assert not wrong, wrong


_ALONE = """
import importlib, json, sys
import keras, tensorflow  # third-party modules may stay loaded
names = json.loads(sys.argv[1])
failed = {}
for name in names:
    for loaded in [m for m in sys.modules if m.split(".")[0] == "seqkeras"]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as error:
        failed[name] = f"{type(error).__name__}: {error}"
print(json.dumps(failed))
"""


def test_each_module_imports_alone_in_a_fresh_process():
    names = sorted(n for n in modules() if not n.endswith("__main__"))
    result = subprocess.run(
        [sys.executable, "-c", _ALONE, json.dumps(names)],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    failed = json.loads(result.stdout.strip().splitlines()[-1])
    assert failed == {}, failed
