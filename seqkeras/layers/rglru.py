"""The RG-LRU and the Griffin/Hawk blocks (De et al. 2024, "Griffin:
Mixing Gated Linear Recurrences with Local Attention").

The Real-Gated Linear Recurrent Unit (`RGLRU`), on x (batch, time,
width), with block-diagonal gate weights (one (w/heads)^2 block per
head):

    r_t = sigmoid(x_t W_a + b_a)          (recurrence gate)
    i_t = sigmoid(x_t W_x + b_x)          (input gate)
    log a_t = -c * r_t * softplus(Lambda) (c = 8)
    h_t = a_t * h_{t-1} + sqrt(1 - a_t^2) * (i_t * x_t)

At a sequence's first position the state is reset (a = 0) and the input
is not scaled (the multiplier is 1). The temporal block
(`GriffinTemporalBlock`) wraps it as Griffin's recurrent branch:

    y = gelu(x W_y);  u = RGLRU(causal_conv(x W_x))
    out = (u * y) W_out

and the residual block (`GriffinBlock`) is `x + Temporal(RMSNorm(x))`
then `+ MLP(RMSNorm(.))`, the temporal part an RG-LRU block or local
(sliding-window) multi-query attention; Hawk is all RG-LRU blocks,
Griffin interleaves the two.

Variables follow `transformers`' `RecurrentGemma` (torch `Linear`
weights transposed; the gate blocks (heads, in, out) as they are).
"""

import keras
import numpy as np
from keras import ops

from seqkeras.layers import state
from seqkeras.layers import validation
from seqkeras.layers.attention import MultiHeadAttention
from seqkeras.layers.attention import key_value_heads
from seqkeras.layers.feedforward import GATE_ACTIVATIONS
from seqkeras.layers.feedforward import GatedFeedForward
from seqkeras.layers.feedforward import _activate as activate
from seqkeras.layers.mamba import _uniform
from seqkeras.layers.rotary import RotaryEmbedding
from seqkeras.layers.scan import causal_conv
from seqkeras.layers.scan import linear_scan

_PACKAGE = "seqkeras"


def _check_rank3(name, input_shape):
    if len(input_shape) != 3 or input_shape[-1] is None:
        raise ValueError(
            f"`{name}` expects inputs of rank 3 with known features, (batch, time, d). "
            f"Received: inputs.shape={tuple(input_shape)}"
        )
    return int(input_shape[-1])


def _expm1(x):
    """exp(x) - 1 for x <= 0 without `exp(x) - 1`'s loss of digits near 0,
    in ops every runtime has (tf2onnx has no Expm1): 2 t / (1 - t) with
    t = tanh(x / 2), accurate to float32 rounding (1 - t >= 1 here)."""
    t = ops.tanh(x / 2.0)
    return 2.0 * t / (1.0 - t)


def _sqrt_bounded_derivative(x, bound=1000.0):
    """sqrt(x) whose derivative is clipped at `bound` (the paper's and
    RecurrentGemma's: sqrt(1 - a^2) has an infinite derivative where a
    reaches 1, which turns the gradients NaN). The value is sqrt(x)
    exactly; the derivative is 1 / (2 sqrt(max(x, 1 / (2 bound)^2)))."""
    x = ops.maximum(x, 0.0)
    slope = ops.stop_gradient(0.5 / ops.sqrt(ops.maximum(x, 1.0 / (2.0 * bound) ** 2)))
    return ops.stop_gradient(ops.sqrt(x)) + slope * (x - ops.stop_gradient(x))


def _recurrent_param_initializer(low=0.9, high=0.999):
    """Lambda such that a = sigmoid-gated decay starts in [low, high] (the
    paper's: softplus^-1 of -log(a) / 2 with a^2 uniform in [low^2, high^2])."""

    def init(shape, dtype=None):
        a2 = _uniform(shape, low**2, high**2)
        target = -0.5 * np.log(a2)
        return ops.cast(target + np.log(-np.expm1(-target)), dtype or "float32")

    return init


