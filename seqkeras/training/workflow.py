"""The training workflow around `fit`: the model directory (`config.json`
rebuilds the model, `best.weights.h5` holds its best weights), the
callbacks that write it and let a killed run resume, and a dataset with
its length known."""

import csv
import inspect
import json
import os
import time

import keras

from seqkeras.layers import validation

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "best.weights.h5"


def _directory_arg(name, directory):
    return validation.path(name, "directory", directory, "a directory")


def _read_config(name, directory):
    """The `config.json` of `directory`, as a dict; errors name `name`."""
    directory = _directory_arg(name, directory)
    path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isdir(directory):
        raise ValueError(f"`{name}`: `directory` {directory}: no such directory")
    if not os.path.isfile(path):
        raise ValueError(
            f"`{name}`: `directory` {directory} is not a trained model directory (no "
            f"{CONFIG_FILE}; train a model into it first)"
        )
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (ValueError, OSError) as error:
        raise ValueError(
            f"`{name}`: the {CONFIG_FILE} of `directory` {directory} is unreadable ({error})"
        ) from None
    if not isinstance(config, dict):
        raise ValueError(
            f"`{name}`: the {CONFIG_FILE} of `directory` {directory} holds a "
            f"{type(config).__name__}, not a JSON object"
        )
    return config


def write_model_config(directory, config):
    """Writes `config` (a JSON-able dict with `builder`, `arguments` and
    `sizes`: what `build_from_config` needs) to `directory/config.json`.

    Args:
        directory: the model directory (made if missing).
        config: a dict; values JSON cannot hold are written as strings.

    Returns:
        The path written.

    Examples:
        >>> import tempfile
        >>> from seqkeras.training import read_model_config, write_model_config
        >>> d = tempfile.mkdtemp()
        >>> _ = write_model_config(d, {"builder": "classifier", "arguments": {},
        ...                            "sizes": {"vocab_size": 10, "num_classes": 2}})
        >>> read_model_config(d)["builder"]
        'classifier'
    """
    directory = _directory_arg("write_model_config", directory)
    if not isinstance(config, dict):
        raise TypeError(
            f"`write_model_config` expects `config` to be a dict. Received: {type(config).__name__}"
        )
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(
            f"`write_model_config` expects `directory` to be a directory. Received: the file "
            f"{directory!r}"
        )
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, CONFIG_FILE)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, default=str)
    return path


def read_model_config(directory):
    """The `config.json` of a model directory, as a dict.

    Args:
        directory: a directory `write_model_config` wrote to.

    Raises:
        ValueError: the directory does not exist, has no `config.json`,
            or its `config.json` is not a JSON object.
    """
    return _read_config("read_model_config", directory)


