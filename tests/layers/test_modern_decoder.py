"""Rotary embeddings, grouped-query and sliding-window attention, the gated
feed-forward and the Llama decoder block, against NumPy references and
`transformers`' own rotary frequencies; cached steps (fixed buffer and
growing cache, prepared fused weights) against the full pass."""

import numpy as np
import pytest

import seqkeras
from tests.layer_checks import run_layer_test

sk = seqkeras.layers


def _x(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _rope_numpy(x, base, layout, start=0, factor=1.0):
    """x (batch, time, heads, dim) rotated, written from the equations."""
    d = x.shape[-1]
    inv = 1.0 / base ** (np.arange(0, d, 2) / d)
    pos = (np.arange(x.shape[1]) + start) / factor
    theta = pos[:, None] * inv[None]  # (time, d/2)
    c, s = np.cos(theta)[None, :, None], np.sin(theta)[None, :, None]
    if layout == "half":
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return np.concatenate([a * c - b * s, b * c + a * s], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * c - b * s, b * c + a * s
    return out


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotary_embedding_matches_the_equations(layout):
    x = _x(2, 7, 3, 8)
    rope = sk.RotaryEmbedding(base=500.0, layout=layout)
    np.testing.assert_allclose(rope(x), _rope_numpy(x, 500.0, layout), atol=1e-5)
    np.testing.assert_allclose(
        rope(x, start_index=5), _rope_numpy(x, 500.0, layout, start=5), atol=1e-5
    )
    heads_first = np.transpose(x, (0, 2, 1, 3))
    np.testing.assert_allclose(
        np.transpose(rope(heads_first, start_index=5, sequence_axis=2), (0, 2, 1, 3)),
        _rope_numpy(x, 500.0, layout, start=5),
        atol=1e-5,
    )
    linear = sk.RotaryEmbedding(500.0, layout, scaling={"type": "linear", "factor": 4.0})
    np.testing.assert_allclose(linear(x), _rope_numpy(x, 500.0, layout, factor=4.0), atol=1e-5)
    # relative positions: q.k depends on the offset only
    q, k = _x(1, 1, 1, 8, seed=1), _x(1, 1, 1, 8, seed=2)
    dots = [
        float(np.sum(np.asarray(rope(q, start_index=s + 3)) * np.asarray(rope(k, start_index=s))))
        for s in (0, 11)
    ]
    assert abs(dots[0] - dots[1]) < 1e-4


def test_rotary_frequencies_equal_transformers():
    # Llama 3's frequency smoothing, and the plain frequencies, as the
    # rotary initialisers of `transformers` compute them.
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from seqkeras.layers.rotary import inverse_frequencies

    scaling = {
        "type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_length": 64,
    }
    config = LlamaConfig(
        hidden_size=256,
        num_attention_heads=2,
        max_position_embeddings=512,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    )
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    ours = inverse_frequencies(128, 500000.0, scaling)
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-6)
    assert not np.allclose(ours, inverse_frequencies(128, 500000.0))  # the scaling acts


def test_rotary_embedding_contract_and_errors():
    run_layer_test(
        lambda: sk.RotaryEmbedding(base=100.0, layout="interleaved", rotary_dim=4),
        _x(2, 5, 3, 8).reshape(2, 5, 24)[:, :, :24].reshape(2, 5, 3, 8),
        fit=False,
    )
    with pytest.raises(ValueError, match="`RotaryEmbedding`.*layout"):
        sk.RotaryEmbedding(layout="gptj")
    with pytest.raises(ValueError, match="scaling"):
        sk.RotaryEmbedding(scaling={"type": "yarn", "factor": 2})
    with pytest.raises(ValueError, match="low_freq_factor"):
        sk.RotaryEmbedding(scaling={"type": "llama3", "factor": 2})
    with pytest.raises(ValueError, match="rank 4"):
        sk.RotaryEmbedding()(_x(2, 5, 8))
    with pytest.raises(ValueError, match="even"):
        sk.RotaryEmbedding()(_x(1, 2, 1, 5))


def _gqa_numpy(x, layer, window=None):
    """Causal grouped-query attention with rotary positions, from the
    layer's weights."""
    wq, wk, wv, wo = (
        np.asarray(w)
        for w in (layer.query_kernel, layer.key_kernel, layer.value_kernel, layer.output_kernel)
    )
    h, kv = wq.shape[1], wk.shape[1]
    q = np.einsum("btd,dhk->bthk", x, wq)
    k = np.einsum("btd,dhk->bthk", x, wk)
    v = np.einsum("btd,dhk->bthk", x, wv)
    base = layer.rotary_embedding.base
    q, k = _rope_numpy(q, base, "half"), _rope_numpy(k, base, "half")
    t = x.shape[1]
    i, j = np.arange(t)[:, None], np.arange(t)[None]
    visible = j <= i
    if window:
        visible &= i - j < window
    out = np.zeros((x.shape[0], t, h, wv.shape[-1]), "float64")
    for head in range(h):
        g = head // (h // kv)  # query head -> its key/value head
        logits = np.einsum("bqd,bkd->bqk", q[:, :, head], k[:, :, g]) / np.sqrt(wq.shape[-1])
        logits = np.where(visible, logits, -np.inf)
        w = np.exp(logits - logits.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        out[:, :, head] = np.einsum("bqk,bkd->bqd", w, v[:, :, g])
    return np.einsum("bthd,hdo->bto", out, wo)


def _gqa_layer(window=None, kv=2):
    return sk.MultiHeadAttention(
        4,
        4,
        num_key_value_heads=kv,
        use_bias=False,
        rotary_embedding=sk.RotaryEmbedding(base=100.0),
        window=window,
    )


@pytest.mark.parametrize("kv,window", [(2, None), (1, 3), (4, 2)])
def test_grouped_query_rotary_window_attention_matches_numpy(kv, window):
    x = _x(2, 7, 8)
    layer = _gqa_layer(window, kv)
    out = layer(x, use_causal_mask=True)
    assert tuple(layer.key_kernel.shape) == (8, kv, 4)
    np.testing.assert_allclose(out, _gqa_numpy(x, layer, window), atol=1e-5)


@pytest.mark.parametrize("layout", ["fixed", "scatter", "growing"])
@pytest.mark.parametrize("prepared", [False, True])
@pytest.mark.parametrize("window", [None, 3])
def test_grouped_query_cached_step_equals_full_pass(layout, prepared, window):
    # One token at a time (after a 3-token prompt in one call), from a
    # max_length buffer (written in place or by scatter) or a cache that
    # grows and keeps only the window: equal to the full causal pass; the
    # cache has the key/value heads only and keeps its layout.
    x = _x(2, 8, 8, seed=3)
    layer = _gqa_layer(window)
    full = np.asarray(layer(x, use_causal_mask=True))
    weights = layer.prepare_step_weights() if prepared else None
    growing = layout == "growing"
    cache = layer.init_cache(2, 8, layout=layout)
    assert tuple(cache[0].shape) == (2, 2, 0 if growing else 8, 4)
    out, cache = layer(x[:, :3], cache=cache, cache_index=0, step_weights=weights)
    np.testing.assert_allclose(out, full[:, :3], atol=1e-5)
    for i in range(3, 8):
        out, cache = layer(x[:, i : i + 1], cache=cache, cache_index=i, step_weights=weights)
        np.testing.assert_allclose(out[:, 0], full[:, i], atol=1e-5)
        assert cache.layout == layout
    kept = (window or 8) if growing else 8
    assert tuple(cache[1].shape) == (2, 2, kept, 4)


def _gated_layer():
    """Qwen3-Next's attention: q/k RMS norms, partial rotary positions, an
    output gate (biases on, scales not ones)."""
    layer = sk.MultiHeadAttention(
        4,
        4,
        num_key_value_heads=2,
        rotary_embedding=sk.RotaryEmbedding(base=100.0, rotary_dim=2),
        query_key_norm=1e-6,
        output_gate=True,
    )
    layer.build((2, 8, 8))
    rng = np.random.default_rng(7)
    for w in layer.weights:
        w.assign(rng.normal(1.0 if "norm" in w.path else 0.0, 0.5, w.shape).astype("float32"))
    return layer


def _gated_numpy(x, layer):
    """The gated, q/k-normalised causal attention, from the layer's weights."""
    w = {v.path.split("/")[-1]: np.asarray(v, "float64") for v in layer.weights}

    def project(name):
        return np.einsum("btd,dhk->bthk", x, w[name + "_kernel"]) + w[name + "_bias"]

    def rms(a, scale):
        return a / np.sqrt(np.mean(a * a, -1, keepdims=True) + 1e-6) * scale

    q, k, v = project("query"), project("key"), project("value")
    q, k = rms(q, w["query_norm_scale"]), rms(k, w["key_norm_scale"])
    q = np.concatenate([_rope_numpy(q[..., :2], 100.0, "half"), q[..., 2:]], -1)
    k = np.concatenate([_rope_numpy(k[..., :2], 100.0, "half"), k[..., 2:]], -1)
    t = x.shape[1]
    visible = np.arange(t)[None] <= np.arange(t)[:, None]
    out = np.zeros(q.shape)
    for head in range(4):
        g = head // 2
        logits = np.einsum("bqd,bkd->bqk", q[:, :, head], k[:, :, g]) / 2.0
        logits = np.where(visible, logits, -np.inf)
        a = np.exp(logits - logits.max(-1, keepdims=True))
        out[:, :, head] = np.einsum("bqk,bkd->bqd", a / a.sum(-1, keepdims=True), v[:, :, g])
    out = out / (1.0 + np.exp(-project("gate")))
    return np.einsum("bthd,hdo->bto", out, w["output_kernel"]) + w["output_bias"]


@pytest.mark.parametrize("layout", ["fixed", "scatter", "growing"])
@pytest.mark.parametrize("prepared", [False, True])
def test_gated_attention_with_query_key_norms(layout, prepared):
    # the full pass against NumPy; a prompt in one call, then one token at
    # a time, equal to it (the norms before the rotation, the scale after
    # the queries' norm, the gate on each head's output)
    x = _x(2, 6, 8, seed=5)
    layer = _gated_layer()
    full = np.asarray(layer(x, use_causal_mask=True))
    np.testing.assert_allclose(full, _gated_numpy(x, layer), atol=1e-4)
    weights = layer.prepare_step_weights() if prepared else None
    cache = layer.init_cache(2, 6, layout=layout)
    out, cache = layer(x[:, :3], cache=cache, cache_index=0, step_weights=weights)
    np.testing.assert_allclose(out, full[:, :3], atol=1e-5)
    for i in range(3, 6):
        out, cache = layer(x[:, i : i + 1], cache=cache, cache_index=i, step_weights=weights)
        np.testing.assert_allclose(out[:, 0], full[:, i], atol=1e-5)


def test_gated_attention_cross_cache_contract_and_errors():
    layer = _gated_layer()
    q, v = _x(6, 1, 8), _x(2, 5, 8, seed=1)
    expected = layer(q, np.repeat(v, 3, axis=0))
    for prepared in (None, layer.prepare_step_weights()):
        out, _ = layer(q, v, cache=layer.compute_cache(v), step_weights=prepared)
        np.testing.assert_allclose(out, expected, atol=1e-5)
    # query, key, value, gate and output kernels and biases, two norm scales
    run_layer_test(
        lambda: sk.MultiHeadAttention(2, 4, query_key_norm=1e-5, output_gate=True),
        (_x(2, 3, 8), _x(2, 5, 8, seed=1)),
        num_weights=(12, 0),
    )
    with pytest.raises(ValueError, match="MultiHeadAttention.*query_key_norm"):
        sk.MultiHeadAttention(2, 4, query_key_norm=0.0)
    with pytest.raises(TypeError, match="MultiHeadAttention.*output_gate"):
        sk.MultiHeadAttention(2, 4, output_gate="yes")


def test_grouped_query_cross_attention_cache_shared_by_beams():
    # 2 sources, 3 beams each, 2 query heads per key/value head: equal to
    # the full attention over the sources repeated per beam.
    layer = sk.MultiHeadAttention(4, 4, num_key_value_heads=2)
    q, v = _x(6, 1, 8), _x(2, 5, 8, seed=1)
    expected = layer(q, np.repeat(v, 3, axis=0))
    for prepared in (None, layer.prepare_step_weights()):
        out, _ = layer(q, v, cache=layer.compute_cache(v), step_weights=prepared)
        np.testing.assert_allclose(out, expected, atol=1e-5)


def test_grouped_query_attention_contract_and_errors():
    run_layer_test(
        lambda: sk.MultiHeadAttention(
            4, 2, num_key_value_heads=2, rotary_embedding=sk.RotaryEmbedding(), window=2
        ),
        _x(2, 5, 8),
        call_kwargs={"use_causal_mask": True},
    )
    with pytest.raises(ValueError, match="num_key_value_heads dividing num_heads"):
        sk.MultiHeadAttention(4, 2, num_key_value_heads=3)
    with pytest.raises(ValueError, match="use_causal_mask=True"):
        sk.MultiHeadAttention(2, 2, window=2)(_x(1, 3, 4))
    with pytest.raises(TypeError, match="rotary_embedding"):
        sk.MultiHeadAttention(2, 2, rotary_embedding="rope")
    layer = _gqa_layer()
    layer(_x(1, 2, 8), use_causal_mask=True)
    with pytest.raises(ValueError, match="num_key_value_heads"):
        layer(_x(1, 1, 8), cache=sk.MultiHeadAttention(4, 4).init_cache(1, 4), cache_index=0)


def test_gated_feedforward_matches_numpy():
    x = _x(2, 3, 8)
    for activation, fn in (
        ("silu", lambda z: z / (1 + np.exp(-z))),
        ("relu", lambda z: np.maximum(z, 0)),
    ):
        layer = sk.GatedFeedForward(16, activation=activation, use_bias=True)
        layer.build(x.shape)
        for w in layer.weights:
            w.assign(_x(*w.shape, seed=len(w.path)))
        g, u, dn = (np.asarray(w) for w in (layer.gate_kernel, layer.up_kernel, layer.down_kernel))
        bg, bu, bd = (np.asarray(w) for w in (layer.gate_bias, layer.up_bias, layer.down_bias))
        expected = (fn(x @ g + bg) * (x @ u + bu)) @ dn + bd
        np.testing.assert_allclose(layer(x), expected, rtol=1e-4, atol=1e-4)
        fused = layer.prepare_step_weights()  # the fused gate/up product
        np.testing.assert_allclose(layer(x, step_weights=fused), expected, rtol=1e-4, atol=1e-4)


def test_gated_feedforward_contract_and_errors():
    run_layer_test(lambda: sk.GatedFeedForward(12, activation="gelu_tanh"), _x(2, 5, 8))
    with pytest.raises(ValueError, match="`GatedFeedForward`.*activation"):
        sk.GatedFeedForward(8, activation="swish2")
    layer = sk.GatedFeedForward(8)
    layer(_x(1, 2, 4))
    with pytest.raises(ValueError, match="GatedFeedForward"):
        layer(_x(1, 2, 5))


@pytest.mark.parametrize("normalize", [True, False])
def test_mixture_of_experts_routes_as_the_equations(normalize):
    # per position: softmax over the experts, the top 2 of 4 kept (and
    # renormalised), each chosen expert's SwiGLU weighted, plus the shared
    # expert scaled by its sigmoid gate; NumPy position by position, with
    # the chosen experts only
    x = _x(2, 3, 8)
    layer = sk.MixtureOfExperts(4, 2, 6, shared_intermediate_dim=5, normalize_top_k=normalize)
    layer.build(x.shape)
    for w in layer.weights:
        w.assign(_x(*w.shape, seed=len(w.path)))
    w = {v.path.split("/")[-1]: np.asarray(v, "float64") for v in layer.weights}
    shared = {v.path.split("/")[-1]: np.asarray(v, "float64") for v in layer.shared_expert.weights}

    def silu(z):
        return z / (1 + np.exp(-z))

    expected = np.zeros(x.shape)
    for b in range(2):
        for t in range(3):
            v = x[b, t].astype("float64")
            logits = v @ w["router_kernel"]
            p = np.exp(logits - logits.max())
            p /= p.sum()
            top = np.argsort(-p)[:2]
            weights = p[top] / (p[top].sum() if normalize else 1.0)
            for e, a in zip(top, weights):
                h = silu(v @ w["expert_gate_kernel"][e]) * (v @ w["expert_up_kernel"][e])
                expected[b, t] += a * (h @ w["expert_down_kernel"][e])
            h = silu(v @ shared["gate_kernel"]) * (v @ shared["up_kernel"])
            gate = 1 / (1 + np.exp(-(v @ w["shared_gate_kernel"])))
            expected[b, t] += gate * (h @ shared["down_kernel"])
    np.testing.assert_allclose(layer(x), expected, rtol=1e-4, atol=1e-4)


def test_mixture_of_experts_contract_errors_and_blocks():
    # router, 3 expert kernels, shared expert's 3 and its gate
    run_layer_test(
        lambda: sk.MixtureOfExperts(3, 2, 4, shared_intermediate_dim=4),
        _x(2, 5, 8),
        num_weights=(8, 0),
    )
    with pytest.raises(ValueError, match="MixtureOfExperts.*top_k <= num_experts"):
        sk.MixtureOfExperts(2, 3, 4)
    with pytest.raises(ValueError, match="LlamaDecoderBlock.*experts"):
        sk.LlamaDecoderBlock(2, 8, experts={"experts": 4})(_x(1, 2, 8))
    # a block with experts: the cached step equals the full pass
    block = sk.LlamaDecoderBlock(
        2, 8, experts={"num_experts": 3, "top_k": 2, "intermediate_dim": 4}
    )
    x = _x(1, 5, 8, seed=2)
    full = np.asarray(block(x))
    assert isinstance(block.feedforward, sk.MixtureOfExperts)
    out, cache = block(x[:, :3], cache=block.init_cache(1, 5), cache_index=0)
    out2, _ = block(x[:, 3:], cache=cache, cache_index=3)
    np.testing.assert_allclose(np.concatenate([out, out2], 1), full, atol=1e-5)
    mixer = sk.MixerBlock(
        "shortconv", experts={"num_experts": 2, "top_k": 1, "intermediate_dim": 4}
    )
    assert isinstance(mixer.ffn, sk.MixtureOfExperts)
    assert sk.MixerBlock.from_config(mixer.get_config()).experts["num_experts"] == 2


def test_llama_block_contract_and_cached_step():
    run_layer_test(
        lambda: sk.LlamaDecoderBlock(4, 16, num_key_value_heads=2, window=3, attention_bias=True),
        _x(2, 5, 8),
    )
    block = sk.LlamaDecoderBlock(4, 16, num_key_value_heads=1, window=3, rope_layout="interleaved")
    x = _x(1, 6, 8, seed=4)
    full = np.asarray(block(x))
    weights = block.prepare_step_weights()
    for layout in ("fixed", "growing"):
        cache = block.init_cache(1, 6, layout=layout)
        for i in range(6):
            out, cache = block(x[:, i : i + 1], cache=cache, cache_index=i, step_weights=weights)
            np.testing.assert_allclose(out[:, 0], full[:, i], atol=1e-5)
    with pytest.raises(ValueError, match="num_key_value_heads dividing"):
        sk.LlamaDecoderBlock(4, 16, num_key_value_heads=3)
    with pytest.raises(ValueError, match="rank 3"):
        sk.LlamaDecoderBlock(2, 8)(_x(2, 8))


def test_lora_adapted_layers_contract():
    # adapters in the config (a `.keras` file rebuilds them), float32
    # adapter weights under mixed precision, the kernels frozen
    run_layer_test(
        lambda: sk.MultiHeadAttention(4, 2, num_key_value_heads=2, lora_rank=2),
        _x(2, 5, 8),
        call_kwargs={"use_causal_mask": True},
        num_weights=(12, 4),  # adapters and biases; the four kernels frozen
    )
    run_layer_test(lambda: sk.GatedFeedForward(12, lora_rank=3, lora_alpha=6), _x(2, 5, 8))
    block = sk.LlamaDecoderBlock(4, 16, num_key_value_heads=2, lora_rank=2)
    block(_x(1, 3, 8))
    assert len(block.trainable_weights) == 2 * 7 + 2  # adapters, the two norms