@keras.saving.register_keras_serializable(package=_PACKAGE)
class RGLRU(keras.layers.Layer):
    """The Real-Gated Linear Recurrent Unit (see the module docstring).

    Variables: `recurrent_param` (width,) (Lambda), `input_gate_kernel`
    and `recurrent_gate_kernel` (heads, width / heads, width / heads),
    `input_gate_bias` and `recurrent_gate_bias` (heads, width / heads).

    Args:
        num_heads: the gates' diagonal blocks (divides the width).
        c: the decay's temperature (8 in the paper).

    Call arguments:
        inputs: (batch, time, width).
        padding_mask: optional bool (batch, time) (default the Keras mask):
            a padded step keeps the state and outputs zeros; the first kept
            step of a row is its first position.
        cache, cache_index: a decoding step (`seqkeras.layers.state`): the
            float32 state (batch, width) of `init_cache` and the inputs'
            first position (position 0 resets the state) -> `(outputs,
            state)`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> lru = seqkeras.layers.RGLRU(num_heads=2)
        >>> x = np.random.default_rng(0).normal(size=(1, 5, 4)).astype("float32")
        >>> full = np.asarray(lru(x))
        >>> h, steps = lru.init_cache(1), []
        >>> for t in range(5):
        ...     y, h = lru(x[:, t : t + 1], cache=h, cache_index=t)
        ...     steps.append(np.asarray(y))
        >>> bool(np.allclose(np.concatenate(steps, 1), full, atol=1e-5))
        True
    """

    def __init__(self, num_heads=1, c=8.0, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = validation.positive_int("RGLRU", "num_heads", num_heads)
        self.c = validation.greater_than("RGLRU", "c", c, 0.0)
        self.supports_masking = True

    def build(self, input_shape):
        width = _check_rank3("RGLRU", input_shape)
        if width % self.num_heads:
            raise ValueError(
                f"`RGLRU` needs a width divisible by num_heads. Received: width={width}, "
                f"num_heads={self.num_heads}"
            )
        self.width = width
        block = width // self.num_heads
        scale = keras.initializers.RandomNormal(stddev=block**-0.5)
        for gate in ("input_gate", "recurrent_gate"):
            setattr(
                self,
                gate + "_kernel",
                self.add_weight(
                    shape=(self.num_heads, block, block),
                    initializer=scale,
                    name=gate + "_kernel",
                ),
            )
            setattr(
                self,
                gate + "_bias",
                self.add_weight(
                    shape=(self.num_heads, block), initializer="zeros", name=gate + "_bias"
                ),
            )
        self.recurrent_param = self.add_weight(
            shape=(width,), initializer=_recurrent_param_initializer(), name="recurrent_param"
        )

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The state before the first step: float32 zeros (batch, width)."""
        state.check_built(self)
        return ops.zeros((batch_size, self.width), "float32")

    def _gate(self, x, kernel, bias):
        shape = ops.shape(x)
        blocks = ops.reshape(x, (shape[0], shape[1], self.num_heads, self.width // self.num_heads))
        y = ops.einsum("bthi,hij->bthj", blocks, ops.cast(kernel, x.dtype)) + ops.cast(
            bias, x.dtype
        )
        return ops.sigmoid(ops.reshape(y, shape))

    def call(self, inputs, padding_mask=None, cache=None, cache_index=None, mask=None):
        name = "RGLRU"
        validation.numeric(name, "inputs", inputs)
        state.check_step(name, cache, cache_index)
        keep = state.kept_steps(name, inputs, mask if padding_mask is None else padding_mask)
        x = ops.cast(inputs, "float32")
        gate_x = self._gate(x, self.input_gate_kernel, self.input_gate_bias)
        gate_a = self._gate(x, self.recurrent_gate_kernel, self.recurrent_gate_bias)
        log_a = -self.c * gate_a * ops.softplus(ops.cast(self.recurrent_param, "float32"))
        a = ops.exp(log_a)
        multiplier = _sqrt_bounded_derivative(-_expm1(2.0 * log_a))
        steps = ops.shape(x)[1]
        if cache is None:  # a row's first (kept) step is its first position
            if keep is None:
                reset = ops.expand_dims(ops.expand_dims(ops.arange(steps) == 0, 0), -1)
            else:
                reset = (ops.cumsum(keep, axis=1) == 1.0) & (keep > 0)
        else:
            positions = ops.arange(steps) + ops.cast(cache_index, "int32")
            reset = ops.expand_dims(ops.expand_dims(positions == 0, 0), -1)
        multiplier = ops.where(reset, 1.0, multiplier)
        a = ops.where(reset, 0.0, a)
        b = x * gate_x * multiplier
        if keep is not None:
            a = keep * a + (1.0 - keep)
            b = keep * b
        h = linear_scan(a, b, cache)
        out = h if keep is None else h * keep
        out = ops.cast(out, self.compute_dtype)
        return out if cache is None else (out, h[:, -1])

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        out = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if cache is not None:
            return out, keras.KerasTensor(cache.shape, dtype="float32")
        return out

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "c": self.c})
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GriffinTemporalBlock(keras.layers.Layer):
    """Griffin's recurrent temporal block: `(RGLRU(conv(x W_x)) * gelu(x
    W_y)) W_out` (see the module docstring).

    Variables: `linear_y_kernel`/`_bias` and `linear_x_kernel`/`_bias` (d,
    width), `conv_kernel` (K, width), `conv_bias`, `linear_out_kernel`/
    `_bias` (width, d); the `rg_lru` sublayer's.

    Args:
        width: the recurrence's width (`lru_width`; default d).
        num_heads: the RG-LRU gates' blocks.
        conv_kernel: the causal convolution's taps.
        activation: the y branch's (`"gelu_tanh"`).
        kernel_initializer: of the projections.

    Call arguments: as `RGLRU`; the state is `(conv window (batch, K - 1,
    width), RG-LRU state)`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> block = seqkeras.layers.GriffinTemporalBlock(num_heads=2)
        >>> tuple(block(np.ones((2, 5, 8), "float32")).shape)
        (2, 5, 8)
    """

    def __init__(
        self,
        width=None,
        num_heads=1,
        conv_kernel=4,
        activation="gelu_tanh",
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "GriffinTemporalBlock"
        self.width = None if width is None else validation.positive_int(name, "width", width)
        self.num_heads = validation.positive_int(name, "num_heads", num_heads)
        self.conv_kernel = validation.positive_int(name, "conv_kernel", conv_kernel)
        self.activation = validation.choice(name, "activation", activation, GATE_ACTIVATIONS)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        d = _check_rank3("GriffinTemporalBlock", input_shape)
        width = self.width or d
        self._width = width

        def dense(name, shape):
            kernel = self.add_weight(
                shape=shape,
                initializer=keras.initializers.get(
                    keras.initializers.serialize(self.kernel_initializer)
                ),
                name=name + "_kernel",
            )
            bias = self.add_weight(shape=shape[-1:], initializer="zeros", name=name + "_bias")
            return kernel, bias

        self.linear_y_kernel, self.linear_y_bias = dense("linear_y", (d, width))
        self.linear_x_kernel, self.linear_x_bias = dense("linear_x", (d, width))
        self.conv_kernel_weights = self.add_weight(
            shape=(self.conv_kernel, width),
            initializer=keras.initializers.RandomNormal(stddev=self.conv_kernel**-0.5),
            name="conv_kernel",
        )
        self.conv_bias = self.add_weight(shape=(width,), initializer="zeros", name="conv_bias")
        self.rg_lru = RGLRU(self.num_heads, dtype=self.dtype_policy, name="rg_lru")
        self.rg_lru.build(tuple(input_shape[:2]) + (width,))
        self.linear_out_kernel, self.linear_out_bias = dense("linear_out", (width, d))

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """`(conv window, RG-LRU state)` of zeros."""
        state.check_built(self)
        window = ops.zeros((batch_size, self.conv_kernel - 1, self._width), self.compute_dtype)
        return (window, self.rg_lru.init_cache(batch_size))

    @staticmethod
    def _apply(x, kernel, bias):
        return ops.matmul(x, ops.cast(kernel, x.dtype)) + ops.cast(bias, x.dtype)

    def call(self, inputs, padding_mask=None, cache=None, cache_index=None, mask=None):
        name = "GriffinTemporalBlock"
        validation.numeric(name, "inputs", inputs)
        state.check_step(name, cache, cache_index)
        padding_mask = mask if padding_mask is None else padding_mask
        keep = state.kept_steps(name, inputs, padding_mask)
        y = self._apply(inputs, self.linear_y_kernel, self.linear_y_bias)
        y = activate(self.activation, y)
        x = self._apply(inputs, self.linear_x_kernel, self.linear_x_bias)
        if keep is not None:
            x = x * ops.cast(keep, x.dtype)
        x, window = causal_conv(
            x, self.conv_kernel_weights, self.conv_bias, None if cache is None else cache[0]
        )
        if cache is None:
            x = self.rg_lru(x, padding_mask=padding_mask)
            lru = None
        else:
            x, lru = self.rg_lru(x, cache=cache[1], cache_index=cache_index)
        out = self._apply(x * y, self.linear_out_kernel, self.linear_out_bias)
        return out if cache is None else (out, (window, lru))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        out = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if cache is not None:
            return out, tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache)
        return out

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "width": self.width,
                "num_heads": self.num_heads,
                "conv_kernel": self.conv_kernel,
                "activation": self.activation,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


_KINDS = ("recurrent", "attention")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GriffinBlock(keras.layers.Layer):
    """Griffin's residual block (see the module docstring):

        h   = x + Temporal(RMSNorm(x))
        out = h + MLP(RMSNorm(h))

    the temporal part a `GriffinTemporalBlock` (`kind="recurrent"`) or
    local multi-query attention (`kind="attention"`: rotary positions on a
    part of each head, a sliding window, an output bias), the MLP a
    `GatedFeedForward` with biases (GeGLU).

    Sublayers: `temporal_norm`, `temporal` (`GriffinTemporalBlock` or
    `MultiHeadAttention`), `channel_norm`, `mlp`.

    Args:
        kind: `"recurrent"` or `"attention"`.
        num_heads: the RG-LRU gates' blocks, or the attention's query heads.
        intermediate_dim: the MLP's gated width.
        width: the RG-LRU width (default d).
        conv_kernel: the RG-LRU block's convolution taps.
        num_key_value_heads: attention's key/value heads (default 1).
        head_dim: attention's head size (default d // num_heads).
        window: attention's sliding window (keys seen, itself included).
        rotary_fraction: the part of each head rotated (0.5).
        rope_base: the rotary base.
        norm_epsilon: the RMSNorms'.
        activation: the MLP's and the y branch's gate (`"gelu_tanh"`).
        kernel_initializer: of the projections.

    Call arguments: `inputs` (batch, time, d), `padding_mask` (default
    the Keras mask), `cache`/`cache_index` (the state contract: the
    temporal block's state or the attention's key/value cache),
    `step_weights` (unused; the one block signature).

    Examples:
        >>> import numpy as np, seqkeras
        >>> block = seqkeras.layers.GriffinBlock("attention", num_heads=2,
        ...                                      intermediate_dim=16, window=3)
        >>> x = np.random.default_rng(0).normal(size=(1, 5, 8)).astype("float32")
        >>> full = np.asarray(block(x))
        >>> cache, steps = block.init_cache(1, 5), []
        >>> for t in range(5):
        ...     y, cache = block(x[:, t : t + 1], cache=cache, cache_index=t)
        ...     steps.append(np.asarray(y))
        >>> bool(np.allclose(np.concatenate(steps, 1), full, atol=1e-5))
        True
    """

    def __init__(
        self,
        kind="recurrent",
        num_heads=1,
        intermediate_dim=None,
        width=None,
        conv_kernel=4,
        num_key_value_heads=1,
        head_dim=None,
        window=2048,
        rotary_fraction=0.5,
        rope_base=10000.0,
        norm_epsilon=1e-6,
        activation="gelu_tanh",
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "GriffinBlock"
        self.kind = validation.choice(name, "kind", kind, _KINDS)
        self.num_heads = validation.positive_int(name, "num_heads", num_heads)
        self.intermediate_dim = (
            None
            if intermediate_dim is None
            else validation.positive_int(name, "intermediate_dim", intermediate_dim)
        )
        self.width = None if width is None else validation.positive_int(name, "width", width)
        self.conv_kernel = validation.positive_int(name, "conv_kernel", conv_kernel)
        self.num_key_value_heads = key_value_heads(name, self.num_heads, num_key_value_heads)
        self.head_dim = (
            None if head_dim is None else validation.positive_int(name, "head_dim", head_dim)
        )
        self.window = validation.positive_int(name, "window", window)
        self.rotary_fraction = validation.greater_than(
            name, "rotary_fraction", rotary_fraction, 0.0
        )
        if self.rotary_fraction > 1.0:
            raise ValueError(
                f"`{name}` received an invalid value for `rotary_fraction`: expected a "
                f"number in (0, 1]. Received: rotary_fraction={rotary_fraction!r}"
            )
        self.rope_base = validation.greater_than(name, "rope_base", rope_base, 1.0)
        self.norm_epsilon = validation.greater_than(name, "norm_epsilon", norm_epsilon, 0.0)
        self.activation = validation.choice(name, "activation", activation, GATE_ACTIVATIONS)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def _initializer(self):
        return keras.initializers.get(keras.initializers.serialize(self.kernel_initializer))

    def build(self, input_shape):
        d = _check_rank3("GriffinBlock", input_shape)
        policy = self.dtype_policy
        self.temporal_norm = keras.layers.RMSNormalization(
            epsilon=self.norm_epsilon, dtype=policy, name="temporal_norm"
        )
        self.channel_norm = keras.layers.RMSNormalization(
            epsilon=self.norm_epsilon, dtype=policy, name="channel_norm"
        )
        for norm in (self.temporal_norm, self.channel_norm):
            norm.supports_masking = True
        if self.kind == "recurrent":
            self.temporal = GriffinTemporalBlock(
                self.width,
                self.num_heads,
                self.conv_kernel,
                self.activation,
                kernel_initializer=self._initializer(),
                dtype=policy,
                name="temporal",
            )
        else:
            head_dim = self.head_dim or d // self.num_heads
            rotary = max(2, 2 * int(head_dim * self.rotary_fraction / 2))
            self.temporal = MultiHeadAttention(
                self.num_heads,
                head_dim,
                num_key_value_heads=self.num_key_value_heads,
                use_bias=False,
                use_output_bias=True,
                output_dim=d,
                rotary_embedding=RotaryEmbedding(
                    self.rope_base,
                    "half",
                    rotary_dim=None if rotary == head_dim else rotary,
                    dtype=policy,
                    name="rotary_embedding",
                ),
                window=self.window,
                kernel_initializer=self._initializer(),
                dtype=policy,
                name="temporal",
            )
        self.mlp = GatedFeedForward(
            self.intermediate_dim or 3 * d,
            activation=self.activation,
            use_bias=True,
            kernel_initializer=self._initializer(),
            dtype=policy,
            name="mlp",
        )
        self.temporal_norm.build(input_shape)
        self.channel_norm.build(input_shape)
        self.temporal.build(input_shape)
        self.mlp.build(input_shape)

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The temporal part's state: the RG-LRU block's `(window, state)`,
        or the attention's key/value cache over `max_length` positions of
        `layout` (`seqkeras.layers.state`)."""
        state.check_built(self)
        if self.kind == "recurrent":
            return self.temporal.init_cache(batch_size)
        if max_length is None and layout != "growing":
            raise ValueError(
                "`GriffinBlock.init_cache` with kind='attention' needs `max_length` "
                "(the positions its key/value cache holds)"
            )
        return self.temporal.init_cache(batch_size, max_length, layout)

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
        name = "GriffinBlock"
        validation.numeric(name, "inputs", inputs)
        state.check_step(name, cache, cache_index)
        padding_mask = mask if padding_mask is None else padding_mask
        h = self.temporal_norm(inputs)
        new_cache = None
        if self.kind == "recurrent":
            if cache is None:
                h = self.temporal(h, padding_mask=padding_mask)
            else:
                h, new_cache = self.temporal(h, cache=cache, cache_index=cache_index)
        else:
            keys = None if padding_mask is None else ops.cast(padding_mask, "bool")
            if cache is None:
                h = self.temporal(h, value_mask=keys, use_causal_mask=True, training=training)
            else:
                h, new_cache = self.temporal(
                    h, value_mask=keys, cache=cache, cache_index=cache_index, training=training
                )
        x = inputs + h
        x = x + self.mlp(self.channel_norm(x))
        return x if cache is None else (x, new_cache)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        out = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if cache is not None:
            return out, keras.tree.map_structure(
                lambda c: keras.KerasTensor(c.shape, dtype=c.dtype), cache
            )
        return out

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "kind": self.kind,
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "width": self.width,
                "conv_kernel": self.conv_kernel,
                "num_key_value_heads": self.num_key_value_heads,
                "head_dim": self.head_dim,
                "window": self.window,
                "rotary_fraction": self.rotary_fraction,
                "rope_base": self.rope_base,
                "norm_epsilon": self.norm_epsilon,
                "activation": self.activation,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
