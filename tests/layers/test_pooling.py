import numpy as np
import pytest

import seqkeras
from tests.layer_checks import run_layer_test

L = seqkeras.layers


def numpy_pool(x, mask, mode, params=None):
    out = []
    for xi, mi in zip(x, mask):
        v = xi[mi]
        if len(v) == 0:
            out.append(np.zeros(x.shape[-1]))
        elif mode == "last":
            out.append(xi[np.nonzero(mi)[0][-1]])
        elif mode == "first":
            out.append(xi[np.nonzero(mi)[0][0]])
        elif mode == "mean":
            out.append(v.mean(0))
        elif mode == "max":
            out.append(v.max(0))
        else:
            kernel, bias, query = params
            logits = np.tanh(v @ kernel + bias) @ query
            w = np.exp(logits - logits.max())
            out.append((w / w.sum()) @ v)
    return np.stack(out)


@pytest.mark.parametrize("mode", ["last", "first", "mean", "max", "attention"])
def test_pooling_matches_numpy_with_padding(mode):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 6, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0] * 6], bool)
    layer = L.SequencePooling(mode)
    got = np.asarray(layer(x, mask=mask))
    params = None
    if mode == "attention":
        params = [np.asarray(w) for w in (layer.kernel, layer.bias, layer.query)]
    np.testing.assert_allclose(got, numpy_pool(x, mask, mode, params), atol=1e-5)
    assert np.all(got[3] == 0)  # a fully padded row pools to zeros


@pytest.mark.parametrize("mode", ["last", "attention"])
def test_pooling_layer_contract(mode):
    x = np.random.default_rng(1).normal(size=(2, 5, 4)).astype("float32")
    # attention: W, b and the query v
    run_layer_test(
        lambda: L.SequencePooling(mode), x, num_weights=(3 if mode == "attention" else 0, 0)
    )


def test_pooling_bad_mode():
    with pytest.raises(ValueError, match="SequencePooling.*mode"):
        L.SequencePooling("median")


@pytest.mark.parametrize("mode", ["last", "first", "mean", "max", "attention"])
def test_pooling_streams_the_prefix_pooling_step_by_step(mode):
    # stream_step from zero states, one step at a time, equals the NumPy
    # pooling of each prefix (the online softmax included)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 7, 4)).astype("float32")
    layer = L.SequencePooling(mode)
    layer(x)  # builds
    params = None
    if mode == "attention":
        params = [np.asarray(w) for w in (layer.kernel, layer.bias, layer.query)]
    sizes = layer.stream_state_sizes
    assert (
        sizes
        == {
            "last": [],
            "first": [4, 1],
            "mean": [4, 1],
            "max": [4, 1],
            "attention": [1, 1, 4],
        }[mode]
    )
    states = [np.zeros((3, s), "float32") for s in sizes]
    for t in range(7):
        out, states = layer.stream_step(x[:, t], states)
        prefix = np.ones((3, t + 1), bool)
        np.testing.assert_allclose(
            np.asarray(out), numpy_pool(x[:, : t + 1], prefix, mode, params), atol=1e-5
        )


def test_pooling_stream_state_sizes_need_a_built_layer():
    with pytest.raises(ValueError, match="SequencePooling.*built"):
        L.SequencePooling("mean").stream_state_sizes
