"""The matrix-memory recurrences (gated DeltaNet with linear attention and
retention as its special cases, the mLSTM, the sLSTM) against NumPy loops
written from the papers' equations and against the reference layers with
copied weights (`transformers`' Qwen3-Next gated DeltaNet and xLSTM-7B
mLSTM layers, the `xlstm` package's sLSTM): outputs and input gradients;
the chunked / parallel forms against the step; padding that leaves the
state alone; every layer's contract (`run_layer_test`)."""

import importlib.util
import os
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

import seqkeras
from seqkeras.layers.delta import gated_delta_rule
from seqkeras.layers.xlstm import MLSTMState
from seqkeras.layers.xlstm import mlstm_chunkwise
from seqkeras.layers.xlstm import mlstm_step
from tests.layer_checks import run_layer_test

#: tests/run.py --slow: the one slow test (the xlstm package's sLSTM)
SLOW_SECONDS = 7
SLOW_PEAK_MB = 690

sk = seqkeras.layers
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _x(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _delta_loop(q, k, v, g, beta, memory):
    """The gated delta rule step by step in float64 NumPy."""
    memory = memory.astype("float64").copy()
    out = []
    for t in range(q.shape[1]):
        if g is not None:
            memory = memory * np.exp(g[:, t])[..., None, None]
        if beta is None:
            update = v[:, t]
        else:
            recalled = np.einsum("bhk,bhkv->bhv", k[:, t], memory)
            update = (v[:, t] - recalled) * beta[:, t][..., None]
        memory = memory + k[:, t][..., None] * update[:, :, None, :]
        out.append(np.einsum("bhk,bhkv->bhv", q[:, t], memory))
    return np.stack(out, 1), memory


def _delta_inputs(steps, seed=0):
    rng = np.random.default_rng(seed)
    b, h, dk, dv = 2, 3, 8, 5
    q = rng.normal(size=(b, steps, h, dk)).astype("float32")
    k = rng.normal(size=(b, steps, h, dk)).astype("float32")
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.normal(size=(b, steps, h, dv)).astype("float32")
    g = -rng.uniform(0.0, 0.5, (b, steps, h)).astype("float32")
    beta = rng.uniform(size=(b, steps, h)).astype("float32")
    memory = rng.normal(size=(b, h, dk, dv)).astype("float32")
    return q, k, v, g, beta, memory


@pytest.mark.parametrize("decay", [True, False])
@pytest.mark.parametrize("delta", [True, False])
@pytest.mark.parametrize("chunk", [64, 8, 5, 1])
def test_gated_delta_rule_matches_the_recurrence(decay, delta, chunk):
    """Gated DeltaNet (decay and delta rule), gated linear attention (no
    delta rule), DeltaNet (no decay) and linear attention (neither): the
    chunked form equals the step-by-step recurrence, from a given memory."""
    q, k, v, g, beta, memory = _delta_inputs(37)
    g, beta = (g if decay else None), (beta if delta else None)
    y, final = gated_delta_rule(q, k, v, g, beta, memory, chunk_size=chunk)
    want, want_final = _delta_loop(q, k, v, g, beta, memory)
    np.testing.assert_allclose(y, want, atol=2e-5)
    np.testing.assert_allclose(final, want_final, atol=2e-5)


def test_gated_delta_rule_repeated_keys_and_any_length():
    """Identical keys at beta = 1 (where a power series of the in-chunk
    system loses float32 precision) and a length unknown when tracing (the
    loop over chunks)."""
    q, k, v, g, beta, memory = _delta_inputs(37)
    same = np.broadcast_to(k[:, :1], k.shape).copy()
    ones = np.ones_like(beta)
    y, _ = gated_delta_rule(q, same, v, g, ones, memory, chunk_size=64)
    np.testing.assert_allclose(y, _delta_loop(q, same, v, g, ones, memory)[0], atol=2e-5)
    specs = [tf.TensorSpec((None, None) + t.shape[2:]) for t in (q, k, v, g, beta)]
    dynamic = tf.function(
        lambda *a: gated_delta_rule(*a, memory, chunk_size=8), input_signature=specs
    )
    y, final = dynamic(q, k, v, g, beta)
    want, want_final = _delta_loop(q, k, v, g, beta, memory)
    np.testing.assert_allclose(y, want, atol=2e-5)
    np.testing.assert_allclose(final, want_final, atol=2e-5)


def _mlstm_loop(q, k, v, i, f, eps=1e-6):
    """The mLSTM step by step in float64 NumPy (m from 0)."""
    b, _, h, dk = q.shape
    memory, normalizer, m = np.zeros((b, h, dk, v.shape[-1])), np.zeros((b, h, dk)), 0.0
    out = []
    for t in range(q.shape[1]):
        m_new = np.maximum(f[:, t] + m, i[:, t])
        fa, ia = np.exp(f[:, t] + m - m_new), np.exp(i[:, t] - m_new)
        memory = fa[..., None, None] * memory + ia[..., None, None] * (
            k[:, t][..., None] * v[:, t][:, :, None]
        )
        normalizer = fa[..., None] * normalizer + ia[..., None] * k[:, t]
        m = m_new
        numerator = np.einsum("bhk,bhkv->bhv", q[:, t], memory)
        denominator = np.sum(q[:, t] * normalizer, -1)
        out.append(numerator / (np.maximum(np.abs(denominator), np.exp(-m)) + eps)[..., None])
    return np.stack(out, 1)


def _mlstm_inputs(steps):
    rng = np.random.default_rng(0)
    b, h, dk, dv = 2, 3, 8, 5
    q = (rng.normal(size=(b, steps, h, dk)) / np.sqrt(dk)).astype("float32")
    k = rng.normal(size=(b, steps, h, dk)).astype("float32")
    v = rng.normal(size=(b, steps, h, dv)).astype("float32")
    i = rng.uniform(-3.0, 3.0, (b, steps, h)).astype("float32")
    f = -np.log1p(np.exp(-rng.normal(0.0, 3.0, (b, steps, h)))).astype("float32")
    return q, k, v, i, f


@pytest.mark.parametrize("chunk", [64, 8, 5, 1])
def test_mlstm_chunkwise_parallel_and_step_match_the_recurrence(chunk):
    """Chunk 64 >= the 37 steps is the parallel (quadratic) form; a
    prefill then steps, and a continuation from a state, agree too."""
    q, k, v, i, f = _mlstm_inputs(37)
    want = _mlstm_loop(q, k, v, i, f)
    y, _ = mlstm_chunkwise(q, k, v, i, f, chunk_size=chunk)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=2e-5)
    head = [t[:, :20] for t in (q, k, v, i, f)]
    _, state = mlstm_chunkwise(*head, chunk_size=8)
    tail, _ = mlstm_chunkwise(*(t[:, 20:] for t in (q, k, v, i, f)), state, chunk_size=6)
    np.testing.assert_allclose(tail, want[:, 20:], rtol=1e-4, atol=2e-5)
    steps = []
    for t in range(20, 37):
        h, state = mlstm_step(q[:, t], k[:, t], v[:, t], i[:, t], f[:, t], state)
        steps.append(np.asarray(h))
    np.testing.assert_allclose(np.stack(steps, 1), want[:, 20:], rtol=1e-4, atol=2e-5)
    assert isinstance(state, MLSTMState)


