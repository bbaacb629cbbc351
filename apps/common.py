"""The training workflow every app in `apps/` shares, over
`seqkeras.training` (the model directory and its callbacks) and
`seqkeras.plots`: `begin_training` (output directory, precision, seed),
`new_model` (the app's preset from `presets.json`, built, compiled, an
`--init` checkpoint copied in, `config.json` written), `fit_and_report`
(the callbacks, a timed `fit`, the curves) and `load`. The command line
helpers are in `cli.py`; the apps import both from their own directory."""

import json
import os
import sys
import time

import keras

from cli import (  # noqa: F401  (the apps reach these through common)
    AppError,
    add_beam_options,
    add_export_options,
    add_fit_options,
    add_out,
    add_overrides,
    add_training_options,
    jit_option,
    read_data,
    run,
    shared_file,
    stdin_lines,
    export,
    served,
    subcommand,
    write_report,
)

CONFIG = "config.json"  # seqkeras.training.CONFIG_FILE
WEIGHTS = "best.weights.h5"  # seqkeras.training.WEIGHTS_FILE


def counted(data):
    """`(data, steps)`: `seqkeras.training.with_cardinality`; an AppError
    for data without a batch (too few examples for `--batch`)."""
    from seqkeras.training import with_cardinality

    data, steps = with_cardinality(data)
    if not steps:
        raise AppError("no full batch of examples: too little data for --batch")
    return data, steps


def training_runs(directories):
    """`(config, history rows, epoch seconds)` of each trained model
    directory (AppError for one without a training history)."""
    from seqkeras.training import read_training_history

    return [read_data(read_training_history, d, what=d) for d in directories]


def load(directory):
    """`(model, config)`: `seqkeras.training.load_model_directory`."""
    from seqkeras.training import load_model_directory

    return read_data(load_model_directory, directory, what="--model")


