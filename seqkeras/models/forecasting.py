"""`forecaster`: multi-step time-series forecasting."""

import keras
from keras import ops

from seqkeras import layers as sk
from seqkeras.models import backbones as bb
from seqkeras.models.base import SequenceModel
from seqkeras.models.steps import ChainStreaming


@keras.saving.register_keras_serializable(package="seqkeras")
class Forecaster(ChainStreaming, SequenceModel):
    """`forecaster`'s class: `series` -> `forecast`. With a recurrent
    backbone it streams one observation at a time; each step's output is
    the forecast from the series so far."""

    stream_per_step = False

    def __init__(self, *args, quantiles=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.quantiles = None if quantiles is None else [float(q) for q
                                                          in quantiles]

    def get_config(self):
        config = super().get_config()
        config["quantiles"] = self.quantiles
        return config


@keras.saving.register_keras_serializable(package="seqkeras")
class OrderedQuantiles(keras.layers.Layer):
    """Raw scores (..., quantiles) -> non-decreasing values: the first
    as is, each next one the previous plus softplus(score), so a
    forecaster's 10% quantile never exceeds its 50% or its 90%."""

    def call(self, inputs):
        first = inputs[..., :1]
        steps = ops.softplus(inputs[..., 1:])
        return ops.concatenate([first, first + ops.cumsum(steps, axis=-1)],
                               axis=-1)

    def compute_output_shape(self, input_shape):
        return input_shape


def _check_quantiles(quantiles):
    if quantiles is None:
        return None
    values = list(quantiles) if isinstance(quantiles, (list, tuple)) \
        else None
    if not values or any(isinstance(q, bool) or not isinstance(
            q, (int, float)) or not 0.0 < q < 1.0 for q in values) or (
            sorted(set(values)) != values):
        raise ValueError(
            "`forecaster` received an invalid value for `quantiles`: "
            "expected increasing levels in (0, 1), e.g. [0.1, 0.5, 0.9]. "
            f"Received: quantiles={quantiles!r}")
    return [float(q) for q in values]


def forecaster(input_steps, horizon, features=1, targets=None,
               backbone="lstm", units=64, num_layers=1, dropout=0.0,
               num_heads=4, intermediate_dim=None, quantiles=None):
    """Direct multi-step forecaster: the last `input_steps` observations ->
    the next `horizon` steps, all at once (no error feedback through
    recursive one-step forecasts).

    Args:
        input_steps: observed steps (the window).
        horizon: predicted steps.
        features: input features per step.
        targets: predicted features per step (default `features`).
        backbone: `"rnn"`, `"gru"`, `"lstm"` or `"transformer"`.
        units: recurrent units, or the Transformer width.
        num_layers, dropout, num_heads, intermediate_dim: the backbone.
        quantiles: increasing levels in (0, 1), e.g. `[0.1, 0.5, 0.9]`:
            forecast those quantiles instead of one value (trained by
            `PinballLoss`, which `compile_model` picks); they are
            non-decreasing by construction (`OrderedQuantiles`).

    Returns:
        A `Forecaster` (a functional `keras.Model`): `series` (batch,
        input_steps, features) -> `forecast` (batch, horizon, targets),
        or (batch, horizon, targets, quantiles) with `quantiles`.

    Example:

    >>> import numpy as np, seqkeras
    >>> model = seqkeras.models.forecaster(24, 6, backbone="gru")
    >>> tuple(model(np.zeros((2, 24, 1), "float32")).shape)
    (2, 6, 1)
    """
    name = "forecaster"
    input_steps = bb.check(name, "input_steps", input_steps, "int")
    horizon = bb.check(name, "horizon", horizon, "int")
    features = bb.check(name, "features", features, "int")
    targets = bb.check(name, "targets", targets or features, "int")
    backbone = bb.check(name, "backbone", backbone, "choice", bb.BACKBONES)
    units = bb.check(name, "units", units, "int")
    num_layers = bb.check(name, "num_layers", num_layers, "int")
    series = keras.Input((input_steps, features), name="series")
    if backbone == "transformer":
        x = keras.layers.Dense(units, name="input_projection")(series)
        x = bb.positions(x, "learned", input_steps, "positions")
        x = bb.transformer_stack(x, num_layers, num_heads,
                                 intermediate_dim or 4 * units, dropout)
        x = sk.SequencePooling("last", name="pooling")(x)
    else:
        x = bb.recurrent_stack(series, backbone, units, num_layers,
                               dropout=dropout, return_sequences=False)
    quantiles = _check_quantiles(quantiles)
    levels = len(quantiles) if quantiles else 1
    x = keras.layers.Dense(horizon * targets * levels, name="head")(x)
    if quantiles:
        x = keras.layers.Reshape((horizon, targets, levels))(x)
        x = OrderedQuantiles(name="ordered_quantiles")(x)
    else:
        x = keras.layers.Reshape((horizon, targets))(x)
    forecast = keras.layers.Activation("linear", dtype="float32",
                                       name="forecast")(x)
    return Forecaster(series, forecast, name=name, quantiles=quantiles)