def build_from_config(config):
    """The model a config describes: `seqkeras.models.<builder>(**sizes,
    **arguments)`, or `seqkeras.pretrained.<name>(...)` for a builder
    `pretrained.<name>` (whose sizes include the checkpoint's
    `architecture`). The weights are new: `load_model_directory` loads
    the trained ones.

    Args:
        config: a dict with `builder` (a name), `arguments` and `sizes`
            (dicts of the builder's keyword arguments).

    Examples:
        >>> from seqkeras.training import build_from_config
        >>> model = build_from_config({"builder": "classifier", "arguments": {"units": 4},
        ...                            "sizes": {"vocab_size": 10, "num_classes": 2}})
        >>> model.output_shape
        (None, 2)
    """
    name = "build_from_config"
    if not isinstance(config, dict):
        raise TypeError(
            f"`{name}` expects `config` to be a dict. Received: {type(config).__name__}"
        )
    missing = [k for k in ("builder", "arguments", "sizes") if k not in config]
    if missing:
        raise ValueError(f"`{name}`: `config` has no {', '.join(missing)} (keys: {sorted(config)})")
    import seqkeras.models

    module, builder = seqkeras.models, config["builder"]
    if not isinstance(builder, str):
        raise ValueError(f"`{name}`: `config['builder']` must be a name. Received: {builder!r}")
    if builder.startswith("pretrained."):
        import seqkeras.pretrained

        module, builder = seqkeras.pretrained, builder.split(".", 1)[1]
    known = set(getattr(module, "__all__", ())) | set(getattr(module, "_RENAMED", {}))
    if builder not in known:
        raise ValueError(
            f"`{name}`: `config['builder']` {config['builder']!r} is not a builder of "
            f"{module.__name__}"
        )
    for key in ("arguments", "sizes"):
        if not isinstance(config[key], dict):
            raise ValueError(
                f"`{name}`: `config[{key!r}]` must be a dict. Received: {config[key]!r}"
            )
    function = getattr(module, builder)
    both = sorted(set(config["sizes"]) & set(config["arguments"]))
    if both:
        raise ValueError(f"`{name}`: `config['sizes']` and `config['arguments']` both give {both}")
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to check against
        parameters = ()
    if parameters and not any(p.kind is p.VAR_KEYWORD for p in parameters):
        accepted = {
            p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        for key in ("sizes", "arguments"):
            unknown = sorted(set(config[key]) - accepted)
            if unknown:
                raise ValueError(
                    f"`{name}`: `config[{key!r}]` holds {unknown}, which the builder "
                    f"{config['builder']!r} does not take"
                )
    return function(**config["sizes"], **config["arguments"])


def load_model_directory(directory):
    """`(model, config)`: the model of a model directory rebuilt from its
    `config.json` (`build_from_config`) with its best weights
    (`best.weights.h5`).

    Args:
        directory: a directory a training run wrote (the apps' `train`, or
            `write_model_config` and `training_callbacks`).

    Raises:
        ValueError: not a model directory, a config that does not build,
            or no weights yet (no epoch has finished).
    """
    name = "load_model_directory"
    config = _read_config(name, directory)
    directory = os.fspath(directory)
    try:
        model = build_from_config(config)
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"`{name}`: the {CONFIG_FILE} of `directory` {directory} does not build ({error})"
        ) from None
    weights = os.path.join(directory, WEIGHTS_FILE)
    if not os.path.isfile(weights):
        raise ValueError(
            f"`{name}`: `directory` {directory} has no {WEIGHTS_FILE} (training has not "
            "finished an epoch yet)"
        )
    model.load_weights(weights)
    return model, config


