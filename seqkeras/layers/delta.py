"""The gated delta rule (Yang et al. 2024), the matrix memory of gated
DeltaNet (the linear-attention layers of Qwen3-Next and Qwen3.5), with
plain linear attention and RetNet's retention as its special cases.

Per head, a (d_k, d_v) memory S is decayed, corrected towards the new
value at the new key (the delta rule, a step of online regression with
learning rate beta) and read by the query:

    S_t = a_t S_{t-1} + beta_t k_t (v_t - a_t S_{t-1}^T k_t)^T
    o_t = S_t^T q_t

`a_t = exp(g_t)` with g_t <= 0 the log decay. Without the delta rule
(`beta=None`) the memory only accumulates, `S_t = a_t S_{t-1} + k_t
v_t^T`: gated linear attention; with a constant a per head, RetNet's
retention; with no decay, linear attention.

`gated_delta_rule` trains a whole sequence in the chunked form: within
each chunk of C steps the corrections the steps make to one another are
one triangular system (solved in matrix products, `_unit_lower_inverse`),
and a loop over the T / C chunks carries S from chunk to chunk. A
decoding step (`delta_rule_step`) is the recurrence itself: its cost does
not depend on the position.
"""

import collections

import keras
import numpy as np
from keras import ops

from seqkeras.layers import state
from seqkeras.layers import validation
from seqkeras.layers.mamba import _dt_bias_initializer
from seqkeras.layers.mamba import _uniform
from seqkeras.layers.scan import causal_conv
from seqkeras.layers.scan import chunk_recurrence


def _expand(x, n):
    """x with n trailing axes of size 1 (`x[..., None, None]` without the
    new-axis slice TFLite's converter refuses)."""
    for _ in range(n):
        x = ops.expand_dims(x, -1)
    return x


def _segment_decays(g):
    """`(..., C) -> (..., C, C)`: exp(g_{j+1} + ... + g_i) for i >= j, 0
    above the diagonal."""
    cumulative = ops.cumsum(g, axis=-1)
    sums = ops.expand_dims(cumulative, -1) - ops.expand_dims(cumulative, -2)
    c = g.shape[-1]
    lower = np.tril(np.ones((c, c), "bool"))
    return ops.where(lower, ops.exp(ops.minimum(sums, 0.0)), 0.0)


