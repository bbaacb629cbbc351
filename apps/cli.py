"""The command line every app in `apps/` shares: the argparse options
several apps take (`--out`, the fit and export options, preset
overrides), subcommands, the `train` options, the one-line error and
`main`'s error handling, stdin lines, and the export step with its
report."""

import argparse
import json
import os
import sys


class AppError(Exception):
    """Bad input: printed as one line, exit status 2."""


def shared_file(*parts):
    """A path under ../shared/data, or None where it is absent."""
    from seqkeras.data.text import shared_data_dir

    root = shared_data_dir()
    return None if root is None else os.path.join(root, *parts)


def read_data(reader, *args, what=None, **kwargs):
    """`reader(*args, **kwargs)` (a library reader or loader); its
    ValueError or missing file is an AppError (prefixed with `what`)."""
    try:
        return reader(*args, **kwargs)
    except (ValueError, OSError) as error:
        raise AppError(f"{what}: {error}" if what else str(error)) from None


def add_out(parser, help="the model directory"):
    """A required `--out`."""
    parser.add_argument("--out", required=True, help=help)


def add_export_options(parser, check, help="validation examples the exports are checked on"):
    """`export`'s `--out` (default MODEL/export) and `--check` (how many
    examples, default `check`)."""
    parser.add_argument("--out", help="default: MODEL/export")
    parser.add_argument("--check", type=int, default=check, help=help)


def add_fit_options(parser, epochs, batch, lr=None, warmup=None, warmup_help=None):
    """`train`'s `--epochs`, `--batch`, `--lr` and, unless `warmup` is
    None, `--warmup` (steps for an int default, a fraction of the steps
    for a float one). `lr` None: an app that fine-tunes with `--init`
    (its default learning rate 2e-3, 1e-4 with `--init`, warmed up over
    the fraction `warmup` of the steps with `--init`)."""
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--batch", type=int, default=batch, help="examples per batch")
    lr_help = "peak learning rate"
    if lr is None:  # the defaults depend on --init
        lr_help = "peak learning rate (default 2e-3; with --init 1e-4)"
        warmup_help = "with --init: the fraction of steps that warm the learning rate up"
    parser.add_argument("--lr", type=float, default=lr, help=lr_help)
    if warmup is not None:
        parser.add_argument("--warmup", type=type(warmup), default=warmup, help=warmup_help)


def positive_int(text):
    """argparse's `type` for a count of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def add_beam_options(parser, beam=1, alpha=True):
    """Decoding's `--beam` (1: greedy) and, with `alpha`, `--alpha`."""
    parser.add_argument("--beam", type=positive_int, default=beam, help="1: greedy")
    if alpha:
        parser.add_argument("--alpha", type=float, default=0.0, help="length penalty exponent")


def add_overrides(parser, help="default: the preset's", **types):
    """One option per keyword, `--name` of `type` (e.g. `units=int`),
    default None: the model preset's value unless given."""
    for name, kind in types.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, help=help)


def subcommand(sub, name, summary, func, model=True, **model_options):
    """A subcommand parser (`summary`: its help line) running `func`, with
    `--model` (required; a model directory; `model_options` for its
    `add_argument`) unless `model` is False."""
    parser = sub.add_parser(name, help=summary)
    if model:
        parser.add_argument("--model", required=True, **model_options)
    parser.set_defaults(func=func)
    return parser


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
        help="tf.distribute strategy: mirrored (all local GPUs), multiworker (the cluster in "
        "TF_CONFIG; worker 0 writes the outputs), tpu (untested)",
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


def export(model, args, name, signatures, check, samples, beside=(), more=None, **verify):
    """What every app's `export` does, into `--out` (default
    `MODEL/export`): the SavedModel with the app's `signatures` at the
    next version of `out/name` (TF Serving's layout); `check(path)`, the
    app's comparison of a signature with Keras in a process without
    seqkeras (a dict for the report; it raises on a difference); the
    servability audit; the forward pass written and verified in every
    format (`seqkeras.export.export_and_verify(model, name + "-forward",
    samples, **verify)`); the files `beside` (paths, or `(path, new
    name)`) copied next to the TFLite file; `more(report, out)`, a dict
    of the app's own further exports; with `batching`, TF Serving's
    batching file; with `xla` (a `check` for it), the XLA-compiled variant
    at `out/<name>-xla`, checked and audited; `report.json`. Returns the
    report."""
    import shutil

    from seqkeras.export import assert_servable, export_and_verify, next_version, saved_model

    xla = verify.pop("xla", None)
    batching = verify.pop("batching", False)
    out = args.out or os.path.join(args.model, "export")
    version = next_version(os.path.join(out, name))
    path = saved_model(model, os.path.join(out, name, str(version)), signatures=signatures)
    names = ", ".join(["serving_default"] + [n for s in signatures for n in s.names])
    print(f"SavedModel: {path} (signatures {names})")
    checked = check(path)
    audit = assert_servable(path)
    print(
        f"serving audit: {len(audit['ops'])} ops, XLA-only: {audit['xla'] or 'none'}, TF Text "
        f"ops: {audit['tf_text'] or 'none'}, ops without a CPU kernel: "
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
    if batching:
        from seqkeras.export import batching_parameters

        report["batching_parameters"] = os.path.join(out, "batching_parameters.txt")
        batching_parameters(report["batching_parameters"])
        print(f"TF Serving batching file: {report['batching_parameters']}")
    if xla is not None:
        base = os.path.join(out, f"{name}-xla")
        path = os.path.join(base, str(next_version(base)))
        report[f"{name}_xla_savedmodel"] = saved_model(model, path, signatures, jit_compile=True)
        report.update(xla(path))
        audit = assert_servable(path, xla_jit=True)
        print(
            f"XLA SavedModel: {path} ({len(audit['xla_compiled'])} functions compiled by XLA; "
            f"XLA-only ops outside them: {audit['xla'] or 'none'}; TF Serving needs "
            "--xla_cpu_compilation_enabled=true)"
        )
    write_report(report, out)
    return report


def served(path, signature, label, what, matches, note="", **inputs):
    """`(equal, seconds)`: the SavedModel's `signature` called on `inputs`
    in a process without seqkeras (`seqkeras.export.fresh_signature`),
    `matches(outputs)` a boolean per example (served equal to Keras).
    Prints `<label> in a process without seqkeras: k/n <what> equal to
    Keras<note>`; AppError on a difference. `equal` is "k/n"."""
    from seqkeras.export import fresh_signature

    outputs, seconds = fresh_signature(path, signature, **inputs)
    found = [bool(m) for m in matches(outputs)]
    equal = f"{sum(found)}/{len(found)}"
    print(f"{label} in a process without seqkeras: {equal} {what} equal to Keras{note}")
    if not all(found):
        raise AppError(f"the exported {signature} signature differs from Keras ({path})")
    return equal, seconds
