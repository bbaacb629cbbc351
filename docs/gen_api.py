"""Writes docs/api/<module>.md: one `:::` entry (mkdocstrings renders the
docstring, its Args and its Example) for every name in each public
module's `__all__`, in that order; and docs/api/raises.json, what the
error-input registry's entries raise for each public name (the pages'
"Raises" sections: docs/griffe_extensions.py).

    python docs/gen_api.py

tests/test_docs.py fails when a public name has no entry here, and
tests/test_error_inputs.py when raises.json is not the registry's.
"""

import importlib
import importlib.util
import json
import os
import sys

MODULES = {
    "layers": "Layers",
    "models": "Models",
    "training": "Training",
    "decoding": "Decoding",
    "data": "Data",
    "export": "Export",
    "pretrained": "Pretrained checkpoints",
    "metrics": "Metrics",
    "plots": "Plots",
    "distribute": "Distributed training",
}
HERE = os.path.dirname(os.path.abspath(__file__))


def page(module, title):
    mod = importlib.import_module(f"seqkeras.{module}")
    summary = (mod.__doc__ or "").strip().split("\n\n")[0]
    lines = [f"# {title}: `seqkeras.{module}`", "", summary, ""]
    for name in mod.__all__:
        lines += [f"::: {_path(module, name, getattr(mod, name))}", ""]
    return "\n".join(lines)


def _path(module, name, obj):
    """The entry's dotted path: `seqkeras.<module>.<name>`, unless a
    submodule has that name too (`seqkeras.export.onnx`, the function, and
    `seqkeras/export/onnx.py`): mkdocstrings would render the whole
    submodule, its helpers included, so the entry names the function where
    it is defined."""
    path = f"seqkeras.{module}.{name}"
    try:
        named_like_a_submodule = importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:  # `seqkeras.decoding` is a module: no submodules
        named_like_a_submodule = False
    if named_like_a_submodule and hasattr(obj, "__qualname__"):  # not a module itself
        return f"{obj.__module__}.{obj.__qualname__}"
    return path


def raises_json():
    """What the error-input registry's entries raise, keyed as griffe
    names each object (`tests.error_inputs.by_definition`)."""
    root = os.path.dirname(HERE)
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.error_inputs import by_definition, load_all, raised

    entries, _ = load_all()
    return by_definition(raised(entries))


def main():
    os.makedirs(os.path.join(HERE, "api"), exist_ok=True)
    for module, title in MODULES.items():
        with open(os.path.join(HERE, "api", f"{module}.md"), "w", encoding="utf-8") as f:
            f.write(page(module, title))
    table = raises_json()
    with open(os.path.join(HERE, "api", "raises.json"), "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
