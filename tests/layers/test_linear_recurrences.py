"""The linear recurrences (minGRU/minLSTM, Mamba/Mamba-2, RG-LRU/Griffin)
and the two primitives under them, against NumPy loops written from the
papers' equations and against mingru-pytorch with copied weights; the
parallel form against the step form; padding that leaves the state
alone; every layer's contract (`run_layer_test`)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import seqkeras
from seqkeras.layers.mamba import ssd_scan
from seqkeras.layers.scan import causal_conv
from seqkeras.layers.scan import linear_scan
from tests.layer_checks import run_layer_test

#: tests/run.py --slow: the one slow test (mingru-pytorch's equality)
SLOW_SECONDS = 6
SLOW_PEAK_MB = 684

sk = seqkeras.layers


def _x(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _loop(a, b, h=None):
    """`h_t = a_t h_{t-1} + b_t` in float64 NumPy."""
    h = np.zeros(a.shape[:1] + a.shape[2:]) if h is None else h.astype("float64")
    out = []
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        out.append(h)
    return np.stack(out, 1)


@pytest.mark.parametrize("steps", [1, 2, 7, 16, 33])
def test_linear_scan_matches_a_loop_at_any_length(steps):
    rng = np.random.default_rng(steps)
    a = rng.uniform(0.0, 1.0, (2, steps, 3, 2)).astype("float32")
    b = rng.normal(size=(2, steps, 3, 2)).astype("float32")
    h0 = rng.normal(size=(2, 3, 2)).astype("float32")
    np.testing.assert_allclose(linear_scan(a, b), _loop(a, b), atol=1e-5)
    np.testing.assert_allclose(linear_scan(a, b, h0), _loop(a, b, h0), atol=1e-5)
    # a length unknown when tracing: the doubling loop, the same states
    dynamic = tf.function(
        lambda a, b: linear_scan(a, b), input_signature=[tf.TensorSpec((None, None, 3, 2))] * 2
    )
    np.testing.assert_allclose(dynamic(a, b), _loop(a, b), atol=1e-5)


def test_linear_scan_gradient_matches_the_loops():
    """The associative scan's gradient (autodiff through its levels) equals
    the gradient of the recurrence written as a loop over time."""
    a = tf.constant(np.random.default_rng(0).uniform(0.2, 1.0, (2, 9, 3)).astype("float32"))
    b = tf.constant(_x(2, 9, 3))
    probe = _x(2, 9, 3, seed=1)

    def loop(a, b):
        h, out = tf.zeros_like(b[:, 0]), []
        for t in range(9):
            h = a[:, t] * h + b[:, t]
            out.append(h)
        return tf.stack(out, 1)

    grads = []
    for fn in (linear_scan, loop):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            loss = tf.reduce_sum(fn(a, b) * probe)
        grads.append(tape.gradient(loss, [a, b]))
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_causal_conv_matches_numpy_and_continues_from_its_window():
    x, kernel, bias = _x(2, 7, 3), _x(4, 3, seed=1), _x(3, seed=2)
    padded = np.concatenate([np.zeros((2, 3, 3), "float32"), x], 1)
    want = sum(padded[:, k : k + 7] * kernel[k] for k in range(4)) + bias
    y, window = causal_conv(x, kernel, bias)
    np.testing.assert_allclose(y, want, atol=1e-5)
    np.testing.assert_allclose(window, x[:, -3:])
    first, w = causal_conv(x[:, :2], kernel, bias)
    rest, _ = causal_conv(x[:, 2:], kernel, bias, w)
    np.testing.assert_allclose(np.concatenate([first, rest], 1), want, atol=1e-5)


# -- minGRU / minLSTM ----------------------------------------------------------


def _g(v):
    return np.where(v >= 0, v + 0.5, 1 / (1 + np.exp(-v)))


def _min_numpy(kind, x, kernel, bias, h, candidate="g"):
    """The paper's step equations, in a loop (float64)."""
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    p = x.astype("float64") @ kernel + bias
    parts = np.split(p, 2 if kind == "gru" else 3, axis=-1)
    cand = _g(parts[0]) if candidate == "g" else parts[0]
    out = []
    for t in range(x.shape[1]):
        if kind == "gru":
            z = sig(parts[1][:, t])
            h = (1 - z) * h + z * cand[:, t]
        else:
            f, i = sig(parts[1][:, t]), sig(parts[2][:, t])
            h = f / (f + i) * h + i / (f + i) * cand[:, t]
        out.append(h)
    return np.stack(out, 1)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("candidate", ["g", "linear"])
