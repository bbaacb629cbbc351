"""`MixerBlock`: the pre-norm residual block around a token mixer with a
fixed-size state (gated DeltaNet, mLSTM, sLSTM, LFM2's gated short
convolution `ShortConvolution`), the block of Qwen3-Next's linear layers,
of xLSTM and of LFM2's convolution layers:

    h   = x + Mixer(Norm(x))
    out = h + GatedFFN(Norm(h))        (omitted with intermediate_dim=0)

Its decoding state is the mixer's (`seqkeras.layers.state`): a fixed-size
value (a convolution window and the memories), so a block mixes with
attention blocks in one model (`seqkeras.models.hybrid_language_model`).
"""

import math

import keras
from keras import ops

from seqkeras.layers import state
from seqkeras.layers import validation
from seqkeras.layers.delta import GatedDeltaNet
from seqkeras.layers.feedforward import GATE_ACTIVATIONS
from seqkeras.layers.feedforward import GatedFeedForward
from seqkeras.layers.feedforward import expert_feedforward
from seqkeras.layers.xlstm import MLSTMLayer
from seqkeras.layers.scan import causal_conv
from seqkeras.layers.xlstm import SLSTMLayer


@keras.saving.register_keras_serializable(package="seqkeras")
class ShortConvolution(keras.layers.Layer):
    """LFM2's gated short convolution (`transformers`' `Lfm2ShortConv`):

        b, c, x = split(x W_in, 3)
        out     = (c * causal_conv(b * x)) W_out      (depthwise, K taps)

    A fixed-size state: the convolution's last K - 1 inputs.

    Variables: `in_kernel` (d, 3 d) (b, c, x columns), `conv_kernel` (K,
    d), `out_kernel` (d, d), and their biases with `use_bias`.

    Args:
        conv_kernel: K (LFM2's `conv_L_cache`, 3).
        use_bias: biases on the projections and the convolution.
        kernel_initializer: of the projections.

    Call arguments:
        inputs: (batch, time, d).
        padding_mask: optional bool (batch, time) (default the Keras mask):
            a padded step's input is zero.
        cache, cache_index: a decoding step (`seqkeras.layers.state`):
            `cache` the (batch, K - 1, d) window from `init_cache` ->
            `(outputs, cache)`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.ShortConvolution(conv_kernel=3)
        >>> x = np.random.default_rng(0).normal(size=(1, 5, 8)).astype("float32")
        >>> full = np.asarray(layer(x))
        >>> y1, cache = layer(x[:, :3], cache=layer.init_cache(1), cache_index=0)
        >>> y2, cache = layer(x[:, 3:], cache=cache, cache_index=3)
        >>> bool(np.allclose(np.concatenate([y1, y2], 1), full, atol=1e-5))
        True
    """

    def __init__(
        self, conv_kernel=3, use_bias=False, kernel_initializer="glorot_uniform", **kwargs
    ):
        super().__init__(**kwargs)
        self.conv_kernel = validation.positive_int("ShortConvolution", "conv_kernel", conv_kernel)
        self.use_bias = validation.boolean("ShortConvolution", "use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        d = state.check_features(self, input_shape)
        self.units = d

        def weight(name, shape, initializer=None):
            initializer = initializer or keras.initializers.get(
                keras.initializers.serialize(self.kernel_initializer)
            )
            return self.add_weight(shape=shape, initializer=initializer, name=name)

        def bias(name, shape):
            return weight(name, shape, "zeros") if self.use_bias else None

        self.in_kernel, self.in_bias = weight("in_kernel", (d, 3 * d)), bias("in_bias", (3 * d,))
        bound = 1.0 / math.sqrt(self.conv_kernel)
        self.conv_kernel_weights = weight(
            "conv_kernel", (self.conv_kernel, d), keras.initializers.RandomUniform(-bound, bound)
        )
        self.conv_bias = bias("conv_bias", (d,))
        self.out_kernel, self.out_bias = weight("out_kernel", (d, d)), bias("out_bias", (d,))

    def init_cache(self, batch_size, max_length=None, layout="fixed"):
        """The state before the first step: a zero (batch, K - 1, d) window."""
        state.check_built(self)
        return ops.zeros((batch_size, self.conv_kernel - 1, self.units), self.compute_dtype)

    def call(self, inputs, padding_mask=None, cache=None, cache_index=None, mask=None):
        validation.numeric("ShortConvolution", "inputs", inputs)
        state.check_step("ShortConvolution", cache, cache_index)
        keep = state.kept_steps(
            "ShortConvolution", inputs, mask if padding_mask is None else padding_mask
        )
        dtype = self.compute_dtype
        x = ops.cast(inputs, dtype)
        if keep is not None:
            x = x * ops.cast(keep, dtype)
        bcx = ops.matmul(x, ops.cast(self.in_kernel, dtype))
        if self.in_bias is not None:
            bcx = bcx + ops.cast(self.in_bias, dtype)
        b, c, h = ops.split(bcx, 3, axis=-1)
        y, window = causal_conv(b * h, self.conv_kernel_weights, self.conv_bias, cache)
        out = ops.matmul(c * y, ops.cast(self.out_kernel, dtype))
        if self.out_bias is not None:
            out = out + ops.cast(self.out_bias, dtype)
        return out if cache is None else (out, window)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        return state.output_spec(self, inputs, cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "conv_kernel": self.conv_kernel,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


_MIXERS = {
    "deltanet": GatedDeltaNet,
    "mlstm": MLSTMLayer,
    "slstm": SLSTMLayer,
    "shortconv": ShortConvolution,
}


@keras.saving.register_keras_serializable(package="seqkeras")
class MixerBlock(keras.layers.Layer):
    """A pre-norm residual block around a `GatedDeltaNet`, `MLSTMLayer` or
    `SLSTMLayer` and a gated feed-forward (see the module docstring).

    Sublayers: `mixer_norm` and `ffn_norm` (`keras.layers.RMSNormalization`,
    or `keras.layers.LayerNormalization` without a bias for
    `norm="layer"`), `mixer`, `ffn` (`GatedFeedForward`, or None).

    Args:
        kind: `"deltanet"`, `"mlstm"`, `"slstm"` or `"shortconv"` (LFM2's
            `ShortConvolution`).
        intermediate_dim: the feed-forward's gated width (0: no
            feed-forward).
        activation: the feed-forward gate's (`"silu"`: SwiGLU).
        norm: `"rms"` (RMSNorm: Qwen3-Next, xLSTM-7B) or `"layer"`
            (LayerNorm: the `xlstm` package's sLSTM block).
        norm_epsilon: the two norms'.
        experts: a dict of `MixtureOfExperts` arguments (`num_experts`,
            `top_k`, `intermediate_dim`, ...): a mixture of experts as the
            feed-forward (Qwen3-Next's sparse MLP) instead of
            `intermediate_dim`'s.
        **mixer_kwargs: the mixer's arguments (`num_key_heads`,
            `num_heads`, ...), besides the Layer's own (`name`, `dtype`).

    Call arguments: the mixer's (`padding_mask`, `cache`, `cache_index`);
    `step_weights` is accepted and unused (the one block signature).

    Examples:
        >>> import numpy as np, seqkeras
        >>> block = seqkeras.layers.MixerBlock(
        ...     "deltanet", intermediate_dim=32, num_key_heads=2, key_head_dim=4)
        >>> x = np.ones((2, 5, 8), "float32")
        >>> tuple(block(x).shape)
        (2, 5, 8)
        >>> out, state = block(x[:, :1], cache=block.init_cache(2), cache_index=0)
        >>> type(state).__name__
        'DeltaNetState'
    """

    _LAYER_ARGS = ("name", "dtype", "trainable", "autocast")

    def __init__(
        self,
        kind,
        intermediate_dim=0,
        activation="silu",
        norm="rms",
        norm_epsilon=1e-6,
        experts=None,
        **kwargs,
    ):
        layer_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in self._LAYER_ARGS}
        super().__init__(**layer_kwargs)
        name = "MixerBlock"
        self.kind = validation.choice(name, "kind", kind, tuple(_MIXERS))
        self.intermediate_dim = validation.non_negative_int(
            name, "intermediate_dim", intermediate_dim
        )
        self.activation = validation.choice(name, "activation", activation, GATE_ACTIVATIONS)
        self.norm = validation.choice(name, "norm", norm, ("rms", "layer"))
        self.norm_epsilon = validation.greater_than(name, "norm_epsilon", norm_epsilon, 0.0)
        self.mixer_kwargs = dict(kwargs)
        self.mixer_norm = self._norm("mixer_norm")
        self.mixer = _MIXERS[kind](dtype=self.dtype_policy, name="mixer", **kwargs)
        self.ffn_norm = self.ffn = None
        self.experts = None if experts is None else dict(experts)
        if experts is not None:
            self.ffn_norm = self._norm("ffn_norm")
            self.ffn = expert_feedforward(
                name,
                self.experts,
                self.activation,
                kwargs.get("kernel_initializer", "glorot_uniform"),
                self.dtype_policy,
                "ffn",
            )
        elif self.intermediate_dim:
            self.ffn_norm = self._norm("ffn_norm")
            self.ffn = GatedFeedForward(
                self.intermediate_dim,
                activation=self.activation,
                kernel_initializer=kwargs.get("kernel_initializer", "glorot_uniform"),
                dtype=self.dtype_policy,
                name="ffn",
            )
        self.supports_masking = True

    def _norm(self, name):
        if self.norm == "rms":
            layer = keras.layers.RMSNormalization(
                epsilon=self.norm_epsilon, dtype=self.dtype_policy, name=name
            )
        else:
            layer = keras.layers.LayerNormalization(
                epsilon=self.norm_epsilon, center=False, dtype=self.dtype_policy, name=name
            )
        layer.supports_masking = True
        return layer

    def build(self, input_shape):
        self.mixer_norm.build(input_shape)
        self.mixer.build(input_shape)
        if self.ffn is not None:
            self.ffn_norm.build(input_shape)
            self.ffn.build(input_shape)

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
            self.mixer_norm(inputs),
            padding_mask=padding_mask,
            cache=cache,
            cache_index=cache_index,
        )
        if cache is not None:
            h, cache = h
        x = inputs + h
        if self.ffn is not None:
            x = x + self.ffn(self.ffn_norm(x))
        return x if cache is None else (x, cache)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        return self.mixer.compute_output_spec(inputs, cache=cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "kind": self.kind,
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "norm": self.norm,
                "norm_epsilon": self.norm_epsilon,
                "experts": self.experts,
                **self.mixer_kwargs,
            }
        )
        return config
