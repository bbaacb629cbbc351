"""RWKV-7 ("Goose", Peng et al. 2025): time mixing with a matrix memory
updated by a generalized delta rule (a per-channel decay and a rank-one
correction), channel mixing, and their residual stack.

The memory M (d_k, d_v) per head, with w_t in (0, 1)^d_k the decay of each
key channel:

    M_t = diag(w_t) M_{t-1} + b_t (a_t^T M_{t-1}) + k_t v_t^T
    o_t = M_t^T r_t

(RWKV-7 takes a = -kk and b = kk * iclr, kk the normalised key, so the
correction removes part of what the memory holds at kk.) A whole sequence
trains in the chunked form (`generalized_delta_rule`): within a chunk the
corrections the steps make to one another are one unit lower-triangular
system (solved in matrix products, as `gated_delta_rule`'s), the decays
applied per channel as ratios to the chunk's start (over 64 steps of
RWKV-7's w >= 0.545 they stay above 1e-17, inside float32's normal range;
measured against keras-hub's step loop at the strongest decay: 7e-7
relative), and a loop over the chunks carries M. A decoding
step is the recurrence itself.
"""

import collections

import keras
import numpy as np
from keras import ops

from seqkeras.layers import state
from seqkeras.layers import validation
from seqkeras.layers.delta import _chunks
from seqkeras.layers.delta import _unit_lower_inverse
from seqkeras.layers.scan import chunk_recurrence

_PACKAGE = "seqkeras"


def generalized_delta_rule(r, log_w, k, v, a, b, initial=None, chunk_size=64):
    """The generalized delta rule (the module docstring) over a whole
    sequence, in the chunked form (float32).

    Args:
        r, k, a, b: (batch, time, heads, d_k): receptance (the query), key,
            and the correction's two vectors.
        log_w: (batch, time, heads, d_k) log decays (<= 0; 0 at a padded
            step, which with k = a = b = 0 leaves M unchanged).
        v: (batch, time, heads, d_v).
        initial: optional (batch, heads, d_k, d_v) memory.
        chunk_size: C (the product of a channel's decays over a chunk
            must stay in float32's normal range: 64 for RWKV-7's w >=
            0.545, 1e-17; smaller for stronger decays).

    Returns:
        `(outputs (batch, time, heads, d_v), final memory)`.
    """
    r, log_w, k, v, a, b = (ops.cast(t, "float32") for t in (r, log_w, k, v, a, b))
    steps = r.shape[1]
    c = chunk_size if steps is None else max(1, min(chunk_size, steps))
    length = ops.shape(r)[1]
    pad = (c - length % c) % c
    rc, wc, kc, vc, ac, bc = (_chunks(t, c, pad) for t in (r, log_w, k, v, a, b))
    inclusive = ops.cumsum(wc, axis=-2)  # (batch, heads, chunks, c, d_k)
    exclusive = inclusive - wc
    last = inclusive[:, :, :, -1:]
    a_hat = ac * ops.exp(exclusive)  # a_t decayed from the chunk's start to t - 1
    r_hat = rc * ops.exp(inclusive)
    b_hat, k_hat = bc * ops.exp(-inclusive), kc * ops.exp(-inclusive)
    strict = np.tril(np.ones((c, c), "float32"), -1)
    lower = np.tril(np.ones((c, c), "float32"))

    def scores(x, y, mask):
        return ops.matmul(x, ops.swapaxes(y, -1, -2)) * mask

    inverse = _unit_lower_inverse(-scores(a_hat, b_hat, strict))
    w = ops.matmul(inverse, a_hat)  # u = w M_in + q
    q = ops.matmul(inverse, ops.matmul(scores(a_hat, k_hat, strict), vc))
    to_end = ops.exp(last - inclusive)
    b_bar = ops.swapaxes(bc * to_end, -1, -2)  # (batch, heads, chunks, d_k, c)
    k_bar_v = ops.matmul(ops.swapaxes(kc * to_end, -1, -2), vc)
    total = ops.swapaxes(ops.exp(last), -1, -2)  # (batch, heads, chunks, d_k, 1)
    if initial is None:
        initial = ops.zeros((ops.shape(r)[0], r.shape[2], r.shape[3], v.shape[3]), "float32")
    initial = ops.cast(initial, "float32")

    def advance(m, x):
        total_i, b_bar_i, w_i, q_i, k_bar_v_i = x
        u = ops.matmul(w_i, m) + q_i
        return total_i * m + ops.matmul(b_bar_i, u) + k_bar_v_i

    inputs = (total, b_bar, w, q, k_bar_v)
    entering, final = chunk_recurrence(advance, initial, inputs)
    u = ops.matmul(w, entering) + q
    y = (
        ops.matmul(r_hat, entering)
        + ops.matmul(scores(r_hat, b_hat, lower), u)
        + ops.matmul(scores(r_hat, k_hat, lower), vc)
    )
    y = ops.transpose(y, (0, 2, 3, 1, 4))
    y = ops.reshape(y, (ops.shape(y)[0], -1) + tuple(y.shape[3:]))[:, :length]
    return y, final


