"""`SequencePooling`: (batch, time, features) -> (batch, features), masked."""

import keras
from keras import ops

from seqkeras.layers import attention_core
from seqkeras.layers import validation

MODES = ("last", "first", "mean", "max", "attention")


@keras.saving.register_keras_serializable(package="seqkeras")
class SequencePooling(keras.layers.Layer):
    """Pools a sequence into one vector, ignoring padding.

    Args:
        mode: `"last"` (the last unmasked step), `"first"` (the first
            unmasked step: BERT's `[CLS]`), `"mean"` or `"max"` over
            unmasked steps, or `"attention"`: a learned query scores each
            step, `w = masked_softmax(v . tanh(W h_t))`, and the output is
            `sum_t w_t h_t` (Yang et al. 2016's attention pooling).
        units: hidden size of the attention score (default: features).
        kernel_initializer, bias_initializer: of the attention score's
            weights (`W`, `v`; `b`).

    Call arguments:
        inputs: (batch, time, features).
        mask: optional bool (batch, time). A sequence with no unmasked step
            pools to zeros.

    Examples:
        >>> import numpy as np, seqkeras
        >>> x = np.arange(12, dtype="float32").reshape(1, 4, 3)
        >>> pool = seqkeras.layers.SequencePooling("last")
        >>> np.asarray(pool(x, mask=np.array([[1, 1, 0, 0]], bool))).tolist()
        [[3.0, 4.0, 5.0]]
    """

    def __init__(
        self,
        mode="mean",
        units=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.mode = validation.choice("SequencePooling", "mode", mode, MODES)
        self.units = (
            None if units is None else validation.positive_int("SequencePooling", "units", units)
        )
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                "`SequencePooling` expects inputs of rank 3 with known "
                "features, (batch, time, features). Received: "
                f"input_shape={tuple(input_shape)}"
            )
        self._features = int(input_shape[-1])
        if self.mode == "attention":
            d = input_shape[-1]
            units = self.units or d
            self.kernel = self.add_weight(
                shape=(d, units), name="kernel", initializer=self.kernel_initializer
            )
            self.bias = self.add_weight(
                shape=(units,), name="bias", initializer=self.bias_initializer
            )
            self.query = self.add_weight(
                shape=(units,), name="query", initializer=self.kernel_initializer
            )

    def __call__(self, *args, **kwargs):
        # strings refused before Keras converts the arguments to backend
        # tensors (on JAX that conversion fails first, with a bare error)
        validation.numeric_arguments("SequencePooling", ("inputs",), args, kwargs)
        return super().__call__(*args, **kwargs)

    def call(self, inputs, mask=None):
        x = inputs
        validation.numeric("SequencePooling", "inputs", x)
        shape = validation.static_shape(x)
        if len(shape) != 3:
            raise ValueError(
                "`SequencePooling` expects `inputs` of rank 3, (batch, time, "
                f"features). Received: inputs.shape={shape}"
            )
        validation.same_dims("SequencePooling", "mask", mask, shape[:2], "(batch, time)")
        if mask is None:
            mask = ops.ones(ops.shape(x)[:2], "bool")
        mask = ops.cast(mask, "bool")
        m = ops.cast(ops.expand_dims(mask, -1), x.dtype)  # (batch, time, 1)
        if self.mode == "last":
            # The last unmasked step (works for right and left padding).
            steps = ops.arange(ops.shape(x)[1])
            last = ops.max(ops.where(mask, steps, -1), axis=1)  # (batch,)
            pick = ops.one_hot(ops.maximum(last, 0), ops.shape(x)[1], dtype=x.dtype)
            pick = pick * ops.cast(ops.expand_dims(last >= 0, -1), x.dtype)
            return ops.einsum("bt,btd->bd", pick, x)
        if self.mode == "first":
            steps = ops.arange(ops.shape(x)[1])
            big = ops.shape(x)[1]
            first = ops.min(ops.where(mask, steps, big), axis=1)  # (batch,)
            pick = ops.one_hot(ops.minimum(first, big - 1), ops.shape(x)[1], dtype=x.dtype)
            pick = pick * ops.cast(ops.expand_dims(first < big, -1), x.dtype)
            return ops.einsum("bt,btd->bd", pick, x)
        if self.mode == "mean":
            count = ops.maximum(ops.sum(m, axis=1), ops.cast(1, x.dtype))
            return ops.sum(x * m, axis=1) / count
        if self.mode == "max":
            low = ops.full_like(x, -1e4 if x.dtype == "float16" else -1e9)
            out = ops.max(ops.where(ops.expand_dims(mask, -1), x, low), axis=1)
            return out * ops.cast(ops.any(mask, axis=1, keepdims=True), x.dtype)
        context, _ = attention_core.attend(
            ops.expand_dims(self.scores(x), 1), x, ops.expand_dims(mask, 1)
        )
        return context[:, 0]

    def scores(self, x):
        """Attention mode: the score of each step, `v . tanh(W h_t + b)`,
        (batch, time) from `x` (batch, time, features)."""
        return ops.matmul(ops.tanh(ops.matmul(x, self.kernel) + self.bias), self.query)

    # -- streaming: the pooled value of the sequence so far, one step at a
    # time, from running states that start at zeros --

    @property
    def stream_state_sizes(self):
        """The widths of the running states `stream_step` carries (built
        layers only): none for "last"; the first step and a
        seen-anything flag for "first"; the running sum and count for
        "mean"; the running maximum and a seen-anything flag for "max";
        the running maximum score, softmax normaliser and weighted sum
        for "attention" (an online softmax)."""
        if not self.built:
            raise ValueError(f"`SequencePooling` {self.name!r} streams once it is built")
        d = self._features
        return {"last": [], "first": [d, 1], "mean": [d, 1], "max": [d, 1], "attention": [1, 1, d]}[
            self.mode
        ]

    def stream_step(self, x, states):
        """One streamed step: `x` (batch, features) and the running states
        (zeros at the start) -> `(pooled value of the steps so far,
        states)`, equal to the layer on the whole sequence so far."""
        if self.mode == "last":
            return x, []
        if self.mode == "mean":
            total, count = states[0] + x, states[1] + 1.0
            return total / count, [total, count]
        if self.mode == "first":
            seen = states[1] > 0
            first = ops.where(seen, states[0], x)
            return first, [first, ops.ones_like(states[1])]
        if self.mode == "max":
            seen = states[1] > 0
            top = ops.where(seen, ops.maximum(states[0], x), x)
            return top, [top, ops.ones_like(states[1])]
        # With norm = acc = 0 (the start), the first step gives exactly x
        # whatever the running maximum holds.
        top, norm, acc = states
        score = self.scores(x[:, None])  # (batch, 1)
        new_top = ops.maximum(top, score)
        old, new = ops.exp(top - new_top), ops.exp(score - new_top)
        norm = norm * old + new
        acc = acc * old + new * x
        return acc / norm, [new_top, norm, acc]

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mode": self.mode,
                "units": self.units,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
