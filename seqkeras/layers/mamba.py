"""Mamba (S6, Gu & Dao 2023) and Mamba-2 (SSD, Dao & Gu 2024) mixers and
their residual block.

Mamba's mixer (`MambaMixer`), on u (batch, time, d):

    x, z  = u W_in                                  (two halves of width d_inner)
    x     = silu(causal_conv(x))                    (depthwise, K taps)
    dt, B, C = x W_x                                (R, N, N columns)
    dt    = softplus(dt W_dt + b_dt)                (d_inner)
    h_t   = exp(dt_t A) * h_{t-1} + dt_t B_t x_t    (A = -exp(A_log): (d_inner, N))
    y_t   = h_t C_t + D x_t
    out   = (y * silu(z)) W_out

Mamba-2's (`Mamba2Mixer`) has one scalar decay per head (A: (heads,)),
B and C shared by the heads of a group, all of x, B and C through the
convolution, and a gated RMSNorm instead of the silu gate:

    z, xBC, dt = u W_in;  x, B, C = silu(causal_conv(xBC))
    dt    = softplus(dt + b_dt)                     (heads)
    h_t   = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T    (per head: (head_dim, N))
    y_t   = h_t C_t + D x_t
    out   = RMSNorm_groups(y * silu(z)) W_out

A whole sequence trains in parallel: Mamba's selective scan is one
`linear_scan` over (batch, time, d_inner, N); Mamba-2's is the chunked
SSD form (within a chunk the recurrence is a masked (chunk x chunk)
matrix of decays times C B^T; a recurrence over the chunks' states joins
them; no loop, any length). A decoding step carries the convolution's
last K - 1 inputs and the state h (`init_cache`), so a step costs the
same at every position. Padding (`padding_mask`) sets dt = 0 and the
convolution input to zero: the state does not move.

The variables are the `transformers` `MambaForCausalLM` /
`Mamba2ForCausalLM` mixer's, transposed where torch's `Linear` stores
(out, in) (`seqkeras.pretrained.mamba_weights` copies them).
"""

import collections
import math

import keras
import numpy as np
from keras import ops

from seqkeras.layers import state
from seqkeras.layers import validation
from seqkeras.layers.scan import causal_conv
from seqkeras.layers.scan import linear_scan

_PACKAGE = "seqkeras"


class MambaState(collections.namedtuple("MambaState", ["conv", "ssm"])):
    """A Mamba mixer's decoding state: `conv` (batch, K - 1, channels), the
    convolution's last inputs, and `ssm` the float32 state h ((batch,
    d_inner, N) for Mamba, (batch, heads, head_dim, N) for Mamba-2)."""

    __slots__ = ()


def _uniform(shape, low=0.0, high=1.0):
    """float64 NumPy numbers uniform in [low, high) drawn from Keras' global
    seed generator (`keras.utils.set_random_seed` makes an initialiser that
    uses them reproducible, as Keras' own are)."""
    drawn = keras.random.uniform(tuple(shape), low, high, dtype="float32")
    return ops.convert_to_numpy(drawn).astype("float64")


def _dt_bias_initializer(low=1e-3, high=0.1, floor=1e-4):
    """softplus^-1 of a step size log-uniform in [low, high] (Mamba's)."""

    def init(shape, dtype=None):
        u = _uniform(shape)
        dt = np.maximum(np.exp(u * (math.log(high) - math.log(low)) + math.log(low)), floor)
        return ops.cast(dt + np.log(-np.expm1(-dt)), dtype or "float32")

    return init


def _a_log_initializer(state_size):
    def init(shape, dtype=None):
        a = np.broadcast_to(np.arange(1, state_size + 1, dtype="float32"), shape)
        return ops.cast(np.log(a), dtype or "float32")

    return init


