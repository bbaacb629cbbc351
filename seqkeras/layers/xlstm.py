"""xLSTM (Beck et al. 2024): the mLSTM, a matrix memory with exponential
input gates that trains in parallel, and the sLSTM, a scalar memory with
exponential gates and recurrent connections, which does not.

mLSTM, per head (q scaled by d_k^-1/2; i~, f~ the gates' pre-activations):

    m_t = max(log sigmoid(f~_t) + m_{t-1}, i~_t)           (the stabiliser)
    C_t = exp(log sigmoid(f~_t) + m_{t-1} - m_t) C_{t-1} + exp(i~_t - m_t) k_t v_t^T
    n_t = (the same decays) n_{t-1} + exp(i~_t - m_t) k_t
    h_t = C_t^T q_t / (max(|n_t . q_t|, exp(-m_t)) + eps)

A whole sequence runs in the chunkwise form (`mlstm_chunkwise`): within a
chunk the outputs are the quadratic (attention-like) form with each row's
own stabiliser; a loop over chunks carries (C, n, m). One chunk as long
as the sequence is the parallel (quadratic) form. m starts at 0, as the
recurrence does, so the three forms agree to rounding.

sLSTM, per unit (W x the input's gates, R block-diagonal per head):

    i~, f~, z~, o~ = W x_t + R h_{t-1} + b
    m_t = max(log sigmoid(f~) + m_{t-1}, i~)   (i~ at the first step)
    c_t = f' c_{t-1} + i' tanh(z~);  n_t = f' n_{t-1} + i'
    h_t = sigmoid(o~) c_t / n_t

with i' = exp(i~ - m_t), f' = exp(log sigmoid(f~) + m_{t-1} - m_t). h_{t-1}
enters the gates, so the sLSTM runs step by step over time (a loop, as
LSTM does): it is the one cell here with no parallel form, and the one
that tracks state (parity, counting) where the linear recurrences cannot.
"""

import collections

import keras
import numpy as np
from keras import ops

from seqkeras.layers import state
from seqkeras.layers import validation
from seqkeras.layers.delta import _chunks
from seqkeras.layers.delta import _expand
from seqkeras.layers.scan import causal_conv
from seqkeras.layers.scan import chunk_recurrence

_PACKAGE = "seqkeras"
_NEG = -1e30  # log(0) for masked entries (finite: no inf - inf)


class MLSTMState(collections.namedtuple("MLSTMState", ["memory", "normalizer", "stabilizer"])):
    """An mLSTM's decoding state: `memory` C (batch, heads, d_k, d_v),
    `normalizer` n (batch, heads, d_k), `stabilizer` m (batch, heads),
    all float32."""

    __slots__ = ()