def _unit_lower_inverse(a):
    """`(I + A)^-1` for strictly lower-triangular A (..., C, C).

    Block by block (Schur complements): with M the inverse of the diagonal
    blocks of size s, the inverse of the blocks of size 2 s is
    `M - M A_s M`, A_s the part of A below the diagonal inside those
    blocks. log2(C) levels of two matrix products each, no loop over
    rows, and no powers of A (a Neumann series loses float32 precision
    when keys repeat)."""
    c = a.shape[-1]
    size = 1 << max(c - 1, 0).bit_length()
    if size != c:  # pad to a power of two with identity rows
        widths = [[0, 0]] * (len(a.shape) - 2) + [[0, size - c], [0, size - c]]
        a = ops.pad(a, widths)
    rows, cols = np.arange(size)[:, None], np.arange(size)[None, :]
    inverse = ops.broadcast_to(np.eye(size, dtype="float32"), ops.shape(a))
    s = 1
    while s < size:
        inside = (rows // (2 * s) == cols // (2 * s)) & (rows // s != cols // s) & (rows > cols)
        below = a * inside.astype("float32")
        inverse = inverse - ops.matmul(ops.matmul(inverse, below), inverse)
        s *= 2
    return inverse[..., :c, :c]


def _chunks(t, c, pad, fill=0.0):
    """(batch, time, heads, ...) -> (batch, heads, chunks, c, ...), the
    time padded at the end by `pad` steps of `fill`."""
    rank = len(t.shape)
    t = ops.pad(t, [[0, 0], [0, pad]] + [[0, 0]] * (rank - 2), constant_values=fill)
    t = ops.reshape(t, (ops.shape(t)[0], -1, c) + tuple(t.shape[2:]))
    return ops.transpose(t, (0, 3, 1, 2) + tuple(range(4, rank + 1)))


def gated_delta_rule(q, k, v, log_decay=None, beta=None, initial=None, chunk_size=64):
    """The gated delta rule (the module docstring) over a whole sequence,
    in the chunked form (float32).

    Args:
        q, k: (batch, time, heads, d_k) queries (already scaled) and keys.
        v: (batch, time, heads, d_v).
        log_decay: (batch, time, heads) g_t <= 0, or None (no decay).
        beta: (batch, time, heads) the delta rule's rates, or None (no
            delta rule: the memory accumulates `k_t v_t^T`).
        initial: optional (batch, heads, d_k, d_v) memory.
        chunk_size: C (the last chunk is padded with steps that change
            nothing).

    Returns:
        `(outputs (batch, time, heads, d_v), final memory (batch, heads,
        d_k, d_v))`.
    """
    q, k, v = (ops.cast(t, "float32") for t in (q, k, v))
    log_decay, beta = (None if t is None else ops.cast(t, "float32") for t in (log_decay, beta))
    steps = q.shape[1]
    c = chunk_size if steps is None else max(1, min(chunk_size, steps))
    length = ops.shape(q)[1]
    pad = (c - length % c) % c
    if log_decay is None:
        log_decay = ops.zeros(ops.shape(q)[:3], q.dtype)
    qc, kc, vc = _chunks(q, c, pad), _chunks(k, c, pad), _chunks(v, c, pad)
    g = _chunks(log_decay, c, pad)  # (batch, heads, chunks, c)
    gamma = ops.cumsum(g, axis=-1)
    decays = _segment_decays(g)  # (batch, heads, chunks, c, c)
    grow = ops.expand_dims(ops.exp(gamma), -1)  # decay from the chunk's start
    to_end = ops.expand_dims(ops.exp(gamma[..., -1:] - gamma), -1)
    if beta is None:
        u, w = vc, None
    else:
        b = ops.expand_dims(_chunks(beta, c, pad), -1)
        kb = kc * b
        strict = np.tril(np.ones((c, c), "float32"), -1)
        a = ops.matmul(kb, ops.swapaxes(kc, -1, -2)) * decays * strict
        inverse = _unit_lower_inverse(a)
        u = ops.matmul(inverse, vc * b)
        w = ops.matmul(inverse, kb * grow)
    kd = ops.swapaxes(kc * to_end, -1, -2)  # (batch, heads, chunks, d_k, c)
    total = _expand(ops.exp(gamma[..., -1]), 2)  # (batch, heads, chunks, 1, 1)
    if initial is None:
        initial = ops.zeros((ops.shape(q)[0], q.shape[2], q.shape[3], v.shape[3]), dtype=q.dtype)
    initial = ops.cast(initial, q.dtype)

    def advance(s, x):
        """The memory entering the next chunk from the one entering this."""
        if w is None:
            u_i, kd_i, total_i = x
            new = u_i
        else:
            u_i, kd_i, total_i, w_i = x
            new = u_i - ops.matmul(w_i, s)
        return total_i * s + ops.matmul(kd_i, new)

    inputs = (u, kd, total) + (() if w is None else (w,))
    entering, s = chunk_recurrence(advance, initial, inputs)
    new = u if w is None else u - ops.matmul(w, entering)
    scores = ops.matmul(qc, ops.swapaxes(kc, -1, -2)) * decays
    y = ops.matmul(qc * grow, entering) + ops.matmul(scores, new)
    y = ops.transpose(y, (0, 2, 3, 1, 4))  # (batch, chunks, c, heads, d_v)
    y = ops.reshape(y, (ops.shape(y)[0], -1) + tuple(y.shape[3:]))[:, :length]
    return y, s


def delta_rule_step(q, k, v, log_decay, beta, memory):
    """One step of the recurrence (a decoding step): q, k (batch, heads,
    d_k), v (batch, heads, d_v), log_decay and beta (batch, heads) or None,
    memory (batch, heads, d_k, d_v) -> `(output (batch, heads, d_v), new
    memory)`."""
    if log_decay is not None:
        memory = memory * _expand(ops.exp(log_decay), 2)
    if beta is None:
        update = v
    else:
        recalled = ops.einsum("bhk,bhkv->bhv", k, memory)
        update = (v - recalled) * ops.expand_dims(beta, -1)
    memory = memory + ops.expand_dims(k, -1) * ops.expand_dims(update, -2)
    return ops.einsum("bhk,bhkv->bhv", q, memory), memory


class DeltaNetState(collections.namedtuple("DeltaNetState", ["conv", "memory"])):
    """A `GatedDeltaNet`'s decoding state: `conv` (batch, K - 1, channels),
    the short convolution's last inputs, and `memory` the float32 (batch,
    value_heads, d_k, d_v) memories."""

    __slots__ = ()


def _l2_normalize(x, epsilon=1e-6):
    """`x / sqrt(sum(x^2) + epsilon)` over the last axis (the gated DeltaNet
    reference's). Written through the mean: the TFLite converter rewrites
    `x * rsqrt(sum(x^2) + eps)` into its L2_NORMALIZATION builtin, which
    drops `epsilon` for `max(norm, 1e-6)` (5e-5 relative on keys of norm
    0.1)."""
    width = x.shape[-1]
    return x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) * width + epsilon)


