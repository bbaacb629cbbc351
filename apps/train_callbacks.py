"""The callbacks of every app's `train`: progress bar, TensorBoard,
`BackupAndRestore` (a killed run resumes), the best checkpoint kept across
a resume, the history CSV and the epoch times."""

import csv
import os
import sys
import time

import keras

WEIGHTS = "best.weights.h5"


def best_so_far(history, monitor="val_loss", mode="min"):
    """The best `monitor` value in a resumed run's history.csv (so the best
    checkpoint is not overwritten by a worse epoch after a restart)."""
    if not os.path.isfile(history):
        return None
    with open(history, newline="") as f:
        values = [float(r[monitor]) for r in csv.DictReader(f) if r.get(monitor)]
    if not values:
        return None
    return min(values) if mode == "min" else max(values)


class _Checkpoint(keras.callbacks.ModelCheckpoint):
    """A ModelCheckpoint that saves `target`'s weights (a model sharing the
    trained model's layers, e.g. the forecaster a teacher-forced training
    graph trains) instead of the fitted model's."""

    def __init__(self, *args, target=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.target = target

    def set_model(self, model):
        super().set_model(model if self.target is None else self.target)


def training_callbacks(out, kill_env, monitor="val_loss", mode="min", target=None):
    """`(callbacks, checkpoint)`: BackupAndRestore under `out/backup`, the
    best weights by `monitor` in `out/best.weights.h5` (of `target` when
    given, else of the fitted model), `history.csv`,
    TensorBoard under `out/logs`, `epoch_seconds.csv`; with the
    environment variable `kill_env` set to N, a SIGKILL after epoch N (what
    the resume tests do to a run). A worker other than the chief of a
    multi-worker run writes all of these to a temporary directory."""
    from seqkeras.distribute import worker_path

    out = worker_path(out)  # the chief's own; another worker's: a temp dir
    os.makedirs(out, exist_ok=True)
    history = os.path.join(out, "history.csv")
    checkpoint = _Checkpoint(
        os.path.join(out, WEIGHTS),
        monitor=monitor,
        mode=mode,
        save_best_only=True,
        save_weights_only=True,
        target=target,
    )
    best = best_so_far(history, monitor, mode)
    if best is not None:
        checkpoint.best = best
    result = [
        keras.callbacks.BackupAndRestore(os.path.join(out, "backup")),
        checkpoint,
        keras.callbacks.CSVLogger(history, append=True),
        keras.callbacks.TensorBoard(os.path.join(out, "logs")),
        EpochTimer(os.path.join(out, "epoch_seconds.csv")),
    ]
    if os.environ.get(kill_env):
        result.append(KillAfter(int(os.environ[kill_env])))
    return result, checkpoint


class EpochTimer(keras.callbacks.Callback):
    """Appends each epoch's wall seconds to a CSV (survives resumes)."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        new = not os.path.isfile(self.path)
        with open(self.path, "a") as f:
            if new:
                f.write("epoch,seconds\n")
            f.write(f"{epoch},{time.perf_counter() - self.start:.1f}\n")


class KillAfter(keras.callbacks.Callback):
    """SIGKILL this process once epoch `n` (1-based) is backed up: what the
    resume test does to a training run."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.n:
            import signal

            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