def presets(app):
    """The app's model presets from `presets.json` beside the apps:
    `{"models": {name: [builder, arguments]}, "tiny": {argument: value}}`
    (`tiny`: a model of a few thousand parameters, for smoke runs)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "presets.json")) as f:
        return json.load(f)[app]


def preset(app, name, tiny=False, overrides=None):
    """`(builder, arguments)` of the app's preset `name`: with `tiny`, the
    arguments the app's `tiny` table names take its values; then
    `overrides` (options given on the command line; None: not given). An
    override of an argument the preset does not take is an AppError."""
    table = presets(app)
    builder, arguments = table["models"][name]
    arguments = dict(arguments)
    if tiny:
        arguments.update({k: v for k, v in table["tiny"].items() if k in arguments})
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in arguments:
            raise AppError(f"--{key.replace('_', '-')} does not apply to --model {name}")
        arguments[key] = value
    return builder, arguments


def new_model(args, app, sizes, compiling=None, trainer=None, overrides=None, init=None, **extra):
    """`(model, fitted, config)`: the model of a `train` run: the app's
    preset `--model` (`preset`), its `sizes` (a dict, or `sizes(builder,
    arguments)` giving the dict and free to adjust the arguments),
    `build_and_compile` (`compiling`, `trainer`), the weights of `init` (a
    pretrained checkpoint or a `seqkeras.training.PretrainingRun`, or
    None) copied in, and `config.json` written with the app's `extra`
    keys and `model`: the preset name."""
    from seqkeras.training import PretrainingRun, write_model_config

    builder, arguments = preset(app, args.model, args.tiny, overrides)
    if callable(sizes):
        sizes = sizes(builder, arguments)
    if init is not None:
        extra["init"] = init.directory
    config = {
        "builder": builder,
        "arguments": arguments,
        "sizes": sizes,
        "model": args.model,
        **extra,
        "weights": WEIGHTS,
        "precision": args.precision,
        "training": {k: v for k, v in vars(args).items() if k != "func"},
    }
    model, fitted = build_and_compile(args, config, compiling, trainer)
    if init is not None and getattr(args, "random_init", False):
        print(f"the network of {init.directory}, random weights (--random-init)")
    elif isinstance(init, PretrainingRun):
        print(read_data(init.copy_weights, model, what=f"--init {init.directory}"))
    elif init is not None:
        from seqkeras.pretrained import load_pretrained

        unused = load_pretrained(model, init)
        print(
            f"initialised from {init.directory} ({init.source}; checkpoint tensors not used: "
            f"{', '.join(unused) or 'none'})"
        )
    write_model_config(args.out, config)
    return model, fitted, config


def begin_training(args):
    """The start of every `train`: `args.out` made, the `--precision`
    policy set, the `--seed` set. Returns the output directory."""
    os.makedirs(args.out, exist_ok=True)
    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    keras.utils.set_random_seed(args.seed)
    return args.out


#: The preset `--init` selects for each kind of pretrained model.
INIT_PRESETS = {
    "bert": "pretrained",
    "gpt2": "pretrained-gpt2",
    "bilm": "elmo",
    "span": "text-to-text",
}


def read_init(args, kinds=tuple(INIT_PRESETS)):
    """The `--init` checkpoint (`seqkeras.pretrained.read_checkpoint`, or a
    `seqkeras.training.PretrainingRun` of `apps/pretrain.py`; AppError if
    it cannot be read or is not one of `kinds`), or None."""
    if not getattr(args, "init", None):
        return None
    from seqkeras.pretrained import read_checkpoint
    from seqkeras.training import PretrainingRun

    try:
        path = os.path.join(args.init, CONFIG)
        objective = None
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                objective = json.load(f).get("objective")
        if objective in ("bilm", "span"):
            init = PretrainingRun(args.init)
        elif objective:
            raise ValueError(
                f"a {objective} run of pretrain.py: give its checkpoint/ directory (mlm, causal)"
            )
        else:
            init = read_checkpoint(args.init)
    except (ValueError, OSError, ImportError) as error:
        raise AppError(f"--init {args.init}: {error}") from None
    if init.model_type not in kinds:
        raise AppError(
            f"--init {args.init}: a {init.model_type} model; this app fine-tunes {', '.join(kinds)}"
        )
    return init


def init_options(args, init, scratch_model, **defaults):
    """`--init` and `--model` together: the `pretrained` preset with a
    checkpoint (`init`, from `read_init`), `scratch_model` without one;
    each option in `defaults` (`name=(from scratch, from a checkpoint)`)
    that the command line left None takes its default (AppError when
    `--model` and `--init` disagree)."""
    preset = INIT_PRESETS[init.model_type] if init else None
    if args.model is None:
        args.model = preset or scratch_model
    if (args.model in INIT_PRESETS.values() or init is not None) and args.model != preset:
        raise AppError(
            "--init DIR sets --model: pretrained (BERT), pretrained-gpt2 (GPT-2), elmo (a "
            "biLM) or text-to-text (a span-corruption seq2seq)"
        )
    fine_tunes = init is not None and init.model_type != "bilm"  # ELMo's biLM stays frozen
    for name, (scratch, pretrained) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, pretrained if fine_tunes else scratch)


def bert_schedule(args, steps):
    """BERT's learning rate over `--epochs` of `steps`: a linear warm-up
    over the `--warmup` fraction to `--lr`, then a linear decay to 0."""
    from seqkeras.training import WarmupLinearDecay

    total = steps * args.epochs
    return WarmupLinearDecay(args.lr, total, int(args.warmup * total))


def build_and_compile(args, config, compiling=None, trainer=None):
    """`(model, fitted)`: inside `--strategy`'s scope, the model of
    `config` and the model to fit (`trainer(model)`, e.g. a teacher-forcing
    graph; default the model itself), compiled with `--jit` and
    `compiling(model)` (a dict of `compile_model`'s arguments, made inside
    the scope). The config gets the model's parameter count."""
    from seqkeras.distribute import get_strategy
    from seqkeras.training import build_from_config, compile_model

    scope = read_data(lambda: get_strategy(args.strategy).scope())
    with scope:
        model = read_data(build_from_config, config)
        fitted = model if trainer is None else trainer(model)
        extra = compiling(model) if compiling else {}
        compile_model(fitted, jit_compile=jit_option(args), **extra)
    config["parameters"] = int(model.count_params())
    return model, fitted