def _torch_grad(module, x, probe):
    import torch

    xt = torch.tensor(x, requires_grad=True)
    out = module(xt)
    out = out[0] if isinstance(out, tuple) else out
    (out * torch.tensor(probe)).sum().backward()
    return out.detach().numpy(), xt.grad.numpy()


def _keras_grad(layer, x, probe):
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        out = layer(xt)
        loss = tf.reduce_sum(out * probe)
    return np.asarray(out), np.asarray(tape.gradient(loss, xt))


def test_gated_deltanet_matches_qwen3_next_with_copied_weights():
    """transformers' Qwen3NextGatedDeltaNet (its torch fallback: chunk and
    recurrent kernels), weights copied (its interleaved projections
    re-laid by `seqkeras.pretrained`): outputs and input gradients; then
    a prefill and steps from our cache."""
    torch = pytest.importorskip("torch")
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next import modeling_qwen3_next as reference

    from seqkeras.pretrained.hybrid import copy_gated_deltanet

    torch.manual_seed(0)
    nk, nv, dk, dv, d = 2, 4, 8, 6, 32
    config = Qwen3NextConfig(
        hidden_size=d,
        linear_num_key_heads=nk,
        linear_num_value_heads=nv,
        linear_key_head_dim=dk,
        linear_value_head_dim=dv,
        linear_conv_kernel_dim=4,
        num_hidden_layers=1,
        layer_types=["linear_attention"],
        num_experts=0,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
    )
    theirs = reference.Qwen3NextGatedDeltaNet(config, 0).eval()
    with torch.no_grad():
        theirs.norm.weight.normal_(1.0, 0.1)
        theirs.dt_bias.normal_(0.0, 0.5)
    ours = sk.GatedDeltaNet(nk, dk, nv, dv, chunk_size=16)
    ours.build((None, None, d))
    tensors = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    copy_gated_deltanet(ours, tensors.__getitem__, lambda var, value: var.assign(value), "")
    x, probe = _x(2, 40, d), _x(2, 40, d, seed=1)
    want, want_grad = _torch_grad(theirs, x, probe)
    got, got_grad = _keras_grad(ours, x, probe)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(got_grad, want_grad, atol=1e-5)
    cache = ours.init_cache(2)
    first, cache = ours(x[:, :30], cache=cache, cache_index=0)
    steps = [np.asarray(first)]
    for t in range(30, 40):
        y, cache = ours(x[:, t : t + 1], cache=cache, cache_index=t)
        steps.append(np.asarray(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), want, atol=1e-5)


