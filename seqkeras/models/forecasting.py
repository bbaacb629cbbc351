"""`forecaster`: multi-step time-series forecasting."""

import keras

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


def forecaster(input_steps, horizon, features=1, targets=None,
               backbone="lstm", units=64, num_layers=1, dropout=0.0,
               num_heads=4, intermediate_dim=None):
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

    Returns:
        A `Forecaster` (a functional `keras.Model`): `series` (batch,
        input_steps, features) -> `forecast` (batch, horizon, targets).

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
    x = keras.layers.Dense(horizon * targets, name="head")(x)
    x = keras.layers.Reshape((horizon, targets))(x)
    forecast = keras.layers.Activation("linear", dtype="float32",
                                       name="forecast")(x)
    return Forecaster(series, forecast, name=name)
