"""Training conventions: masked losses and metrics, learning-rate schedules,
callbacks and `compile_model`."""

import math
import numbers
import time

import keras
from keras import ops

from seqkeras.data.tokens import PAD
from seqkeras.layers.walk import all_layers
from seqkeras.models.tasks import JIT_PURPOSES  # noqa: F401  (the public home is here)
from seqkeras.models.tasks import TASKS
from seqkeras.models.tasks import _check_task
from seqkeras.models.tasks import choose_jit_compile
from seqkeras.models.tasks import infer_task


def _check_pad_id(name, pad_id):
    if isinstance(pad_id, bool) or not isinstance(pad_id, numbers.Integral):
        raise ValueError(
            f"`{name}` expects `pad_id` to be a token id (an int). Received: {pad_id!r}"
        )
    return int(pad_id)


def _token_targets(name, y_true, y_pred):
    """`y_true` (..., time) of ids against `y_pred` (..., time, vocab) of
    logits: checked from the static shapes (a (..., time, 1) `y_true` is
    squeezed)."""
    true_shape, pred_shape = tuple(y_true.shape), tuple(y_pred.shape)
    if len(true_shape) == len(pred_shape) and true_shape and true_shape[-1] == 1:
        y_true, true_shape = ops.squeeze(y_true, -1), true_shape[:-1]
    if len(pred_shape) != len(true_shape) + 1 or any(
        a is not None and b is not None and a != b for a, b in zip(true_shape, pred_shape)
    ):
        raise ValueError(
            f"`{name}` expects `y_true` of token ids of shape (..., time) and `y_pred` of "
            "logits of shape (..., time, vocab). Received: "
            f"y_true.shape={true_shape}, y_pred.shape={pred_shape}"
        )
    return y_true


@keras.saving.register_keras_serializable(package="seqkeras")
class MaskedAccuracy(keras.metrics.Mean):
    """Token accuracy that ignores padding targets (`keras.metrics.
    SparseCategoricalAccuracy` has no `ignore_class`).

    Args:
        pad_id: the target id to ignore.
        name: the metric's name.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.training import MaskedAccuracy
        >>> m = MaskedAccuracy()
        >>> logits = np.eye(3, dtype="float32")[[[1, 2, 0]]] * 5
        >>> m.update_state(np.array([[1, 1, 0]]), logits)
        >>> float(m.result())
        0.5
    """

    def __init__(self, pad_id=PAD, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = _check_pad_id("MaskedAccuracy", pad_id)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = ops.convert_to_tensor(y_true), ops.convert_to_tensor(y_pred)
        y_true = ops.cast(_token_targets("MaskedAccuracy", y_true, y_pred), "int32")
        hits = ops.cast(ops.equal(ops.argmax(y_pred, axis=-1), y_true), "float32")
        weight = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, "float32")
        super().update_state(hits, sample_weight=weight)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="seqkeras")
