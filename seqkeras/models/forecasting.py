"""`forecaster`: multi-step time-series forecasting."""

import keras
from keras import ops

from seqkeras import layers as sk
from seqkeras.layers import validation
from seqkeras.models import backbones as bb
from seqkeras.models.base import SequenceModel
from seqkeras.models.base import named_inputs
from seqkeras.models.steps import ChainStreaming


@keras.saving.register_keras_serializable(package="seqkeras")
class Forecaster(ChainStreaming, SequenceModel):
    """`forecaster`'s class: `series` -> `forecast`. With a recurrent
    backbone it streams one observation at a time; each step's output is
    the forecast from the series so far.

    Args:
        *args: `SequenceModel`'s (`vocabulary_sizes`, `parts`) and Keras'.
        quantiles: the forecast's increasing levels in (0, 1), or None (a
            point forecast).
        **kwargs: `keras.Model`'s functional arguments.
    """

    task = "regression"
    stream_per_step = False

    def __init__(self, *args, quantiles=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.quantiles = _check_quantiles(type(self).__name__, quantiles)

    def check_inputs(self, x, where=None):
        """Checks the `series` (its rank, steps and features, statically;
        numeric values) before Keras' or a layer's own error does."""
        super().check_inputs(x, where)
        if x is None:
            return
        where = where or type(self).__name__
        name = self.inputs[0].name
        series = named_inputs(self, x).get(name)
        if series is None or isinstance(series, keras.KerasTensor):
            return
        validation.numeric(where, name, series)
        expected = tuple(self.inputs[0].shape)
        shape = validation.static_shape(series)
        if len(shape) != len(expected) or any(
            e is not None and s is not None and s != e for s, e in zip(shape, expected)
        ):
            raise ValueError(
                f"`{where}` expects `{name}` of shape (batch, "
                f"{', '.join(str(d) for d in expected[1:])}) (batch, input steps, features). "
                f"Received: {name}.shape={shape}"
            )

    @property
    def streamable(self):
        # window scaling needs the whole window's statistics first
        return not any(isinstance(layer, sk.WindowScaling) for layer in self.layers)

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
        return ops.concatenate([first, first + ops.cumsum(steps, axis=-1)], axis=-1)

    def compute_output_shape(self, input_shape):
        return input_shape


SCALINGS = (None, "window")


def _check_sizes(
    name, input_steps, horizon, features, targets, units, num_layers, scaling, first_targets=False
):
    """The forecasters' shared arguments, checked; the targets must be
    among the features when they are the first ones (window scaling, or
    `first_targets`)."""
    values = [
        bb.check(name, arg, value, "int")
        for arg, value in (
            ("input_steps", input_steps),
            ("horizon", horizon),
            ("features", features),
            ("targets", features if targets is None else targets),
            ("units", units),
            ("num_layers", num_layers),
        )
    ]
    scaling = bb.check(name, "scaling", scaling, "choice", SCALINGS)
    features, targets = values[2], values[3]
    if (scaling or first_targets) and targets > features:
        raise ValueError(
            f"`{name}` forecasts the first `targets` of the `features`; "
            f"targets={targets} > features={features}"
        )
    return (*values, scaling)


def _check_quantiles(name, quantiles):
    if quantiles is None:
        return None
    values = list(quantiles) if isinstance(quantiles, (list, tuple)) else None
    if (
        not values
        or any(
            isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.0 < q < 1.0
            for q in values
        )
        or (sorted(set(values)) != values)
    ):
        raise ValueError(
            f"`{name}` received an invalid value for `quantiles`: "
            "expected increasing levels in (0, 1), e.g. [0.1, 0.5, 0.9]. "
            f"Received: quantiles={quantiles!r}"
        )
    return [float(q) for q in values]


def forecaster(
    input_steps,
    horizon,
    features=1,
    targets=None,
    backbone="lstm",
    units=64,
    num_layers=1,
    dropout=0.0,
    num_heads=4,
    intermediate_dim=None,
    quantiles=None,
    scaling=None,
):
    """Direct multi-step forecaster: the last `input_steps` observations ->
    the next `horizon` steps, all at once (no error feedback through
    recursive one-step forecasts).

    Args:
        input_steps: observed steps (the window).
        horizon: predicted steps.
        features: input features per step.
        targets: predicted features per step (default `features`).
        backbone: `"rnn"`, `"gru"`, `"lstm"`, `"mingru"`, `"minlstm"` or
            `"transformer"`.
        units: recurrent units, or the Transformer width.
        num_layers, dropout, num_heads, intermediate_dim: the backbone.
        quantiles: increasing levels in (0, 1), e.g. `[0.1, 0.5, 0.9]`:
            forecast those quantiles instead of one value (trained by
            `PinballLoss`, which `compile_model` picks); they are
            non-decreasing by construction (`OrderedQuantiles`).
        scaling: None, or `"window"`: each input window is standardised
            by its own mean and standard deviation and the forecast mapped
            back (`seqkeras.layers.WindowScaling`), so the model takes and
            returns raw values and the scaling is part of every export.
            The targets are the first `targets` features. A window-scaled
            model does not stream.

    Returns:
        A `Forecaster` (a functional `keras.Model`): `series` (batch,
        input_steps, features) -> `forecast` (batch, horizon, targets),
        or (batch, horizon, targets, quantiles) with `quantiles`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.forecaster(24, 6, backbone="gru")
        >>> tuple(model(np.zeros((2, 24, 1), "float32")).shape)
        (2, 6, 1)
    """
    name = "forecaster"
    input_steps, horizon, features, targets, units, num_layers, scaling = _check_sizes(
        name, input_steps, horizon, features, targets, units, num_layers, scaling
    )
    backbone = bb.check(name, "backbone", backbone, "choice", bb.BACKBONES)
    dropout = bb.check(name, "dropout", dropout, "rate")
    num_heads = bb.check(name, "num_heads", num_heads, "int")
    intermediate_dim = bb.check(name, "intermediate_dim", intermediate_dim, "optional int")
    series = keras.Input((input_steps, features), name="series")
    x = series
    if scaling:
        x = sk.WindowScaling(name="scaling")(series)
    if backbone == "transformer":
        x = keras.layers.Dense(units, name="input_projection")(x)
        x = bb.positions(x, "learned", input_steps, "positions")
        x = bb.transformer_stack(x, num_layers, num_heads, intermediate_dim or 4 * units, dropout)
        x = sk.SequencePooling("last", name="pooling")(x)
    else:
        x = bb.recurrent_stack(
            x, backbone, units, num_layers, dropout=dropout, return_sequences=False
        )
    quantiles = _check_quantiles(name, quantiles)
    levels = len(quantiles) if quantiles else 1
    x = keras.layers.Dense(horizon * targets * levels, name="head")(x)
    if quantiles:
        x = keras.layers.Reshape((horizon, targets, levels))(x)
        x = OrderedQuantiles(name="ordered_quantiles")(x)
    else:
        x = keras.layers.Reshape((horizon, targets))(x)
    if scaling:
        forecast = sk.WindowScaling(inverse=True, dtype="float32", name="forecast")(series, x)
    else:
        forecast = keras.layers.Activation("linear", dtype="float32", name="forecast")(x)
    return Forecaster(series, forecast, name=name, quantiles=quantiles)


@keras.saving.register_keras_serializable(package="seqkeras")
class Seq2SeqForecaster(Forecaster):
    """`seq2seq_forecaster`'s class: `series` -> `forecast`, the decoder
    feeding back its own forecast (the median with `quantiles`) one step
    at a time. Parts: `scaling`, `unscaling` (or None), `encoder` (the
    recurrent layers), `decoder`, `head`, `quantiles` (or None).
    `teacher_forcing_model()` is the training graph over the same
    layers."""

    @property
    def streamable(self):
        return False

    def teacher_forcing_model(self):
        """A functional model over this model's layers: `{"series",
        "future"}` -> `forecast`, the decoder reading the true previous
        value at each step (teacher forcing). Train it; this model then
        forecasts with the learned weights."""
        cached = getattr(self, "_teacher", None)
        if cached is None:
            series = keras.Input(tuple(self.inputs[0].shape[1:]), name="series")
            shape = tuple(self.outputs[0].shape[1:3])
            future = keras.Input(shape, name="future")
            levels = len(self.quantiles) if self.quantiles else 1
            cached = keras.Model(
                {"series": series, "future": future},
                _seq2seq_graph(self, series, shape[1], levels, future=future),
                name=f"{self.name}_teacher_forcing",
            )
            object.__setattr__(self, "_teacher", cached)
        return cached


def _seq2seq_graph(parts, series, targets, levels, horizon=None, future=None, median_index=None):
    """The seq2seq forecaster's graph on `series` from its parts (a dict or
    a `Seq2SeqForecaster`): teacher-forced on `future` when given, else
    `horizon` steps feeding back its own forecast (quantile
    `median_index`)."""
    part = parts.part if hasattr(parts, "part") else parts.get
    scaling, unscaling = part("scaling"), part("unscaling")
    decoder, head, ordered = part("decoder"), part("head"), part("quantiles")
    x = scaling(series) if scaling is not None else series
    encoder = part("encoder")
    for layer in encoder[:-1]:
        x = layer(x)
    _, *states = encoder[-1](x)
    last = keras.layers.Cropping1D((x.shape[1] - 1, 0))(x)
    last = _Columns(targets)(last)  # (batch, 1, targets)

    def shaped(y):  # (batch, steps, targets * levels) -> (.., targets[, q])
        steps_ = y.shape[1]
        if ordered is None:
            return keras.layers.Reshape((steps_, targets))(y)
        return ordered(keras.layers.Reshape((steps_, targets, levels))(y))

    if future is not None:
        f = scaling(series, future) if scaling is not None else future
        previous = keras.layers.Concatenate(axis=1)([last, keras.layers.Cropping1D((0, 1))(f)])
        h, *_ = decoder(previous, initial_state=states)
        y = shaped(head(h))
    else:
        outputs, previous = [], last
        for _ in range(horizon):
            h, *states = decoder(previous, initial_state=states)
            y = shaped(head(h))  # (batch, 1, targets[, q])
            outputs.append(y)
            previous = y if ordered is None else _Median(median_index)(y)
        y = outputs[0] if horizon == 1 else keras.layers.Concatenate(axis=1)(outputs)
    if unscaling is not None:
        return unscaling(series, y)
    return keras.layers.Activation("linear", dtype="float32", name="forecast")(y)


@keras.saving.register_keras_serializable(package="seqkeras")
class _Columns(keras.layers.Layer):
    """The first `n` features: (..., features) -> (..., n)."""

    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        self.n = int(n)

    def call(self, x):
        return x[..., : self.n]

    def compute_output_shape(self, shape):
        return tuple(shape[:-1]) + (self.n,)

    def get_config(self):
        return dict(super().get_config(), n=self.n)


@keras.saving.register_keras_serializable(package="seqkeras")
class _Median(keras.layers.Layer):
    """Quantile `index` of (..., quantiles): (..., q) -> (...)."""

    def __init__(self, index, **kwargs):
        super().__init__(**kwargs)
        self.index = int(index)

    def call(self, x):
        return x[..., self.index]

    def compute_output_shape(self, shape):
        return tuple(shape[:-1])

    def get_config(self):
        return dict(super().get_config(), index=self.index)


def seq2seq_forecaster(
    input_steps,
    horizon,
    features=1,
    targets=None,
    cell="lstm",
    units=64,
    num_layers=1,
    dropout=0.0,
    quantiles=None,
    scaling="window",
):
    """Encoder-decoder forecaster: a recurrent encoder reads the window, a
    recurrent decoder starts from its states and produces the horizon one
    step at a time, each step's input the previous value: the true one in
    training (teacher forcing, `teacher_forcing_model()`), its own
    forecast (the median with `quantiles`) when forecasting.

    Args:
        input_steps: observed steps (the window).
        horizon: predicted steps.
        features: input features per step; the targets are the first
            `targets` of them (default all).
        targets: predicted features per step (default `features`).
        cell: `"rnn"`, `"gru"` or `"lstm"` (encoder and decoder).
        units: recurrent units.
        num_layers: encoder layers (the decoder has one).
        dropout: input dropout of the encoder cells.
        quantiles: increasing levels in (0, 1) (see `forecaster`).
        scaling: `"window"` (default; see `forecaster`) or None.

    Returns:
        A `Seq2SeqForecaster` (a functional `keras.Model`): `series`
        (batch, input_steps, features) -> `forecast` (batch, horizon,
        targets[, quantiles]); train `model.teacher_forcing_model()` on
        `{"series": x, "future": y}` -> `y`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.seq2seq_forecaster(24, 6, units=8)
        >>> x = np.random.rand(4, 24, 1).astype("float32")
        >>> tuple(model(x).shape)
        (4, 6, 1)
        >>> trainer = model.teacher_forcing_model()
        >>> tuple(trainer({"series": x, "future": np.zeros((4, 6, 1))}).shape)
        (4, 6, 1)
    """
    name = "seq2seq_forecaster"
    input_steps, horizon, features, targets, units, num_layers, scaling = _check_sizes(
        name,
        input_steps,
        horizon,
        features,
        targets,
        units,
        num_layers,
        scaling,
        first_targets=True,
    )
    cell = bb.check(name, "cell", cell, "choice", bb.DECODER_CELLS)
    dropout = bb.check(name, "dropout", dropout, "rate")
    quantiles = _check_quantiles(name, quantiles)
    levels = len(quantiles) if quantiles else 1
    series = keras.Input((input_steps, features), name="series")
    encoder = [
        sk.Recurrent(
            bb.make_cell(cell, units, dropout=dropout),
            return_sequences=i < num_layers - 1,
            return_state=i == num_layers - 1,
            name=f"encoder_{i}",
        )
        for i in range(num_layers)
    ]
    decoder = sk.Recurrent(
        bb.make_cell(cell, units), return_sequences=True, return_state=True, name="decoder"
    )
    ordered = OrderedQuantiles(name="ordered_quantiles") if quantiles else None
    median = min(range(levels), key=lambda i: abs(quantiles[i] - 0.5)) if quantiles else None
    parts = {
        "scaling": sk.WindowScaling(name="scaling") if scaling else None,
        "unscaling": sk.WindowScaling(inverse=True, dtype="float32", name="forecast")
        if scaling
        else None,
        "encoder": encoder,
        "decoder": decoder,
        "head": keras.layers.Dense(targets * levels, name="head"),
        "quantiles": ordered,
    }
    forecast = _seq2seq_graph(parts, series, targets, levels, horizon=horizon, median_index=median)
    return Seq2SeqForecaster(series, forecast, name=name, quantiles=quantiles, parts=parts)
