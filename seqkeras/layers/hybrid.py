"""`MixerBlock`: the pre-norm residual block around a matrix-memory token
mixer (gated DeltaNet, mLSTM, sLSTM), the block of Qwen3-Next's linear
layers and of xLSTM:

    h   = x + Mixer(Norm(x))
    out = h + GatedFFN(Norm(h))        (omitted with intermediate_dim=0)

Its decoding state is the mixer's (`seqkeras.layers.state`): a fixed-size
value (a convolution window and the memories), so a block mixes with
attention blocks in one model (`seqkeras.models.hybrid_language_model`).
"""

import keras

from seqkeras.layers import validation
from seqkeras.layers.delta import GatedDeltaNet
from seqkeras.layers.feedforward import GATE_ACTIVATIONS
from seqkeras.layers.feedforward import GatedFeedForward
from seqkeras.layers.xlstm import MLSTMLayer
from seqkeras.layers.xlstm import SLSTMLayer

_MIXERS = {"deltanet": GatedDeltaNet, "mlstm": MLSTMLayer, "slstm": SLSTMLayer}


@keras.saving.register_keras_serializable(package="seqkeras")
class MixerBlock(keras.layers.Layer):
    """A pre-norm residual block around a `GatedDeltaNet`, `MLSTMLayer` or
    `SLSTMLayer` and a gated feed-forward (see the module docstring).

    Sublayers: `mixer_norm` and `ffn_norm` (`keras.layers.RMSNormalization`,
    or `keras.layers.LayerNormalization` without a bias for
    `norm="layer"`), `mixer`, `ffn` (`GatedFeedForward`, or None).

    Args:
        kind: `"deltanet"`, `"mlstm"` or `"slstm"`.
        intermediate_dim: the feed-forward's gated width (0: no
            feed-forward).
        activation: the feed-forward gate's (`"silu"`: SwiGLU).
        norm: `"rms"` (RMSNorm: Qwen3-Next, xLSTM-7B) or `"layer"`
            (LayerNorm: the `xlstm` package's sLSTM block).
        norm_epsilon: the two norms'.
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
        if self.intermediate_dim:
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
                **self.mixer_kwargs,
            }
        )
        return config