def test_mlstm_layer_matches_xlstm_7b_with_copied_weights():
    """transformers' xLSTM layer (its torch fallback), weights copied:
    outputs and input gradients; the parallel form and the steps too.
    Within 1e-5 relative (and absolute): the two float32 computations
    round differently by ~1e-5 of the outputs (the per-head LayerNorm
    divides by small spreads; in float64 the forms agree exactly)."""
    torch = pytest.importorskip("torch")
    from transformers import xLSTMConfig
    from transformers.models.xlstm import modeling_xlstm as reference

    if not hasattr(reference, "xLSTMLayer"):
        pytest.skip("transformers uses the xlstm package's layer here (it is installed)")
    from seqkeras.pretrained.hybrid import copy_mlstm

    torch.manual_seed(0)
    d, heads = 64, 2
    config = xLSTMConfig(
        vocab_size=100, hidden_size=d, num_hidden_layers=1, num_heads=heads, chunk_size=8
    )
    theirs = reference.xLSTMLayer(config).eval()
    with torch.no_grad():  # its initialisation zeroes the gates' weights
        for name, p in theirs.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif "gate_preact.bias" in name:
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
    ours = sk.MLSTMLayer(heads, qk_dim_factor=0.5, chunk_size=8)
    ours.build((None, None, d))
    tensors = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    copy_mlstm(ours, tensors.__getitem__, lambda var, value: var.assign(value), "")
    x, probe = _x(2, 37, d), _x(2, 37, d, seed=1)
    want, want_grad = _torch_grad(theirs, x, probe)
    got, got_grad = _keras_grad(ours, x, probe)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-5, atol=1e-5)
    parallel = sk.MLSTMLayer.from_config({**ours.get_config(), "chunk_size": 64})
    parallel.build((None, None, d))
    parallel.set_weights(ours.get_weights())
    np.testing.assert_allclose(parallel(x), want, rtol=1e-5, atol=1e-5)
    cache, steps = ours.init_cache(2), []
    for t in range(37):
        y, cache = ours(x[:, t : t + 1], cache=cache, cache_index=t)
        steps.append(np.asarray(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), want, rtol=1e-5, atol=1e-5)


