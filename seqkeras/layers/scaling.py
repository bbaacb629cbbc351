"""`WindowScaling`: per-window standardisation of a series and its inverse,
so that a forecaster takes and returns raw values (the scaling travels
inside the exported model)."""

import keras
from keras import ops

from seqkeras.layers import validation


@keras.saving.register_keras_serializable(package="seqkeras")
class WindowScaling(keras.layers.Layer):
    """Standardises each input window by its own mean and standard
    deviation per feature (over the time axis), or maps values back.

    With the statistics of `series` (batch, time, features), `mu` and
    `sigma = sqrt(var + epsilon)`:

    - `layer(series)`: `(series - mu) / sigma`;
    - `layer(series, values)`: `(values - mu) / sigma` (e.g. the future a
      decoder is teacher-forced with), or with `inverse=True`
      `values * sigma + mu` (a forecast back to raw units). `values` is
      (batch, horizon, targets) or (batch, horizon, targets, quantiles);
      its `targets` are the first features of `series`.

    Scaling by the window rather than by the training set lets a model
    forecast levels it never saw in training (a trending series such as
    airline passengers; RevIN, Kim et al. 2022). The statistics are
    computed in float32 whatever the compute dtype.

    Args:
        inverse: map `values` back to raw units (needs `values`).
        epsilon: added to the variance (a constant window scales by
            `sqrt(epsilon)` instead of dividing by zero).

    Examples:
        >>> import numpy as np, seqkeras
        >>> series = np.array([[[1.0], [2.0], [3.0]]])
        >>> scale = seqkeras.layers.WindowScaling(epsilon=0.0)
        >>> [round(float(v), 3) for v in np.asarray(scale(series))[0, :, 0]]
        [-1.225, 0.0, 1.225]
        >>> back = seqkeras.layers.WindowScaling(inverse=True, epsilon=0.0)
        >>> round(float(np.asarray(back(series, np.array([[[1.0]]])))[0, 0, 0]), 3)
        2.816
    """

    def __init__(self, inverse=False, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.inverse = validation.boolean("WindowScaling", "inverse", inverse)
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon >= 0:
            raise ValueError(
                "`WindowScaling` received an invalid value for `epsilon`: "
                f"expected a number >= 0. Received: epsilon={epsilon!r}"
            )
        self.epsilon = float(epsilon)

    def _check(self, series, values):
        validation.numeric("WindowScaling", "series", series)
        shape = validation.static_shape(series)
        if len(shape) != 3:
            raise ValueError(
                "`WindowScaling` expects `series` of rank 3 (batch, time, "
                f"features). Received: series.shape={shape}"
            )
        if values is None:
            if self.inverse:
                raise ValueError(
                    "`WindowScaling(inverse=True)` maps `values` back to "
                    "raw units: call it as layer(series, values)"
                )
            return
        validation.numeric("WindowScaling", "values", values)
        vshape = validation.static_shape(values)
        if len(vshape) not in (3, 4) or (
            None not in (vshape[2], shape[2]) and vshape[2] > shape[2]
        ):
            raise ValueError(
                "`WindowScaling` expects `values` (batch, horizon, targets) "
                "or (batch, horizon, targets, quantiles) with targets <= "
                f"the series' features ({shape[2]}). Received: "
                f"values.shape={vshape}"
            )

    def call(self, series, values=None):
        self._check(series, values)
        dtype = self.compute_dtype
        x = ops.cast(series, "float32")
        mu = ops.mean(x, axis=1, keepdims=True)
        sigma = ops.sqrt(ops.var(x, axis=1, keepdims=True) + self.epsilon)
        if values is None:
            return ops.cast((x - mu) / sigma, dtype)
        targets = ops.shape(values)[2]
        mu, sigma = mu[:, :, :targets], sigma[:, :, :targets]
        if len(values.shape) == 4:
            mu, sigma = mu[..., None], sigma[..., None]
        v = ops.cast(values, "float32")
        out = v * sigma + mu if self.inverse else (v - mu) / sigma
        return ops.cast(out, dtype)

    def compute_output_shape(self, series_shape, values_shape=None):
        return tuple(series_shape if values_shape is None else values_shape)

    def get_config(self):
        config = super().get_config()
        config.update(inverse=self.inverse, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="seqkeras")
class Scale(keras.layers.Layer):
    """Multiplies its inputs by a constant `factor` (Gemma and Griffin
    scale the token embedding by sqrt(d)); a mask passes through.

    Args:
        factor: the constant (a number).

    Examples:
        >>> import numpy as np, seqkeras
        >>> np.asarray(seqkeras.layers.Scale(2.0)(np.ones((1, 2), "float32")))
        array([[2., 2.]], dtype=float32)
    """

    def __init__(self, factor, **kwargs):
        super().__init__(**kwargs)
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise TypeError(
                f"`Scale` received an invalid value for `factor`: expected a number. "
                f"Received: factor={factor!r}"
            )
        self.factor = float(factor)
        self.supports_masking = True

    def call(self, inputs):
        return inputs * ops.cast(self.factor, inputs.dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config["factor"] = self.factor
        return config


@keras.saving.register_keras_serializable(package="seqkeras")
class SoftCap(keras.layers.Layer):
    """`cap * tanh(x / cap)`: values squashed smoothly into (-cap, cap)
    (Gemma 2 and RecurrentGemma's logit soft cap); a mask passes through.

    Args:
        cap: a number > 0.

    Examples:
        >>> import numpy as np, seqkeras
        >>> y = seqkeras.layers.SoftCap(30.0)(np.array([[15.0, 300.0]], "float32"))
        >>> np.round(np.asarray(y), 2)  # 30 tanh(0.5), 30 tanh(10)
        array([[13.86, 30.  ]], dtype=float32)
    """

    def __init__(self, cap, **kwargs):
        super().__init__(**kwargs)
        self.cap = validation.greater_than("SoftCap", "cap", cap, 0.0)
        self.supports_masking = True

    def call(self, inputs):
        cap = ops.cast(self.cap, inputs.dtype)
        return ops.tanh(inputs / cap) * cap

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config["cap"] = self.cap
        return config