def distribution_scope(kind, model):
    """The scope `--distribute` names: None, nothing; on JAX,
    `keras.distribution` (`"data"`, or `"model"` with `model`'s weights
    split over the devices); on TensorFlow, `"data"` is MirroredStrategy
    and `"model"` an AppError."""
    import contextlib

    import seqkeras.distribute as dist

    if kind is None:
        return contextlib.nullcontext()
    print(f"--distribute {kind}: {len(keras.distribution.list_devices())} devices")
    if keras.backend.backend() == "jax":
        return dist.get_distribution(kind, model).scope()
    if kind == "model":
        raise AppError(
            "--distribute model splits the weights with keras.distribution, which runs on "
            "JAX here: set KERAS_BACKEND=jax (on TensorFlow, --distribute data)"
        )
    return dist.get_strategy("mirrored").scope()


def in_new_process(function, *args):
    """`function(*args)` (a module-level function of the app) in a new
    Python process, which ends when it returns: what it loaded (a model)
    is given back to the system before the caller goes on. Its exceptions
    are raised here."""
    import concurrent.futures
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # nothing of this process copied
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(function, *args).result()


class KillAfter(keras.callbacks.Callback):
    """SIGKILL this process once epoch `n` (1-based) is backed up: what the
    resume tests do to a training run (`kill_env` set to N)."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.n:
            import signal

            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)


def fit_and_report(model, args, data, kill_env, curves, validation=None, *best, **fit_options):
    """Fits `model` on `data` for `--epochs` with
    `seqkeras.training.training_callbacks` (the best epoch by `monitor`,
    `mode`: positional after `validation`, or keywords; the weights of
    `target` if given, or the given `checkpoint` callback (e.g.
    `LoraCheckpoint`) instead; the `extra_callbacks` run after
    `BackupAndRestore` and before the checkpoint, so the metrics they log
    are checkpointed and written; with the environment variable `kill_env`
    set to N, a SIGKILL after epoch N), times it and plots `curves` (the
    `seqkeras.plots.plot_curves` arguments after the paths). Prints and
    returns `(seconds, best monitored value)`."""
    from seqkeras.plots import plot_curves
    from seqkeras.training import training_callbacks

    out = args.out
    monitor, mode = best or ("val_loss", "min")
    monitor = fit_options.pop("monitor", monitor)
    mode = fit_options.pop("mode", mode)
    target = fit_options.pop("target", None)
    given = fit_options.pop("checkpoint", None)
    callbacks, checkpoint = training_callbacks(out, monitor, mode, target, given)
    callbacks[1:1] = list(fit_options.pop("extra_callbacks", ()))
    if os.environ.get(kill_env):
        callbacks.append(KillAfter(int(os.environ[kill_env])))
    start = time.perf_counter()
    model.fit(
        data,
        validation_data=validation,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=args.verbose,
        **fit_options,
    )
    seconds = time.perf_counter() - start
    png = plot_curves(os.path.join(out, "history.csv"), os.path.join(out, "curves.png"), *curves)
    print(
        f"trained in {seconds:.0f} s (this process); best {monitor} "
        f"{checkpoint.best:.4f}; curves: {png}"
    )
    return seconds, checkpoint.best


def by_length(path, bins, scores, indices, xlabel, ylabel, title):
    """Prints a score per length bin for each model (`scores`: label ->
    values; `indices`: each bin's examples) and plots it
    (`seqkeras.plots.plot_by_length`)."""
    from seqkeras.plots import plot_by_length

    counts = [len(i) for i in indices]
    print(f"{ylabel} by length:", [f"{lo}-{hi}" for lo, hi in bins], "examples", counts)
    for label, values in scores.items():
        print(f"  {label}: " + " ".join(f"{x:.1f}" for x in values))
    print(f"plot: {plot_by_length(path, bins, scores, counts, xlabel, ylabel, title)}")
