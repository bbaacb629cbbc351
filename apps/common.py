"""What every app in `apps/` shares: the one training workflow and the
model directory it writes, the one-line error and `main`'s error handling.

The workflow of `train`:

1. `begin_training(args)`: the output directory, the precision policy
   (`--precision`) and the seed (`--seed`).
2. `new_model(args, app, sizes, options)`: the model, as a `(builder,
   arguments)` pair from the app's presets (`presets.json`, `--model`),
   shrunk by `--tiny`, overridden by options (`preset`); inside
   `--strategy`'s scope `seqkeras.models.<builder>(**sizes, **arguments)`
   compiled by `seqkeras.models.compile_model` with `--jit` (and a
   `cosine_schedule`; `build_and_compile`); `config.json` written, the
   layout every app shares: `{"builder", "arguments", "sizes"}` (what
   rebuilds the model: `build(config)`), the app's own keys, `model`,
   `parameters`, `precision`, `weights` and the `training` options.
3. `fit_and_report(...)`: the callbacks (progress bar, TensorBoard,
   `BackupAndRestore`, best checkpoint kept across a resume, history CSV,
   epoch times), a timed `fit`, the curves PNG.

`load(directory)` rebuilds the model of a model directory with its best
weights.

The apps import it as `common` (their own directory is on `sys.path` when
they run as scripts; the tests load them the same way)."""

import json
import os
import sys
import time

import keras

import plots
from train_callbacks import WEIGHTS, training_callbacks

CONFIG = "config.json"


class AppError(Exception):
    """Bad input: printed as one line, exit status 2."""


def shared_file(*parts):
    """A path under ../shared/data, or None where it is absent."""
    from seqkeras.data.text import shared_data_dir

    root = shared_data_dir()
    return None if root is None else os.path.join(root, *parts)


def read_data(reader, *args, what=None, **kwargs):
    """`reader(*args, **kwargs)` (a `seqkeras.data` reader); its
    ValueError or missing file is an AppError (prefixed with `what`)."""
    try:
        return reader(*args, **kwargs)
    except (ValueError, OSError) as error:
        raise AppError(f"{what}: {error}" if what else str(error)) from None


def counted(data):
    """`(data, steps)`: a finite `tf.data` dataset with its number of
    batches counted once and asserted (Keras then shows the progress bar
    and the cosine schedule knows its length from the first epoch)."""
    import tensorflow as tf

    steps = sum(1 for _ in data)
    return data.apply(tf.data.experimental.assert_cardinality(steps)), steps


def training_runs(directories):
    """`(directory, config, history rows, epoch seconds)` of each trained
    model directory (its `config.json`, `history.csv` and
    `epoch_seconds.csv`); AppError for one without a training history."""
    import csv

    runs = []
    for directory in directories:
        config = read_config(directory)
        try:
            with open(os.path.join(directory, "history.csv")) as f:
                rows = list(csv.DictReader(f))
            with open(os.path.join(directory, "epoch_seconds.csv")) as f:
                seconds = [float(r["seconds"]) for r in csv.DictReader(f)]
        except (OSError, KeyError, ValueError) as error:
            raise AppError(f"{directory}: no training history ({error})") from None
        runs.append((directory, config, rows, seconds))
    return runs


def read_config(directory):
    """The `config.json` of a trained model directory (AppError if it is
    not one)."""
    path = os.path.join(directory, CONFIG)
    if not os.path.isdir(directory):
        raise AppError(f"--model {directory}: no such directory")
    if not os.path.isfile(path):
        raise AppError(
            f"--model {directory} is not a trained model directory (no {CONFIG}; run `train` first)"
        )
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, OSError) as error:
        raise AppError(f"--model {directory}: unreadable {CONFIG} ({error})") from None


def write_config(directory, config):
    with open(os.path.join(directory, CONFIG), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, default=str)


def build(config):
    """`seqkeras.models.<builder>(**sizes, **arguments)` of a config
    (`pretrained.<builder>`: `seqkeras.pretrained`'s, whose sizes include
    the checkpoint's `architecture`)."""
    import seqkeras

    module, name = seqkeras.models, config["builder"]
    if name.startswith("pretrained."):
        import seqkeras.pretrained

        module, name = seqkeras.pretrained, name.split(".", 1)[1]
    builder = getattr(module, name)
    return builder(**config["sizes"], **config["arguments"])