def test_min_cells_match_the_paper_equations(kind, candidate):
    cls = sk.MinGRUCell if kind == "gru" else sk.MinLSTMCell
    layer = sk.Recurrent(cls(4, candidate=candidate), return_sequences=True, return_state=True)
    x, h0 = _x(2, 6, 3), _x(2, 4, seed=3)
    layer(x)
    layer.cell.bias.assign(_x(*layer.cell.bias.shape, seed=4))
    kernel, bias = layer.cell.kernel.numpy(), layer.cell.bias.numpy()
    want = _min_numpy(kind, x, kernel, bias, h0, candidate)
    out, last = layer(x, initial_state=[h0])
    np.testing.assert_allclose(out, want, atol=1e-5)
    np.testing.assert_allclose(last, want[:, -1], atol=1e-5)
    # the step form: the cell on one position at a time
    h, steps = [h0], []
    for t in range(6):
        y, h = layer.cell(x[:, t], h)
        steps.append(np.asarray(y))
    np.testing.assert_allclose(np.stack(steps, 1), want, atol=1e-5)


@pytest.mark.slow  # .ci/run installs the reference before the slow tests
@pytest.mark.parametrize("kind", ["minGRU", "minLSTM"])
@pytest.mark.parametrize("expansion", [1.0, 2.0])
def test_min_cells_match_mingru_pytorch(kind, expansion):
    """mingru-pytorch 0.2.1 (`pip install --no-deps mingru-pytorch`), its
    log-space parallel form, weights copied: a Recurrent of our cell (no
    biases), then its output projection."""
    torch = pytest.importorskip("torch")
    reference = pytest.importorskip(f"minGRU_pytorch.{kind}")
    torch.manual_seed(0)
    ref = getattr(reference, kind)(8, expansion_factor=expansion)
    x = torch.randn(2, 7, 8)
    with torch.no_grad():
        want = ref(x).numpy()
    inner = int(8 * expansion)
    cell = (sk.MinGRUCell if kind == "minGRU" else sk.MinLSTMCell)(inner, use_bias=False)
    layer = sk.Recurrent(cell, return_sequences=True)
    layer.build((None, None, 8))
    weights = [p.detach().numpy() for p in ref.parameters()]
    cell.kernel.assign(weights[0].T)
    out = np.asarray(layer(x.numpy()))
    if len(weights) > 1:
        out = out @ weights[1].T
    np.testing.assert_allclose(out, want, atol=1e-5)
    if kind == "minGRU":  # continuing from a state: its prev_hidden
        first = sk.Recurrent(cell, return_sequences=True, return_state=True)
        _, h = first(x[:, :3].numpy())
        with torch.no_grad():
            _, prev = ref(x[:, :3], return_next_prev_hidden=True)
            rest = ref(x[:, 3:], prev_hidden=prev).numpy()
        np.testing.assert_allclose(np.asarray(h), prev[:, 0].numpy(), atol=1e-5)
        out = np.asarray(layer(x[:, 3:].numpy(), initial_state=[h]))
        out = out @ weights[1].T if len(weights) > 1 else out
        np.testing.assert_allclose(out, rest, atol=1e-5)


@pytest.mark.parametrize("cls", [sk.MinGRUCell, sk.MinLSTMCell])
def test_min_cells_padding_leaves_the_state_alone(cls):
    layer = sk.Recurrent(cls(4), return_sequences=True, return_state=True)
    x = _x(1, 5, 3)
    out, last = layer(x)
    right = np.concatenate([x, _x(1, 2, 3, seed=5)], 1)
    out_r, last_r = layer(right, mask=np.array([[1] * 5 + [0] * 2], bool))
    np.testing.assert_allclose(last_r, last, atol=1e-6)
    np.testing.assert_allclose(out_r[:, :5], out, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(out_r)[:, 5:], 0.0)
    left = np.concatenate([_x(1, 2, 3, seed=6), x], 1)
    _, last_l = layer(left, mask=np.array([[0] * 2 + [1] * 5], bool))
    np.testing.assert_allclose(last_l, last, atol=1e-6)


