"""`CharacterEncoder` against a NumPy implementation of its equation
(embed, "same" convolution, masked max over the word's characters),
padding invariance, and the layer contract."""

import numpy as np
import pytest

import seqkeras
from tests.layer_checks import run_layer_test


def _numpy(layer, ids):
    emb = np.asarray(layer.embeddings)
    kernel, bias = np.asarray(layer.kernel), np.asarray(layer.bias)
    k = kernel.shape[0]
    out = np.zeros(ids.shape[:2] + (kernel.shape[2],), "float32")
    for b in range(ids.shape[0]):
        for t in range(ids.shape[1]):
            chars = ids[b, t]
            x = emb[chars] * (chars != 0)[:, None]  # padding embeds as 0
            padded = np.pad(x, ((k // 2, k // 2), (0, 0)))
            h = np.stack(
                [
                    np.tanh(sum(padded[i + j] @ kernel[j] for j in range(k)) + bias)
                    for i in range(len(chars))
                ]
            )
            real = chars != 0
            out[b, t] = h[real].max(0) if real.any() else 0.0
    return out


def test_matches_numpy_and_ignores_padding():
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 20, (2, 4, 6)).astype("int32")
    ids[0, 1, 3:] = 0  # a short word
    ids[1, 3] = 0  # a padding word
    layer = seqkeras.layers.CharacterEncoder(20, embedding_dim=5, filters=7, kernel_size=3)
    out = np.asarray(layer(ids))
    np.testing.assert_allclose(out, _numpy(layer, ids), atol=1e-5)
    assert np.all(out[1, 3] == 0)
    # more padding characters after each word change nothing
    wider = np.concatenate([ids, np.zeros((2, 4, 3), "int32")], axis=2)
    np.testing.assert_allclose(np.asarray(layer(wider)), out, atol=1e-6)


def test_layer_contract_and_errors():
    ids = np.random.default_rng(1).integers(0, 12, (2, 3, 5)).astype("int32")
    run_layer_test(
        lambda: seqkeras.layers.CharacterEncoder(12, embedding_dim=4, filters=3),
        ids,
        num_weights=(3, 0),
    )
    with pytest.raises(ValueError, match="CharacterEncoder.*kernel_size"):
        seqkeras.layers.CharacterEncoder(10, kernel_size=2)
    with pytest.raises(ValueError, match="CharacterEncoder.*rank 3"):
        seqkeras.layers.CharacterEncoder(10)(np.zeros((2, 3), "int32"))


def test_text_input_is_refused():
    # TensorFlow backend: JAX's layer call converts inputs before `call`
    with pytest.raises(TypeError, match="CharacterEncoder.*numeric"):
        seqkeras.layers.CharacterEncoder(10)(np.array([[["a"]]]))