class MaskedPerplexity(keras.metrics.Mean):
    """exp(mean token cross-entropy) over non-padding targets.

    keras-hub's `Perplexity` metric would serve, but it averages per-batch
    and is not registered for `.keras` reloading without keras-hub
    imported; this is the same formula in a few lines.

    Args:
        pad_id: the target id to ignore.
        name: the metric's name.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.training import MaskedPerplexity
        >>> m = MaskedPerplexity()
        >>> m.update_state(np.array([[1, 0]]), np.zeros((1, 2, 4), "float32"))
        >>> round(float(m.result()), 4)  # uniform over 4 tokens
        4.0
    """

    def __init__(self, pad_id=PAD, name="perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = _check_pad_id("MaskedPerplexity", pad_id)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = ops.convert_to_tensor(y_true), ops.convert_to_tensor(y_pred)
        y_true = ops.cast(_token_targets("MaskedPerplexity", y_true, y_pred), "int32")
        xent = keras.losses.sparse_categorical_crossentropy(
            y_true, ops.cast(y_pred, "float32"), from_logits=True
        )
        weight = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, "float32")
        super().update_state(xent, sample_weight=weight)

    def result(self):
        return ops.exp(super().result())

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="seqkeras")
class SmoothedTokenCrossEntropy(keras.losses.Loss):
    """Sparse cross-entropy from logits with label smoothing, averaged over
    the non-padding targets: `(1 - e) * -log p(y) + e * mean_v -log p(v)`
    (the smoothed target puts `1 - e + e / V` on `y` and `e / V` on every
    other token, as `keras.losses.CategoricalCrossentropy(label_smoothing=
    e)` does, without the one-hot (batch, time, V) tensor). Computed in
    float32 under mixed precision.

    Keras' `SparseCategoricalCrossentropy` takes no `label_smoothing` and
    `CategoricalCrossentropy` needs one-hot targets, hence this loss.

    Args:
        label_smoothing: `e`, in [0, 1).
        pad_id: the target id to ignore.
        name: the loss's name.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.training import SmoothedTokenCrossEntropy
        >>> loss = SmoothedTokenCrossEntropy(label_smoothing=0.1)
        >>> logits = np.zeros((1, 2, 4), "float32")  # uniform over 4 tokens
        >>> round(float(loss(np.array([[3, 0]]), logits)), 4)  # log(4)
        1.3863
    """

    def __init__(
        self, label_smoothing=0.1, pad_id=PAD, name="smoothed_token_cross_entropy", **kwargs
    ):
        _check_smoothing("SmoothedTokenCrossEntropy", label_smoothing)
        super().__init__(name=name, **kwargs)
        self.label_smoothing = float(label_smoothing)
        self.pad_id = _check_pad_id("SmoothedTokenCrossEntropy", pad_id)

    def call(self, y_true, y_pred):
        y_true = ops.cast(_token_targets("SmoothedTokenCrossEntropy", y_true, y_pred), "int32")
        logits = ops.cast(y_pred, "float32")
        log_p = logits - ops.logsumexp(logits, axis=-1, keepdims=True)
        nll = -ops.squeeze(
            ops.take_along_axis(log_p, ops.expand_dims(ops.maximum(y_true, 0), -1), axis=-1), -1
        )
        loss = (1.0 - self.label_smoothing) * nll - self.label_smoothing * ops.mean(log_p, axis=-1)
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        # the default reduction averages over every position; scaling by
        # all / valid makes it the mean over the valid targets
        total = ops.cast(ops.size(mask), "float32")
        return loss * mask * total / ops.maximum(ops.sum(mask), 1.0)

    def get_config(self):
        return {
            **super().get_config(),
            "label_smoothing": self.label_smoothing,
            "pad_id": self.pad_id,
        }


def _check_smoothing(name, label_smoothing):
    if (
        isinstance(label_smoothing, bool)
        or not isinstance(label_smoothing, numbers.Real)
        or not 0.0 <= label_smoothing < 1.0
    ):
        raise ValueError(
            f"`{name}` expects `label_smoothing` in [0, 1) (a number). "
            f"Received: label_smoothing={label_smoothing!r}"
        )


def masked_loss(pad_id=PAD, label_smoothing=0.0):
    """Sparse cross-entropy from logits, ignoring padding targets; with
    `label_smoothing` > 0 a `SmoothedTokenCrossEntropy`.

    Args:
        pad_id: the target id to ignore.
        label_smoothing: in [0, 1).

    Returns:
        A `keras.losses.Loss`.
    """
    _check_pad_id("masked_loss", pad_id)
    _check_smoothing("masked_loss", label_smoothing)
    if label_smoothing:
        return SmoothedTokenCrossEntropy(label_smoothing, pad_id)
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=pad_id)


