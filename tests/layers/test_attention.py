"""Masked softmax, score functions, Attention and MultiHeadAttention against
NumPy references and Keras, with masks, causality, caches and dtypes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import seqkeras
from seqkeras.layers import Attention, MultiHeadAttention
from seqkeras.layers.masking import masked_softmax
from tests.layer_checks import run_layer_test

RNG = np.random.default_rng(0)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_softmax(x, mask):
    x = np.where(mask, x, -np.inf)
    e = np.exp(x - np.max(np.where(mask, x, -1e30), -1, keepdims=True))
    e = np.where(mask, e, 0.0)
    total = e.sum(-1, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1), 0.0)


# --- masked softmax ----------------------------------------------------------
def test_masked_softmax_matches_numpy():
    logits = _x(3, 4, 6)
    mask = RNG.random((3, 4, 6)) > 0.3
    mask[0, 1] = False  # a fully masked row
    np.testing.assert_allclose(masked_softmax(logits, mask), np_softmax(logits, mask), atol=1e-6)
    np.testing.assert_allclose(
        masked_softmax(logits), np_softmax(logits, np.ones_like(mask)), atol=1e-6
    )


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fully_masked_rows_give_zeros_and_finite_gradients(dtype):
    logits = tf.Variable(tf.cast(_x(2, 3, 5) * 1000.0, dtype))  # large too
    mask = np.ones((2, 3, 5), bool)
    mask[1, 2] = False
    mask[0, 0, 1:] = False
    with tf.GradientTape() as tape:
        w = masked_softmax(logits, mask)
        loss = tf.reduce_sum(tf.cast(w, "float32") * _x(2, 3, 5, seed=1))
    grad = tape.gradient(loss, logits)
    w = np.asarray(tf.cast(w, "float32"))
    assert w.dtype == np.float32 and np.all(np.isfinite(w))
    np.testing.assert_array_equal(w[1, 2], 0.0)
    np.testing.assert_array_equal(w[~mask], 0.0)
    np.testing.assert_allclose(w[0, 0, 0], 1.0)
    g = np.asarray(tf.cast(grad, "float32"))
    assert np.all(np.isfinite(g))
    np.testing.assert_array_equal(g[1, 2], 0.0)


# --- Attention: each score against NumPy ------------------------------------
def np_scores(layer, q, k):
    if layer.score == "dot":
        return q @ k.swapaxes(-1, -2)
    if layer.score == "scaled_dot":
        return q @ k.swapaxes(-1, -2) / np.sqrt(k.shape[-1])
    if layer.score == "general":
        return q @ layer.kernel.numpy() @ k.swapaxes(-1, -2)
    if layer.score == "additive":
        w1, w2, v = (layer.query_kernel.numpy(), layer.key_kernel.numpy(), layer.v.numpy())
        out = np.zeros(q.shape[:2] + (k.shape[1],))
        for b in range(q.shape[0]):
            for i in range(q.shape[1]):
                for j in range(k.shape[1]):
                    out[b, i, j] = v @ np.tanh(q[b, i] @ w1 + k[b, j] @ w2)
        return out
    qn = q / np.linalg.norm(q, axis=-1, keepdims=True)
    kn = k / np.linalg.norm(k, axis=-1, keepdims=True)
    return qn @ kn.swapaxes(-1, -2) / np.exp(layer.log_temperature.numpy())


SCORES = ["dot", "scaled_dot", "general", "additive", "cosine"]


@pytest.mark.parametrize("score", SCORES)
def test_attention_matches_numpy(score):
    same = score in ("dot", "scaled_dot", "cosine")
    q = _x(2, 3, 4)
    k = _x(2, 5, 4 if same else 6, seed=1)
    v = _x(2, 5, 7, seed=2)
    layer = Attention(score, units=3)
    layer(q, v, key=k)
    for w in layer.weights:
        w.assign(RNG.normal(size=w.shape).astype("float32"))
    value_mask = np.ones((2, 5), bool)
    value_mask[1, 3:] = False
    query_mask = np.array([[True, True, False], [True] * 3])
    context, weights = layer(
        q, v, key=k, value_mask=value_mask, query_mask=query_mask, return_attention_scores=True
    )
    mask = value_mask[:, None, :] & query_mask[:, :, None]
    expected_w = np_softmax(np_scores(layer, q, k), mask)
    np.testing.assert_allclose(weights, expected_w, atol=1e-5)
    np.testing.assert_allclose(context, expected_w @ v, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(context)[0, 2], 0.0)


def test_dot_score_matches_keras_attention():
    q, v = _x(2, 3, 4), _x(2, 5, 4, seed=1)
    mask = [np.ones((2, 3), bool), np.array([[1, 1, 1, 0, 0]] * 2, bool)]
    ours = Attention("dot")(q, v, value_mask=mask[1])
    theirs = keras.layers.Attention()([q, v], mask=mask)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


def run_fully_masked(layer, features):
    """Calls `layer` with batch row 1 fully masked; checks the output and
    every gradient are finite and returns the output as float32."""
    q = tf.Variable(_x(2, 3, features) * 30)
    v = _x(2, 5, features, seed=1)
    value_mask = np.ones((2, 5), bool)
    value_mask[1] = False
    with tf.GradientTape() as tape:
        out = layer(q, v, value_mask=value_mask)
        loss = tf.reduce_sum(tf.cast(out, "float32"))
    grads = tape.gradient(loss, [q] + layer.trainable_weights)
    for g in grads:
        assert np.all(np.isfinite(np.asarray(tf.cast(g, "float32"))))
    out = np.asarray(tf.cast(out, "float32"))
    assert np.all(np.isfinite(out))
    return out


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_attention_fully_masked_half_precision(score, dtype):
    layer = Attention(score, dtype=keras.DTypePolicy(f"mixed_{dtype}"))
    out = run_fully_masked(layer, 4)
    assert keras.backend.standardize_dtype(layer.compute_dtype) == dtype
    np.testing.assert_array_equal(out[1], 0.0)


@pytest.mark.parametrize("score", SCORES)
def test_attention_causal_mask(score):
    layer = Attention(score)
    x = _x(1, 6, 4)
    base = np.asarray(layer(x, x, use_causal_mask=True))
    changed = x.copy()
    changed[0, 4] += 5.0
    out = np.asarray(layer(changed, changed, use_causal_mask=True))
    np.testing.assert_allclose(out[0, :4], base[0, :4], atol=1e-6)
    assert not np.allclose(out[0, 4:], base[0, 4:])


@pytest.mark.parametrize("score", SCORES)
def test_attention_layer_contract(score):
    # weights: general W; additive W1, W2, v; cosine its log temperature
    trainable = {"general": 1, "additive": 3, "cosine": 1}.get(score, 0)
    for kwargs in ({}, {"return_attention_scores": True}):
        run_layer_test(
            lambda: Attention(score, dropout=0.1),
            (_x(2, 3, 4), _x(2, 5, 4, seed=1)),
            kwargs,
            num_weights=(trainable, 0),
            # the weights, an extra output: the jit fit is the plain call's
            fit=not kwargs,
        )


def test_attention_bad_input():
    with pytest.raises(ValueError, match="`score`: expected one of"):
        Attention("bilinear")
    with pytest.raises(ValueError, match="`units`"):
        Attention("additive", units=0)
    with pytest.raises(ValueError, match="same feature size"):
        Attention("dot")(_x(1, 2, 3), _x(1, 2, 4))
    with pytest.raises(ValueError, match="`query` of rank 3"):
        Attention()(_x(2, 3), _x(1, 2, 3))
    with pytest.raises(ValueError, match="same length"):
        Attention()(_x(1, 2, 3), _x(1, 4, 3), key=_x(1, 5, 3))
    with pytest.raises(ValueError, match="`temperature`"):
        Attention("cosine", temperature=0)


# --- MultiHeadAttention ------------------------------------------------------
def _mha_pair(q_dim=8, kv_dim=6, heads=2, key_dim=4, fused=None):
    ours = MultiHeadAttention(heads, key_dim, fused=fused)
    theirs = keras.layers.MultiHeadAttention(heads, key_dim)
    q, v = _x(2, 5, q_dim), _x(2, 7, kv_dim, seed=1)
    ours(q, v), theirs(q, v)
    for a, b in zip(ours.weights, theirs.weights):
        assert a.shape == b.shape
        a.assign(RNG.normal(size=a.shape).astype("float32") * 0.5)
        b.assign(a.numpy())
    return ours, theirs, q, v


@pytest.mark.parametrize("fused", [False, True])
def test_mha_matches_keras_with_copied_weights(fused):
    ours, theirs, q, v = _mha_pair(fused=fused)
    value_mask = np.ones((2, 7), bool)
    value_mask[0, 4:] = False
    for kwargs in ({}, {"value_mask": value_mask}):
        o1, w1 = ours(q, v, return_attention_scores=True, **kwargs)
        o2, w2 = theirs(q, v, return_attention_scores=True, **kwargs)
        np.testing.assert_allclose(o1, o2, atol=1e-5)
        np.testing.assert_allclose(w1, w2, atol=1e-5)
        np.testing.assert_allclose(ours(q, v, **kwargs), o2, atol=1e-5)
    ours, theirs, q, _ = _mha_pair(kv_dim=8, fused=fused)
    np.testing.assert_allclose(
        ours(q, q, use_causal_mask=True), theirs(q, q, use_causal_mask=True), atol=1e-5
    )


def test_mha_fully_masked_query_outputs_bias_only():
    ours, _, q, v = _mha_pair(fused=True)  # the fused branch on TF too
    value_mask = np.ones((2, 7), bool)
    value_mask[1] = False
    fused = np.asarray(ours(q, v, value_mask=value_mask))
    out, w = ours(q, v, value_mask=value_mask, return_attention_scores=True)
    np.testing.assert_array_equal(np.asarray(w)[1], 0.0)
    bias = ours.output_bias.numpy()
    np.testing.assert_allclose(fused[1], np.broadcast_to(bias, (5, 8)), atol=1e-6)
    np.testing.assert_allclose(fused, out, atol=1e-5)


def test_mha_causal_future_tokens_do_not_leak():
    mha = MultiHeadAttention(2, 4)
    x = _x(1, 6, 8)
    base = np.asarray(mha(x, x, use_causal_mask=True))
    x2 = x.copy()
    x2[0, 3] -= 4.0
    out = np.asarray(mha(x2, x2, use_causal_mask=True))
    np.testing.assert_allclose(out[0, :3], base[0, :3], atol=1e-6)
    assert not np.allclose(out[0, 3:], base[0, 3:])


def test_mha_incremental_decoding_equals_full_pass():
    mha = MultiHeadAttention(2, 4)
    x = _x(2, 6, 8)
    mha(x, x)
    for w in mha.weights:
        w.assign(RNG.normal(size=w.shape).astype("float32") * 0.5)
    full = np.asarray(mha(x, x, use_causal_mask=True))
    cache = mha.init_cache(2, 8)
    # A prompt of 2 steps, then one step at a time.
    out, cache = mha(x[:, :2], x[:, :2], cache=cache, cache_index=0)
    np.testing.assert_allclose(out, full[:, :2], atol=1e-5)
    step = tf.function(lambda t, c, i: mha(t, t, cache=c, cache_index=i), jit_compile=True)
    for i in range(2, 6):
        out, cache = step(x[:, i : i + 1], cache, tf.constant(i))
        np.testing.assert_allclose(out[:, 0], full[:, i], atol=1e-5)


@pytest.mark.parametrize("layout", ["fixed", "scatter", "growing"])
def test_mha_prepared_step_equals_keras_full_pass(layout):
    # The decoding step with the fused, scale-folded projections
    # (`prepare_step_weights`, passed as `step_weights`), one token at a
    # time from an empty cache of each layout (a max_length buffer written
    # in place or by scatter, or a cache that grows by one position per
    # step), equals Keras' causal self-attention with the same weights.
    ours, theirs, x, _ = _mha_pair(kv_dim=8)
    full = np.asarray(theirs(x, x, use_causal_mask=True))
    weights = ours.prepare_step_weights()
    growing = layout == "growing"
    cache = ours.init_cache(2, 8, layout=layout)
    assert tuple(cache[0].shape) == (2, 2, 0 if growing else 8, 4)
    for i in range(x.shape[1]):
        out, cache = ours(x[:, i : i + 1], cache=cache, cache_index=i, step_weights=weights)
        np.testing.assert_allclose(out[:, 0], full[:, i], atol=1e-5)
    assert tuple(cache[1].shape) == (2, 2, 5 if growing else 8, 4)
    assert cache.layout == layout


def test_mha_cross_attention_cache_shared_by_beams():
    # A cache of 2 sources serves 6 query rows (3 beams each, row i * 3 + j
    # reads source i): the same as Keras over the sources repeated per beam.
    ours, theirs, q, v = _mha_pair()
    value_mask = np.ones((2, 7), bool)
    value_mask[0, 4:] = False
    beams = np.repeat(q[:, :1], 3, axis=0) + _x(6, 1, 8, seed=2)  # (6, 1, 8)
    expected = theirs(beams, np.repeat(v, 3, axis=0), value_mask=np.repeat(value_mask, 3, axis=0))
    cache = ours.compute_cache(v)
    for prepared in (None, ours.prepare_step_weights()):
        out, same = ours(beams, v, value_mask=value_mask, cache=cache, step_weights=prepared)
        np.testing.assert_allclose(out, expected, atol=1e-5)
        for a, b in zip(same, cache):  # returned as it came
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="cross-attention cache of 2 rows cannot serve 5"):
        ours(beams[:5], v, cache=cache)
    with pytest.raises(ValueError, match="`cache` to be a pair"):
        ours(beams, v, cache=cache[0])
    with pytest.raises(ValueError, match="no `attention_mask`"):
        ours(beams[:2], v, cache=cache, attention_mask=np.ones((2, 1, 7), bool))


def test_mha_layer_contract():
    # query, key, value and output kernels and biases
    for kwargs in ({}, {"return_attention_scores": True}):
        run_layer_test(
            lambda: MultiHeadAttention(2, 3, dropout=0.1),
            (_x(2, 3, 4), _x(2, 5, 6, seed=1)),
            kwargs,
            num_weights=(8, 0),
            # the weights, an extra output: the jit fit is the plain call's
            fit=not kwargs,
        )


def test_mha_bad_input():
    with pytest.raises(ValueError, match="`num_heads`"):
        MultiHeadAttention(0, 4)
    with pytest.raises(ValueError, match="`MultiHeadAttention` was built"):
        mha = MultiHeadAttention(2, 4)
        mha(_x(1, 3, 8), _x(1, 3, 6))
        mha(_x(1, 3, 8), _x(1, 3, 8))
    with pytest.raises(ValueError, match="caches need key_dim == value_dim"):
        MultiHeadAttention(2, 4, value_dim=3).init_cache(1, 4)


def test_mha_precomputed_cross_attention_cache():
    ours, _, q, v = _mha_pair()
    value_mask = np.ones((2, 7), bool)
    value_mask[0, 5:] = False
    cache = ours.compute_cache(v)
    out, same = ours(q, v, value_mask=value_mask, cache=cache)
    np.testing.assert_allclose(out, ours(q, v, value_mask=value_mask), atol=1e-6)
    np.testing.assert_array_equal(same, cache)


def test_mha_self_attention_form_equals_explicit_form():
    ours, theirs, q, _ = _mha_pair(kv_dim=8)
    mask = np.ones((2, 5), bool)
    mask[1, 3:] = False
    fused = np.asarray(ours(q, value_mask=mask, query_mask=mask))
    expected = np.asarray(theirs(q, q, query_mask=mask, value_mask=mask))
    # Keras gives masked queries uniform weights; ours gives them none.
    np.testing.assert_allclose(fused[mask], expected[mask], atol=1e-5)
    np.testing.assert_allclose(
        fused[~mask], np.broadcast_to(ours.output_bias.numpy(), fused[~mask].shape), atol=1e-6
    )
    # In a functional model the input's padding mask masks queries and keys.
    inp = keras.Input((None,), dtype="int32")
    emb = keras.layers.Embedding(10, 8, mask_zero=True)
    x = emb(inp)
    model = keras.Model(inp, [ours(x), theirs(x, x)])
    a, b = model(np.array([[1, 2, 3, 0, 0]]))
    np.testing.assert_allclose(np.asarray(a)[:, :3], np.asarray(b)[:, :3], atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fused", [False, True])
def test_mha_fully_masked_half_precision(dtype, fused):
    mha = MultiHeadAttention(2, 4, dtype=keras.DTypePolicy(f"mixed_{dtype}"), fused=fused)
    out = run_fully_masked(mha, 8)
    np.testing.assert_allclose(out[1], np.broadcast_to(mha.output_bias.numpy(), (3, 8)), atol=1e-2)


@pytest.mark.parametrize(
    "make,inputs",
    [
        (
            lambda init: Attention("additive", kernel_initializer=init),
            lambda: (_x(2, 3, 4), _x(2, 5, 4)),
        ),
        (
            lambda init: Attention("general", kernel_initializer=init),
            lambda: (_x(2, 3, 4), _x(2, 5, 4)),
        ),
        (
            lambda init: MultiHeadAttention(2, 4, kernel_initializer=init, bias_initializer=init),
            lambda: (_x(2, 3, 8), _x(2, 5, 8)),
        ),
        (
            lambda init: seqkeras.layers.TransformerEncoderBlock(
                2, 16, kernel_initializer=init, bias_initializer=init
            ),
            lambda: (_x(2, 3, 8),),
        ),
        (
            lambda init: seqkeras.layers.TransformerDecoderBlock(
                2, 16, kernel_initializer=init, bias_initializer=init
            ),
            lambda: (_x(2, 3, 8), _x(2, 5, 8)),
        ),
        (
            lambda init: seqkeras.layers.SequencePooling(
                "attention", kernel_initializer=init, bias_initializer=init
            ),
            lambda: (_x(2, 3, 8),),
        ),
    ],
)
def test_initializers_are_configurable_and_serialized(make, inputs):
    layer = make(keras.initializers.Constant(0.25))
    layer(*inputs())
    weights = [w for w in layer.weights if "norm" not in w.path and "temperature" not in w.path]
    assert weights
    for w in weights:
        np.testing.assert_array_equal(w.numpy(), 0.25, err_msg=w.path)
    clone = type(layer).from_config(layer.get_config())
    clone(*inputs())
    for w in clone.weights:
        if "norm" not in w.path:
            np.testing.assert_array_equal(w.numpy(), 0.25, err_msg=w.path)


def test_fused_is_an_argument_not_a_module_flag():
    layer = MultiHeadAttention(2, 4, fused=True)
    assert MultiHeadAttention.from_config(layer.get_config()).fused is True
    with pytest.raises(TypeError, match="`fused`"):
        MultiHeadAttention(2, 4, fused="yes")
