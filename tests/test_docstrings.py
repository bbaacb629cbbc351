"""Every docstring example in the library runs and prints what it says."""

import doctest
import importlib

import pytest

MODULES = [
    "seqkeras.layers.attention",
    "seqkeras.layers.cells",
    "seqkeras.layers.masking",
    "seqkeras.layers.positional",
    "seqkeras.layers.recurrent",
    "seqkeras.layers.transformer",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