@keras.saving.register_keras_serializable(package="seqkeras")
class PinballLoss(keras.losses.Loss):
    """The quantile (pinball) loss, averaged over every quantile, step and
    target:

        rho_q(y, f) = max(q (y - f), (q - 1) (y - f))

    whose minimiser over f is the q-quantile of y.

    Args:
        quantiles: the levels, one per entry of the predictions' last
            axis, each in (0, 1).
        name: the loss's name.

    Call: `y_true` (..., targets), `y_pred` (..., targets, quantiles).

    Examples:
        >>> import numpy as np
        >>> from seqkeras.training import PinballLoss
        >>> loss = PinballLoss([0.1, 0.9])
        >>> y = np.array([[[1.0]]]); f = np.array([[[[0.0, 0.0]]]])
        >>> round(float(loss(y, f)), 3)  # (0.1 * 1 + 0.9 * 1) / 2
        0.5
    """

    def __init__(self, quantiles, name="pinball", **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(quantiles, (str, bytes)) or not hasattr(quantiles, "__iter__"):
            raise TypeError(
                "`PinballLoss` expects `quantiles` to be a list of levels in (0, 1). "
                f"Received: quantiles={quantiles!r}"
            )
        quantiles = list(quantiles)
        if any(isinstance(q, bool) or not isinstance(q, numbers.Real) for q in quantiles):
            raise TypeError(
                "`PinballLoss` expects `quantiles` to be numbers in (0, 1). "
                f"Received: quantiles={quantiles!r}"
            )
        quantiles = [float(q) for q in quantiles]
        if not quantiles or any(not 0.0 < q < 1.0 for q in quantiles):
            raise ValueError(
                f"`PinballLoss` expects quantiles in (0, 1). Received: quantiles={quantiles}"
            )
        self.quantiles = quantiles

    def call(self, y_true, y_pred):
        levels = tuple(y_pred.shape)[-1:]
        if len(tuple(y_pred.shape)) != len(tuple(y_true.shape)) + 1 or (
            levels[0] is not None and levels[0] != len(self.quantiles)
        ):
            raise ValueError(
                f"`PinballLoss` expects `y_pred` of shape y_true.shape + "
                f"({len(self.quantiles)},) (one value per quantile). "
                f"Received: y_true.shape={tuple(y_true.shape)}, "
                f"y_pred.shape={tuple(y_pred.shape)}"
            )
        q = ops.convert_to_tensor(self.quantiles, "float32")
        error = ops.expand_dims(ops.cast(y_true, "float32"), -1) - ops.cast(y_pred, "float32")
        loss = ops.maximum(q * error, (q - 1.0) * error)
        return ops.mean(ops.reshape(loss, (ops.shape(loss)[0], -1)), axis=-1)

    def get_config(self):
        return {"quantiles": self.quantiles, "name": self.name}


def compile_model(
    model,
    task=None,
    learning_rate=1e-3,
    clipnorm=1.0,
    weight_decay=0.0,
    jit_compile="auto",
    optimizer=None,
    label_smoothing=0.0,
    **kwargs,
):
    """Compiles `model` with seqkeras' defaults: Adam(W) with gradient
    clipping by global norm, XLA, and the task's loss and metrics.

    Args:
        model: a model from `seqkeras.models` (or any functional model).
        task: default: the model's own (see `infer_task`): classifiers get
            `"classes"`, forecasters `"regression"`, taggers, language
            models and seq2seq models `"tokens"`. Explicitly: `"tokens"`
            (logits per token: masked sparse cross-entropy, masked accuracy
            and perplexity; target id 0 is padding and ignored),
            `"classes"` (one label per sequence: sparse cross-entropy and
            accuracy; every label counts, 0 included) or `"regression"`
            (MSE and MAE; a forecaster with `quantiles`: `PinballLoss`).
            A task that contradicts the model's outputs raises a
            ValueError.
        learning_rate: a float or a `keras.optimizers.schedules` schedule.
        clipnorm: clip the global gradient norm (the seed notes'
            g <- min(1, tau / |g|) g); None disables.
        weight_decay: decoupled weight decay (AdamW) when > 0.
        jit_compile: compile the train step with XLA: True, False or
            "auto" (default): `choose_jit_compile(model)`'s choice, by
            backend, device, distribution strategy and dtype policy.
        optimizer: use this optimizer instead.
        label_smoothing: task `"tokens"`: smooth the targets by this much
            (`SmoothedTokenCrossEntropy`); the metrics stay unsmoothed.
        **kwargs: passed to `model.compile` (e.g. `steps_per_execution`).

    Returns:
        The model.

    Examples:
        >>> import seqkeras
        >>> model = seqkeras.models.classifier(20, 2, backbone="gru")
        >>> _ = seqkeras.training.compile_model(model)
        >>> type(model.loss).__name__, seqkeras.training.infer_task(model)
        ('SparseCategoricalCrossentropy', 'classes')
    """
    if jit_compile == "auto":
        jit_compile, _ = choose_jit_compile(model)
    elif not isinstance(jit_compile, bool):
        raise ValueError(
            "`compile_model` received an invalid value for `jit_compile`: "
            'expected True, False or "auto". Received: '
            f"jit_compile={jit_compile!r}"
        )
    if task is None:
        task = infer_task(model)
        if task is None:
            raise ValueError(
                "`compile_model` cannot tell the task of a model without "
                "symbolic inputs and outputs; pass task= one of "
                f"{TASKS}. Received: model={model.name!r}"
            )
    elif task not in TASKS:
        raise ValueError(
            f"`compile_model` received an invalid value for `task`: expected "
            f"one of {TASKS}. Received: task={task!r}"
        )
    else:
        _check_task(model, task)
    if label_smoothing and task != "tokens":
        raise ValueError(
            '`compile_model` applies `label_smoothing` to the "tokens" '
            f"task only. Received: label_smoothing={label_smoothing!r} for "
            f"task={task!r}"
        )
    if optimizer is None:
        clip = {} if clipnorm is None else {"global_clipnorm": clipnorm}
        if weight_decay:
            optimizer = keras.optimizers.AdamW(learning_rate, weight_decay=weight_decay, **clip)
        else:
            optimizer = keras.optimizers.Adam(learning_rate, **clip)
    if getattr(model, "own_loss", False):  # e.g. a CRFTagger
        if label_smoothing:
            raise ValueError(
                f"`compile_model`: {type(model).__name__} computes its own "
                "loss; `label_smoothing` does not apply"
            )
        kwargs.setdefault("loss", None)
        kwargs.setdefault("metrics", None)
        model.compile(optimizer=optimizer, jit_compile=jit_compile, **kwargs)
        return model
    if task == "tokens":
        loss = masked_loss(label_smoothing=label_smoothing)
        metrics = [MaskedAccuracy(), MaskedPerplexity()]
    elif task == "classes":
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    elif getattr(model, "quantiles", None):
        loss, metrics = PinballLoss(model.quantiles), []
    else:
        loss, metrics = "mse", [keras.metrics.MeanAbsoluteError(name="mae")]
    kwargs.setdefault("loss", loss)
    kwargs.setdefault("metrics", metrics)
    model.compile(optimizer=optimizer, jit_compile=jit_compile, **kwargs)
    return model


class TimeBudget(keras.callbacks.Callback):
    """A learning rate scheduled over wall time: linear warm-up over the
    first `warmup` steps, then a cosine decay to `alpha * peak` at
    `minutes` of training, when training stops (checked before and after
    every call of the train step). Runs of different models then get the
    same time and the same schedule shape. The optimizer's learning rate
    must be a variable (a float, not a schedule).

    Args:
        minutes: the training time, >= 0.
        peak: the largest learning rate, > 0.
        warmup: warm-up steps, an int >= 0.
        alpha: the final rate as a fraction of `peak`, in [0, 1].

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.classifier(10, 2, units=4, embedding_dim=4)
        >>> _ = seqkeras.training.compile_model(model, learning_rate=1e-3)
        >>> budget = seqkeras.training.TimeBudget(minutes=0.0, peak=1e-2)
        >>> history = model.fit(np.ones((8, 3), "int32"), np.zeros(8), epochs=5,
        ...                     callbacks=[budget], verbose=0)
        >>> len(history.history["loss"])  # stopped after the first step
        1
    """

    def __init__(self, minutes, peak, warmup=0, alpha=0.1):
        super().__init__()

        def number(x):
            return not isinstance(x, bool) and isinstance(x, numbers.Real)

        name = "TimeBudget"
        if not number(minutes) or not minutes >= 0:
            raise ValueError(f"`{name}` expects a number `minutes` >= 0. Received: {minutes!r}")
        if not number(peak) or not peak > 0:
            raise ValueError(f"`{name}` expects a number `peak` > 0. Received: {peak!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, numbers.Integral) or warmup < 0:
            raise ValueError(f"`{name}` expects an int `warmup` >= 0. Received: {warmup!r}")
        if not number(alpha) or not 0 <= alpha <= 1:
            raise ValueError(f"`{name}` expects a number `alpha` in [0, 1]. Received: {alpha!r}")
        self.seconds = 60 * minutes
        self.peak, self.warmup, self.alpha = peak, warmup, alpha
        self.start = time.perf_counter()

    def on_train_batch_begin(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        frac = min(1.0, (time.perf_counter() - self.start) / max(self.seconds, 1e-9))
        decay = self.alpha + (1 - self.alpha) * 0.5 * (1 + math.cos(math.pi * frac))
        warm = min(1.0, (step + 1) / self.warmup) if self.warmup else 1.0
        self.model.optimizer.learning_rate.assign(self.peak * warm * decay)

    def on_train_batch_end(self, batch, logs=None):
        if time.perf_counter() - self.start > self.seconds:
            self.model.stop_training = True


class ResetStatesAtEpochStart(keras.callbacks.Callback):
    """For truncated BPTT: zero the stateful layers' states before each
    epoch (the windows restart at the corpus start)."""

    def set_model(self, model):
        name = "ResetStatesAtEpochStart"
        if not isinstance(model, keras.Model):
            raise TypeError(
                f"`{name}` expects `model` to be a keras.Model. Received: {type(model).__name__}"
            )
        if not any(getattr(layer, "stateful", False) for layer in all_layers(model)):
            raise ValueError(
                f"`{name}`: `model` {model.name!r} has no stateful layer (build it with "
                "stateful=True); there are no states to reset"
            )
        super().set_model(model)

    def on_epoch_begin(self, epoch, logs=None):
        reset_states(self.model)


def reset_states(model):
    """Zeroes every stateful seqkeras layer in `model`.

    Args:
        model: a Keras model (or layer).

    Raises:
        TypeError: a `model` that is not a Keras layer or model.
    """
    if not isinstance(model, keras.Layer):
        raise TypeError(
            "`reset_states` expects `model` to be a keras.Model (or layer). Received: "
            f"{type(model).__name__} {model!r}"
        )
    for layer in all_layers(model):
        if getattr(layer, "stateful", False) and hasattr(layer, "reset_states"):
            layer.reset_states()


@keras.saving.register_keras_serializable(package="seqkeras")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's learning-rate schedule (Devlin et al. 2019): linear warm-up
    from 0 to `peak` over `warmup_steps`, then linear decay to 0 at
    `total_steps` (and 0 after).

    Args:
        peak: the largest learning rate, > 0.
        total_steps: positive int, the length of training in steps.
        warmup_steps: int in [0, total_steps).

    Examples:
        >>> from seqkeras.training import WarmupLinearDecay
        >>> s = WarmupLinearDecay(1e-3, total_steps=10, warmup_steps=2)
        >>> [round(float(s(i)), 6) for i in (0, 1, 2, 6, 10)]
        [0.0, 0.0005, 0.001, 0.0005, 0.0]
    """

    def __init__(self, peak, total_steps, warmup_steps=0):
        name = "WarmupLinearDecay"
        if not isinstance(peak, (int, float)) or not peak > 0:
            raise ValueError(f"`{name}` expects a number `peak` > 0. Received: {peak!r}")
        if not isinstance(total_steps, int) or total_steps < 1:
            raise ValueError(
                f"`{name}` expects an int `total_steps` >= 1. Received: {total_steps!r}"
            )
        if not isinstance(warmup_steps, int) or not 0 <= warmup_steps < total_steps:
            raise ValueError(
                f"`{name}` expects an int `warmup_steps` in [0, total_steps={total_steps}). "
                f"Received: {warmup_steps!r}"
            )
        self.peak, self.total_steps, self.warmup_steps = float(peak), total_steps, warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warm = step / max(1, self.warmup_steps)
        decay = (self.total_steps - step) / (self.total_steps - self.warmup_steps)
        rate = ops.where(step < self.warmup_steps, warm, decay)
        return self.peak * ops.clip(rate, 0.0, 1.0)

    def get_config(self):
        return {
            "peak": self.peak,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
        }


def cosine_schedule(peak, steps, warmup=0, alpha=0.05):
    """A cosine decay from `peak` to `alpha * peak` over `steps` steps,
    after a linear warm-up from 0 over the first `warmup` steps (if any):
    Keras' `CosineDecay`, its arguments checked.

    Args:
        peak: the largest learning rate, >= 0.
        steps: positive int, the length of training in steps (warm-up
            included).
        warmup: int in [0, steps].
        alpha: the final rate as a fraction of `peak`, in [0, 1].

    Returns:
        A `keras.optimizers.schedules.CosineDecay`.

    Examples:
        >>> from seqkeras.training import cosine_schedule
        >>> s = cosine_schedule(1e-3, steps=10, warmup=2, alpha=0.1)
        >>> [round(float(s(i)), 6) for i in (0, 1, 2, 10)]
        [0.0, 0.0005, 0.001, 0.0001]
    """
    name = "cosine_schedule"
    if isinstance(peak, bool) or not isinstance(peak, (int, float)) or not peak >= 0:
        raise ValueError(f"`{name}` expects a number `peak` >= 0. Received: {peak!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"`{name}` expects an int `steps` >= 1. Received: {steps!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup <= steps:
        raise ValueError(
            f"`{name}` expects an int `warmup` in [0, steps={steps}]. Received: {warmup!r}"
        )
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(f"`{name}` expects a number `alpha` in [0, 1]. Received: {alpha!r}")
    if warmup:
        return keras.optimizers.schedules.CosineDecay(
            0.0, max(1, steps - warmup), alpha=alpha, warmup_target=float(peak), warmup_steps=warmup
        )
    return keras.optimizers.schedules.CosineDecay(float(peak), steps, alpha=alpha)