def load(directory):
    """`(model, config)`: the model of a `train` output directory, rebuilt
    from its `config.json` with its best weights (AppError if it is not
    one or cannot be rebuilt)."""
    config = read_config(directory)
    try:
        model = build(config)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise AppError(f"--model {directory}: unreadable {CONFIG} ({error})") from None
    return load_weights(model, directory), config


def presets(app):
    """The app's model presets from `presets.json` beside the apps:
    `{"models": {name: [builder, arguments]}, "tiny": {argument: value}}`
    (`tiny`: a model of a few thousand parameters, for smoke runs)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "presets.json")) as f:
        return json.load(f)[app]


def preset(app, name, tiny=False, overrides=None):
    """`(builder, arguments)` of the app's preset `name` (`presets`): with
    `tiny`, the arguments the app's `tiny` table names take its values;
    then `overrides` (options given on the command line, None: not
    given). An override of an argument the preset does not take is an
    AppError."""
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


def new_model(args, app, sizes, options=None, trainer=None, overrides=None, init=None, **extra):
    """`(model, fitted, config)`: the model of a `train` run in one step:
    the app's preset `--model` (`preset`, with `--tiny` and `overrides`),
    its `sizes` (a dict, or `sizes(builder, arguments)` giving the dict
    and free to adjust the arguments), `build_and_compile` (`options`,
    `trainer`), the weights of the pretrained checkpoint `init` (a
    `seqkeras.pretrained.Checkpoint`, or None) copied in, and
    `config.json` written (`model_config`, with the app's `extra` keys and
    `model`: the preset name)."""
    builder, arguments = preset(app, args.model, args.tiny, overrides)
    if callable(sizes):
        sizes = sizes(builder, arguments)
    if init is not None:
        extra["init"] = init.directory
    config = model_config(args, builder, arguments, sizes, model=args.model, **extra)
    model, fitted = build_and_compile(args, config, options, trainer)
    if init is not None and getattr(args, "random_init", False):
        print(f"the network of {init.directory}, random weights (--random-init)")
    elif isinstance(init, PretrainRun):
        init.copy_weights(model)
    elif init is not None:
        from seqkeras.pretrained import load_pretrained

        unused = load_pretrained(model, init)
        print(
            f"initialised from {init.directory} ({init.source}; checkpoint tensors not used: "
            f"{', '.join(unused) or 'none'})"
        )
    write_config(args.out, config)
    return model, fitted, config


def begin_training(args):
    """The start of every `train`: `args.out` made, the `--precision`
    policy set, the `--seed` set. Returns the output directory."""
    os.makedirs(args.out, exist_ok=True)
    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    keras.utils.set_random_seed(args.seed)
    return args.out


def model_config(args, builder, arguments, sizes, **extra):
    """The `config.json` of a training run: `builder`, `arguments`,
    `sizes`, the app's `extra` keys, the weights file, the precision and
    the training options."""
    return {
        "builder": builder,
        "arguments": arguments,
        "sizes": sizes,
        **extra,
        "weights": WEIGHTS,
        "precision": args.precision,
        "training": {k: v for k, v in vars(args).items() if k != "func"},
    }


class PretrainRun:
    """`--init` of an `apps/pretrain.py` directory of `--objective bilm`
    (ELMo) or `span` (T5): `model_type` (the objective), `architecture`
    (the builder's arguments), `sizes`, `directory`, `source`."""

    source = "apps/pretrain.py"
    encoder_only = False  # a span run's encoder alone (translate.py)

    def __init__(self, directory, config):
        self.directory, self.model_type = directory, config["objective"]
        self.architecture, self.sizes = dict(config["arguments"]), dict(config["sizes"])

    def copy_weights(self, model):
        """Its weights into `model` (ELMo: the biLM layers; T5: all, or
        the encoder side with `encoder_only`)."""
        from seqkeras.models import load_bilm, load_encoder

        trained = load(self.directory)[0]
        if self.model_type == "bilm":
            load_bilm(model, trained)
            print(f"ELMo: the biLM of {self.directory}, frozen")
        elif self.encoder_only:
            try:
                names = load_encoder(model, trained)
            except ValueError as error:
                raise AppError(f"--init {self.directory}: {error}") from None
            print(f"the encoder of {self.directory} (span corruption): {', '.join(names)}")
        else:
            model.set_weights(trained.get_weights())
            print(f"initialised from {self.directory} (span corruption)")


#: The preset `--init` selects for each kind of pretrained model.
INIT_PRESETS = {
    "bert": "pretrained",
    "gpt2": "pretrained-gpt2",
    "bilm": "elmo",
    "span": "text-to-text",
}


def read_init(args, kinds=tuple(INIT_PRESETS)):
    """The `--init` checkpoint (`seqkeras.pretrained.read_checkpoint`, or a
    `PretrainedBiLM` for a biLM pretrained by `apps/pretrain.py`; AppError
    if it cannot be read or is not one of `kinds`), or None."""
    if not getattr(args, "init", None):
        return None
    from seqkeras.pretrained import read_checkpoint

    try:
        path = os.path.join(args.init, CONFIG)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
            if config.get("objective") in ("bilm", "span"):
                return _init_kind(args, PretrainRun(args.init, config), kinds)
            if config.get("objective"):
                raise ValueError(
                    f"a {config['objective']} run of pretrain.py: give its checkpoint/ "
                    "directory (mlm, causal)"
                )
        return _init_kind(args, read_checkpoint(args.init), kinds)
    except (ValueError, OSError, ImportError) as error:
        raise AppError(f"--init {args.init}: {error}") from None


def _init_kind(args, init, kinds):
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
    from seqkeras.models import WarmupLinearDecay

    total = steps * args.epochs
    return WarmupLinearDecay(args.lr, total, int(args.warmup * total))


def cosine_schedule(peak, steps, warmup=0, alpha=0.05):
    """Cosine decay from `peak` to `alpha * peak` over `steps` steps,
    after a linear warm-up over the first `warmup` steps (if any)."""
    if warmup:
        return keras.optimizers.schedules.CosineDecay(
            0.0, max(1, steps - warmup), alpha=alpha, warmup_target=peak, warmup_steps=warmup
        )
    return keras.optimizers.schedules.CosineDecay(peak, steps, alpha=alpha)


def build_and_compile(args, config, options=None, trainer=None):
    """`(model, fitted)`: inside `--strategy`'s scope, the model of
    `config` (a ValueError from its builder is an AppError) and the model
    to fit (`trainer(model)`, e.g. a teacher-forcing graph; default the
    model itself), compiled by `seqkeras.models.compile_model` with
    `--jit` and `options(model)` (a dict of its arguments, made inside
    the scope: a learning rate, schedule or optimizer, a loss). The
    config gets the model's parameter count."""
    import seqkeras

    with strategy_scope(args):
        try:
            model = build(config)
        except ValueError as error:
            raise AppError(str(error)) from None
        fitted = model if trainer is None else trainer(model)
        seqkeras.models.compile_model(
            fitted, jit_compile=jit_option(args), **(options(model) if options else {})
        )
    config["parameters"] = int(model.count_params())
    return model, fitted


def fit_and_report(
    model,
    args,
    data,
    kill_env,
    curves,
    validation=None,
    monitor="val_loss",
    mode="min",
    extra_callbacks=(),
    target=None,
    **fit_options,
):
    """Fits `model` on `data` for `--epochs` with the callbacks of
    `train_callbacks.training_callbacks` (the `extra_callbacks` run after `BackupAndRestore` and
    before the checkpoint, so the metrics they add to the logs are
    checkpointed and written), times it and plots `curves` (the
    `plot_curves` arguments after the paths) from the history. Prints
    and returns `(seconds, best monitored value)`."""
    out = args.out
    callbacks, checkpoint = training_callbacks(out, kill_env, monitor, mode, target)
    callbacks[1:1] = list(extra_callbacks)
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
    png = plots.plot_curves(
        os.path.join(out, "history.csv"), os.path.join(out, "curves.png"), *curves
    )
    print(
        f"trained in {seconds:.0f} s (this process); best {monitor} "
        f"{checkpoint.best:.4f}; curves: {png}"
    )
    return seconds, checkpoint.best


def export(model, args, name, signatures, check, samples, beside=(), more=None, **verify):
    """What every app's `export` does, into `--out` (default
    `MODEL/export`): the SavedModel with the app's `signatures` at the
    next version of `out/name` (TF Serving's layout); `check(path)`, the
    app's comparison of a signature with Keras in a process without
    seqkeras (a dict for the report; it raises on a difference); the
    servability audit (`seqkeras.export.assert_servable`); the forward
    pass written and verified in every format
    (`seqkeras.export.export_and_verify(model, name + "-forward",
    samples, **verify)`); the files `beside` (paths, or `(path, new
    name)`) copied next to the TFLite file; `more(report, out)`, a dict
    of the app's own further exports (e.g. a streaming step model);
    `report.json`. Returns the report."""
    import shutil

    from seqkeras.export import assert_servable, export_and_verify, next_version, saved_model

    out = args.out or os.path.join(args.model, "export")
    version = next_version(os.path.join(out, name))
    path = saved_model(model, os.path.join(out, name, str(version)), signatures=signatures)
    names = ", ".join(["serving_default"] + [n for s in signatures for n in s.names])
    print(f"SavedModel: {path} (signatures {names})")
    checked = check(path)
    audit = assert_servable(path)
    print(
        f"serving audit: {len(audit['ops'])} ops, XLA-only: "
        f"{audit['xla'] or 'none'}, TF Text ops: "
        f"{audit['tf_text'] or 'none'}, ops without a CPU kernel: "
        f"{audit['no_kernel'] or 'none'}"
    )
    report = export_and_verify(model, name + "-forward", samples, out, **verify)
    report.update({f"{name}_savedmodel": path, **checked, "serving_ops": len(audit["ops"])})
    directory = os.path.dirname(report["tflite"])
    for item in beside:
        source, new = item if isinstance(item, tuple) else (item, None)
        shutil.copy(source, os.path.join(directory, new or os.path.basename(source)))
    if more is not None:
        report.update(more(report, out))
    write_report(report, out)
    return report


def options(parser, spec, **help):
    """Adds an option per `name=default` word of `spec` (e.g. `"epochs=10
    lr=1e-3 warmup=0"`: `--epochs`, `--lr`, `--warmup`), its type that of
    the default (a Python literal; `name=int` or `name=float`: no default,
    None); `help` by option name (underscores)."""
    import ast

    for word in spec.split():
        name, value = word.split("=", 1)
        key = name.replace("-", "_")
        if value in ("int", "float"):
            kind, default = {"int": int, "float": float}[value], None
        else:
            default = ast.literal_eval(value)
            kind = type(default)
        parser.add_argument(f"--{name}", type=kind, default=default, help=help.get(key))


def subcommand(sub, name, summary, func, model=True, **model_options):
    """A subcommand parser (`summary`: its help line) running `func`, with
    `--model` (required; a model directory; `model_options` for its
    `add_argument`) unless `model` is False."""
    parser = sub.add_parser(name, help=summary)
    if model:
        parser.add_argument("--model", required=True, **model_options)
    parser.set_defaults(func=func)
    return parser


def load_weights(model, directory):
    weights = os.path.join(directory, WEIGHTS)
    if not os.path.isfile(weights):
        raise AppError(
            f"--model {directory} has no {WEIGHTS} (training has not finished an epoch yet)"
        )
    model.load_weights(weights)
    return model


def add_training_options(parser):
    """The `train` options every app shares: --precision, --jit,
    --strategy, --seed, --tiny, --verbose."""
    from seqkeras.distribute import STRATEGIES

    parser.add_argument("--precision", default="float32", choices=("float32", "mixed_bfloat16"))
    parser.add_argument(
        "--jit",
        default="auto",
        choices=("auto", "on", "off"),
        help="XLA: auto (default) lets compile_model choose by device, strategy and precision",
    )
    parser.add_argument(
        "--strategy",
        default="default",
        choices=STRATEGIES,
        help="tf.distribute strategy: mirrored (all local "
        "GPUs), multiworker (the cluster in TF_CONFIG; "
        "worker 0 writes the outputs), tpu (untested)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--tiny", action="store_true", help="a model of a few thousand parameters (smoke runs)"
    )
    parser.add_argument(
        "--verbose", type=int, default=1, help="Keras fit verbosity (1: progress bar)"
    )


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
        print(f"  {key}: {value:.3g}" if isinstance(value, float) else f"  {key}: {value}")


def stdin_lines(prog):
    """stdin's lines through the library's reader (UTF-8 checked; empty
    input is an empty list)."""
    from seqkeras.data.pipelines import text_lines

    try:
        return text_lines(sys.stdin.buffer.read(), "stdin", name=prog, allow_empty_input=True)
    except ValueError as error:
        raise AppError(str(error)) from None


def run(prog, parser, argv, required=()):
    """Parses `argv` and runs the subcommand; `AppError` -> one line on
    stderr and exit status 2. `required`: argument names whose default
    comes from ../shared/data and must be given where it is absent."""
    args = parser.parse_args(argv)
    for key in required:
        if hasattr(args, key) and getattr(args, key) is None:
            raise SystemExit(
                f"{prog}: error: --{key.replace('_', '-')} is needed (no ../shared/data here)"
            )
    try:
        args.func(args)
    except AppError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
