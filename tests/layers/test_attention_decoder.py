import os
import tempfile

import keras
import numpy as np
import pytest

import seqkeras
from tests.layer_checks import mask_of, run_layer_test

L = seqkeras.layers


def softmax(z, mask):
    z = np.where(mask, z, -np.inf)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def numpy_decoder(layer, x, memory, mask, h0):
    """The seed notes' equations with a tanh RNN cell and the additive
    score v . tanh(W1 q + W2 k), one step at a time in NumPy."""
    cell = layer.cell
    W, U, b = (np.asarray(w, "float64") for w in (cell.kernel, cell.recurrent_kernel, cell.bias))
    att = layer.attention
    W1, W2, v = (np.asarray(w, "float64") for w in (att.query_kernel, att.key_kernel, att.v))

    def attend(q):
        scores = np.tanh(q[:, None] @ W1 + memory @ W2) @ v  # (B, S)
        w = softmax(scores, mask)
        return np.einsum("bs,bsd->bd", w, memory), w

    h, a = h0, np.zeros_like(h0)
    outs, weights = [], []
    for t in range(x.shape[1]):
        if layer.style == "bahdanau":
            c, w = attend(h)
            h = np.tanh(np.concatenate([x[:, t], c], -1) @ W + h @ U + b)
            out = np.concatenate([h, c], -1)
        else:
            inp = np.concatenate([x[:, t], a], -1) if layer.input_feeding else x[:, t]
            h = np.tanh(inp @ W + h @ U + b)
            c, w = attend(h)
            Wc = np.asarray(layer.combine.kernel, "float64")
            out = a = np.tanh(np.concatenate([c, h], -1) @ Wc)
        outs.append(out)
        weights.append(w)
    return np.stack(outs, 1), np.stack(weights, 1)


@pytest.mark.parametrize("style,feeding", [("bahdanau", True), ("luong", True), ("luong", False)])
def test_decoder_matches_numpy_equations(style, feeding):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 5)).astype("float32")
    memory = rng.normal(size=(3, 6, 7)).astype("float32")
    mask = np.ones((3, 6), bool)
    mask[0, 4:] = False
    mask[1, 1:] = False
    h0 = rng.normal(size=(3, 8)).astype("float32") * 0.5
    layer = L.AttentionDecoder(
        L.SimpleRNNCell(8), score="additive", style=style, input_feeding=feeding, attention_units=9
    )
    out, w = layer(x, memory, initial_state=[h0], memory_mask=mask, return_attention_scores=True)
    ref_out, ref_w = numpy_decoder(
        layer, x.astype("float64"), memory.astype("float64"), mask, h0.astype("float64")
    )
    np.testing.assert_allclose(np.asarray(out), ref_out, atol=1e-5)
    np.testing.assert_allclose(np.asarray(w), ref_w, atol=1e-5)
    assert np.all(np.asarray(w)[1, :, 1:] == 0)  # masked memory: no weight


def test_padding_the_memory_changes_nothing():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    memory = rng.normal(size=(2, 5, 6)).astype("float32")
    layer = L.AttentionDecoder(L.GRUCell(6), score="general", style="luong")
    short = np.asarray(layer(x, memory))
    padded = np.concatenate([memory, rng.normal(size=(2, 3, 6))], 1)
    mask = np.arange(8)[None].repeat(2, 0) < 5
    np.testing.assert_allclose(
        np.asarray(layer(x, padded.astype("float32"), memory_mask=mask)), short, atol=1e-6
    )


def test_step_equals_full_pass():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 4, 3)).astype("float32")
    memory = rng.normal(size=(2, 5, 6)).astype("float32")
    layer = L.AttentionDecoder(L.LSTMCell(6), score="dot", style="luong")
    full = np.asarray(layer(x, memory))
    states = layer.get_initial_state(2)
    for t in range(4):
        out, states, _ = layer.step(x[:, t], states, memory)
        np.testing.assert_allclose(np.asarray(out), full[:, t], atol=1e-5)


@pytest.mark.parametrize(
    "style,score,weights",
    [
        ("bahdanau", "additive", 3 + 3),  # GRU (3); W1, W2, v
        ("luong", "general", 3 + 1 + 1),  # GRU; W; the combine kernel
    ],
)
def test_decoder_layer_contract(style, score, weights):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    memory = rng.normal(size=(2, 5, 6)).astype("float32")
    for kwargs in ({}, {"return_attention_scores": True}):
        run_layer_test(
            lambda: L.AttentionDecoder(L.GRUCell(6), score=score, style=style),
            (x, memory),
            kwargs,
            num_weights=(weights, 0),
            # the weights, an extra output: the jit fit is the plain call's
            fit=not kwargs,
        )


def test_decoder_serializes_fits_and_keeps_the_mask():
    rng = np.random.default_rng(3)
    ids = keras.Input((None,), dtype="int32")
    mem = keras.Input((None, 6))
    x = keras.layers.Embedding(10, 4, mask_zero=True)(ids)
    layer = L.AttentionDecoder(L.GRUCell(6), score="cosine")
    out = layer(x, mem)
    assert tuple(out.shape) == (None, None, 12)
    model = keras.Model([ids, mem], keras.layers.Dense(1)(out))
    tokens = np.array([[3, 4, 0], [5, 0, 0]])
    memory = rng.normal(size=(2, 5, 6)).astype("float32")
    before = np.asarray(model([tokens, memory]))
    clone = L.AttentionDecoder.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded([tokens, memory])), before, atol=1e-6)
    model.compile("adam", "mse", jit_compile=True)
    history = model.fit([tokens, memory], np.zeros((2, 3, 1)), epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    # the embedding mask reaches the output
    masked = keras.Model([ids, mem], out)
    result = masked([tokens, memory])
    np.testing.assert_array_equal(np.asarray(mask_of(result)), tokens != 0)


def test_decoder_bad_input():
    with pytest.raises(ValueError, match="AttentionDecoder.*score"):
        L.AttentionDecoder(L.GRUCell(4), score="bilinear")
    with pytest.raises(ValueError, match="AttentionDecoder.*style"):
        L.AttentionDecoder(L.GRUCell(4), style="vaswani")
    with pytest.raises(TypeError, match="AttentionDecoder.*cell"):
        L.AttentionDecoder(keras.layers.GRUCell(4))
    layer = L.AttentionDecoder(L.GRUCell(4), score="dot")
    with pytest.raises(ValueError, match="cell units \\(4\\).*memory features \\(6\\)"):
        layer(np.ones((1, 2, 3), "float32"), np.ones((1, 5, 6), "float32"))


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_decoder_mixed_precision(policy):
    keras.config.set_dtype_policy(policy)
    try:
        layer = L.AttentionDecoder(L.GRUCell(8), score="additive", style="luong")
        x = np.ones((2, 3, 4), "float32")
        memory = np.ones((2, 5, 8), "float32")
        mask = np.array([[1, 1, 0, 0, 0], [0] * 5], bool)
        out, w = layer(x, memory, memory_mask=mask, return_attention_scores=True, training=True)
        assert keras.backend.standardize_dtype(out.dtype) == policy[6:]
        assert np.all(np.isfinite(np.asarray(out, "float32")))
        assert np.all(np.asarray(w, "float32")[1] == 0)  # all keys masked
    finally:
        keras.config.set_dtype_policy("float32")