def mlstm_chunkwise(q, k, v, igate, fgate, initial=None, chunk_size=64, eps=1e-6):
    """The mLSTM over a whole sequence, in the chunkwise form (float32).

    Args:
        q, k: (batch, time, heads, d_k); q already scaled by d_k^-1/2.
        v: (batch, time, heads, d_v).
        igate: (batch, time, heads) the input gates' pre-activations i~.
        fgate: (batch, time, heads) the forget gates' log sigmoid(f~)
            (<= 0; a padded step: 0 with igate -1e30 keeps the state).
        initial: optional `MLSTMState` (default zeros, m = 0).
        chunk_size: the chunk; >= time: the parallel (quadratic) form.
        eps: added to the normalizer.

    Returns:
        `(h (batch, time, heads, d_v), final MLSTMState)`.
    """
    q, k, v, igate, fgate = (ops.cast(t, "float32") for t in (q, k, v, igate, fgate))
    steps = q.shape[1]
    c = chunk_size if steps is None else max(1, min(chunk_size, steps))
    length = ops.shape(q)[1]
    pad = (c - length % c) % c

    def chunks(t, fill=0.0):
        return _chunks(t, c, pad, fill)

    qc, kc, vc = chunks(q), chunks(k), chunks(v)
    ic, fc = chunks(igate, _NEG), chunks(fgate)  # (batch, heads, chunks, c)
    b = ops.cumsum(fc, axis=-1)
    lower = np.tril(np.ones((c, c), "bool"))
    log_d = ops.where(
        lower, ops.expand_dims(b, -1) - ops.expand_dims(b, -2) + ops.expand_dims(ic, -2), _NEG
    )
    intra_max = ops.max(log_d, axis=-1)
    to_end = b[..., -1:] - b + ic  # (batch, heads, chunks, c)
    to_end_max = ops.max(to_end, axis=-1)
    total = b[..., -1]
    if initial is None:
        batch, heads = ops.shape(q)[0], q.shape[2]
        initial = MLSTMState(
            ops.zeros((batch, heads, q.shape[3], v.shape[3]), q.dtype),
            ops.zeros((batch, heads, q.shape[3]), q.dtype),
            ops.zeros((batch, heads), q.dtype),
        )

    def advance(s, x):
        memory, normalizer, m = s
        total_i, to_end_i, to_end_max_i, k_i, v_i = x
        m_next = ops.maximum(total_i + m, to_end_max_i)
        old = ops.exp(total_i + m - m_next)
        gated = k_i * ops.expand_dims(ops.exp(to_end_i - ops.expand_dims(m_next, -1)), -1)
        memory = _expand(old, 2) * memory + ops.matmul(ops.swapaxes(gated, -1, -2), v_i)
        normalizer = ops.expand_dims(old, -1) * normalizer + ops.sum(gated, axis=-2)
        return MLSTMState(memory, normalizer, m_next)

    inputs = (total, to_end, to_end_max, kc, vc)
    entering, final = chunk_recurrence(advance, MLSTMState(*initial), inputs)
    memory, normalizer, m = entering  # (batch, heads, chunks, ...)
    inter = b + ops.expand_dims(m, -1)  # (batch, heads, chunks, c)
    row = ops.maximum(inter, intra_max)
    weights = ops.matmul(qc, ops.swapaxes(kc, -1, -2)) * ops.exp(log_d - ops.expand_dims(row, -1))
    qbar = qc * ops.expand_dims(ops.exp(inter - row), -1)
    numerator = ops.matmul(qbar, memory) + ops.matmul(weights, vc)
    denominator = ops.squeeze(ops.matmul(qbar, ops.expand_dims(normalizer, -1)), -1) + ops.sum(
        weights, -1
    )
    h = numerator / ops.expand_dims((ops.maximum(ops.abs(denominator), ops.exp(-row)) + eps), -1)
    h = ops.transpose(h, (0, 2, 3, 1, 4))
    h = ops.reshape(h, (ops.shape(h)[0], -1) + tuple(h.shape[3:]))[:, :length]
    return h, final


def mlstm_step(q, k, v, igate, fgate, previous, eps=1e-6):
    """One mLSTM step: q (scaled), k (batch, heads, d_k), v (batch, heads,
    d_v), igate and fgate (log sigmoid) (batch, heads), previous
    `MLSTMState` -> `(h (batch, heads, d_v), MLSTMState)`."""
    q, k, v, igate, fgate = (ops.cast(t, "float32") for t in (q, k, v, igate, fgate))
    memory, normalizer, m = previous
    m_new = ops.maximum(fgate + m, igate)
    f = ops.exp(fgate + m - m_new)
    i = ops.exp(igate - m_new)
    memory = _expand(f, 2) * memory + _expand(i, 2) * (
        ops.expand_dims(k, -1) * ops.expand_dims(v, -2)
    )
    normalizer = ops.expand_dims(f, -1) * normalizer + ops.expand_dims(i, -1) * k
    numerator = ops.einsum("bhk,bhkv->bhv", q, memory)
    denominator = ops.sum(q * normalizer, axis=-1)
    h = numerator / ops.expand_dims((ops.maximum(ops.abs(denominator), ops.exp(-m_new)) + eps), -1)
    return h, MLSTMState(memory, normalizer, m_new)


def _soft_cap(x, cap):
    return x if cap is None else cap * ops.tanh(x / cap)