def test_min_cells_stack_and_run_backwards():
    x = _x(2, 6, 3)
    forward = sk.Recurrent(sk.MinLSTMCell(4), return_sequences=True)
    bi = sk.Bidirectional(forward)
    out = np.asarray(bi(x))
    assert out.shape == (2, 6, 8)
    backward = bi.backward_layer
    # the backward half is the forward equations on the reversed sequence
    np.testing.assert_allclose(
        out[:, :, 4:], np.asarray(backward(x))[:, ::-1], atol=1e-6
    )  # Bidirectional re-reverses the backward outputs
    stacked = sk.StackedRecurrent(
        [sk.Recurrent(sk.MinGRUCell(3), return_sequences=True) for _ in range(2)], residual=True
    )
    assert tuple(stacked(x).shape) == (2, 6, 3)


@pytest.mark.parametrize("cls", [sk.MinGRUCell, sk.MinLSTMCell])
def test_min_recurrent_layer_contract(cls):
    run_layer_test(
        lambda: sk.Recurrent(cls(4), return_sequences=True), _x(2, 5, 3), num_weights=(2, 0)
    )


# -- Mamba / Mamba-2 -----------------------------------------------------------


def _ssd_loop(x, dt, a, b, c, h):
    """Mamba-2's recurrence per head in NumPy: h_t = exp(dt a) h + dt x b^T,
    y_t = h_t c_t."""
    ys = []
    for t in range(x.shape[1]):
        decay = np.exp(dt[:, t] * a)[:, :, None, None]
        h = decay * h + np.einsum("bhp,bhn->bhpn", x[:, t] * dt[:, t, :, None], b[:, t])
        ys.append(np.einsum("bhpn,bhn->bhp", h, c[:, t]))
    return np.stack(ys, 1), h


@pytest.mark.parametrize("chunk", [1, 3, 4, 16])
def test_ssd_scan_equals_the_recurrence(chunk):
    rng = np.random.default_rng(chunk)
    x, b, c = _x(2, 10, 3, 2), _x(2, 10, 3, 4, seed=1), _x(2, 10, 3, 4, seed=2)
    dt = rng.uniform(0.01, 0.5, (2, 10, 3)).astype("float32")
    a = -rng.uniform(0.5, 2.0, 3).astype("float32")
    h0 = _x(2, 3, 2, 4, seed=3)
    want, last = _ssd_loop(x, dt, a, b, c, h0.astype("float64"))
    y, final = ssd_scan(x, dt, a, b, c, h0, chunk_size=chunk)
    np.testing.assert_allclose(y, want, atol=1e-4)
    np.testing.assert_allclose(final, last, atol=1e-4)


def _mixer(version):
    if version == "mamba":
        return sk.MambaMixer(state_size=4, conv_kernel=3)
    return sk.Mamba2Mixer(head_dim=4, state_size=4, num_groups=2, chunk_size=3)