def generalized_delta_step(r, log_w, k, v, a, b, memory):
    """One step: r, log_w, k, a, b (batch, heads, d_k), v (batch, heads,
    d_v), memory (batch, heads, d_k, d_v) -> `(output (batch, heads, d_v),
    new memory)`."""
    r, log_w, k, v, a, b = (ops.cast(t, "float32") for t in (r, log_w, k, v, a, b))
    recalled = ops.einsum("bhk,bhkv->bhv", a, memory)
    memory = (
        ops.expand_dims(ops.exp(log_w), -1) * memory
        + ops.expand_dims(b, -1) * ops.expand_dims(recalled, -2)
        + ops.expand_dims(k, -1) * ops.expand_dims(v, -2)
    )
    return ops.einsum("bhk,bhkv->bhv", r, memory), memory


class RWKVState(collections.namedtuple("RWKVState", ["shift", "memory"])):
    """RWKV-7 time mixing's decoding state: `shift` (batch, 1, d) the last
    input (the token shift's), `memory` the float32 (batch, heads, N, N)
    memories (key by value)."""

    __slots__ = ()


def _shifted(x, previous):
    """x one step later: `previous` (batch, 1, d) or zeros first."""
    if previous is None:
        previous = ops.zeros_like(x[:, :1])
    return ops.concatenate([ops.cast(previous, x.dtype), x[:, :-1]], axis=1)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class RWKV7TimeMixing(keras.layers.Layer):
    """RWKV-7's time mixing (keras-hub's `RWKV7TimeMix`, BlinkDL's
    `RWKV_Tmix_x070`).

    On x (batch, time, d), heads of N = `head_size` channels:

        xx = shift(x) - x;  x_c = x + xx * mix_c     (c in r, w, k, v, a, g)
        r, k, v = x_r W_r, x_k W_k, x_v W_v
        w   = exp(-0.606531 sigmoid(w0 + tanh(x_w w1) w2))   (per channel)
        v   = v + (v_first - v) sigmoid(v0 + x_v v1 v2)       (not the first layer)
        a   = sigmoid(a0 + x_a a1 a2);  g = sigmoid(x_g g1) g2
        kk  = normalize(k * k_k);  k = k (1 + (a - 1) k_a)
        o   = generalized_delta_rule(r, w, k, v, -kk, kk * a)
        out = ((GroupNorm_heads(o) + (r . k r_k) v) * g) W_o

    Variables (keras-hub's names): `x_r` .. `x_g`, `w0`, `w1`, `w2`, `a0`,
    `a1`, `a2`, `v0`, `v1`, `v2` (with `value_residual`), `g1`, `g2`,
    `k_k`, `k_a`, `r_k` (heads, N), `receptance_kernel`, `key_kernel`,
    `value_kernel`, `output_kernel` (d, d), `norm_gamma`, `norm_beta`.

    Args:
        head_size: N (d divisible by it).
        decay_lora, aaa_lora, mv_lora, gate_lora: the low-rank widths of
            w, a, the value residual and g.
        value_residual: mix in the first layer's values (`v_first`;
            every layer but the first).
        chunk_size: the chunked form's chunk.
        norm_epsilon: the per-head GroupNorm's (RWKV-7: 64e-5).
        kernel_initializer: of every variable but the norm.

    Call arguments:
        inputs: (batch, time, d).
        v_first: (batch, time, d) the first layer's values (required with
            `value_residual`).
        padding_mask: optional bool (batch, time) (default the Keras mask):
            a padded step's input is zero and leaves the memory unchanged.
        cache, cache_index: a decoding step (`seqkeras.layers.state`):
            an `RWKVState` from `init_cache`.

    Returns:
        `(outputs, v)` (v: this layer's values, the next layers' `v_first`
        when this is the first), and the new `RWKVState` with `cache`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.RWKV7TimeMixing(head_size=4, value_residual=False)
        >>> x = np.random.default_rng(0).normal(size=(1, 6, 8)).astype("float32")
        >>> full, v = layer(x)
        >>> y1, v1, cache = layer(x[:, :4], cache=layer.init_cache(1), cache_index=0)
        >>> y2, v2, cache = layer(x[:, 4:], cache=cache, cache_index=4)
        >>> bool(np.allclose(np.concatenate([y1, y2], 1), full, atol=1e-5))
        True
    """

    def __init__(
        self,
        head_size=64,
        decay_lora=64,
        aaa_lora=64,
        mv_lora=32,
        gate_lora=128,
        value_residual=True,
        chunk_size=64,
        norm_epsilon=64e-5,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "RWKV7TimeMixing"
        self.head_size = validation.positive_int(name, "head_size", head_size)
        self.decay_lora = validation.positive_int(name, "decay_lora", decay_lora)
        self.aaa_lora = validation.positive_int(name, "aaa_lora", aaa_lora)
        self.mv_lora = validation.positive_int(name, "mv_lora", mv_lora)
        self.gate_lora = validation.positive_int(name, "gate_lora", gate_lora)
        self.value_residual = validation.boolean(name, "value_residual", value_residual)
        self.chunk_size = validation.positive_int(name, "chunk_size", chunk_size)
        self.norm_epsilon = validation.greater_than(name, "norm_epsilon", norm_epsilon, 0.0)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape, *args, **kwargs):
        d = state.check_features(self, input_shape)
        if d % self.head_size:
            raise ValueError(
                f"`RWKV7TimeMixing` needs the features d={d} divisible by "
                f"head_size={self.head_size}"
            )
        self.units, self.num_heads = d, d // self.head_size

        def weight(name, shape, initializer=None):
            initializer = initializer or keras.initializers.get(
                keras.initializers.serialize(self.kernel_initializer)
            )
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        for c in "rwkvag":
            setattr(self, "x_" + c, weight("x_" + c, (d,)))
        self.w0, self.w1, self.w2 = (
            weight("w0", (d,)),
            weight("w1", (d, self.decay_lora)),
            weight("w2", (self.decay_lora, d)),
        )
        self.a0, self.a1, self.a2 = (
            weight("a0", (d,)),
            weight("a1", (d, self.aaa_lora)),
            weight("a2", (self.aaa_lora, d)),
        )
        self.v0 = self.v1 = self.v2 = None
        if self.value_residual:
            self.v0, self.v1, self.v2 = (
                weight("v0", (d,)),
                weight("v1", (d, self.mv_lora)),
                weight("v2", (self.mv_lora, d)),
            )
        self.g1, self.g2 = weight("g1", (d, self.gate_lora)), weight("g2", (self.gate_lora, d))
        self.k_k, self.k_a = weight("k_k", (d,)), weight("k_a", (d,))
        self.r_k = weight("r_k", (self.num_heads, self.head_size))
        for name in ("receptance", "key", "value", "output"):
            setattr(self, name + "_kernel", weight(name + "_kernel", (d, d)))
        self.norm_gamma = weight("norm_gamma", (d,), "ones")
        self.norm_beta = weight("norm_beta", (d,), "zeros")

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The state before the first step (`RWKVState` of zeros)."""
        state.check_built(self)
        n = self.head_size
        return RWKVState(
            ops.zeros((batch_size, 1, self.units), self.compute_dtype),
            ops.zeros((batch_size, self.num_heads, n, n), "float32"),
        )

    def _heads(self, t, like):
        shape = (ops.shape(like)[0], ops.shape(like)[1], self.num_heads, self.head_size)
        return ops.reshape(t, shape)

    def call(
        self, inputs, v_first=None, padding_mask=None, cache=None, cache_index=None, mask=None
    ):
        name = "RWKV7TimeMixing"
        validation.numeric(name, "inputs", inputs)
        state.check_cache(self, cache, cache_index, "RWKVState")
        if self.value_residual and v_first is None:
            raise ValueError(
                f"`{name}` with value_residual=True needs `v_first` (the first layer's values)"
            )
        keep = state.kept_steps(name, inputs, mask if padding_mask is None else padding_mask)
        x = ops.cast(inputs, "float32")
        if keep is not None:
            x = x * keep
        xx = _shifted(x, None if cache is None else cache.shift) - x
        if keep is not None:
            xx = xx * keep

        def mixed(c):
            return x + xx * ops.cast(getattr(self, "x_" + c), "float32")

        def f32(v):
            return ops.cast(v, "float32")

        r = ops.matmul(mixed("r"), f32(self.receptance_kernel))
        k = ops.matmul(mixed("k"), f32(self.key_kernel))
        v = ops.matmul(mixed("v"), f32(self.value_kernel))
        z = f32(self.w0) + ops.matmul(ops.tanh(ops.matmul(mixed("w"), f32(self.w1))), f32(self.w2))
        log_w = -ops.exp(-ops.softplus(-z) - 0.5)  # log w, w = exp(-e^-0.5 sigmoid(z))
        values = v
        if self.value_residual:
            gate = ops.sigmoid(
                f32(self.v0) + ops.matmul(ops.matmul(mixed("v"), f32(self.v1)), f32(self.v2))
            )
            v = v + (ops.cast(v_first, "float32") - v) * gate
        a = ops.sigmoid(
            f32(self.a0) + ops.matmul(ops.matmul(mixed("a"), f32(self.a1)), f32(self.a2))
        )
        g = ops.matmul(ops.sigmoid(ops.matmul(mixed("g"), f32(self.g1))), f32(self.g2))
        kk = self._heads(k * f32(self.k_k), inputs)
        kk = kk * ops.maximum(
            ops.rsqrt(ops.sum(ops.square(kk), axis=-1, keepdims=True) + 1e-12), 1e-12
        )
        k = k * (1.0 + (a - 1.0) * f32(self.k_a))
        if keep is not None:
            log_w = log_w * keep
        rh, kh, vh, wh = (self._heads(t, inputs) for t in (r, k, v, log_w))
        ah = self._heads(a, inputs)
        memory = None if cache is None else ops.cast(cache.memory, "float32")
        if inputs.shape[1] == 1 and memory is not None:
            o, memory = generalized_delta_step(
                rh[:, 0], wh[:, 0], kh[:, 0], vh[:, 0], -kk[:, 0], (kk * ah)[:, 0], memory
            )
            o = ops.expand_dims(o, 1)
        else:
            o, memory = generalized_delta_rule(
                rh, wh, kh, vh, -kk, kk * ah, memory, self.chunk_size
            )
        # the per-head GroupNorm, then the bonus (r . k r_k) v
        mean = ops.mean(o, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(o - mean), axis=-1, keepdims=True)
        o = (o - mean) * ops.rsqrt(variance + self.norm_epsilon)
        o = ops.reshape(o, ops.shape(x)) * f32(self.norm_gamma) + f32(self.norm_beta)
        bonus = ops.sum(rh * kh * f32(self.r_k), axis=-1, keepdims=True) * vh
        o = o + ops.reshape(bonus, ops.shape(x))
        out = ops.matmul(
            ops.cast(o * g, self.compute_dtype), ops.cast(self.output_kernel, self.compute_dtype)
        )
        values = ops.cast(values, self.compute_dtype)
        if cache is None:
            return out, values
        shift = ops.cast(x[:, -1:], self.compute_dtype)
        return out, values, RWKVState(shift, memory)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        out = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        values = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if cache is None:
            return out, values
        return out, values, RWKVState(*(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "head_size": self.head_size,
                "decay_lora": self.decay_lora,
                "aaa_lora": self.aaa_lora,
                "mv_lora": self.mv_lora,
                "gate_lora": self.gate_lora,
                "value_residual": self.value_residual,
                "chunk_size": self.chunk_size,
                "norm_epsilon": self.norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class RWKV7ChannelMixing(keras.layers.Layer):
    """RWKV-7's channel mixing: `k = x + (shift(x) - x) * x_k`, `out =
    relu(k W_k)^2 W_v` (keras-hub's `RWKV7ChannelMix`).

    Variables: `x_k` (d,), `key_kernel` (d, intermediate_dim),
    `value_kernel` (intermediate_dim, d).

    Args:
        intermediate_dim: the hidden width.
        kernel_initializer: of the variables.

    Call arguments:
        inputs: (batch, time, d).
        cache, cache_index: a decoding step: `cache` the (batch, 1, d) last
            input (`init_cache`) -> `(outputs, cache)`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.RWKV7ChannelMixing(16)
        >>> tuple(layer(np.ones((2, 3, 8), "float32")).shape)
        (2, 3, 8)
    """

    def __init__(self, intermediate_dim, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.intermediate_dim = validation.positive_int(
            "RWKV7ChannelMixing", "intermediate_dim", intermediate_dim
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        d = state.check_features(self, input_shape)
        self.units = d

        def weight(name, shape):
            initializer = keras.initializers.get(
                keras.initializers.serialize(self.kernel_initializer)
            )
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        self.x_k = weight("x_k", (d,))
        self.key_kernel = weight("key_kernel", (d, self.intermediate_dim))
        self.value_kernel = weight("value_kernel", (self.intermediate_dim, d))

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The state before the first step: a zero last input."""
        state.check_built(self)
        return ops.zeros((batch_size, 1, self.units), self.compute_dtype)

    def call(self, inputs, cache=None, cache_index=None):
        validation.numeric("RWKV7ChannelMixing", "inputs", inputs)
        state.check_step("RWKV7ChannelMixing", cache, cache_index)
        dtype = self.compute_dtype
        x = ops.cast(inputs, dtype)
        k = x + (_shifted(x, cache) - x) * ops.cast(self.x_k, dtype)
        k = ops.square(ops.relu(ops.matmul(k, ops.cast(self.key_kernel, dtype))))
        out = ops.matmul(k, ops.cast(self.value_kernel, dtype))
        return out if cache is None else (out, x[:, -1:])

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        return state.output_spec(self, inputs, cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


def _layer_norm(name, epsilon, dtype):
    norm = keras.layers.LayerNormalization(epsilon=epsilon, dtype=dtype, name=name)
    norm.supports_masking = True
    return norm


@keras.saving.register_keras_serializable(package=_PACKAGE)
class RWKV7Blocks(keras.layers.Layer):
    """A stack of RWKV-7 blocks, one layer so that the first block's values
    (`v_first`, which every later block mixes in) pass between blocks
    inside it, and the stack keeps the one block signature:

        x = LayerNorm_0(x)                                 (first block only)
        x = x + TimeMixing(LayerNorm_1(x), v_first)
        x = x + ChannelMixing(LayerNorm_2(x))

    Sublayers (lists, one per block): `norms` (ln1, ln2), `time_mixing`
    (`RWKV7TimeMixing`), `channel_mixing` (`RWKV7ChannelMixing`), and
    `initial_norm` (ln0).

    Args:
        num_layers: blocks.
        intermediate_dim: the channel mixing's width.
        head_size: N.
        decay_lora, aaa_lora, mv_lora, gate_lora, chunk_size: the time
            mixing's.
        norm_epsilon: the LayerNorms' (1e-5).
        kernel_initializer: of the mixings.

    Call arguments: `inputs` (batch, time, d), `padding_mask`, and a
    decoding step's `cache` (a tuple with one `(RWKVState, shift)` per
    block, `init_cache`) and `cache_index`; `step_weights` is accepted and
    unused.

    Examples:
        >>> import numpy as np, seqkeras
        >>> stack = seqkeras.layers.RWKV7Blocks(2, 16, head_size=4)
        >>> x = np.random.default_rng(0).normal(size=(1, 5, 8)).astype("float32")
        >>> full = np.asarray(stack(x))
        >>> cache, steps = stack.init_cache(1), []
        >>> for t in range(5):
        ...     y, cache = stack(x[:, t : t + 1], cache=cache, cache_index=t)
        ...     steps.append(np.asarray(y))
        >>> bool(np.allclose(np.concatenate(steps, 1), full, atol=1e-5))
        True
    """

    def __init__(
        self,
        num_layers,
        intermediate_dim,
        head_size=64,
        decay_lora=64,
        aaa_lora=64,
        mv_lora=32,
        gate_lora=128,
        chunk_size=64,
        norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "RWKV7Blocks"
        self.num_layers = validation.positive_int(name, "num_layers", num_layers)
        self.intermediate_dim = validation.positive_int(name, "intermediate_dim", intermediate_dim)
        self.norm_epsilon = validation.greater_than(name, "norm_epsilon", norm_epsilon, 0.0)
        self.mixing_kwargs = dict(
            head_size=head_size,
            decay_lora=decay_lora,
            aaa_lora=aaa_lora,
            mv_lora=mv_lora,
            gate_lora=gate_lora,
            chunk_size=chunk_size,
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        dtype = self.dtype_policy
        init = keras.initializers.serialize(self.kernel_initializer)
        self.initial_norm = _layer_norm("ln0", norm_epsilon, dtype)
        self.norms, self.time_mixing, self.channel_mixing = [], [], []
        for i in range(num_layers):
            self.norms.append(
                [
                    _layer_norm(f"ln1_{i}", norm_epsilon, dtype),
                    _layer_norm(f"ln2_{i}", norm_epsilon, dtype),
                ]
            )
            self.time_mixing.append(
                RWKV7TimeMixing(
                    value_residual=i > 0,
                    kernel_initializer=keras.initializers.get(init),
                    dtype=dtype,
                    name=f"time_mixing_{i}",
                    **self.mixing_kwargs,
                )
            )
            self.channel_mixing.append(
                RWKV7ChannelMixing(
                    intermediate_dim,
                    kernel_initializer=keras.initializers.get(init),
                    dtype=dtype,
                    name=f"channel_mixing_{i}",
                )
            )
        self.supports_masking = True

    def build(self, input_shape):
        self.initial_norm.build(input_shape)
        for (ln1, ln2), tm, cm in zip(self.norms, self.time_mixing, self.channel_mixing):
            ln1.build(input_shape)
            ln2.build(input_shape)
            tm.build(input_shape)
            cm.build(input_shape)

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """One `(RWKVState, channel-mixing shift)` per block (zeros)."""
        state.check_built(self)
        return tuple(
            (tm.init_cache(batch_size), cm.init_cache(batch_size))
            for tm, cm in zip(self.time_mixing, self.channel_mixing)
        )

    def call(
        self,
        inputs,
        padding_mask=None,
        cache=None,
        cache_index=None,
        step_weights=None,
        training=None,
        mask=None,
    ):
        state.check_step("RWKV7Blocks", cache, cache_index)
        padding_mask = mask if padding_mask is None else padding_mask
        keep = state.kept_steps("RWKV7Blocks", inputs, padding_mask)
        x = self.initial_norm(inputs)
        v_first, new = None, []
        for i, ((ln1, ln2), tm, cm) in enumerate(
            zip(self.norms, self.time_mixing, self.channel_mixing)
        ):
            layer_cache = None if cache is None else cache[i]
            h = tm(
                ln1(x),
                v_first,
                padding_mask=padding_mask,
                cache=None if cache is None else layer_cache[0],
                cache_index=cache_index,
            )
            if i == 0:
                v_first = h[1]
            x = x + h[0]
            f = ln2(x)
            if keep is not None:
                f = f * ops.cast(keep, f.dtype)
            if cache is None:
                x = x + cm(f)
            else:
                out, shift = cm(f, cache=layer_cache[1], cache_index=cache_index)
                x = x + out
                new.append((h[2], shift))
        return x if cache is None else (x, tuple(new))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        return state.output_spec(self, inputs, cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_layers": self.num_layers,
                "intermediate_dim": self.intermediate_dim,
                "norm_epsilon": self.norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                **self.mixing_kwargs,
            }
        )
        return config