def _head_norm(x, scale, bias, epsilon):
    """A LayerNorm over each head's last axis (float32), then `scale` (and
    `bias`) over the heads flattened: (batch, time, heads, width) ->
    (batch, time, heads * width)."""
    mean = ops.mean(x, axis=-1, keepdims=True)
    variance = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
    y = (x - mean) * ops.rsqrt(variance + epsilon)
    y = ops.reshape(y, (ops.shape(y)[0], ops.shape(y)[1], x.shape[2] * x.shape[3]))
    y = y * ops.cast(scale, "float32")
    return y if bias is None else y + ops.cast(bias, "float32")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MLSTMLayer(keras.layers.Layer):
    """The mLSTM layer of xLSTM-7B (`transformers`' `xLSTMLayer`; the
    module docstring has the cell).

        q, k, v, o~ = x W_q, x W_k, x W_v, x W_o      (heads: slices of the features)
        i~, f~      = cap(x W_i + b_i), cap(x W_f + b_f)  (one per head;
                      cap(z) = 15 tanh(z / 15))
        h           = mLSTM(q, k, v, i~, f~)           (chunkwise / step)
        out         = (sigmoid(o~) * LayerNorm_heads(h)) W_out

    Variables (torch `Linear` weights transposed): `q_kernel`, `k_kernel`
    (d, qk_dim), `v_kernel`, `o_kernel` (d, v_dim), `i_kernel`,
    `f_kernel` (d, heads) with `i_bias`, `f_bias`, `norm_scale` (v_dim,),
    `out_kernel` (v_dim, d); biases on q, k, v, o, the norm and out with
    `use_bias`.

    Args:
        num_heads: heads.
        qk_dim_factor, v_dim_factor: qk_dim = int(d * qk_dim_factor),
            v_dim = int(d * v_dim_factor) (divisible by `num_heads`).
        gate_soft_cap: the gates' cap (None: off).
        chunk_size: the chunkwise form's chunk.
        norm_epsilon: the per-head LayerNorm's.
        epsilon: added to the cell's normalizer.
        use_bias: biases on the projections and the norm.
        kernel_initializer: of the projections.

    Call arguments:
        inputs: (batch, time, d).
        padding_mask: optional bool (batch, time) (default the Keras
            mask): a padded step leaves the state unchanged, outputs zeros.
        cache, cache_index: a decoding step (`seqkeras.layers.state`):
            `cache` an `MLSTMState` from `init_cache` -> `(outputs, cache)`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.MLSTMLayer(num_heads=2, chunk_size=4)
        >>> x = np.random.default_rng(0).normal(size=(1, 6, 8)).astype("float32")
        >>> full = np.asarray(layer(x))
        >>> cache, steps = layer.init_cache(1), []
        >>> for t in range(6):
        ...     y, cache = layer(x[:, t : t + 1], cache=cache, cache_index=t)
        ...     steps.append(np.asarray(y))
        >>> bool(np.allclose(np.concatenate(steps, 1), full, atol=1e-5))
        True
    """

    def __init__(
        self,
        num_heads,
        qk_dim_factor=0.5,
        v_dim_factor=1.0,
        gate_soft_cap=15.0,
        chunk_size=64,
        norm_epsilon=1e-6,
        epsilon=1e-6,
        use_bias=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "MLSTMLayer"
        self.num_heads = validation.positive_int(name, "num_heads", num_heads)
        self.qk_dim_factor = validation.greater_than(name, "qk_dim_factor", qk_dim_factor, 0.0)
        self.v_dim_factor = validation.greater_than(name, "v_dim_factor", v_dim_factor, 0.0)
        self.gate_soft_cap = (
            None
            if gate_soft_cap is None
            else validation.greater_than(name, "gate_soft_cap", gate_soft_cap, 0.0)
        )
        self.chunk_size = validation.positive_int(name, "chunk_size", chunk_size)
        self.norm_epsilon = validation.greater_than(name, "norm_epsilon", norm_epsilon, 0.0)
        self.epsilon = validation.greater_than(name, "epsilon", epsilon, 0.0)
        self.use_bias = validation.boolean(name, "use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        d = state.check_features(self, input_shape)
        qk, v = int(d * self.qk_dim_factor), int(d * self.v_dim_factor)
        if qk % self.num_heads or v % self.num_heads or not qk:
            raise ValueError(
                f"`MLSTMLayer` needs qk_dim = int(d * qk_dim_factor) = {qk} and v_dim = "
                f"int(d * v_dim_factor) = {v} divisible by num_heads={self.num_heads}"
            )
        self.qk_dim, self.v_dim = qk, v
        heads = self.num_heads

        def weight(name, shape, initializer=None):
            initializer = initializer or keras.initializers.get(
                keras.initializers.serialize(self.kernel_initializer)
            )
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        def bias(name, shape):
            return weight(name, shape, "zeros") if self.use_bias else None

        self.q_kernel, self.q_bias = weight("q_kernel", (d, qk)), bias("q_bias", (qk,))
        self.k_kernel, self.k_bias = weight("k_kernel", (d, qk)), bias("k_bias", (qk,))
        self.v_kernel, self.v_bias = weight("v_kernel", (d, v)), bias("v_bias", (v,))
        self.o_kernel, self.o_bias = weight("o_kernel", (d, v)), bias("o_bias", (v,))
        self.i_kernel = weight("i_kernel", (d, heads))
        self.i_bias = weight("i_bias", (heads,), keras.initializers.Constant(-10.0))
        self.f_kernel = weight("f_kernel", (d, heads))
        self.f_bias = weight(
            "f_bias",
            (heads,),
            lambda shape, dtype=None: ops.cast(np.linspace(3.0, 6.0, shape[0]), dtype or "float32"),
        )
        self.norm_scale = weight("norm_scale", (v,), "ones")
        self.norm_bias = bias("norm_bias", (v,))
        self.out_kernel, self.out_bias = weight("out_kernel", (v, d)), bias("out_bias", (d,))

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The state before the first step (`MLSTMState`: zeros, m = 0); its
        size does not depend on `max_length` or `layout`."""
        state.check_built(self)
        h, dk, dv = self.num_heads, self.qk_dim // self.num_heads, self.v_dim // self.num_heads
        return MLSTMState(
            ops.zeros((batch_size, h, dk, dv), "float32"),
            ops.zeros((batch_size, h, dk), "float32"),
            ops.zeros((batch_size, h), "float32"),
        )

    @staticmethod
    def _project(x, kernel, bias):
        y = ops.matmul(x, ops.cast(kernel, x.dtype))
        return y if bias is None else y + ops.cast(bias, x.dtype)

    def call(self, inputs, padding_mask=None, cache=None, cache_index=None, mask=None):
        validation.numeric("MLSTMLayer", "inputs", inputs)
        state.check_cache(self, cache, cache_index, "MLSTMState")
        keep = state.kept_steps(
            "MLSTMLayer", inputs, mask if padding_mask is None else padding_mask
        )
        batch, steps = ops.shape(inputs)[0], ops.shape(inputs)[1]
        heads = self.num_heads

        def split(t):
            width = t.shape[-1] // heads
            return ops.reshape(ops.cast(t, "float32"), (batch, steps, heads, width))

        q = split(self._project(inputs, self.q_kernel, self.q_bias))
        k = split(self._project(inputs, self.k_kernel, self.k_bias))
        v = split(self._project(inputs, self.v_kernel, self.v_bias))
        o = self._project(inputs, self.o_kernel, self.o_bias)
        x32 = ops.cast(inputs, "float32")
        i = _soft_cap(self._project(x32, self.i_kernel, self.i_bias), self.gate_soft_cap)
        f = _soft_cap(self._project(x32, self.f_kernel, self.f_bias), self.gate_soft_cap)
        f = ops.log_sigmoid(f)
        if keep is not None:  # a padded step: forget nothing, take nothing in
            i = ops.where(keep > 0, i, _NEG)
            f = f * keep
        q = q * (q.shape[-1] ** -0.5)
        previous = None if cache is None else MLSTMState(*cache)
        if inputs.shape[1] == 1 and previous is not None:
            h, final = mlstm_step(
                q[:, 0], k[:, 0], v[:, 0], i[:, 0], f[:, 0], previous, self.epsilon
            )
            h = ops.expand_dims(h, 1)
        else:
            h, final = mlstm_chunkwise(q, k, v, i, f, previous, self.chunk_size, self.epsilon)
        h = _head_norm(h, self.norm_scale, self.norm_bias, self.norm_epsilon)
        h = ops.cast(ops.sigmoid(ops.cast(o, "float32")) * h, self.compute_dtype)
        out = self._project(h, self.out_kernel, self.out_bias)
        if keep is not None:
            out = out * ops.cast(keep, out.dtype)
        if cache is None:
            return out
        return out, final

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        return state.output_spec(self, inputs, cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "qk_dim_factor": self.qk_dim_factor,
                "v_dim_factor": self.v_dim_factor,
                "gate_soft_cap": self.gate_soft_cap,
                "chunk_size": self.chunk_size,
                "norm_epsilon": self.norm_epsilon,
                "epsilon": self.epsilon,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


class SLSTMState(
    collections.namedtuple("SLSTMState", ["conv", "hidden", "cell", "normalizer", "stabilizer"])
):
    """An sLSTM's decoding state: `conv` (batch, K - 1, d) the convolution's
    last inputs, and the cell's h, c, n, m, each float32 (batch, d)."""

    __slots__ = ()


def slstm_step(gates, previous, recurrent_kernel, bias, num_heads):
    """One sLSTM step: `gates` (batch, 4 d) the input's pre-activations
    (i, f, z, o blocks), `previous` (h, c, n, m) each (batch, d),
    `recurrent_kernel` (heads, d_h, 4, d_h), `bias` (heads, 4, d_h) ->
    `(h, (h, c, n, m))`."""
    h, c, n, m = previous
    batch = ops.shape(h)[0]
    width = recurrent_kernel.shape[1]
    hh = ops.reshape(h, (batch, num_heads, width))
    recurrent = ops.einsum("bhd,hdgo->bgho", hh, recurrent_kernel)  # (batch, 4, heads, d_h)
    raw = (
        ops.reshape(gates, (batch, 4, num_heads, width))
        + recurrent
        + ops.expand_dims(ops.transpose(bias, (1, 0, 2)), 0)
    )
    raw = ops.reshape(raw, (batch, 4, num_heads * width))
    i, f, z, o = raw[:, 0], raw[:, 1], raw[:, 2], raw[:, 3]
    log_f = ops.log_sigmoid(f) + m
    m_new = ops.where(n == 0.0, i, ops.maximum(i, log_f))  # the first step: m = i~
    i_act = ops.minimum(ops.exp(i - m_new), 1.0)
    f_act = ops.minimum(ops.exp(log_f - m_new), 1.0)
    c = f_act * c + i_act * ops.tanh(z)
    n = f_act * n + i_act
    h = ops.sigmoid(o) * c / n
    return h, (h, c, n, m_new)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SLSTMLayer(keras.layers.Layer):
    """The sLSTM layer of xLSTM (the `xlstm` package's `sLSTMLayer`; the
    module docstring has the cell).

        x_c        = silu(causal_conv(x))               (K taps; K = 0: none)
        i~, f~     = x_c W_i, x_c W_f;  z~, o~ = x W_z, x W_o   (per head)
        h          = sLSTM(i~, f~, z~, o~)              (recurrent, block-diagonal R)
        out        = LayerNorm_heads(h) * scale

    The sLSTM is recurrent through h: it runs step by step (a loop over
    time, like LSTM), with no parallel form.

    Variables: `conv_kernel` (K, d), `conv_bias`, `i_kernel`,
    `f_kernel`, `z_kernel`, `o_kernel` (heads, d_h, d_h) (`xlstm`'s
    `LinearHeadwiseExpand` weights transposed per head), `recurrent_kernel`
    (heads, d_h, 4, d_h) (gates i, f, z, o), `bias` (heads, 4, d_h),
    `norm_scale` (d,).

    Args:
        num_heads: heads (d divisible by it).
        conv_kernel: the causal convolution's taps before the i and f gates
            (0: none).
        norm_epsilon: the per-head LayerNorm's.
        kernel_initializer: of the input gates' weights.

    Call arguments: as `MLSTMLayer`'s (`cache` an `SLSTMState`), and `training`
        (the loop over a sequence writes its outputs as training does, or as
        inference and exports do: `seqkeras.layers.time_loop.scan`).

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.SLSTMLayer(num_heads=2)
        >>> x = np.random.default_rng(0).normal(size=(1, 6, 8)).astype("float32")
        >>> full = np.asarray(layer(x))
        >>> cache = layer.init_cache(1)
        >>> y1, cache = layer(x[:, :4], cache=cache, cache_index=0)
        >>> y2, cache = layer(x[:, 4:], cache=cache, cache_index=4)
        >>> bool(np.allclose(np.concatenate([y1, y2], 1), full, atol=1e-5))
        True
    """

    def __init__(
        self,
        num_heads,
        conv_kernel=4,
        norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "SLSTMLayer"
        self.num_heads = validation.positive_int(name, "num_heads", num_heads)
        self.conv_kernel = validation.non_negative_int(name, "conv_kernel", conv_kernel)
        self.norm_epsilon = validation.greater_than(name, "norm_epsilon", norm_epsilon, 0.0)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        d = state.check_features(self, input_shape)
        if d % self.num_heads:
            raise ValueError(
                f"`SLSTMLayer` needs the features d={d} divisible by num_heads={self.num_heads}"
            )
        heads, width = self.num_heads, d // self.num_heads
        self.units = d

        def weight(name, shape, initializer=None):
            initializer = initializer or keras.initializers.get(
                keras.initializers.serialize(self.kernel_initializer)
            )
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        self.conv_kernel_weights = self.conv_bias = None
        if self.conv_kernel:
            bound = 1.0 / np.sqrt(self.conv_kernel)
            self.conv_kernel_weights = weight(
                "conv_kernel",
                (self.conv_kernel, d),
                keras.initializers.RandomUniform(-bound, bound),
            )
            self.conv_bias = weight("conv_bias", (d,), "zeros")
        for gate in "ifzo":
            setattr(self, gate + "_kernel", weight(gate + "_kernel", (heads, width, width)))
        self.recurrent_kernel = weight("recurrent_kernel", (heads, width, 4, width), "zeros")

        def forget_bias(shape, dtype=None):  # xlstm's "powerlaw_blockdependent", first block
            b = np.zeros(shape, "float32")
            ramp = np.arange(width) / max(width - 1, 1)
            b[:, 1] = 5.0 - 12.0 * ramp**0.3
            return ops.cast(b, dtype or "float32")

        self.bias = weight("bias", (heads, 4, width), forget_bias)
        self.norm_scale = weight("norm_scale", (d,), "ones")

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The state before the first step (`SLSTMState` of zeros)."""
        state.check_built(self)
        zeros = ops.zeros((batch_size, self.units), "float32")
        conv = ops.zeros((batch_size, max(self.conv_kernel - 1, 0), self.units), self.compute_dtype)
        return SLSTMState(conv, zeros, zeros, zeros, zeros)

    def _headwise(self, x, kernel):
        batch, steps = ops.shape(x)[0], ops.shape(x)[1]
        heads = ops.reshape(x, (batch, steps, self.num_heads, self.units // self.num_heads))
        y = ops.einsum("bthd,hdo->btho", heads, ops.cast(kernel, x.dtype))
        return ops.reshape(y, (batch, steps, self.units))

    def call(
        self, inputs, padding_mask=None, cache=None, cache_index=None, mask=None, training=None
    ):
        from seqkeras.layers import time_loop

        validation.numeric("SLSTMLayer", "inputs", inputs)
        state.check_cache(self, cache, cache_index, "SLSTMState")
        keep = state.kept_steps(
            "SLSTMLayer", inputs, mask if padding_mask is None else padding_mask
        )
        x = ops.cast(inputs, "float32")
        if keep is not None:
            x = x * keep
        window = None if cache is None else cache.conv
        xc = x
        if self.conv_kernel:
            xc, window = causal_conv(
                x,
                self.conv_kernel_weights,
                self.conv_bias,
                None if window is None else ops.cast(window, "float32"),
            )
            xc = ops.silu(xc)
        gates = ops.concatenate(
            [
                self._headwise(xc, self.i_kernel),
                self._headwise(xc, self.f_kernel),
                self._headwise(x, self.z_kernel),
                self._headwise(x, self.o_kernel),
            ],
            axis=-1,
        )
        batch = ops.shape(inputs)[0]
        if cache is None:
            zeros = ops.zeros((batch, self.units), "float32")
            previous = (zeros, zeros, zeros, zeros)
        else:
            previous = tuple(ops.cast(t, "float32") for t in cache[1:])
        recurrent = ops.cast(self.recurrent_kernel, "float32")
        bias = ops.cast(self.bias, "float32")
        if keep is not None:
            gates = ops.concatenate([gates, keep], axis=-1)

        def step(g, states):
            kept = None
            if keep is not None:
                g, kept = g[:, :-1], g[:, -1:] > 0
            h, new = slstm_step(g, states, recurrent, bias, self.num_heads)
            if kept is not None:
                new = tuple(ops.where(kept, a, b) for a, b in zip(new, states))
                h = ops.where(kept, h, 0.0)
            return h, new

        if inputs.shape[1] == 1 and cache is not None:
            h, final = step(gates[:, 0], previous)
            h = ops.expand_dims(h, 1)
        else:
            hs, final = time_loop.scan(
                step,
                ops.transpose(gates, (1, 0, 2)),
                list(previous),
                self.units,
                "float32",
                training=bool(training),
            )
            h = ops.transpose(hs, (1, 0, 2))
        heads = ops.reshape(
            h, (batch, ops.shape(h)[1], self.num_heads, self.units // self.num_heads)
        )
        out = ops.cast(
            _head_norm(heads, self.norm_scale, None, self.norm_epsilon), self.compute_dtype
        )
        if keep is not None:
            out = out * ops.cast(keep, out.dtype)
        if cache is None:
            return out
        conv = ops.cast(window, self.compute_dtype) if self.conv_kernel else cache.conv
        return out, SLSTMState(conv, *final)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        return state.output_spec(self, inputs, cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "conv_kernel": self.conv_kernel,
                "norm_epsilon": self.norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