def read_training_history(directory):
    """`(config, rows, seconds)` of a trained model directory: its
    `config.json`, the rows of its `history.csv` (dicts of strings) and
    each epoch's wall seconds (`epoch_seconds.csv`).

    Args:
        directory: a model directory written by an app's `train`.

    Returns:
        `(config, rows, seconds)`.

    Raises:
        ValueError: not a model directory, or one without a training
            history.
    """
    config = _read_config("read_training_history", directory)
    directory = os.fspath(directory)
    try:
        with open(os.path.join(directory, "history.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        with open(os.path.join(directory, "epoch_seconds.csv"), newline="") as f:
            seconds = [float(r["seconds"]) for r in csv.DictReader(f)]
    except (OSError, KeyError, ValueError) as error:
        raise ValueError(
            f"`read_training_history`: `directory` {directory} has no training history ({error})"
        ) from None
    return config, rows, seconds


def best_so_far(history, monitor="val_loss", mode="min"):
    """The best `monitor` value in a history CSV (None if there is none):
    what a resumed run's best checkpoint must beat."""
    if not os.path.isfile(history):
        return None
    with open(history, newline="") as f:
        values = [float(r[monitor]) for r in csv.DictReader(f) if r.get(monitor)]
    if not values:
        return None
    return min(values) if mode == "min" else max(values)


class _Checkpoint(keras.callbacks.ModelCheckpoint):
    """A ModelCheckpoint of `target`'s weights (a model sharing the fitted
    model's layers, e.g. the forecaster a teacher-forced graph trains)."""

    def __init__(self, *args, target=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.target = target

    def set_model(self, model):
        super().set_model(model if self.target is None else self.target)


def training_callbacks(directory, monitor="val_loss", mode="min", target=None, checkpoint=None):
    """`(callbacks, checkpoint)` for `fit` writing a model directory:
    `BackupAndRestore` under `directory/backup` (a killed run resumes
    where it stopped), the best weights by `monitor` in
    `directory/best.weights.h5` (of `target` when given, else of the
    fitted model; a resumed run keeps the best of its history) or the
    given `checkpoint` callback, the history CSV, TensorBoard logs under
    `directory/logs` and each epoch's wall time (`EpochTimer`). On a
    multi-worker run, a worker other than the chief writes to a
    temporary directory.

    Args:
        directory: the model directory.
        monitor: the logged value that picks the best epoch.
        mode: "min" or "max".
        target: the model whose weights are saved, or None.
        checkpoint: None, or the callback that keeps the best epoch
            instead (with a `best` attribute, e.g. `LoraCheckpoint`: the
            adapters alone); it runs where the default would, after
            `BackupAndRestore` and before the history CSV.

    Examples:
        >>> import tempfile
        >>> from seqkeras.training import training_callbacks
        >>> callbacks, checkpoint = training_callbacks(tempfile.mkdtemp())
        >>> [type(c).__name__ for c in callbacks]
        ['BackupAndRestore', '_Checkpoint', 'CSVLogger', 'TensorBoard', 'EpochTimer']
    """
    from seqkeras.distribute import worker_path

    directory = _directory_arg("training_callbacks", directory)
    if mode not in ("min", "max"):
        raise ValueError(f"`training_callbacks` expects `mode` 'min' or 'max'. Received: {mode!r}")
    if not isinstance(monitor, str) or not monitor:
        raise ValueError(
            "`training_callbacks` expects `monitor` to be the name of a logged value (e.g. "
            f"'val_loss'). Received: {monitor!r}"
        )
    if target is not None and not isinstance(target, keras.Model):
        raise TypeError(
            "`training_callbacks` expects `target` to be a keras.Model or None. Received: "
            f"{type(target).__name__} {target!r}"
        )
    if checkpoint is not None and not (
        isinstance(checkpoint, keras.callbacks.Callback) and hasattr(checkpoint, "best")
    ):
        raise TypeError(
            "`training_callbacks` expects `checkpoint` to be None or a keras callback with a "
            f"`best` attribute (e.g. LoraCheckpoint). Received: {type(checkpoint).__name__}"
        )
    out = worker_path(directory)  # the chief's own; another worker's: a temp dir
    os.makedirs(out, exist_ok=True)
    history = os.path.join(out, "history.csv")
    if checkpoint is None:
        checkpoint = _Checkpoint(
            os.path.join(out, WEIGHTS_FILE),
            monitor=monitor,
            mode=mode,
            save_best_only=True,
            save_weights_only=True,
            target=target,
        )
        best = best_so_far(history, monitor, mode)
        if best is not None:
            checkpoint.best = best
    return [
        keras.callbacks.BackupAndRestore(os.path.join(out, "backup")),
        checkpoint,
        keras.callbacks.CSVLogger(history, append=True),
        keras.callbacks.TensorBoard(os.path.join(out, "logs")),
        EpochTimer(os.path.join(out, "epoch_seconds.csv")),
    ], checkpoint


class EpochTimer(keras.callbacks.Callback):
    """Appends each epoch's wall seconds to a CSV (`epoch,seconds`; kept
    across resumes).

    Args:
        path: the CSV file.

    Examples:
        >>> import os, tempfile, numpy as np, seqkeras
        >>> path = os.path.join(tempfile.mkdtemp(), "epochs.csv")
        >>> model = seqkeras.models.classifier(10, 2, units=4, embedding_dim=4)
        >>> _ = seqkeras.training.compile_model(model)
        >>> _ = model.fit(np.ones((4, 3), "int32"), np.zeros(4), epochs=2, verbose=0,
        ...               callbacks=[seqkeras.training.EpochTimer(path)])
        >>> open(path).read().splitlines()[0], len(open(path).read().splitlines())
        ('epoch,seconds', 3)
    """

    def __init__(self, path):
        super().__init__()
        path = validation.path("EpochTimer", "path", path, "a CSV file path")
        if os.path.isdir(path):
            raise ValueError(
                f"`EpochTimer` expects `path` to be a CSV file, not a directory. Received: {path!r}"
            )
        self.path = os.fspath(path)

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        new = not os.path.isfile(self.path)
        with open(self.path, "a") as f:
            if new:
                f.write("epoch,seconds\n")
            f.write(f"{epoch},{time.perf_counter() - self.start:.1f}\n")


def with_cardinality(dataset):
    """`(dataset, steps)`: a finite `tf.data` dataset with its number of
    batches counted once (one pass) and asserted, so Keras shows a
    progress bar with an end, a schedule knows its length and validation
    does not "run out of data".

    Args:
        dataset: a finite `tf.data.Dataset`.

    Returns:
        `(dataset, steps)`.

    Examples:
        >>> import tensorflow as tf
        >>> from seqkeras.training import with_cardinality
        >>> data = tf.data.Dataset.range(10).filter(lambda x: x % 2 == 0).batch(2)
        >>> int(data.cardinality())  # unknown
        -2
        >>> data, steps = with_cardinality(data)
        >>> steps, int(data.cardinality())
        (3, 3)
    """
    import tensorflow as tf  # a tf.data helper: TensorFlow-specific

    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(
            "`with_cardinality` expects `dataset` to be a tf.data.Dataset. Received: "
            f"{type(dataset).__name__}"
        )
    if dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
        raise ValueError(
            "`with_cardinality` expects a finite `dataset`; this one is infinite (it repeats), "
            "its batches cannot be counted"
        )
    steps = sum(1 for _ in dataset)
    return dataset.apply(tf.data.experimental.assert_cardinality(steps)), steps


class PretrainingRun:
    """A model directory of a pretraining run (`apps/pretrain.py`) whose
    objective is `bilm` (an ELMo biLM) or `span` (T5's span corruption),
    read as the `init` of a fine-tuning run.

    Attributes:
        directory: the run's directory.
        model_type: its objective, "bilm" or "span".
        architecture: its builder's arguments.
        sizes: its builder's sizes.
        encoder_only: with `span`, copy only the encoder (a translation
            model's encoder starts from it).

    Args:
        directory: the run's model directory.
        encoder_only: with `span`, copy only the encoder (a translation
            model's encoder starts from it).
    """

    source = "apps/pretrain.py"

    def __init__(self, directory, encoder_only=False):
        config = _read_config("PretrainingRun", directory)
        if config.get("objective") not in ("bilm", "span"):
            raise ValueError(
                f"`PretrainingRun`: `directory` {os.fspath(directory)} is not a bilm or span "
                f"pretraining run (objective {config.get('objective')!r})"
            )
        for key in ("arguments", "sizes"):
            if not isinstance(config.get(key), dict):
                raise ValueError(
                    f"`PretrainingRun`: the {CONFIG_FILE} of `directory` {os.fspath(directory)} "
                    f"has no {key!r} dict. Received: {config.get(key)!r}"
                )
        if not isinstance(encoder_only, bool):
            raise TypeError(
                f"`PretrainingRun` expects `encoder_only` to be a bool. Received: {encoder_only!r}"
            )
        self.directory, self.model_type = os.fspath(directory), config["objective"]
        self.architecture, self.sizes = dict(config["arguments"]), dict(config["sizes"])
        self.encoder_only = encoder_only

    def copy_weights(self, model):
        """Copies the run's weights into `model`: the biLM layers (frozen)
        for `bilm`; for `span` all weights, or the encoder's with
        `encoder_only`. Returns a line saying what was copied."""
        from seqkeras.models import load_bilm, load_encoder

        trained = load_model_directory(self.directory)[0]
        if self.model_type == "bilm":
            load_bilm(model, trained)
            return f"ELMo: the biLM of {self.directory}, frozen"
        if self.encoder_only:
            names = load_encoder(model, trained)
            return f"the encoder of {self.directory} (span corruption): {', '.join(names)}"
        model.set_weights(trained.get_weights())
        return f"initialised from {self.directory} (span corruption)"


class LoraCheckpoint(keras.callbacks.Callback):
    """Saves a LoRA model's adapters (`seqkeras.models.save_lora`: the only
    trained weights, megabytes instead of the model's hundreds) whenever
    the monitored value improves: the best checkpoint of a LoRA
    fine-tuning. A resumed run starts from the best value in its history
    CSV, so a worse epoch after a restart does not replace the adapters.

    Args:
        model: the model with adapters (`seqkeras.models.with_lora`).
        path: the `.npz` file to write.
        monitor: the logged value, lower is better.
        history: a history CSV of an earlier part of the run, or None.

    Attributes:
        best: the best value so far.
    """

    def __init__(self, model, path, monitor="val_loss", history=None):
        super().__init__()
        name = "LoraCheckpoint"
        if not isinstance(model, keras.Model):
            raise TypeError(
                f"`{name}` expects `model` to be a keras.Model with LoRA adapters. Received: "
                f"{type(model).__name__}"
            )
        path = validation.path(name, "path", path, "a file path")
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(
                f"`{name}` expects `monitor` to be the name of a logged value (e.g. "
                f"'val_loss'). Received: {monitor!r}"
            )
        if history is not None:
            history = validation.path(name, "history", history, "a CSV path or None")
        self.lora_model, self.path, self.monitor = model, os.fspath(path), monitor
        best = best_so_far(history, monitor) if history else None
        self.best = float("inf") if best is None else float(best)

    def on_epoch_end(self, epoch, logs=None):
        from seqkeras.models import save_lora

        value = (logs or {}).get(self.monitor)
        if value is not None and value < self.best:
            self.best = float(value)
            save_lora(self.lora_model, self.path)
