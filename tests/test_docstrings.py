"""Every docstring example in the library runs and prints what it says."""

import doctest
import importlib

import pytest

MODULES = [
    "seqkeras.data.sequences",
    "seqkeras.decoding",
    "seqkeras.data.synthetic",
    "seqkeras.data.text",
    "seqkeras.layers.attention",
    "seqkeras.layers.attention_decoder",
    "seqkeras.layers.cells",
    "seqkeras.layers.masking",
    "seqkeras.layers.pooling",
    "seqkeras.layers.positional",
    "seqkeras.layers.recurrent",
    "seqkeras.layers.transformer",
    "seqkeras.models.base",
    "seqkeras.models.classification",
    "seqkeras.models.encoder_decoder",
    "seqkeras.models.forecasting",
    "seqkeras.models.language_models",
    "seqkeras.models.training",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
