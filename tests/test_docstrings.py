"""Every docstring example in the library runs and prints what it says."""

import doctest
import importlib
import pkgutil

import pytest


def _modules():
    """Every module of the installed package, found by walking it."""
    import seqkeras

    names = [
        info.name
        for info in pkgutil.walk_packages(seqkeras.__path__, "seqkeras.")
        if not info.name.endswith("__main__")
    ]
    return sorted(names)


MODULES = _modules()


def test_the_walk_finds_the_modules():
    for name in (
        "seqkeras.models.generation",
        "seqkeras.export.streaming",
        "seqkeras.data.tokens",
        "seqkeras.layers.cells",
    ):
        assert name in MODULES


def _has_examples(module):
    return any(test.examples for test in doctest.DocTestFinder().find(module))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    if not _has_examples(module):
        pytest.skip(f"{name} has no docstring examples")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
