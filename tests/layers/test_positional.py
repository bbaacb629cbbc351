"""Positional encodings against the seed notes' formula."""

import keras
import numpy as np
import pytest

from seqkeras.layers import PositionalEmbedding, SinusoidalPositionalEncoding
from tests.layer_checks import mask_of, run_layer_test


def np_sinusoid(length, d, start=0):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    pe = np.zeros((length, d))
    for pos in range(start, start + length):
        for j in range(d):
            i = j // 2
            angle = pos / 10000 ** (2 * i / d)
            pe[pos - start, j] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
    return pe


@pytest.mark.parametrize("d", [6, 7])
def test_sinusoidal_matches_formula(d):
    layer = SinusoidalPositionalEncoding()
    x = np.random.default_rng(0).normal(size=(2, 9, d)).astype("float32")
    np.testing.assert_allclose(layer(x), x + np_sinusoid(9, d), atol=1e-5)
    np.testing.assert_allclose(layer(x, start_index=40), x + np_sinusoid(9, d, 40), atol=1e-4)


def test_sinusoidal_any_length_and_decoding_offset():
    layer = SinusoidalPositionalEncoding()
    zeros = np.zeros((1, 3000, 8), "float32")
    full = np.asarray(layer(zeros))
    np.testing.assert_allclose(full[0, -1], np_sinusoid(1, 8, 2999)[0], atol=1e-3)
    step = np.asarray(layer(zeros[:, :1], start_index=1234))
    np.testing.assert_allclose(step[0, 0], full[0, 1234], atol=1e-6)


def test_sinusoidal_scale_and_mask():
    layer = SinusoidalPositionalEncoding(scale_inputs=True)
    x = np.ones((1, 2, 4), "float32")
    np.testing.assert_allclose(layer(x), 2.0 * x + np_sinusoid(2, 4), atol=1e-6)
    inp = keras.Input((None,), dtype="int32")
    emb = keras.layers.Embedding(10, 4, mask_zero=True)(inp)
    out = SinusoidalPositionalEncoding()(emb)
    assert mask_of(out) is not None


def test_positional_embedding_adds_rows_and_errors_past_max_length():
    layer = PositionalEmbedding(max_length=6)
    x = np.zeros((2, 4, 3), "float32")
    out = np.asarray(layer(x))
    np.testing.assert_allclose(out[0], layer.embeddings.numpy()[:4])
    np.testing.assert_allclose(
        np.asarray(layer(x[:, :1], start_index=5))[0], layer.embeddings.numpy()[5:6]
    )
    with pytest.raises(ValueError, match="has 6 positions"):
        layer(np.zeros((1, 7, 3), "float32"))
    with pytest.raises(ValueError, match="has 6 positions"):
        layer(x, start_index=3)
    with pytest.raises(ValueError, match="`max_length`"):
        PositionalEmbedding(0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SinusoidalPositionalEncoding(),
        lambda: PositionalEmbedding(max_length=8),
    ],
)
def test_positional_layer_contract(make):
    x = np.random.default_rng(1).normal(size=(2, 5, 4)).astype("float32")
    run_layer_test(make, x)


def test_sinusoidal_bad_max_wavelength():
    with pytest.raises(ValueError, match="`max_wavelength`: expected a number > 1"):
        SinusoidalPositionalEncoding(max_wavelength=1)
    with pytest.raises(TypeError, match="`max_wavelength`"):
        SinusoidalPositionalEncoding(max_wavelength="big")