def _retention_decays(heads):
    """RetNet's fixed per-head log decays, log(1 - 2^(-5 - h))."""
    return np.log(1.0 - 2.0 ** (-5.0 - np.arange(heads, dtype="float64"))).astype("float32")


@keras.saving.register_keras_serializable(package="seqkeras")
class GatedDeltaNet(keras.layers.Layer):
    """Gated DeltaNet's token mixer (Yang et al. 2024; the linear-attention
    layer of Qwen3-Next and Qwen3.5), with plain linear attention and
    RetNet's retention as its special cases.

    On x (batch, time, d):

        q, k, v = silu(causal_conv(x W_qkv))       (short depthwise conv)
        q, k    = l2norm(q) d_k^-1/2, l2norm(k)    (per head)
        g       = -exp(A_log) softplus(x W_a + dt_bias)   (per value head)
        beta    = sigmoid(x W_b)
        o       = gated_delta_rule(q, k, v, g, beta)      (the module docstring)
        out     = (RMSNorm(o) * scale * silu(x W_z)) W_out   (per head)

    `decay="fixed"` replaces g by RetNet's constant log(1 - 2^(-5 - h)) per
    head, `decay="none"` by 0; `delta_rule=False` drops beta (the memory
    accumulates `k v^T`): no delta rule and no decay is linear attention,
    no delta rule and fixed decays retention (with this layer's norms and
    gates). Value heads may outnumber key heads (each key head serves
    `value_heads / key_heads` consecutive value heads).

    Training runs the chunked form (`gated_delta_rule`, chunks of
    `chunk_size`); a decoding step carries the convolution's last K - 1
    inputs and the memories (`init_cache`), so a step costs the same at
    every position.

    Variables (Qwen3.5's layout; `seqkeras.pretrained` re-lays Qwen3-Next's
    interleaved one): `qkv_kernel` (d, 2 key_heads d_k + value_heads d_v)
    (q, k, v columns), `z_kernel` (d, value_heads d_v), `b_kernel` (d,
    value_heads) (delta rule), `a_kernel`, `dt_bias`, `A_log` (learned
    decay), `conv_kernel` (K, channels), `norm_scale` (d_v,),
    `out_kernel` (value_heads d_v, d).

    Args:
        num_key_heads: query/key heads.
        key_head_dim: d_k.
        num_value_heads: value heads (default `num_key_heads`; a multiple
            of it).
        value_head_dim: d_v (default d_k).
        conv_kernel: the short convolution's taps.
        decay: `"learned"` (gated DeltaNet), `"fixed"` (retention) or
            `"none"`.
        delta_rule: the delta rule's correction (False: accumulate).
        chunk_size: the chunked form's chunk length.
        norm_epsilon: the gated RMSNorm's.
        kernel_initializer: of the projections.

    Call arguments:
        inputs: (batch, time, d).
        padding_mask: optional bool (batch, time) (default the Keras mask):
            a padded step leaves the memories unchanged and outputs zeros.
        cache, cache_index: a decoding step (`seqkeras.layers.state`):
            `cache` from `init_cache`; one position or several -> `(outputs,
            cache)`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.GatedDeltaNet(num_key_heads=2, key_head_dim=4, chunk_size=4)
        >>> x = np.random.default_rng(0).normal(size=(1, 6, 8)).astype("float32")
        >>> full = np.asarray(layer(x))
        >>> cache = layer.init_cache(1)
        >>> y1, cache = layer(x[:, :5], cache=cache, cache_index=0)  # a prefill
        >>> y2, cache = layer(x[:, 5:], cache=cache, cache_index=5)  # a step
        >>> bool(np.allclose(np.concatenate([y1, y2], 1), full, atol=1e-5))
        True
    """

    DECAYS = ("learned", "fixed", "none")

    def __init__(
        self,
        num_key_heads,
        key_head_dim,
        num_value_heads=None,
        value_head_dim=None,
        conv_kernel=4,
        decay="learned",
        delta_rule=True,
        chunk_size=64,
        norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "GatedDeltaNet"
        self.num_key_heads = validation.positive_int(name, "num_key_heads", num_key_heads)
        self.key_head_dim = validation.positive_int(name, "key_head_dim", key_head_dim)
        self.num_value_heads = validation.positive_int(
            name, "num_value_heads", num_key_heads if num_value_heads is None else num_value_heads
        )
        if self.num_value_heads % self.num_key_heads:
            raise ValueError(
                f"`{name}` needs num_value_heads to be a multiple of num_key_heads. Received: "
                f"num_value_heads={num_value_heads}, num_key_heads={num_key_heads}"
            )
        self.value_head_dim = validation.positive_int(
            name, "value_head_dim", key_head_dim if value_head_dim is None else value_head_dim
        )
        self.conv_kernel = validation.positive_int(name, "conv_kernel", conv_kernel)
        self.decay = validation.choice(name, "decay", decay, self.DECAYS)
        self.delta_rule = validation.boolean(name, "delta_rule", delta_rule)
        self.chunk_size = validation.positive_int(name, "chunk_size", chunk_size)
        self.norm_epsilon = validation.greater_than(name, "norm_epsilon", norm_epsilon, 0.0)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def _initializer(self):
        return keras.initializers.get(keras.initializers.serialize(self.kernel_initializer))

    def build(self, input_shape):
        d = state.check_features(self, input_shape)
        key_dim = self.num_key_heads * self.key_head_dim
        value_dim = self.num_value_heads * self.value_head_dim
        heads = self.num_value_heads
        self._channels = 2 * key_dim + value_dim

        def kernel(name, shape, initializer=None):
            return self.add_weight(
                shape=shape, initializer=initializer or self._initializer(), name=name
            )

        self.qkv_kernel = kernel("qkv_kernel", (d, self._channels))
        self.z_kernel = kernel("z_kernel", (d, value_dim))
        self.b_kernel = kernel("b_kernel", (d, heads)) if self.delta_rule else None
        self.a_kernel = self.dt_bias = self.A_log = None
        if self.decay == "learned":
            self.a_kernel = kernel("a_kernel", (d, heads))
            # gated DeltaNet's (and Mamba's) initialisation: dt log-uniform
            # in [1e-3, 0.1] and A uniform in (0, 16], so g = -A dt starts
            # in [-1.6, 0): memories that last from a few steps to
            # thousands (Qwen3-Next's dt_bias = 1 makes most heads forget
            # within a few steps)
            self.dt_bias = kernel("dt_bias", (heads,), _dt_bias_initializer())
            self.A_log = kernel(
                "A_log",
                (heads,),
                lambda shape, dtype=None: ops.cast(
                    np.log(_uniform(shape, 1e-4, 16.0)), dtype or "float32"
                ),
            )
        bound = 1.0 / np.sqrt(self.conv_kernel)
        self.conv_kernel_weights = kernel(
            "conv_kernel",
            (self.conv_kernel, self._channels),
            keras.initializers.RandomUniform(-bound, bound),
        )
        self.norm_scale = kernel("norm_scale", (self.value_head_dim,), "ones")
        self.out_kernel = kernel("out_kernel", (value_dim, d))

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The state before the first step (`DeltaNetState` of zeros); its
        size does not depend on `max_length` or `layout`."""
        state.check_built(self)
        return DeltaNetState(
            ops.zeros((batch_size, self.conv_kernel - 1, self._channels), self.compute_dtype),
            ops.zeros(
                (batch_size, self.num_value_heads, self.key_head_dim, self.value_head_dim),
                "float32",
            ),
        )

    @staticmethod
    def _heads(t, heads, width, like):
        """(batch, time, heads * width) -> (batch, time, heads, width), the
        batch and time read from the layer's inputs `like` (tf2onnx folds a
        projection's shape into its 2-D matmul's)."""
        return ops.reshape(t, (ops.shape(like)[0], ops.shape(like)[1], heads, width))

    def call(self, inputs, padding_mask=None, cache=None, cache_index=None, mask=None):
        name = "GatedDeltaNet"
        validation.numeric(name, "inputs", inputs)
        state.check_cache(self, cache, cache_index, "DeltaNetState")
        keep = state.kept_steps(name, inputs, mask if padding_mask is None else padding_mask)
        dtype = self.compute_dtype
        qkv = ops.matmul(inputs, ops.cast(self.qkv_kernel, dtype))
        if keep is not None:
            qkv = qkv * ops.cast(keep, dtype)
        qkv, window = causal_conv(
            qkv, self.conv_kernel_weights, None, None if cache is None else cache.conv
        )
        qkv = ops.cast(ops.silu(qkv), "float32")
        key_dim = self.num_key_heads * self.key_head_dim
        q, k, v = ops.split(qkv, [key_dim, 2 * key_dim], axis=-1)
        repeats = self.num_value_heads // self.num_key_heads
        q, k = (
            ops.repeat(
                self._heads(t, self.num_key_heads, self.key_head_dim, inputs), repeats, axis=2
            )
            for t in (q, k)
        )
        q = _l2_normalize(q) * (self.key_head_dim**-0.5)
        k = _l2_normalize(k)
        v = self._heads(v, self.num_value_heads, self.value_head_dim, inputs)
        x32 = ops.cast(inputs, "float32")
        g = None
        if self.decay == "learned":
            a = ops.matmul(x32, ops.cast(self.a_kernel, "float32"))
            g = -ops.exp(ops.cast(self.A_log, "float32")) * ops.softplus(
                a + ops.cast(self.dt_bias, "float32")
            )
        elif self.decay == "fixed":
            g = ops.zeros_like(q[..., 0]) + _retention_decays(self.num_value_heads)
        beta = None
        if self.delta_rule:
            beta = ops.sigmoid(ops.matmul(x32, ops.cast(self.b_kernel, "float32")))
        if keep is not None:
            k = k * ops.expand_dims(keep, -1)
            g = None if g is None else g * keep
            beta = None if beta is None else beta * keep
        memory = None if cache is None else cache.memory
        if inputs.shape[1] == 1 and memory is not None:  # one step: the recurrence itself
            o, memory = delta_rule_step(
                q[:, 0],
                k[:, 0],
                v[:, 0],
                None if g is None else g[:, 0],
                None if beta is None else beta[:, 0],
                ops.cast(memory, "float32"),
            )
            o = ops.expand_dims(o, 1)
        else:
            o, memory = gated_delta_rule(q, k, v, g, beta, memory, self.chunk_size)
        o = o * ops.rsqrt(ops.mean(ops.square(o), axis=-1, keepdims=True) + self.norm_epsilon)
        o = o * ops.cast(self.norm_scale, "float32")
        z = self._heads(
            ops.matmul(x32, ops.cast(self.z_kernel, "float32")),
            self.num_value_heads,
            self.value_head_dim,
            inputs,
        )
        o = ops.reshape(
            o * ops.silu(z),
            (
                ops.shape(inputs)[0],
                ops.shape(inputs)[1],
                self.num_value_heads * self.value_head_dim,
            ),
        )
        out = ops.matmul(ops.cast(o, dtype), ops.cast(self.out_kernel, dtype))
        if keep is not None:
            out = out * ops.cast(keep, out.dtype)
        if cache is None:
            return out
        return out, DeltaNetState(window, memory)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        return state.output_spec(self, inputs, cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_key_heads": self.num_key_heads,
                "key_head_dim": self.key_head_dim,
                "num_value_heads": self.num_value_heads,
                "value_head_dim": self.value_head_dim,
                "conv_kernel": self.conv_kernel,
                "decay": self.decay,
                "delta_rule": self.delta_rule,
                "chunk_size": self.chunk_size,
                "norm_epsilon": self.norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