def _xlstm_package():
    """The `xlstm` package installed with `--no-deps` into `.refs/xlstm`
    (not the virtual environment: there transformers would switch its
    xLSTM to it), its sLSTM modules imported without its `__init__` (which
    needs mlstm_kernels)."""
    root = os.path.join(ROOT, ".refs", "xlstm")
    if importlib.util.find_spec("torch") is None or not os.path.isdir(os.path.join(root, "xlstm")):
        pytest.skip(
            "the xlstm package is not in .refs/xlstm (`pip install --no-deps --target "
            ".refs/xlstm xlstm==2.0.6`)"
        )
    package = types.ModuleType("xlstm")
    package.__path__ = [os.path.join(root, "xlstm")]
    sys.modules.setdefault("xlstm", package)
    from xlstm.blocks.slstm.layer import sLSTMLayer, sLSTMLayerConfig

    return sLSTMLayer, sLSTMLayerConfig


@pytest.mark.slow
def test_slstm_matches_the_xlstm_package_with_copied_weights():
    """The `xlstm` package's sLSTMLayer (vanilla backend), weights copied
    (its `fgate` module feeds the input gate): outputs and input
    gradients; a prefill and a step continue from our cache."""
    import torch

    from seqkeras.pretrained.hybrid import copy_slstm

    layer_class, config_class = _xlstm_package()
    torch.manual_seed(0)
    config = config_class(
        embedding_dim=32,
        num_heads=4,
        conv1d_kernel_size=4,
        backend="vanilla",
        dtype="float32",
        enable_automatic_mixed_precision=False,
    )
    theirs = layer_class(config).eval()
    with torch.no_grad():
        theirs.slstm_cell._recurrent_kernel_.normal_(0.0, 0.3)
        theirs.slstm_cell._bias_.normal_(0.0, 1.0)
        theirs.group_norm.weight.normal_(0.0, 0.1)
    ours = sk.SLSTMLayer(4)
    ours.build((None, None, 32))
    tensors = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    copy_slstm(ours, tensors.__getitem__, lambda var, value: var.assign(value), "")
    x, probe = _x(2, 10, 32), _x(2, 10, 32, seed=1)
    want, want_grad = _torch_grad(theirs, x, probe)
    got, got_grad = _keras_grad(ours, x, probe)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(got_grad, want_grad, atol=1e-5)
    cache = ours.init_cache(2)
    first, cache = ours(x[:, :9], cache=cache, cache_index=0)
    last, _ = ours(x[:, 9:], cache=cache, cache_index=9)
    np.testing.assert_allclose(np.concatenate([first, last], 1), want, atol=1e-5)


def _layers():
    return {
        "deltanet": lambda: sk.GatedDeltaNet(2, 4, chunk_size=4),
        "linear_attention": lambda: sk.GatedDeltaNet(2, 4, decay="none", delta_rule=False),
        "retention": lambda: sk.GatedDeltaNet(2, 4, decay="fixed", delta_rule=False),
        "mlstm": lambda: sk.MLSTMLayer(2, chunk_size=4),
        "slstm": lambda: sk.SLSTMLayer(2),
    }


