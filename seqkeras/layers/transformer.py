"""`TransformerEncoderBlock` and `TransformerDecoderBlock`."""

import math

import keras
from keras import ops

from seqkeras.layers import validation
from seqkeras.layers.attention import MultiHeadAttention

_PACKAGE = "seqkeras"

#: Feed-forward activations: `"gelu"` is the exact (erf) GELU of BERT;
#: `"gelu_tanh"` its tanh approximation (GPT-2's `gelu_new`, keras-hub's
#: BERT and GPT-2).
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


@keras.saving.register_keras_serializable(package=_PACKAGE)
def gelu_tanh(x):
    """The tanh approximation of GELU (GPT-2's `gelu_new`)."""
    return keras.activations.gelu(x, approximate=True)


def _activation(name):
    return gelu_tanh if name == "gelu_tanh" else name


class _TransformerBlock(keras.layers.Layer):
    """Shared arguments, sublayer construction and the residual sublayer
    wrapper of the encoder and decoder blocks."""

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        key_dim=None,
        dropout=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = type(self).__name__
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.num_heads = validation.positive_int(name, "num_heads", num_heads)
        self.intermediate_dim = validation.positive_int(name, "intermediate_dim", intermediate_dim)
        self.key_dim = (
            None if key_dim is None else validation.positive_int(name, "key_dim", key_dim)
        )
        self.dropout = validation.rate(name, "dropout", dropout)
        self.activation = validation.choice(name, "activation", activation, ACTIVATIONS)
        self.norm_first = validation.boolean(name, "norm_first", norm_first)
        self.layer_norm_epsilon = validation.greater_than(
            name, "layer_norm_epsilon", layer_norm_epsilon, 0.0
        )
        if not math.isfinite(self.layer_norm_epsilon):
            raise ValueError(
                f"`{name}` received an invalid value for "
                "`layer_norm_epsilon`: expected a finite number > 0. "
                f"Received: layer_norm_epsilon={layer_norm_epsilon!r}"
            )
        self.supports_masking = True

    def _check_input(self, arg, shape):
        if len(shape) != 3 or shape[-1] is None:
            raise ValueError(
                f"`{type(self).__name__}` expects `{arg}` of rank 3 with "
                f"known features, (batch, time, d). Received: "
                f"{arg}.shape={tuple(shape)}"
            )
        d = shape[-1]
        key_dim = self.key_dim or d // self.num_heads
        if key_dim == 0:
            raise ValueError(
                f"`{type(self).__name__}` needs d >= num_heads. Received: "
                f"d={d}, num_heads={self.num_heads}"
            )
        return d, key_dim

    def _check_call(self, arg, x):
        """Numeric input of the built feature size."""
        validation.numeric(type(self).__name__, arg, x)
        built = getattr(self, "_built_features", None)
        validation.features(type(self).__name__, arg, x, built)

    def _attention(self, name, key_dim):
        return MultiHeadAttention(
            self.num_heads,
            key_dim,
            dropout=self.dropout,
            kernel_initializer=self._initializer("kernel"),
            bias_initializer=self._initializer("bias"),
            dtype=self.dtype_policy,
            name=name,
        )

    def _initializer(self, which):
        """A copy of the block's initializer for one sublayer (each Keras
        layer owns its initializer objects)."""
        init = getattr(self, f"{which}_initializer")
        return keras.initializers.get(keras.initializers.serialize(init))

    def _norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def _build_feedforward(self, d):
        self.feedforward_intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            activation=_activation(self.activation),
            kernel_initializer=self._initializer("kernel"),
            bias_initializer=self._initializer("bias"),
            dtype=self.dtype_policy,
            name="feedforward_intermediate_dense",
        )
        self.feedforward_output_dense = keras.layers.Dense(
            d,
            kernel_initializer=self._initializer("kernel"),
            bias_initializer=self._initializer("bias"),
            dtype=self.dtype_policy,
            name="feedforward_output_dense",
        )
        self.feedforward_layer_norm = self._norm("feedforward_layer_norm")
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="dropout"
        )
        self.feedforward_intermediate_dense.build((None, None, d))
        self.feedforward_output_dense.build((None, None, self.intermediate_dim))
        self.feedforward_layer_norm.build((None, None, d))

    def _residual(self, x, norm, sublayer, training):
        """Post-LN: LN(x + sublayer(x)); pre-LN: x + sublayer(LN(x))."""
        if self.norm_first:
            return x + self.dropout_layer(sublayer(norm(x)), training=training)
        return norm(x + self.dropout_layer(sublayer(x), training=training))

    def _feedforward(self, x, training):
        def ffn(h):
            if len(h.shape) == 3 and h.shape[1] == 1:
                # one position (a decoding step): 2-D products (a Dense on
                # (batch, 1, d) is a tensordot of about ten graph ops)
                flat = ops.reshape(h, (-1, h.shape[-1]))
                y = self.feedforward_output_dense(self.feedforward_intermediate_dense(flat))
                return ops.reshape(y, (-1, 1, y.shape[-1]))
            return self.feedforward_output_dense(self.feedforward_intermediate_dense(h))

        return self._residual(x, self.feedforward_layer_norm, ffn, training)

    def compute_output_shape(self, input_shape, *args, **kwargs):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "key_dim": self.key_dim,
                "dropout": self.dropout,
                "activation": self.activation,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


