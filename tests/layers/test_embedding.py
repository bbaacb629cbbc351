"""`BertEmbedding` and `GatherSteps` against NumPy, with their layer
contracts; `gelu_tanh` against its formula."""

import os
import tempfile

import keras
import numpy as np
import pytest

import seqkeras
from tests.layer_checks import run_layer_test

L = seqkeras.layers


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_bert_embedding_matches_numpy_with_segments_and_mask():
    rng = np.random.default_rng(0)
    layer = L.BertEmbedding(30, 6, max_length=10, num_segments=3, layer_norm_epsilon=1e-6)
    ids = np.array([[2, 7, 9, 3, 0], [2, 5, 3, 0, 0]])
    segments = np.array([[0, 0, 1, 2, 0], [0, 1, 1, 0, 0]])
    layer(ids)  # builds
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape))
    tok, pos, seg = (np.asarray(w) for w in layer.weights[:3])
    gamma, beta = np.asarray(layer.layer_norm.gamma), np.asarray(layer.layer_norm.beta)
    expected = _layer_norm(tok[ids] + pos[None, :5] + seg[segments], gamma, beta, 1e-6)
    got = layer(ids, segment_ids=segments)
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-5)
    # default segments: all 0
    expected0 = _layer_norm(tok[ids] + pos[None, :5] + seg[0], gamma, beta, 1e-6)
    np.testing.assert_allclose(np.asarray(layer(ids)), expected0, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(layer.compute_mask(ids)), ids != 0)


def test_bert_embedding_contract_and_errors():
    ids = np.random.default_rng(1).integers(0, 20, (2, 5)).astype("int32")
    # token, position, segment tables and the LayerNorm's two
    run_layer_test(lambda: L.BertEmbedding(20, 8, max_length=8), ids, num_weights=(5, 0))
    with pytest.raises(ValueError, match="BertEmbedding.*max_length"):
        L.BertEmbedding(20, 8, max_length=4)(np.ones((1, 6), "int32"))
    with pytest.raises(ValueError, match="BertEmbedding.*vocab_size"):
        L.BertEmbedding(0, 8)
    if keras.backend.backend() == "tensorflow":  # JAX converts inputs before `call`
        with pytest.raises(TypeError, match="BertEmbedding.*numeric"):
            L.BertEmbedding(20, 8)(np.array([["a"]]))


def test_gather_steps_matches_numpy_and_masks_index_zero():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, 3)).astype("float32")
    index = np.array([[1, 2, 5, 0], [3, 4, 0, 0]])
    got = L.GatherSteps()([x, index])
    expected = np.stack([x[b][index[b]] for b in range(2)])
    np.testing.assert_allclose(np.asarray(got), expected)
    mask = L.GatherSteps().compute_mask([x, index])
    np.testing.assert_array_equal(np.asarray(mask), index > 0)


def test_gather_steps_contract():
    layer = L.GatherSteps(name="first")
    assert type(layer).from_config(layer.get_config()).get_config() == layer.get_config()
    seq = keras.Input((None, 4))
    index = keras.Input((None,), dtype="int32")
    out = L.GatherSteps()([seq, index])
    assert tuple(out.shape) == (None, None, 4)
    assert L.GatherSteps().compute_output_shape([(2, 7, 4), (2, 3)]) == (2, 3, 4)
    pooled = L.SequencePooling("mean")(out)  # the mask reaches the next layer
    model = keras.Model([seq, index], keras.layers.Dense(2)(pooled))
    x = np.random.default_rng(3).normal(size=(2, 6, 4)).astype("float32")
    i = np.array([[1, 3, 0], [2, 0, 0]], "int32")
    expected = np.stack([x[0, [1, 3]].mean(0), x[1, [2]].mean(0)])
    inner = keras.Model([seq, index], pooled)
    np.testing.assert_allclose(np.asarray(inner([x, i])), expected, atol=1e-6)
    before = np.asarray(model([x, i]))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded([x, i])), before, atol=1e-6)
    model.compile("adam", "mse", jit_compile=True)
    history = model.fit([x, i], np.zeros((2, 2)), epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    for policy in ("mixed_float16", "mixed_bfloat16"):
        keras.config.set_dtype_policy(policy)
        try:
            out = L.GatherSteps()([x, i])
            assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
        finally:
            keras.config.set_dtype_policy("float32")
    with pytest.raises(ValueError, match="GatherSteps.*sequence, index"):
        L.GatherSteps()(x)
    with pytest.raises(ValueError, match="GatherSteps.*index"):
        L.GatherSteps()([x, np.zeros((2, 3, 1), "int32")])


def test_gelu_tanh_is_the_tanh_approximation():
    from seqkeras.layers.transformer import gelu_tanh

    x = np.linspace(-4, 4, 41).astype("float32")
    expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(np.asarray(gelu_tanh(x)), expected, atol=1e-6)
    block = L.TransformerEncoderBlock(2, 8, activation="gelu_tanh")
    again = L.TransformerEncoderBlock.from_config(block.get_config())
    assert again.activation == "gelu_tanh"