def test_short_convolution_matches_its_equation_and_steps():
    """LFM2's gated short convolution against NumPy: (c * conv(b * x)) W_out,
    and a prefill then steps from its window."""
    keras.utils.set_random_seed(0)
    layer = sk.ShortConvolution(3)
    x = _x(2, 7, 8)
    got = np.asarray(layer(x))
    b, c, h = np.split(x @ np.asarray(layer.in_kernel), 3, axis=-1)
    u = np.pad(b * h, ((0, 0), (2, 0), (0, 0)))
    kernel = np.asarray(layer.conv_kernel_weights)
    conv = sum(u[:, j : j + 7] * kernel[j] for j in range(3))
    np.testing.assert_allclose(got, (c * conv) @ np.asarray(layer.out_kernel), atol=1e-5)
    first, cache = layer(x[:, :4], cache=layer.init_cache(2), cache_index=0)
    steps = [np.asarray(first)]
    for t in range(4, 7):
        y, cache = layer(x[:, t : t + 1], cache=cache, cache_index=t)
        steps.append(np.asarray(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), got, atol=1e-5)


@pytest.mark.parametrize("name", list(_layers()))
def test_parallel_equals_steps_and_padding_leaves_the_state_alone(name):
    keras.utils.set_random_seed(0)
    layer = _layers()[name]()
    x = _x(2, 7, 8)
    full = np.asarray(layer(x))
    cache, steps = layer.init_cache(2), []
    for t in range(7):
        y, cache = layer(x[:, t : t + 1], cache=cache, cache_index=t)
        steps.append(np.asarray(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    # padded steps at the end: they output zeros and leave the memories
    # as the unpadded steps left them (the convolution's window aside: it
    # holds the zeros the padded steps fed it)
    keep = np.ones((2, 7), bool)
    keep[0, 5:] = False
    padded, state = layer(x, padding_mask=keep, cache=layer.init_cache(2), cache_index=0)
    assert np.all(np.asarray(padded)[0, 5:] == 0.0)
    np.testing.assert_allclose(np.asarray(padded)[:, :5], full[:, :5], atol=1e-5)
    _, want = layer(x[:1, :5], cache=layer.init_cache(1), cache_index=0)
    for field in type(state)._fields:
        if field != "conv":
            got, expected = getattr(state, field), getattr(want, field)
            np.testing.assert_allclose(np.asarray(got)[:1], expected, atol=1e-5)


def test_matrix_memory_layer_contracts():
    run_layer_test(lambda: sk.GatedDeltaNet(2, 4, chunk_size=4), _x(2, 5, 8), num_weights=(9, 0))
    run_layer_test(lambda: sk.MLSTMLayer(2, chunk_size=4), _x(2, 5, 8), num_weights=(10, 0))
    run_layer_test(lambda: sk.SLSTMLayer(2), _x(2, 5, 8), num_weights=(9, 0))
    run_layer_test(
        lambda: sk.RWKV7Blocks(
            2, 16, head_size=4, decay_lora=4, aaa_lora=4, mv_lora=4, gate_lora=4
        ),
        _x(2, 5, 8),
        num_weights=None,
    )
    run_layer_test(lambda: sk.RWKV7ChannelMixing(16), _x(2, 5, 8), num_weights=(3, 0))
    run_layer_test(lambda: sk.ShortConvolution(3), _x(2, 5, 8), num_weights=(3, 0))
    # the blocks: their mixers' jit fit is above (each an XLA compile of a
    # chunked recurrence's gradient: a third of this test's time)
    for kind, options in (
        ("deltanet", {"num_key_heads": 2, "key_head_dim": 4}),
        ("mlstm", {"num_heads": 2}),
        ("slstm", {"num_heads": 2, "conv_kernel": 0}),
    ):
        run_layer_test(
            lambda: sk.MixerBlock(kind, intermediate_dim=16, **options),
            _x(2, 5, 8),
            num_weights=None,
            fit=False,
        )


def test_matrix_memory_errors_name_the_argument():
    with pytest.raises(ValueError, match="GatedDeltaNet.*num_value_heads"):
        sk.GatedDeltaNet(2, 4, num_value_heads=3)
    with pytest.raises(ValueError, match="GatedDeltaNet.*decay"):
        sk.GatedDeltaNet(2, 4, decay="sometimes")
    with pytest.raises(ValueError, match="MLSTMLayer.*divisible"):
        sk.MLSTMLayer(3)(_x(1, 2, 8))
    with pytest.raises(ValueError, match="SLSTMLayer.*divisible"):
        sk.SLSTMLayer(3)(_x(1, 2, 8))
    with pytest.raises(TypeError, match="MLSTMLayer.*cache"):
        layer = sk.MLSTMLayer(2)
        layer(_x(1, 2, 8), cache=np.zeros(3), cache_index=0)
    with pytest.raises(ValueError, match="MixerBlock.*kind"):
        sk.MixerBlock("lstm")


@pytest.mark.parametrize("chunk", [16, 5, 1])
def test_generalized_delta_rule_matches_keras_hub_rwkv7(chunk):
    """RWKV-7's recurrence: our chunked form (per-channel decays, rank-one
    corrections) and step against keras-hub's step-by-step loop, from a
    given memory (keras-hub's is value by key: transposed)."""
    pytest.importorskip("keras_hub")
    from keras_hub.src.models.rwkv7.rwkv7_layer import rnn_generalized_delta_rule

    from seqkeras.layers.rwkv import generalized_delta_rule, generalized_delta_step

    rng = np.random.default_rng(0)
    b, t, h, n = 2, 37, 3, 8
    r, v = _x(b, t, h, n), _x(b, t, h, n, seed=1)
    k = 0.5 * _x(b, t, h, n, seed=2)
    kk = _x(b, t, h, n, seed=3)
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    iclr = rng.uniform(size=(b, t, h, n)).astype("float32")
    w_log = (-np.log1p(np.exp(-rng.normal(size=(b, t, h, n)))) - 0.5).astype("float32")
    memory = _x(b, h, n, n, seed=4)
    want, want_memory = rnn_generalized_delta_rule(
        r, w_log, k, v, -kk, kk * iclr, initial_state=memory
    )
    log_w = -np.exp(w_log)
    ours = (r, log_w, k, v, -kk, kk * iclr)
    y, final = generalized_delta_rule(*ours, memory.transpose(0, 1, 3, 2), chunk_size=chunk)
    np.testing.assert_allclose(y, want, atol=1e-5)
    np.testing.assert_allclose(np.asarray(final).transpose(0, 1, 3, 2), want_memory, atol=1e-5)
    m, steps = memory.transpose(0, 1, 3, 2), []
    for i in range(t):
        o, m = generalized_delta_step(*(x[:, i] for x in ours), m)
        steps.append(np.asarray(o))
    np.testing.assert_allclose(np.stack(steps, 1), want, atol=1e-5)


def _rwkv7_pair(num_layers=3):
    """keras-hub's RWKV7Backbone with weights of a larger scale than its
    N(0, 0.02) (so every term matters), and our model with them copied."""
    keras_hub = pytest.importorskip("keras_hub")
    from seqkeras.pretrained.hybrid import copy_rwkv7

    keras.utils.set_random_seed(0)
    sizes = dict(head_size=8, gate_lora=4, mv_lora=4, aaa_lora=6, decay_lora=5)
    theirs = keras_hub.models.RWKV7Backbone(
        hidden_size=32,
        num_layers=num_layers,
        vocabulary_size=40,
        intermediate_dim=64,
        dtype="float32",
        **sizes,
    )
    rng = np.random.default_rng(0)
    for w in theirs.weights:
        shift = 1.0 if w.path.endswith("gamma") else 0.0
        w.assign(rng.normal(0.0, 0.3, w.shape).astype("float32") + shift)

    def build():
        return seqkeras.models.rwkv7_language_model(
            40,
            32,
            num_layers,
            intermediate_dim=64,
            head_size=8,
            decay_lora=5,
            aaa_lora=6,
            mv_lora=4,
            gate_lora=4,
            chunk_size=8,
        )

    ours = copy_rwkv7(build(), {w.path: np.asarray(w) for w in theirs.weights})
    return theirs, ours, build


def test_rwkv7_model_matches_keras_hub_with_the_same_weights():
    """Logits and the gradient of a loss with respect to every weight equal
    keras-hub's RWKV7Backbone's; a prefill then steps equal the full pass;
    left padding leaves the real tokens' logits as keras-hub's."""
    from seqkeras.pretrained.hybrid import copy_rwkv7

    theirs, ours, build = _rwkv7_pair()
    ids = np.random.default_rng(0).integers(1, 40, (2, 21)).astype("int32")
    probe = _x(2, 21, 40, seed=5)

    def loss_and_grads(model, call):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(call(model) * probe)
        return np.asarray(call(model)), tape.gradient(loss, model.trainable_weights)

    want, want_grads = loss_and_grads(
        theirs, lambda m: m({"token_ids": ids, "padding_mask": np.ones_like(ids)})
    )
    got, got_grads = loss_and_grads(ours, lambda m: m(ids))
    np.testing.assert_allclose(got, want, atol=2e-5)
    # keras-hub's gradients laid out as our variables (copied as weights)
    laid_out = copy_rwkv7(
        build(),
        {
            w.path: np.asarray(tf.convert_to_tensor(g))
            for w, g in zip(theirs.trainable_weights, want_grads)
        },
    )
    # within 1e-5 of each gradient's largest entry: float32 sums of entries
    # up to ~60 differ by ~1e-4 between CPUs (AVX2 vs AVX-512 kernels)
    for variable, grad in zip(laid_out.trainable_weights, got_grads):
        scale = max(1.0, float(np.abs(np.asarray(variable)).max()))
        np.testing.assert_allclose(
            tf.convert_to_tensor(grad),
            variable,
            rtol=1e-5,
            atol=1e-5 * scale,
            err_msg=variable.path,
        )
    caches = ours.init_cache(None, 2, 21)
    logits, caches = ours.call_with_cache(ids[:, :15], caches, 0)  # a prefill
    steps = [np.asarray(logits)]
    for t in range(15, 21):
        logits, caches = ours.call_with_cache(ids[:, t], caches, t)
        steps.append(np.asarray(logits))
    np.testing.assert_allclose(np.stack(steps, 1), want[:, 14:], atol=2e-5)
    padded = np.concatenate([np.zeros((2, 3), "int32"), ids], 1)
    mask = (padded != 0).astype("int32")
    want = np.asarray(theirs({"token_ids": padded, "padding_mask": mask}))[:, 3:]
    np.testing.assert_allclose(np.asarray(ours(padded))[:, 3:], want, atol=2e-5)


def test_rwkv7_blocks_steps_and_padding():
    """The stack's prefill and steps equal its full pass; trailing padded
    steps leave every block's memory as the unpadded steps left it."""
    keras.utils.set_random_seed(0)
    stack = sk.RWKV7Blocks(2, 16, head_size=4, decay_lora=4, aaa_lora=4, mv_lora=4, gate_lora=4)
    x = _x(2, 7, 8)
    full = np.asarray(stack(x))
    first, cache = stack(x[:, :4], cache=stack.init_cache(2), cache_index=0)
    steps = [np.asarray(first)]
    for t in range(4, 7):
        y, cache = stack(x[:, t : t + 1], cache=cache, cache_index=t)
        steps.append(np.asarray(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    keep = np.ones((2, 7), bool)
    keep[0, 5:] = False
    _, padded = stack(x, padding_mask=keep, cache=stack.init_cache(2), cache_index=0)
    _, short = stack(x[:1, :5], cache=stack.init_cache(1), cache_index=0)
    for (mixing, _), (want, _) in zip(padded, short):
        np.testing.assert_allclose(np.asarray(mixing.memory)[:1], want.memory, atol=1e-5)