def _key_mask(padding_mask):
    return None if padding_mask is None else ops.cast(padding_mask, "bool")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerEncoderBlock(_TransformerBlock):
    """Transformer encoder block (Vaswani et al. 2017; seed notes).

    `Z1 = LN(X + MHA(X, X, X))`, `Z2 = LN(Z1 + FFN(Z1))` with
    `FFN(x) = act(x W1 + b1) W2 + b2`; with `norm_first=True` the pre-LN
    form `Z1 = X + MHA(LN(X))`, `Z2 = Z1 + FFN(LN(Z1))`. Dropout follows
    the attention weights and each sublayer. Sublayer names and weight
    shapes match `keras_hub.layers.TransformerEncoder`.

    Args:
        num_heads: positive int.
        intermediate_dim: positive int, FFN hidden size.
        key_dim: per-head size (default d // num_heads).
        dropout: rate in [0, 1).
        activation: `"relu"`, `"gelu"` (exact, erf) or `"gelu_tanh"`
            (its tanh approximation, GPT-2's).
        norm_first: pre-LN instead of the seed notes' post-LN.
        layer_norm_epsilon: LayerNorm epsilon.
        kernel_initializer, bias_initializer: of the attention projections
            and the feed-forward layers.

    Call arguments:
        inputs: (batch, time, d).
        padding_mask: optional bool (batch, time); padded positions are
            never attended to (defaults to the input's Keras mask, which is
            propagated).
        attention_mask: optional bool (batch, time, time).
        use_causal_mask: causal self-attention (e.g. for a decoder-only
            model built from encoder blocks).
        training: enables dropout.

    Examples:
        >>> import numpy as np, seqkeras
        >>> block = seqkeras.layers.TransformerEncoderBlock(2, 16)
        >>> tuple(block(np.ones((2, 5, 8), "float32")).shape)
        (2, 5, 8)
    """

    def build(self, input_shape):
        d, key_dim = self._check_input("inputs", input_shape)
        self._built_features = d
        self.self_attention_layer = self._attention("self_attention_layer", key_dim)
        self.self_attention_layer.build(input_shape)
        self.self_attention_layer_norm = self._norm("self_attention_layer_norm")
        self.self_attention_layer_norm.build(input_shape)
        self._build_feedforward(d)

    def __call__(self, *args, **kwargs):
        # strings refused before Keras converts the arguments to backend
        # tensors (on JAX that conversion fails first, with a bare error)
        validation.numeric_arguments(type(self).__name__, ("inputs",), args, kwargs)
        return super().__call__(*args, **kwargs)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        training=None,
        mask=None,
    ):
        name = "TransformerEncoderBlock"
        self._check_call("inputs", inputs)
        shape = validation.static_shape(inputs)
        validation.same_dims(name, "padding_mask", padding_mask, shape[:2], "(batch, time)")
        validation.same_dims(
            name,
            "attention_mask",
            attention_mask,
            (shape[0], shape[1], shape[1]),
            "(batch, time, time)",
        )
        mask = _key_mask(mask if padding_mask is None else padding_mask)

        def attend(h):
            return self.self_attention_layer(
                h,
                value_mask=mask,
                attention_mask=attention_mask,
                use_causal_mask=use_causal_mask,
                training=training,
            )

        x = self._residual(inputs, self.self_attention_layer_norm, attend, training)
        return self._feedforward(x, training)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerDecoderBlock(_TransformerBlock):
    """Transformer decoder block, with an incremental decoding path.

    `Z1 = LN(Y + MaskedMHA(Y))`, `Z2 = LN(Z1 + MHA(Z1, H, H))` (keys and
    values from the encoder outputs H; skipped when no encoder sequence is
    given, for decoder-only models), `Z3 = LN(Z2 + FFN(Z2))`; pre-LN with
    `norm_first=True`. Sublayer names and weight shapes match
    `keras_hub.layers.TransformerDecoder`.

    Args: as `TransformerEncoderBlock`.

    Call arguments:
        decoder_sequence: (batch, Tq, d).
        encoder_sequence: optional (batch, Tk, d_enc); give it at the first
            call (build) to have cross-attention.
        decoder_padding_mask: optional bool (batch, Tq) (defaults to the
            decoder sequence's Keras mask); encoder_padding_mask: optional
            bool (batch, Tk).
        use_causal_mask: causal self-attention (default True).
        cache, cache_index: a decoding step (the state contract of every
            decoder block, `seqkeras.layers.state`): the self-attention
            cache from `init_cache` and the position of the first query
            (one position, or a prompt's several at once); the call returns
            `(output, new_cache)` and equals the full causal pass.
            (`self_attention_cache` and `self_attention_cache_index` are
            their old names, deprecated.)
        cross_attention_cache: optional encoder keys and values from
            `compute_cross_attention_cache(encoder_sequence)`, so a decoding
            step does not project the encoder outputs again; it may have
            fewer rows than `decoder_sequence` (a divisor: consecutive rows,
            the beams of a source, share one).
        step_weights: optional, with `cache`: `prepare_step_weights()`,
            made once per decoding request (fused attention projections).
        training: enables dropout.

    Examples:
        >>> import numpy as np, seqkeras
        >>> block = seqkeras.layers.TransformerDecoderBlock(2, 16)
        >>> y, h = np.ones((2, 4, 8), "float32"), np.ones((2, 6, 8), "float32")
        >>> tuple(block(y, h).shape)
        (2, 4, 8)
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        d, key_dim = self._check_input("decoder_sequence", decoder_sequence_shape)
        self._built_features = d
        self.self_attention = self._attention("self_attention", key_dim)
        self.self_attention.build(decoder_sequence_shape)
        self.self_attention_layer_norm = self._norm("self_attention_layer_norm")
        self.self_attention_layer_norm.build(decoder_sequence_shape)
        self.has_cross_attention = encoder_sequence_shape is not None
        if self.has_cross_attention:
            self._check_input("encoder_sequence", encoder_sequence_shape)
            self.cross_attention = self._attention("cross_attention", key_dim)
            self.cross_attention.build(decoder_sequence_shape, encoder_sequence_shape)
            self.cross_attention_layer_norm = self._norm("cross_attention_layer_norm")
            self.cross_attention_layer_norm.build(decoder_sequence_shape)
        self._build_feedforward(d)

    def init_cache(self, batch_size, max_length, layout="fixed"):
        """An empty self-attention cache of `layout` for incremental
        decoding (`MultiHeadAttention.init_cache`)."""
        return self.self_attention.init_cache(batch_size, max_length, layout)

    def prepare_step_weights(self):
        """The step weights of the block's attention layers,
        `{"self_attention": ..., "cross_attention": ...}` (pass them as
        `step_weights`)."""
        found = {"self_attention": self.self_attention.prepare_step_weights()}
        if self.has_cross_attention:
            found["cross_attention"] = self.cross_attention.prepare_step_weights()
        return found

    def compute_cross_attention_cache(self, encoder_sequence):
        """The cross-attention keys and values, projected once per decoded
        sequence; pass as `cross_attention_cache`."""
        return self.cross_attention.compute_cache(encoder_sequence)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        use_causal_mask=True,
        cache=None,
        cache_index=None,
        cross_attention_cache=None,
        step_weights=None,
        training=None,
        mask=None,
        decoder_sequence_mask=None,
        encoder_sequence_mask=None,
        self_attention_cache=None,
        self_attention_cache_index=None,
    ):
        cache, cache_index = _renamed_cache_arguments(
            cache, cache_index, self_attention_cache, self_attention_cache_index
        )
        # Keras fills `mask` (one tensor argument) or `*_sequence_mask` (two)
        # from the inputs' Keras masks.
        if decoder_padding_mask is None:
            decoder_padding_mask = mask if decoder_sequence_mask is None else decoder_sequence_mask
        if encoder_padding_mask is None:
            encoder_padding_mask = encoder_sequence_mask
        if (encoder_sequence is not None) != self.has_cross_attention:
            raise ValueError(
                "`TransformerDecoderBlock` was built "
                + ("with" if self.has_cross_attention else "without")
                + " cross-attention; call it "
                + ("with" if self.has_cross_attention else "without")
                + " `encoder_sequence`."
            )
        name = "TransformerDecoderBlock"
        self._check_call("decoder_sequence", decoder_sequence)
        shape = validation.static_shape(decoder_sequence)
        validation.same_dims(
            name, "decoder_padding_mask", decoder_padding_mask, shape[:2], "(batch, time)"
        )
        if encoder_sequence is not None:
            validation.numeric(name, "encoder_sequence", encoder_sequence)
            source = validation.static_shape(encoder_sequence)
            validation.same_dims(
                name,
                "encoder_padding_mask",
                encoder_padding_mask,
                source[:2],
                "(batch, encoder_time)",
            )
        caching = cache is not None
        if caching and cache_index is None:
            raise ValueError(f"`{name}` received a `cache` without a `cache_index`")
        if cache_index is not None and not caching:
            raise ValueError(f"`{name}` received a `cache_index` without a `cache`")
        weights = step_weights or {}
        new_cache = None

        def self_attend(h):
            nonlocal new_cache
            if caching:
                out, new_cache = self.self_attention(
                    h,
                    value_mask=_key_mask(decoder_padding_mask),
                    cache=cache,
                    cache_index=cache_index,
                    step_weights=weights.get("self_attention"),
                    training=training,
                )
                return out
            return self.self_attention(
                h,
                value_mask=_key_mask(decoder_padding_mask),
                use_causal_mask=use_causal_mask,
                training=training,
            )

        x = self._residual(decoder_sequence, self.self_attention_layer_norm, self_attend, training)
        if self.has_cross_attention:

            def cross_attend(h):
                out = self.cross_attention(
                    h,
                    encoder_sequence,
                    value_mask=_key_mask(encoder_padding_mask),
                    cache=cross_attention_cache,
                    step_weights=weights.get("cross_attention")
                    if cross_attention_cache is not None
                    else None,
                    training=training,
                )
                return out if cross_attention_cache is None else out[0]

            x = self._residual(x, self.cross_attention_layer_norm, cross_attend, training)
        x = self._feedforward(x, training)
        return (x, new_cache) if caching else x

    def compute_output_spec(
        self, decoder_sequence, *args, cache=None, self_attention_cache=None, **kwargs
    ):
        out = keras.KerasTensor(decoder_sequence.shape, dtype=self.compute_dtype)
        cache = self_attention_cache if cache is None else cache
        if cache is not None:
            return out, tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache)
        return out


def _renamed_cache_arguments(cache, cache_index, old_cache, old_index):
    """`(cache, cache_index)` from the block's arguments, taking the old
    names (`self_attention_cache`, `self_attention_cache_index`) with a
    DeprecationWarning."""
    where, unset = "TransformerDecoderBlock", validation.UNSET

    def given(x):
        return unset if x is None else x

    cache = validation.renamed(
        where, "cache", given(cache), "self_attention_cache", given(old_cache), None, 5
    )
    cache_index = validation.renamed(
        where,
        "cache_index",
        given(cache_index),
        "self_attention_cache_index",
        given(old_index),
        None,
        5,
    )
    return cache, cache_index
