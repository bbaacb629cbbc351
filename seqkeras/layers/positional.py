"""Positional encodings: `SinusoidalPositionalEncoding`, `PositionalEmbedding`."""

import keras
from keras import ops

from seqkeras.layers import validation

_PACKAGE = "seqkeras"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SinusoidalPositionalEncoding(keras.layers.Layer):
    """Adds the seed notes' sinusoidal position code to its input.

    `PE(pos, 2i) = sin(pos / 10000^(2i/d))`,
    `PE(pos, 2i+1) = cos(pos / 10000^(2i/d))` (Vaswani et al. 2017), computed
    from the positions on every call, so any length works (no table runs
    out). Positions start at `start_index` (e.g. the decoding step).

    Args:
        max_wavelength: the 10000 of the formula.
        scale_inputs: multiply the input by sqrt(d) before adding (as the
            Transformer does with its embeddings).

    Call arguments:
        inputs: (batch, time, d), d even or odd.
        start_index: int scalar (or tensor), position of the first step.

    The input mask, if any, is propagated.

    Examples:
        >>> import numpy as np, seqkeras
        >>> pe = seqkeras.layers.SinusoidalPositionalEncoding()
        >>> out = pe(np.zeros((1, 3, 4), "float32"))
        >>> np.round(np.asarray(out, "float64")[0, 1], 3).tolist()
        [0.841, 0.54, 0.01, 1.0]
    """

    def __init__(self, max_wavelength=10000.0, scale_inputs=False, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = validation.greater_than(
            "SinusoidalPositionalEncoding", "max_wavelength", max_wavelength, 1
        )
        self.scale_inputs = validation.boolean(
            "SinusoidalPositionalEncoding", "scale_inputs", scale_inputs
        )
        self.supports_masking = True

    def encoding(self, length, depth, start_index=0):
        """The (length, depth) code for positions start_index, ...; float32."""
        pos = ops.cast(ops.arange(length) + start_index, "float32")
        i = ops.arange(depth)
        two_i = ops.cast(i - i % 2, "float32")  # 2i for both sin and cos
        rates = ops.power(self.max_wavelength, -two_i / float(depth))
        angles = ops.expand_dims(pos, 1) * ops.expand_dims(rates, 0)
        return ops.where(ops.expand_dims(i % 2 == 0, 0), ops.sin(angles), ops.cos(angles))

    def call(self, inputs, start_index=0):
        name = "SinusoidalPositionalEncoding"
        start_index = validation.position(name, "start_index", start_index)
        if len(inputs.shape) != 3:
            raise ValueError(
                "`SinusoidalPositionalEncoding` expects inputs of rank 3, "
                f"(batch, time, d). Received: shape={tuple(inputs.shape)}"
            )
        depth = inputs.shape[-1]
        code = self.encoding(ops.shape(inputs)[1], depth, start_index)
        x = inputs
        if self.scale_inputs:
            x = x * ops.cast(ops.sqrt(float(depth)), x.dtype)
        return x + ops.cast(code, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength, "scale_inputs": self.scale_inputs})
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class PositionalEmbedding(keras.layers.Layer):
    """Adds a learned embedding of each position to its input.

    Args:
        max_length: positive int, the number of positions learned; longer
            inputs (or `start_index + time > max_length`) raise a
            `ValueError` where the length is known while tracing; at run
            time, positions past the end are clipped to the last one.
        initializer: embeddings initializer.

    Call arguments:
        inputs: (batch, time, d).
        start_index: int scalar, position of the first step.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.PositionalEmbedding(max_length=16)
        >>> tuple(layer(np.zeros((2, 5, 8), "float32")).shape)
        (2, 5, 8)
    """

    def __init__(self, max_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.max_length = validation.positive_int("PositionalEmbedding", "max_length", max_length)
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(
                "`PositionalEmbedding` expects inputs of rank 3, "
                f"(batch, time, d). Received: shape={tuple(input_shape)}"
            )
        self.embeddings = self.add_weight(
            shape=(self.max_length, input_shape[-1]),
            name="embeddings",
            initializer=self.initializer,
        )

    def call(self, inputs, start_index=0):
        start_index = validation.position("PositionalEmbedding", "start_index", start_index)
        length = inputs.shape[1]
        if (
            length is not None
            and isinstance(start_index, int)
            and start_index + length > self.max_length
        ):
            raise ValueError(
                f"`PositionalEmbedding` has {self.max_length} positions "
                f"(`max_length`); received a sequence covering positions "
                f"{start_index}..{start_index + length - 1}."
            )
        positions = ops.arange(ops.shape(inputs)[1]) + start_index
        positions = ops.minimum(positions, self.max_length - 1)
        code = ops.take(self.embeddings, positions, axis=0)
        return inputs + ops.cast(code, inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