class _Mixer(keras.layers.Layer):
    """What both mixers share: arguments, the cache, masks, config."""

    def __init__(
        self,
        state_size,
        expand,
        conv_kernel,
        use_bias,
        use_conv_bias,
        kernel_initializer,
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = type(self).__name__
        self.state_size = validation.positive_int(name, "state_size", state_size)
        self.expand = validation.greater_than(name, "expand", expand, 0.0)
        self.conv_kernel = validation.positive_int(name, "conv_kernel", conv_kernel)
        self.use_bias = validation.boolean(name, "use_bias", use_bias)
        self.use_conv_bias = validation.boolean(name, "use_conv_bias", use_conv_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def _initializer(self):
        return keras.initializers.get(keras.initializers.serialize(self.kernel_initializer))

    def _check_build(self, input_shape):
        return state.check_features(self, input_shape)

    def _dense(self, name, shape, bias):
        kernel = self.add_weight(
            shape=shape, initializer=self._initializer(), name=name + "_kernel"
        )
        b = None
        if bias:
            b = self.add_weight(shape=shape[-1:], initializer="zeros", name=name + "_bias")
        return kernel, b

    def _conv(self, channels):
        self.conv_kernel_weights = self.add_weight(
            shape=(self.conv_kernel, channels),
            initializer=keras.initializers.RandomUniform(
                -1 / math.sqrt(self.conv_kernel), 1 / math.sqrt(self.conv_kernel)
            ),
            name="conv_kernel",
        )
        self.conv_bias = None
        if self.use_conv_bias:
            self.conv_bias = self.add_weight(
                shape=(channels,), initializer="zeros", name="conv_bias"
            )

    @staticmethod
    def _apply(x, kernel, bias):
        y = ops.matmul(x, ops.cast(kernel, x.dtype))
        return y if bias is None else y + ops.cast(bias, x.dtype)

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The state before the first step (`MambaState` of zeros). Its size
        does not depend on `max_length` or `layout` (taken for the one
        state contract of `seqkeras.layers.state`)."""
        state.check_built(self)
        return MambaState(
            ops.zeros((batch_size, self.conv_kernel - 1, self._conv_channels), self.compute_dtype),
            ops.zeros((batch_size,) + self._state_shape, "float32"),
        )

    def _check_cache(self, cache, cache_index):
        state.check_cache(self, cache, cache_index, "MambaState")

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        return state.output_spec(self, inputs, cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "state_size": self.state_size,
                "expand": self.expand,
                "conv_kernel": self.conv_kernel,
                "use_bias": self.use_bias,
                "use_conv_bias": self.use_conv_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MambaMixer(_Mixer):
    """Mamba's selective state-space mixer (S6; the module docstring has
    the equations).

    Variables (`transformers`' `MambaMixer`, torch `Linear` weights
    transposed): `in_proj_kernel` (d, 2 d_inner) (x columns first, then
    z), `conv_kernel` (K, d_inner), `conv_bias`, `x_proj_kernel`
    (d_inner, R + 2N) (dt, B, C), `dt_proj_kernel` (R, d_inner),
    `dt_proj_bias`, `A_log` (d_inner, N), `D` (d_inner,),
    `out_proj_kernel` (d_inner, d); biases on the two projections with
    `use_bias`.

    Args:
        state_size: N, the state per channel.
        expand: d_inner = int(expand * d).
        conv_kernel: K, the causal convolution's taps.
        time_step_rank: R, the low-rank dt projection (default ceil(d / 16)).
        use_bias: biases on `in_proj` and `out_proj`.
        use_conv_bias: a bias on the convolution.
        kernel_initializer: of the projections.

    Call arguments:
        inputs: (batch, time, d).
        padding_mask: optional bool (batch, time) (default the Keras mask):
            a padded step leaves the state unchanged and outputs zeros.
        cache, cache_index: a decoding step (`seqkeras.layers.state`):
            `cache` from `init_cache`; any `cache_index` (the state does not
            depend on positions); one position or several -> `(outputs,
            cache)`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> mixer = seqkeras.layers.MambaMixer(state_size=4)
        >>> x = np.random.default_rng(0).normal(size=(1, 6, 8)).astype("float32")
        >>> full = np.asarray(mixer(x))
        >>> cache, steps = mixer.init_cache(1), []
        >>> for t in range(6):
        ...     y, cache = mixer(x[:, t : t + 1], cache=cache, cache_index=t)
        ...     steps.append(np.asarray(y))
        >>> bool(np.allclose(np.concatenate(steps, 1), full, atol=1e-5))
        True
    """

    def __init__(
        self,
        state_size=16,
        expand=2,
        conv_kernel=4,
        time_step_rank=None,
        use_bias=False,
        use_conv_bias=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(
            state_size, expand, conv_kernel, use_bias, use_conv_bias, kernel_initializer, **kwargs
        )
        self.time_step_rank = (
            None
            if time_step_rank is None
            else validation.positive_int("MambaMixer", "time_step_rank", time_step_rank)
        )

    def build(self, input_shape):
        d = self._check_build(input_shape)
        inner = int(self.expand * d)
        rank = self.time_step_rank or math.ceil(d / 16)
        self.inner_dim, self.rank = inner, rank
        self._conv_channels = inner
        self._state_shape = (inner, self.state_size)
        self.in_proj_kernel, self.in_proj_bias = self._dense(
            "in_proj", (d, 2 * inner), self.use_bias
        )
        self._conv(inner)
        self.x_proj_kernel, _ = self._dense("x_proj", (inner, rank + 2 * self.state_size), False)
        self.dt_proj_kernel = self.add_weight(
            shape=(rank, inner),
            initializer=keras.initializers.RandomUniform(-(rank**-0.5), rank**-0.5),
            name="dt_proj_kernel",
        )
        self.dt_proj_bias = self.add_weight(
            shape=(inner,), initializer=_dt_bias_initializer(), name="dt_proj_bias"
        )
        self.A_log = self.add_weight(
            shape=(inner, self.state_size),
            initializer=_a_log_initializer(self.state_size),
            name="A_log",
        )
        self.D = self.add_weight(shape=(inner,), initializer="ones", name="D")
        self.out_proj_kernel, self.out_proj_bias = self._dense(
            "out_proj", (inner, d), self.use_bias
        )

    def call(self, inputs, padding_mask=None, cache=None, cache_index=None, mask=None):
        validation.numeric("MambaMixer", "inputs", inputs)
        self._check_cache(cache, cache_index)
        keep = state.kept_steps(
            type(self).__name__, inputs, mask if padding_mask is None else padding_mask
        )
        xz = self._apply(inputs, self.in_proj_kernel, self.in_proj_bias)
        x, z = ops.split(xz, 2, axis=-1)
        if keep is not None:
            x = x * ops.cast(keep, x.dtype)
        x, window = causal_conv(
            x, self.conv_kernel_weights, self.conv_bias, None if cache is None else cache.conv
        )
        x = ops.silu(x)
        n = self.state_size
        dt, b, c = ops.split(
            ops.cast(self._apply(x, self.x_proj_kernel, None), "float32"),
            [self.rank, self.rank + n],
            axis=-1,
        )
        dt = ops.softplus(
            ops.matmul(dt, ops.cast(self.dt_proj_kernel, "float32"))
            + ops.cast(self.dt_proj_bias, "float32")
        )
        if keep is not None:
            dt = dt * keep
        x32 = ops.cast(x, "float32")
        a = -ops.exp(ops.cast(self.A_log, "float32"))  # (d_inner, N)
        dt4 = ops.expand_dims(dt, -1)  # (batch, time, d_inner, 1)
        decay = ops.exp(dt4 * a)
        drive = dt4 * ops.expand_dims(x32, -1) * ops.expand_dims(b, 2)
        h = linear_scan(decay, drive, None if cache is None else cache.ssm)
        y = ops.squeeze(ops.matmul(h, ops.expand_dims(c, -1)), -1)  # (batch, time, d_inner)
        y = y + x32 * ops.cast(self.D, "float32")
        y = ops.cast(y, self.compute_dtype) * ops.silu(z)
        out = self._apply(y, self.out_proj_kernel, self.out_proj_bias)
        if keep is not None:
            out = out * ops.cast(keep, out.dtype)
        if cache is None:
            return out
        return out, MambaState(window, h[:, -1])

    def get_config(self):
        config = super().get_config()
        config["time_step_rank"] = self.time_step_rank
        return config


def _segment_sums(a):
    """`(..., Q) -> (..., Q, Q)`: `[i, j] = a_{j+1} + ... + a_i` for i >= j,
    and the mask of those entries (the rest are never used)."""
    cumulative = ops.cumsum(a, axis=-1)
    sums = ops.expand_dims(cumulative, -1) - ops.expand_dims(cumulative, -2)
    q = ops.shape(a)[-1]
    rows = ops.expand_dims(ops.arange(q), -1)
    lower = rows >= ops.expand_dims(ops.arange(q), 0)
    return sums, lower


def _decays(a):
    """exp of `_segment_sums(a)` where defined, 0 above the diagonal."""
    sums, lower = _segment_sums(a)
    return ops.where(lower, ops.exp(ops.minimum(sums, 0.0)), 0.0)


def ssd_scan(x, dt, a, b, c, initial=None, chunk_size=64):
    """The Mamba-2 state-space recurrence over a whole sequence, in the
    chunked SSD form (Dao & Gu 2024, "Listing 1").

    Per head, `h_t = exp(dt_t a) h_{t-1} + dt_t x_t b_t^T` and `y_t = h_t
    c_t` (float32).

    Args:
        x: (batch, time, heads, head_dim).
        dt: (batch, time, heads) step sizes.
        a: (heads,) the (negative) decay rates.
        b, c: (batch, time, heads, N).
        initial: optional (batch, heads, head_dim, N) state.
        chunk_size: the chunk length (the last chunk is padded).

    Returns:
        `(y (batch, time, heads, head_dim), final state (batch, heads,
        head_dim, N))`.
    """
    steps = x.shape[1]
    q = chunk_size if steps is None else min(chunk_size, steps)
    length = ops.shape(x)[1]
    pad = (q - length % q) % q  # padded steps: dt = 0, so decay 1, no input

    def padded(t):
        widths = [[0, 0], [0, pad]] + [[0, 0]] * (len(t.shape) - 2)
        t = ops.pad(t, widths)
        return ops.reshape(t, (ops.shape(t)[0], -1, q) + tuple(t.shape[2:]))

    xs = padded(x * ops.expand_dims(dt, -1))  # (batch, chunks, q, heads, p)
    da = padded(dt * a)  # (batch, chunks, q, heads)
    bs, cs = padded(b), padded(c)  # (batch, chunks, q, heads, n)
    da = ops.transpose(da, (0, 1, 3, 2))  # (batch, chunks, heads, q)
    cumulative = ops.cumsum(da, axis=-1)
    # within each chunk: y_l = sum_{s <= l} (c_l . b_s) exp(sum a_{s+1..l}) x_s
    scores = ops.einsum("bclhn,bcshn->bchls", cs, bs) * _decays(da)
    y = ops.einsum("bchls,bcshp->bclhp", scores, xs)
    # each chunk's own contribution to the state at its end
    to_end = ops.exp(cumulative[..., -1:] - cumulative)  # (batch, chunks, heads, q)
    weighted = bs * ops.expand_dims(ops.transpose(to_end, (0, 1, 3, 2)), -1)
    states = ops.einsum("bclhn,bclhp->bchpn", weighted, xs)
    if initial is None:
        initial = ops.zeros_like(states[:, 0])
    states = ops.concatenate([ops.expand_dims(ops.cast(initial, states.dtype), 1), states], 1)
    # the state entering each chunk: a recurrence over the chunks' totals
    totals = ops.pad(cumulative[..., -1], [[0, 0], [1, 0], [0, 0]])  # (batch, chunks + 1, heads)
    across = _decays(ops.transpose(totals, (0, 2, 1)))  # (batch, heads, z, chunks + 1)
    states = ops.einsum("bhzc,bchpn->bzhpn", across, states)
    entering, final = states[:, :-1], states[:, -1]
    from_start = ops.exp(ops.transpose(cumulative, (0, 1, 3, 2)))  # (batch, chunks, q, heads)
    y = y + ops.einsum("bclhn,bchpn->bclhp", cs, entering) * ops.expand_dims(from_start, -1)
    y = ops.reshape(y, (ops.shape(y)[0], -1) + tuple(y.shape[3:]))[:, :length]
    return y, final


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Mamba2Mixer(_Mixer):
    """Mamba-2's state-space-duality mixer (SSD; the module docstring has
    the equations).

    Variables (`transformers`' `Mamba2Mixer`, torch `Linear` weights
    transposed): `in_proj_kernel` (d, 2 d_inner + 2 G N + heads) (z, x,
    B, C, dt columns), `conv_kernel` (K, d_inner + 2 G N), `conv_bias`,
    `dt_bias` (heads,), `A_log` (heads,), `D` (heads,), `norm_scale`
    (d_inner,), `out_proj_kernel` (d_inner, d).

    Args:
        head_dim: P, each head's width; heads = d_inner / P.
        state_size: N.
        expand: d_inner = int(expand * d).
        num_groups: G, groups of heads sharing B and C (divides heads).
        conv_kernel: K.
        chunk_size: the SSD form's chunk length.
        time_step_limit: `(low, high)` dt is clipped to (full sequences).
        norm_epsilon: the gated RMSNorm's.
        use_bias, use_conv_bias, kernel_initializer: as `MambaMixer`.

    Call arguments: as `MambaMixer`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> mixer = seqkeras.layers.Mamba2Mixer(head_dim=4, state_size=8, chunk_size=4)
        >>> x = np.random.default_rng(0).normal(size=(1, 6, 8)).astype("float32")
        >>> full = np.asarray(mixer(x))
        >>> cache = mixer.init_cache(1)
        >>> y1, cache = mixer(x[:, :4], cache=cache, cache_index=0)  # a prefill
        >>> y2, cache = mixer(x[:, 4:], cache=cache, cache_index=4)
        >>> bool(np.allclose(np.concatenate([y1, y2], 1), full, atol=1e-5))
        True
    """

    def __init__(
        self,
        head_dim=64,
        state_size=128,
        expand=2,
        num_groups=1,
        conv_kernel=4,
        chunk_size=64,
        time_step_limit=(0.0, float("inf")),
        norm_epsilon=1e-5,
        use_bias=False,
        use_conv_bias=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(
            state_size, expand, conv_kernel, use_bias, use_conv_bias, kernel_initializer, **kwargs
        )
        name = "Mamba2Mixer"
        self.head_dim = validation.positive_int(name, "head_dim", head_dim)
        self.num_groups = validation.positive_int(name, "num_groups", num_groups)
        self.chunk_size = validation.positive_int(name, "chunk_size", chunk_size)
        try:
            limit = tuple(float(v) for v in time_step_limit)
        except (TypeError, ValueError):
            limit = ()
        if len(limit) != 2 or not 0.0 <= limit[0] < limit[1]:
            raise ValueError(
                f"`{name}` received an invalid value for `time_step_limit`: expected "
                f"(low, high) with 0 <= low < high. Received: time_step_limit={time_step_limit!r}"
            )
        self.time_step_limit = limit
        self.norm_epsilon = validation.greater_than(name, "norm_epsilon", norm_epsilon, 0.0)

    def build(self, input_shape):
        d = self._check_build(input_shape)
        inner = int(self.expand * d)
        name = "Mamba2Mixer"
        if inner % self.head_dim:
            raise ValueError(
                f"`{name}` needs d_inner = int(expand * d) divisible by head_dim. "
                f"Received: d={d}, expand={self.expand}, head_dim={self.head_dim}"
            )
        heads = inner // self.head_dim
        if heads % self.num_groups:
            raise ValueError(
                f"`{name}` needs heads (d_inner / head_dim = {heads}) divisible by "
                f"num_groups. Received: num_groups={self.num_groups}"
            )
        self.inner_dim, self.num_heads = inner, heads
        gn = self.num_groups * self.state_size
        self._conv_channels = inner + 2 * gn
        self._state_shape = (heads, self.head_dim, self.state_size)
        self.in_proj_kernel, self.in_proj_bias = self._dense(
            "in_proj", (d, 2 * inner + 2 * gn + heads), self.use_bias
        )
        self._conv(self._conv_channels)
        self.dt_bias = self.add_weight(
            shape=(heads,), initializer=_dt_bias_initializer(), name="dt_bias"
        )
        self.A_log = self.add_weight(
            shape=(heads,),
            initializer=lambda shape, dtype=None: ops.cast(
                np.log(np.arange(1, heads + 1, dtype="float32")), dtype or "float32"
            ),
            name="A_log",
        )
        self.D = self.add_weight(shape=(heads,), initializer="ones", name="D")
        self.norm_scale = self.add_weight(shape=(inner,), initializer="ones", name="norm_scale")
        self.out_proj_kernel, self.out_proj_bias = self._dense(
            "out_proj", (inner, d), self.use_bias
        )

    def _heads(self, t, width):
        """(batch, time, G * width) -> (batch, time, heads, width): each
        group's columns repeated for its heads."""
        t = ops.reshape(t, (ops.shape(t)[0], ops.shape(t)[1], self.num_groups, 1, width))
        t = ops.repeat(t, self.num_heads // self.num_groups, axis=3)
        return ops.reshape(t, (ops.shape(t)[0], ops.shape(t)[1], self.num_heads, width))

    def call(self, inputs, padding_mask=None, cache=None, cache_index=None, mask=None):
        validation.numeric("Mamba2Mixer", "inputs", inputs)
        self._check_cache(cache, cache_index)
        keep = state.kept_steps(
            type(self).__name__, inputs, mask if padding_mask is None else padding_mask
        )
        inner, n, gn = self.inner_dim, self.state_size, self.num_groups * self.state_size
        zxbcdt = self._apply(inputs, self.in_proj_kernel, self.in_proj_bias)
        z, xbc, dt = ops.split(zxbcdt, [inner, 2 * inner + 2 * gn], axis=-1)
        if keep is not None:
            xbc = xbc * ops.cast(keep, xbc.dtype)
        xbc, window = causal_conv(
            xbc, self.conv_kernel_weights, self.conv_bias, None if cache is None else cache.conv
        )
        xbc = ops.cast(ops.silu(xbc), "float32")
        x, b, c = ops.split(xbc, [inner, inner + gn], axis=-1)
        dt = ops.softplus(ops.cast(dt, "float32") + ops.cast(self.dt_bias, "float32"))
        low, high = self.time_step_limit
        if cache is None and (low > 0.0 or math.isfinite(high)):
            dt = ops.clip(dt, low, high)
        if keep is not None:
            dt = dt * keep
        batch, steps = ops.shape(x)[0], ops.shape(x)[1]
        xh = ops.reshape(x, (batch, steps, self.num_heads, self.head_dim))
        bh, ch = self._heads(b, n), self._heads(c, n)
        a = -ops.exp(ops.cast(self.A_log, "float32"))
        initial = None if cache is None else cache.ssm
        if x.shape[1] == 1 and initial is not None:  # one step: the recurrence itself
            decay = ops.exp(dt[:, 0] * a)[:, :, None, None]
            drive = ops.einsum("bhp,bhn->bhpn", xh[:, 0] * dt[:, 0, :, None], bh[:, 0])
            final = decay * initial + drive
            y = ops.expand_dims(ops.einsum("bhpn,bhn->bhp", final, ch[:, 0]), 1)
        else:
            y, final = ssd_scan(xh, dt, a, bh, ch, initial, self.chunk_size)
        y = y + xh * ops.cast(self.D, "float32")[:, None]
        y = ops.reshape(y, (batch, steps, inner))
        # the gated RMSNorm, per group of d_inner / G channels
        g = y * ops.silu(ops.cast(z, "float32"))
        g = ops.reshape(g, (batch, steps, self.num_groups, inner // self.num_groups))
        g = g * ops.rsqrt(ops.mean(ops.square(g), axis=-1, keepdims=True) + self.norm_epsilon)
        g = ops.reshape(g, (batch, steps, inner)) * ops.cast(self.norm_scale, "float32")
        out = self._apply(ops.cast(g, self.compute_dtype), self.out_proj_kernel, self.out_proj_bias)
        if keep is not None:
            out = out * ops.cast(keep, out.dtype)
        if cache is None:
            return out
        return out, MambaState(window, final)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "head_dim": self.head_dim,
                "num_groups": self.num_groups,
                "chunk_size": self.chunk_size,
                "time_step_limit": list(self.time_step_limit),
                "norm_epsilon": self.norm_epsilon,
            }
        )
        return config


_MIXERS = {"mamba": MambaMixer, "mamba2": Mamba2Mixer}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MambaBlock(keras.layers.Layer):
    """Mamba's residual block: `x + Mixer(RMSNorm(x))`, the mixer a
    `MambaMixer` or a `Mamba2Mixer`.

    Sublayers: `norm` (`keras.layers.RMSNormalization`), `mixer`.

    Args:
        version: `"mamba"` (S6) or `"mamba2"` (SSD).
        norm_epsilon: the RMSNorm's (and Mamba-2's gated norm's).
        **mixer_kwargs: the mixer's arguments (`state_size`, `expand`,
            `conv_kernel`, ...; Mamba-2: `head_dim`, `num_groups`,
            `chunk_size`), besides the Layer's own (`name`, `dtype`).

    Call arguments: as the mixer's (`padding_mask`, `cache`,
    `cache_index`); `step_weights` is accepted and unused (the one block
    signature of `seqkeras.layers.state`).

    Examples:
        >>> import numpy as np, seqkeras
        >>> block = seqkeras.layers.MambaBlock("mamba", state_size=4)
        >>> tuple(block(np.ones((2, 5, 8), "float32")).shape)
        (2, 5, 8)
    """

    _LAYER_ARGS = ("name", "dtype", "trainable", "autocast")

    def __init__(self, version="mamba", norm_epsilon=1e-5, **kwargs):
        layer_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in self._LAYER_ARGS}
        super().__init__(**layer_kwargs)
        self.version = validation.choice("MambaBlock", "version", version, tuple(_MIXERS))
        self.norm_epsilon = validation.greater_than("MambaBlock", "norm_epsilon", norm_epsilon, 0.0)
        if version == "mamba2":
            kwargs.setdefault("norm_epsilon", norm_epsilon)
        self.mixer_kwargs = dict(kwargs)
        self.norm = keras.layers.RMSNormalization(
            epsilon=self.norm_epsilon, dtype=self.dtype_policy, name="norm"
        )
        self.norm.supports_masking = True
        self.mixer = _MIXERS[version](dtype=self.dtype_policy, name="mixer", **kwargs)
        self.supports_masking = True

    def build(self, input_shape):
        self.norm.build(input_shape)
        self.mixer.build(input_shape)

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The mixer's `init_cache`."""
        return self.mixer.init_cache(batch_size, max_length, layout)

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
        padding_mask = mask if padding_mask is None else padding_mask
        h = self.mixer(
            self.norm(inputs), padding_mask=padding_mask, cache=cache, cache_index=cache_index
        )
        if cache is None:
            return inputs + h
        h, cache = h
        return inputs + h, cache

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        return state.output_spec(self, inputs, cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"version": self.version, "norm_epsilon": self.norm_epsilon, **self.mixer_kwargs}
        )
        return config
