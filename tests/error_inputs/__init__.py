"""The error-input registry of the public API (after PyTorch's
`OpInfo.error_inputs_func`): for each public function, layer and
exporter, the bad inputs a user plausibly passes, each with the error it
must raise and the words its message must contain.

An entry is added with

    entry("seqkeras.data.length_batches", "batch_size",
          lambda: D.length_batches([[4]], batch_size=0))

in the module of its namespace (`tests/error_inputs/<namespace>.py`):
the public name (as `tests/public_api.txt` lists it), the argument the
message must name, and a call that makes the mistake. Options: `error`
(default ValueError or TypeError), `words` (more regular expressions the
message must match), `graph=True` (the call also runs inside
`tf.function`: the check must happen at trace time, or as an in-graph
assert where the value comes at run time), `xla=True` (and under
`tf.function(jit_compile=True)`). A public name that cannot take a bad
input gets `opt_out(name, reason)` with the reason written out.

`tests/test_error_inputs.py` runs every entry and fails for a public name
with neither entries nor an opt-out. The errors the entries raise are the
API pages' "Raises" sections (`raised`, written to `RAISES_FILE` by
`python docs/gen_api.py`; the test checks that file against the entries).
"""

import dataclasses
from typing import Callable

DEFAULT_ERRORS = (ValueError, TypeError)


@dataclasses.dataclass
class ErrorInput:
    name: str  # the public name, e.g. "seqkeras.data.length_batches"
    argument: str  # the argument the message must name
    call: Callable
    error: tuple = DEFAULT_ERRORS
    words: tuple = ()
    graph: bool = False
    xla: bool = False
    named: str = None  # what the message names, when not the public name's last part

    @property
    def short(self):
        """What the message must name: the function or class, e.g.
        `length_batches`."""
        return self.named or self.name.rsplit(".", 1)[-1]

    @property
    def id(self):
        return f"{self.name.split('.', 1)[-1]}-{self.argument}"


ENTRIES = []
OPT_OUT = {}


def entry(
    name, argument, call, error=DEFAULT_ERRORS, *, words=(), graph=False, xla=False, named=None
):
    """Registers one bad input of the public `name` (see the module doc;
    `named`: what the message must name instead of the name's last part,
    e.g. `fit` for a model's method)."""
    if not isinstance(error, tuple):
        error = (error,)
    ENTRIES.append(ErrorInput(name, argument, call, error, tuple(words), graph, xla, named))


def opt_out(name, reason):
    """`name` takes no input a user could get wrong: `reason` says why."""
    assert len(reason) >= 20, f"{name}: write the reason out"
    OPT_OUT[name] = reason


def load_all():
    """Imports every namespace's entries; returns (ENTRIES, OPT_OUT)."""
    import importlib
    import pkgutil

    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return ENTRIES, OPT_OUT


#: {public name: {error class name: [arguments]}}: what the entries raise,
#: the API pages' "Raises" sections (docs/griffe_extensions.py)
RAISES_FILE = "docs/api/raises.json"


def raised(entries, errors=None):
    """`{public name: {error class name: sorted arguments}}`: the error each
    entry raises when called (`errors`: `{entry index: error class name}`
    already seen, e.g. by the test that ran them; the others are called
    here). Entries of internal names (`seqkeras.(internal)...`) are left
    out."""
    errors = dict(errors or {})
    table = {}
    for i, item in enumerate(entries):
        if i not in errors:
            try:
                item.call()
                errors[i] = None
            except Exception as error:  # noqa: BLE001 (any: the entry's check is the test's)
                errors[i] = type(error).__name__
        if errors[i] is None or "(internal)" in item.name:
            continue
        arguments = table.setdefault(item.name, {}).setdefault(errors[i], [])
        if item.argument not in arguments:
            arguments.append(item.argument)
    return {
        name: {error: sorted(args) for error, args in sorted(kinds.items())}
        for name, kinds in sorted(table.items())
    }


def by_definition(table):
    """`raised`'s table keyed as griffe names each object, where it is
    defined (`{path: {"name": public name, "raises": {...}}}`): the
    contents of `RAISES_FILE`. Public names of one object (a deprecated
    alias) share its entry."""
    import importlib
    import inspect

    found = {}
    for name, kinds in table.items():
        module, attribute = name.rsplit(".", 1)
        obj = getattr(importlib.import_module(module), attribute)
        path = obj.__name__ if inspect.ismodule(obj) else f"{obj.__module__}.{obj.__qualname__}"
        merged = found.setdefault(path, {"name": name, "raises": {}})["raises"]
        for error, arguments in kinds.items():
            merged[error] = sorted(set(merged.get(error, [])) | set(arguments))
    return dict(sorted(found.items()))
