"""What every app in `apps/` shares: the one-line error, the training
callbacks (progress bar, TensorBoard, `BackupAndRestore`, best checkpoint
kept across a resume, history CSV, epoch times), the curves PNG, the
`config.json` of a model directory, and `main`'s error handling.

The apps import it as `common` (their own directory is on `sys.path` when
they run as scripts; the tests load them the same way)."""

import csv
import json
import os
import sys
import time

import keras

CONFIG = "config.json"
WEIGHTS = "best.weights.h5"


class AppError(Exception):
    """Bad input: printed as one line, exit status 2."""


def shared_file(*parts):
    """A path under ../shared/data, or None where it is absent."""
    from seqkeras.data import shared_data_dir

    root = shared_data_dir()
    return None if root is None else os.path.join(root, *parts)


def read_config(directory):
    """The `config.json` of a trained model directory (AppError if it is
    not one)."""
    path = os.path.join(directory, CONFIG)
    if not os.path.isdir(directory):
        raise AppError(f"--model {directory}: no such directory")
    if not os.path.isfile(path):
        raise AppError(f"--model {directory} is not a trained model "
                       f"directory (no {CONFIG}; run `train` first)")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, OSError) as error:
        raise AppError(f"--model {directory}: unreadable {CONFIG} "
                       f"({error})") from None


def write_config(directory, config):
    with open(os.path.join(directory, CONFIG), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, default=str)


def load_weights(model, directory):
    weights = os.path.join(directory, WEIGHTS)
    if not os.path.isfile(weights):
        raise AppError(f"--model {directory} has no {WEIGHTS} (training "
                       "has not finished an epoch yet)")
    model.load_weights(weights)
    return model


def best_so_far(history, monitor="val_loss", mode="min"):
    """The best `monitor` value in a resumed run's history.csv (so the best
    checkpoint is not overwritten by a worse epoch after a restart)."""
    if not os.path.isfile(history):
        return None
    with open(history, newline="") as f:
        values = [float(r[monitor]) for r in csv.DictReader(f)
                  if r.get(monitor)]
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


def callbacks(out, kill_env, monitor="val_loss", mode="min", target=None):
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
        os.path.join(out, WEIGHTS), monitor=monitor, mode=mode,
        save_best_only=True, save_weights_only=True, target=target)
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


def plot_curves(history, path, title, loss_label, metric,
                metric_label):
    """Loss and `metric` per epoch (train and validation) from a
    history.csv, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(history, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    epochs = [int(r["epoch"]) + 1 for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for key, style in (("loss", "-"), ("val_loss", "--")):
        if key in rows[0]:
            axes[0].plot(epochs, [float(r[key]) for r in rows], style,
                         label=key)
    axes[0].set_ylabel(loss_label)
    for key, style in ((metric, "-"), ("val_" + metric, "--")):
        if key in rows[0]:
            axes[1].plot(epochs, [float(r[key]) for r in rows], style,
                         label=key)
    axes[1].set_ylabel(metric_label)
    for ax in axes:
        ax.set_xlabel("epoch")
        ax.legend()
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


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


def add_training_options(parser):
    """The `train` options every app shares: --precision, --jit,
    --strategy, --seed, --tiny, --verbose."""
    from seqkeras.distribute import STRATEGIES

    parser.add_argument("--precision", default="float32",
                        choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--jit", default="auto", choices=("auto", "on", "off"),
                        help="XLA: auto (default) lets compile_model choose "
                        "by device, strategy and precision")
    parser.add_argument("--strategy", default="default", choices=STRATEGIES,
                        help="tf.distribute strategy: mirrored (all local "
                        "GPUs), multiworker (the cluster in TF_CONFIG; "
                        "worker 0 writes the outputs), tpu (untested)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiny", action="store_true",
                        help="a model of a few thousand parameters (smoke "
                        "runs)")
    parser.add_argument("--verbose", type=int, default=1,
                        help="Keras fit verbosity (1: progress bar)")


def jit_option(args):
    """`--jit` as `compile_model`'s `jit_compile`."""
    return {"auto": "auto", "on": True, "off": False}[args.jit]


def strategy_scope(args):
    """The scope of `--strategy`'s `tf.distribute` strategy: build and
    compile the model inside it."""
    from seqkeras.distribute import get_strategy

    try:
        return get_strategy(args.strategy).scope()
    except ValueError as error:
        raise AppError(str(error)) from None


def write_report(report, out):
    """Writes an export report to `out/report.json` and prints it."""
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2, default=str)
    print("export report:")
    for key, value in report.items():
        print(f"  {key}: {value:.3g}" if isinstance(value, float)
              else f"  {key}: {value}")


def stdin_lines(prog):
    """stdin's lines through the library's reader (UTF-8 checked; empty
    input is an empty list)."""
    from seqkeras.data.pipelines import text_lines

    try:
        return text_lines(sys.stdin.buffer.read(), "stdin", name=prog,
                          allow_empty_input=True)
    except ValueError as error:
        raise AppError(str(error)) from None


def run(prog, parser, argv, required=()):
    """Parses `argv` and runs the subcommand; `AppError` -> one line on
    stderr and exit status 2. `required`: argument names whose default
    comes from ../shared/data and must be given where it is absent."""
    args = parser.parse_args(argv)
    for key in required:
        if hasattr(args, key) and getattr(args, key) is None:
            raise SystemExit(f"{prog}: error: --{key.replace('_', '-')} "
                             "is needed (no ../shared/data here)")
    try:
        args.func(args)
    except AppError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
