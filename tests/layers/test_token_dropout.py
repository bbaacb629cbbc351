"""`TokenDropout`: the replacement rate matches `rate` (binomial bounds),
padding and reserved ids are never replaced, inference is the identity,
and the layer contract."""

import numpy as np
import pytest

import seqkeras
from tests.layer_checks import run_layer_test


def _ids(rng, shape=(64, 50), vocab=200):
    ids = rng.integers(0, vocab, shape).astype("int32")
    ids[:, -5:] = 0  # padding at the end of every row
    return ids


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_replacement_rate_and_what_is_kept(rate):
    rng = np.random.default_rng(0)
    ids = _ids(rng)
    out = np.asarray(seqkeras.layers.TokenDropout(rate, seed=1)(ids, training=True))
    real = ids >= 4
    replaced = out != ids
    # only real tokens change, and only into UNK
    assert not np.any(replaced & ~real)
    assert np.all(out[replaced] == 3)
    # a real token that happens to be UNK already cannot be counted; none
    # are (ids >= 4). The fraction replaced is binomial(n, rate): 5 sigma.
    n = int(real.sum())
    sigma = np.sqrt(rate * (1 - rate) / n)
    assert abs(replaced.sum() / n - rate) < 5 * sigma


def test_inference_and_zero_rate_are_identity():
    ids = _ids(np.random.default_rng(1))
    np.testing.assert_array_equal(np.asarray(seqkeras.layers.TokenDropout(0.9)(ids)), ids)
    np.testing.assert_array_equal(
        np.asarray(seqkeras.layers.TokenDropout(0.0)(ids, training=True)), ids
    )


def test_custom_ids():
    ids = np.array([[1, 2, 5, 9, 0]], "int32")
    out = np.asarray(
        seqkeras.layers.TokenDropout(0.99, unk_id=7, first_id=3, seed=0)(ids, training=True)
    )
    assert out[0, :2].tolist() == [1, 2] and out[0, 4] == 0
    assert set(out[0, 2:4].tolist()) <= {5, 9, 7}


def test_layer_contract_and_errors():
    ids = _ids(np.random.default_rng(2), (2, 6), 20)
    run_layer_test(
        lambda: seqkeras.layers.TokenDropout(0.3, seed=0), ids, num_weights=(0, 0), fit=False
    )
    with pytest.raises(ValueError, match="TokenDropout.*rate"):
        seqkeras.layers.TokenDropout(1.0)
    with pytest.raises(TypeError, match="TokenDropout.*unk_id"):
        seqkeras.layers.TokenDropout(0.1, unk_id=2.5)


def test_text_input_is_refused():
    # TensorFlow backend: JAX's layer call converts inputs before `call`
    with pytest.raises(TypeError, match="TokenDropout.*numeric"):
        seqkeras.layers.TokenDropout(0.1)(np.array([["a"]]))