@pytest.mark.parametrize("version", ["mamba", "mamba2"])
def test_mamba_parallel_equals_step_and_prefill(version):
    mixer = _mixer(version)
    x = _x(2, 8, 8)
    full = np.asarray(mixer(x))
    cache, steps = mixer.init_cache(2), []
    for t in range(8):
        y, cache = mixer(x[:, t : t + 1], cache=cache, cache_index=t)
        steps.append(np.asarray(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    # a prompt's prefill (5 positions in one pass), then steps
    y, cache = mixer(x[:, :5], cache=mixer.init_cache(2), cache_index=0)
    rest = [mixer(x[:, t : t + 1], cache=cache, cache_index=t) for t in (5,)]
    np.testing.assert_allclose(y, full[:, :5], atol=1e-5)
    np.testing.assert_allclose(rest[0][0], full[:, 5:6], atol=1e-5)


@pytest.mark.parametrize("version", ["mamba", "mamba2"])
def test_mamba_padding_leaves_the_state_alone(version):
    mixer = _mixer(version)
    x = _x(1, 5, 8)
    out = np.asarray(mixer(x))
    right = np.concatenate([x, _x(1, 2, 8, seed=4)], 1)
    mask = np.array([[1] * 5 + [0] * 2], bool)
    out_r = np.asarray(mixer(right, padding_mask=mask))
    np.testing.assert_allclose(out_r[:, :5], out, atol=1e-5)
    np.testing.assert_array_equal(out_r[:, 5:], 0.0)
    # left padding: the same outputs and the same final SSM state
    left = np.concatenate([_x(1, 2, 8, seed=5), x], 1)
    mask = np.array([[0] * 2 + [1] * 5], bool)
    out_l = np.asarray(mixer(left, padding_mask=mask))
    np.testing.assert_allclose(out_l[:, 2:], out, atol=1e-5)
    # the Keras mask of an embedding (id 0 is padding) reaches the block
    ids = keras.Input((None,), dtype="int32")
    block = sk.MambaBlock(version, state_size=4, head_dim=4) if version == "mamba2" else None
    block = block or sk.MambaBlock(version, state_size=4)
    model = keras.Model(ids, block(keras.layers.Embedding(6, 8, mask_zero=True)(ids)))
    out = np.asarray(model(np.array([[3, 4, 0, 0]])))
    unpadded = np.asarray(model(np.array([[3, 4]])))
    np.testing.assert_allclose(out[:, :2], unpadded, atol=1e-5)


@pytest.mark.parametrize("version", ["mamba", "mamba2"])
def test_mamba_block_layer_contract(version):
    kwargs = dict(state_size=4, conv_kernel=3)
    if version == "mamba2":
        kwargs.update(head_dim=4, chunk_size=4)
    # mamba: in/out projections, conv kernel and bias, x and dt projections,
    # dt bias, A_log, D, norm; mamba2: in/out, conv (2), dt bias, A_log, D,
    # gated norm, norm
    weights = (10, 0) if version == "mamba" else (9, 0)
    run_layer_test(lambda: sk.MambaBlock(version, **kwargs), _x(2, 5, 8), num_weights=weights)


def test_mamba_errors_name_the_argument():
    with pytest.raises(ValueError, match="`MambaBlock`.*version"):
        sk.MambaBlock("mamba3")
    with pytest.raises(ValueError, match="`Mamba2Mixer`.*head_dim"):
        sk.Mamba2Mixer(head_dim=5)(np.ones((1, 2, 8), "float32"))
    with pytest.raises(ValueError, match="`Mamba2Mixer`.*num_groups"):
        sk.Mamba2Mixer(head_dim=4, num_groups=3)(np.ones((1, 2, 8), "float32"))
    mixer = sk.MambaMixer(state_size=2)
    with pytest.raises(ValueError, match="`MambaMixer.init_cache`.*built"):
        mixer.init_cache(1)
    mixer.build((None, None, 8))
    with pytest.raises(ValueError, match="without a `cache_index`"):
        mixer(np.ones((1, 2, 8), "float32"), cache=mixer.init_cache(1))
    with pytest.raises(ValueError, match="`MambaMixer`.*rank 3"):
        sk.MambaMixer()(np.ones((2, 8), "float32"))


# -- RG-LRU / Griffin ----------------------------------------------------------


def _rglru_numpy(lru, x, h=None, start=0):
    """The RG-LRU's equations (De et al. 2024, eq. 1-4) in a loop."""
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    heads = lru.num_heads
    blocks = x.reshape(x.shape[:2] + (heads, -1)).astype("float64")

    def gate(kernel, bias):
        y = np.einsum("bthi,hij->bthj", blocks, kernel.numpy()) + bias.numpy()
        return sig(y.reshape(x.shape))

    gx = gate(lru.input_gate_kernel, lru.input_gate_bias)
    ga = gate(lru.recurrent_gate_kernel, lru.recurrent_gate_bias)
    log_a = -8.0 * ga * np.log1p(np.exp(lru.recurrent_param.numpy()))
    h = np.zeros((x.shape[0], x.shape[2])) if h is None else h
    out = []
    for t in range(x.shape[1]):
        a = np.exp(log_a[:, t])
        first = start + t == 0
        h = (0 if first else a) * h + (1 if first else np.sqrt(1 - a**2)) * gx[:, t] * x[:, t]
        out.append(h)
    return np.stack(out, 1)


def test_rglru_matches_the_paper_equations_and_steps():
    lru = sk.RGLRU(num_heads=2)
    x = _x(2, 6, 4)
    lru(x)
    for w in lru.weights:
        w.assign(_x(*w.shape, seed=len(w.path)))
    np.testing.assert_allclose(lru(x), _rglru_numpy(lru, x), atol=1e-5)
    h, steps = lru.init_cache(2), []
    for t in range(6):
        y, h = lru(x[:, t : t + 1], cache=h, cache_index=t)
        steps.append(np.asarray(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), _rglru_numpy(lru, x), atol=1e-5)
    # continuing at position 3 from a state: no reset
    h3 = _rglru_numpy(lru, x[:, :3])[:, -1]
    y, _ = lru(x[:, 3:], cache=h3.astype("float32"), cache_index=3)
    np.testing.assert_allclose(y, _rglru_numpy(lru, x)[:, 3:], atol=1e-5)


def test_rglru_gradient_is_finite_where_the_decay_reaches_one():
    """sqrt(1 - a^2) has an infinite derivative at a = 1 (Lambda very
    negative: softplus(Lambda) -> 0): its derivative is bounded (as
    RecurrentGemma's), so training does not turn NaN (it did on
    selective copying)."""
    lru = sk.RGLRU(num_heads=1)
    x = tf.constant(_x(1, 4, 2))
    lru(x)
    lru.recurrent_param.assign(np.full(2, -40.0, "float32"))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(lru(x))
    grads = tape.gradient(loss, lru.trainable_weights)
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)


@pytest.mark.parametrize("kind", ["recurrent", "attention"])
def test_griffin_block_parallel_equals_step_and_padding(kind):
    block = sk.GriffinBlock(kind, num_heads=2, intermediate_dim=16, window=3, conv_kernel=3)
    x = _x(2, 7, 8)
    full = np.asarray(block(x))
    cache, steps = block.init_cache(2, 7), []
    for t in range(7):
        y, cache = block(x[:, t : t + 1], cache=cache, cache_index=t)
        steps.append(np.asarray(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    y, cache = block(x[:, :4], cache=block.init_cache(2, 7), cache_index=0)
    np.testing.assert_allclose(y, full[:, :4], atol=1e-5)
    y, _ = block(x[:, 4:], cache=cache, cache_index=4)
    np.testing.assert_allclose(y, full[:, 4:], atol=1e-5)
    # padding on the right changes no kept position's output
    right = np.concatenate([x, _x(2, 2, 8, seed=4)], 1)
    mask = np.array([[1] * 7 + [0] * 2] * 2, bool)
    np.testing.assert_allclose(np.asarray(block(right, padding_mask=mask))[:, :7], full, atol=1e-5)


def test_griffin_layer_contracts():
    # recurrence gates (2 kernels, 2 biases) and Lambda
    run_layer_test(lambda: sk.RGLRU(num_heads=2), _x(2, 5, 4), num_weights=(5, 0))
    # + linear_y, linear_x, linear_out (kernel, bias each), conv (2)
    run_layer_test(
        lambda: sk.GriffinTemporalBlock(num_heads=2, conv_kernel=3),
        _x(2, 5, 8),
        num_weights=(13, 0),
    )
    for kind in ("recurrent", "attention"):
        run_layer_test(
            lambda kind=kind: sk.GriffinBlock(kind, num_heads=2, intermediate_dim=8, window=2),
            _x(2, 5, 8),
        )


def test_scale_and_soft_cap_contracts():
    run_layer_test(lambda: sk.Scale(2.0), _x(2, 5, 3), num_weights=(0, 0))
    run_layer_test(lambda: sk.SoftCap(3.0), _x(2, 5, 3), num_weights=(0, 0))
    with pytest.raises(ValueError, match="`SoftCap`.*cap"):
        sk.SoftCap(0.0)
    with pytest.raises(TypeError, match="`Scale`.*factor"):
        sk.Scale("2")
