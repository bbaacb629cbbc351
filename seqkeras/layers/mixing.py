"""ELMo's layers: `ScalarMix` (a learned, softmax-normalised mix of a
network's layers) and `ReverseSequence` (each row's unpadded steps in
reverse, for a backward language model over right-padded batches)."""

import keras
import numpy as np
from keras import ops

from seqkeras.layers import validation

_PACKAGE = "seqkeras"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ScalarMix(keras.layers.Layer):
    """A task-specific mix of K layers (Peters et al. 2018, eq. 1):
    `gamma * sum_k softmax(w)_k h_k`, with `w` initialised to 0 (an equal
    mix) and `gamma` to 1.

    With `layer_norm=True` each layer is first normalised by the mean and
    variance of all its unmasked elements in the batch (one mean and one
    variance per layer, over batch, time and features), as in AllenNLP's
    `ScalarMix(do_layer_norm=True)`.

    Args:
        num_layers: K, positive int.
        layer_norm: normalise each layer before mixing.
        trainable_weights_init: the initial `w` (K floats; default zeros).

    Call arguments:
        inputs: a list of K tensors of one shape (batch, time, features).
        mask: optional bool (batch, time) (a list of them is accepted:
            the first is used); needed for `layer_norm` over padded
            batches, and passed on.

    Examples:
        >>> import numpy as np, seqkeras
        >>> mix = seqkeras.layers.ScalarMix(2)
        >>> a, b = np.ones((1, 2, 3), "float32"), np.zeros((1, 2, 3), "float32")
        >>> np.asarray(mix([a, b])).tolist()
        [[[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]]
    """

    def __init__(self, num_layers, layer_norm=False, trainable_weights_init=None, **kwargs):
        super().__init__(**kwargs)
        name = "ScalarMix"
        self.num_layers = validation.positive_int(name, "num_layers", num_layers)
        self.layer_norm = bool(layer_norm)
        if trainable_weights_init is not None:
            try:
                values = [float(v) for v in trainable_weights_init]
            except (TypeError, ValueError):
                raise TypeError(
                    f"`ScalarMix` received an invalid value for `trainable_weights_init`: "
                    f"expected {self.num_layers} floats (`num_layers`). "
                    f"Received: trainable_weights_init={trainable_weights_init!r}"
                ) from None
            if len(values) != self.num_layers:
                raise ValueError(
                    f"`ScalarMix` received an invalid value for `trainable_weights_init`: "
                    f"expected {self.num_layers} floats (`num_layers`). "
                    f"Received: {len(values)} values"
                )
            trainable_weights_init = values
        self.trainable_weights_init = trainable_weights_init
        self.supports_masking = True

    def _check(self, shapes):
        if not isinstance(shapes, (list, tuple)) or len(shapes) != self.num_layers:
            count = len(shapes) if isinstance(shapes, (list, tuple)) else type(shapes).__name__
            raise ValueError(
                f"`ScalarMix` expects `inputs`, a list of {self.num_layers} tensors "
                f"(`num_layers`). Received: {count}"
            )
        first = tuple(shapes[0])
        for k, shape in enumerate(shapes):
            if len(shape) != len(first) or any(
                a is not None and b is not None and a != b for a, b in zip(shape, first)
            ):
                raise ValueError(
                    "`ScalarMix` expects tensors of one shape. Received: "
                    f"inputs[0].shape={first}, inputs[{k}].shape={tuple(shape)}"
                )

    def build(self, input_shape):
        self._check(input_shape)
        init = self.trainable_weights_init
        self.scalar_weights = self.add_weight(
            shape=(self.num_layers,),
            name="scalar_weights",
            initializer="zeros" if init is None else keras.initializers.Constant(init),
        )
        self.gamma = self.add_weight(shape=(), name="gamma", initializer="ones")

    def _normalize(self, x, mask):
        if mask is None:
            mean = ops.mean(x)
            variance = ops.mean(ops.square(x - mean))
            return (x - mean) / ops.sqrt(variance + 1e-12)
        weights = ops.cast(ops.expand_dims(mask, -1), x.dtype)
        count = ops.sum(weights) * ops.cast(ops.shape(x)[-1], x.dtype)
        count = ops.maximum(count, 1.0)
        mean = ops.sum(x * weights) / count
        variance = ops.sum(ops.square((x - mean) * weights)) / count
        return (x - mean) / ops.sqrt(variance + 1e-12)

    def call(self, inputs, mask=None):
        self._check([tuple(x.shape) for x in inputs])
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        shape = validation.static_shape(inputs[0])
        validation.same_dims("ScalarMix", "mask", mask, shape[:2], "(batch, time)")
        weights = ops.softmax(ops.cast(self.scalar_weights, "float32"))
        out = 0.0
        for k, x in enumerate(inputs):
            x = ops.cast(x, "float32")
            if self.layer_norm:
                x = self._normalize(x, mask)
            out = out + weights[k] * x
        return ops.cast(ops.cast(self.gamma, "float32") * out, self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            return mask[0]
        return mask

    def compute_output_shape(self, input_shape):
        self._check(input_shape)
        return tuple(input_shape[0])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_layers": self.num_layers,
                "layer_norm": self.layer_norm,
                "trainable_weights_init": self.trainable_weights_init,
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ReverseSequence(keras.layers.Layer):
    """Reverses each row's unmasked steps, leaving its padding in place:
    with a right-padded row `[a, b, c, PAD]` the output is `[c, b, a,
    PAD]`. Applying it twice gives the input back, so a backward language
    model is a forward one between two of these.

    Call arguments:
        inputs: (batch, time, ...).
        mask: optional bool (batch, time), True on the steps of each row's
            prefix (right padding); without one every step is reversed.

    Examples:
        >>> import numpy as np, seqkeras
        >>> x = np.array([[[1.0], [2.0], [3.0], [0.0]]], "float32")
        >>> out = seqkeras.layers.ReverseSequence()(x, mask=np.array([[1, 1, 1, 0]], bool))
        >>> np.asarray(out)[0, :, 0].tolist()
        [3.0, 2.0, 1.0, 0.0]
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if len(inputs.shape) < 2:
            raise ValueError(
                "`ReverseSequence` expects inputs of rank >= 2, (batch, time, ...). "
                f"Received: shape {tuple(inputs.shape)}"
            )
        validation.same_dims(
            "ReverseSequence", "mask", mask, validation.static_shape(inputs)[:2], "(batch, time)"
        )
        values = None if mask is None else validation.concrete_values(mask)
        if values is not None and values.size:  # traced masks pass unchecked
            kept = values.astype(bool)
            if np.any(kept[:, 1:] & ~kept[:, :-1]):
                row = int(np.flatnonzero(np.any(kept[:, 1:] & ~kept[:, :-1], axis=1))[0])
                raise ValueError(
                    "`ReverseSequence` expects a right-padded `mask` (each row's valid "
                    f"steps first). Received: mask[{row}]={kept[row].astype(int).tolist()}"
                )
        time = ops.shape(inputs)[1]
        steps = ops.arange(time)
        if mask is None:
            index = ops.broadcast_to(time - 1 - steps, ops.shape(inputs)[:2])
        else:
            lengths = ops.sum(ops.cast(mask, "int32"), axis=1, keepdims=True)
            index = ops.where(steps[None, :] < lengths, lengths - 1 - steps[None, :], steps)
        index = ops.reshape(index, ops.shape(index) + (1,) * (len(inputs.shape) - 2))
        return ops.take_along_axis(inputs, ops.cast(index, "int32"), axis=1)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)
