"""A character language model (tiny-shakespeare by default) with seqkeras:
an LSTM, GRU, minGRU, Mamba, Mamba-2, Hawk, Griffin or Transformer over
characters, trained from scratch, that scores text, samples from a prompt
and runs one character at a time on a phone.

    python apps/charlm.py train --out runs/charlm --model lstm
    python apps/charlm.py evaluate --model runs/charlm --text some.txt   # loss = ...
    python apps/charlm.py sample --model runs/charlm --prompt "ROMEO:" \\
        --strategy top_p --top-p 0.9 --temperature 0.8
    python apps/charlm.py export --model runs/charlm
    python apps/charlm.py compare runs/lstm runs/transformer --out cmp.png

Data: any UTF-8 text file (`train`: the first 90% for training, the last
10% for validation, or `--validation FILE`). What each subcommand writes
and prints, and the errors: docs/guides/apps.md, "Command-line reference".
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quiet  # noqa: F401  (first: TensorFlow without its start-up lines)

import numpy as np

import keras
import seqkeras
from seqkeras.data import CharVocabulary, language_model_windows, random_windows_dataset
from seqkeras.data import read_text as read_utf8
from seqkeras.metrics import BitsPerCharacter, bits_per_character, windows_nll
from seqkeras.models import generate
from seqkeras.plots import plot_runs_against_time
from seqkeras.training import cosine_schedule

import common
from common import AppError

PROG = "charlm.py"
KILL_ENV = "CHARLM_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
VOCABULARY = "vocabulary.json"
MODELS = sorted(common.presets("charlm")["models"])  # presets.json
STRATEGIES = ("greedy", "top_k", "top_p", "temperature")


def read_text(path, what="--text"):
    """A UTF-8 file's text, CRLF read as LF (AppError if missing,
    unreadable or shorter than 2 characters)."""
    if path is None:
        raise AppError(f"{what} is needed (no ../shared/data here)")
    text = common.read_data(read_utf8, path, name=PROG, what=what)
    if len(text) < 2:
        raise AppError(f"{what} {path} has {len(text)} characters; at least 2 are needed")
    return text


def vocabulary_of(directory):
    path = os.path.join(directory, VOCABULARY)
    return common.read_data(CharVocabulary.load, path, what=f"--model {directory}")


def load(directory):
    """`(model, vocabulary, config)` from a `train` output directory."""
    model, config = common.load(directory)
    return model, vocabulary_of(directory), config


def train(args):
    text = read_text(args.text)
    split = len(text) if args.validation else int(0.9 * len(text))
    train_text = text[:split]
    val_text = read_text(args.validation, "--validation") if args.validation else text[split:]
    if len(train_text) < args.block + 2 or len(val_text) < 2:
        need = f"--block {args.block} needs at least {args.block + 2} (and 2 for validation)"
        raise AppError(f"--text {args.text}: {len(train_text)} training characters; {need}")
    out = common.begin_training(args)
    if os.path.isfile(os.path.join(out, VOCABULARY)):
        vocabulary = vocabulary_of(out)  # a resumed run keeps its own
    else:
        vocabulary = CharVocabulary.from_texts([train_text])
        vocabulary.save(out)
    steps = args.epochs * args.steps_per_epoch
    # a constant peak when `TimeBudget` schedules over wall time (--minutes)
    schedule = args.lr if args.minutes else cosine_schedule(args.lr, steps, args.warmup, 0.1)

    def options(model):
        optimizer = keras.optimizers.AdamW(
            schedule, weight_decay=args.weight_decay, beta_1=0.9, beta_2=0.99, global_clipnorm=1.0
        )
        # decay matrices only, as nanoGPT: not biases, norms or the 1-D rest
        optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
        return {"optimizer": optimizer, "steps_per_execution": args.steps_per_execution}

    def sizes(builder, arguments):  # attention's context is the block
        if builder in ("transformer_language_model", "griffin_language_model"):
            return {"vocab_size": len(vocabulary), "max_length": args.block}
        return {"vocab_size": len(vocabulary)}

    counts = dict(training_characters=len(train_text), validation_characters=len(val_text))
    keys = ("embedding_dim", "units", "hidden_dim", "num_layers", "num_heads", "dropout")
    overrides = {k: getattr(args, k) for k in keys}
    counts.update(block=args.block)
    model = common.new_model(args, "charlm", sizes, options, None, overrides, **counts)[0]
    ids = vocabulary.encode_text(train_text)
    data = random_windows_dataset(ids, args.block, args.batch, args.seed)
    validation = language_model_windows(vocabulary.encode_text(val_text), args.block)
    run = f"{args.epochs} epochs of {args.steps_per_epoch} batches of {args.batch} x {args.block}"
    chars = f"{len(vocabulary)} symbols, {len(train_text):,} training / {len(val_text):,} val"
    print(f"{args.model} language model: {model.count_params():,} parameters, {chars}, {run}")
    extra = [BitsPerCharacter()]  # val_bpc beside val_loss
    if args.minutes:  # the learning rate over wall time, stopping there
        extra.append(seqkeras.training.TimeBudget(args.minutes, args.lr, args.warmup))
    curves = (f"{args.model} character LM", "loss (nats per character)")
    curves += ("bpc", "bits per character")
    fit = dict(steps_per_epoch=args.steps_per_epoch, validation_batch_size=64, shuffle=False)
    _, best = common.fit_and_report(
        model, args, data, KILL_ENV, curves, validation, extra_callbacks=extra, **fit
    )
    print(f"best validation loss {bits_per_character(best):.4f} bits per character")


def score(model, vocabulary, config, text):
    """`(nats per character, characters scored, unknown characters)`."""
    ids = vocabulary.encode_text(text)
    windows = language_model_windows(ids, config["block"])
    total, count = windows_nll(model.predict_on_batch, *windows)
    return total / count, count, int((ids == 3).sum())


def evaluate(args):
    model, vocabulary, config = load(args.model)
    text = read_text(args.text)
    if args.tail is not None and not 0.0 < args.tail <= 1.0:
        raise AppError(f"--tail must be in (0, 1]; got {args.tail}")
    text = text[int((1.0 - (args.tail or 1.0)) * len(text)) :]  # 0.1: input.txt's validation
    if len(text) < 2:
        raise AppError(f"--tail {args.tail} of {args.text} leaves {len(text)} characters; 2 needed")
    start = time.perf_counter()
    loss, count, unknown = score(model, vocabulary, config, text)
    speed = count / (time.perf_counter() - start)
    scored = f"{count:,} characters scored in windows of {config['block']}"
    print(f"{args.text}: {scored} ({speed:,.0f} characters/s), {unknown} not in the vocabulary")
    print(f"bits per character = {bits_per_character(loss):.4f}, perplexity = {np.exp(loss):.3f}")
    print(f"loss = {loss:.4f}")


def sample(args):
    model, vocabulary, config = load(args.model)
    prompt = args.prompt.encode().decode("unicode_escape") if args.escapes else args.prompt
    if not prompt:
        raise AppError("--prompt is empty; give at least one character")
    unknown = "".join(sorted(set(prompt) - set(vocabulary.characters)))
    if unknown:
        raise AppError(f"--prompt has characters the model does not know: {unknown!r}")
    length = len(prompt) + args.length
    limit = model.max_generation_length
    if limit is not None and length > limit:
        more = f"more than the Transformer's context of {limit} characters"
        raise AppError(f"--length {args.length} after a {len(prompt)}-character prompt is {more}")
    strategy = "greedy"
    options = {}
    if args.strategy != "greedy":
        strategy = "sample"
        options = {"temperature": args.temperature, "seed": args.seed}
        options.update({k: getattr(args, k) for k in ("top_k", "top_p") if k == args.strategy})
    ids = np.repeat(vocabulary.encode_text(prompt)[None], args.samples, 0)
    options.update(prompt=ids, max_length=length, strategy=strategy, eos_id=None)
    out = common.read_data(generate, model, **options)  # a bad option: one line
    for i, row in enumerate(np.asarray(out)):
        if args.samples > 1:
            print(f"--- sample {i + 1}")
        print(vocabulary.decode(row[None])[0])


def export(args):
    from seqkeras.export import signatures as S

    model, vocabulary, config = load(args.model)
    val_text = None  # the training run's validation text
    training = config["training"]
    if training.get("validation") or training.get("text") and os.path.isfile(training["text"]):
        text = read_text(training.get("validation") or training["text"])
        val_text = text if training.get("validation") else text[int(0.9 * len(text)) :]
    length = min(config["block"], args.length)
    known = set(vocabulary.characters)
    prompts = [p for p in ("ROMEO:", "First Citizen:\n", "The ") if set(p) <= known]
    prompts = prompts or [vocabulary.characters[0]]

    def continuation(prompt):  # Keras' greedy continuation
        ids = vocabulary.encode_text(prompt)[None]
        ids = np.asarray(generate(model, prompt=ids, max_length=length, eos_id=None))
        return vocabulary.decode(ids[:, len(prompt) :])[0]

    def check(path):
        def matches(out):  # the served continuations against Keras'
            return [got == continuation(p) for p, got in zip(prompts, out["text"])]

        name = "generate_text"
        note = " (greedy)"
        same, _ = common.served(path, name, name, "continuations", matches, note, text=prompts)
        return {"generate_text_equal": same}

    sample_ids = vocabulary.encode_text((val_text or "".join(prompts))[: config["block"]])[None]
    ids = vocabulary.encode_text((val_text or "")[: args.check + 1])

    def metric(predict):  # nats per character over the first --check validation characters
        windows = language_model_windows(ids, config["block"])
        total, count = windows_nll(lambda ids: predict({"token_ids": ids}), *windows)
        return total / count

    def step_models(report, out):  # a Transformer needs the whole sequence
        if config["model"] == "transformer":
            return {}
        return streaming(model, vocabulary, config, out, val_text, sample_ids, args.check)

    signatures = [S.ServeText(vocabulary=vocabulary), *S.generation(length, vocabulary=vocabulary)]
    verify = dict(tolerance=1e-3, quantize=("dynamic_int8", "float16"))
    verify.update(metric=metric if val_text else None)
    beside = [os.path.join(args.model, VOCABULARY)]
    samples = [sample_ids[:, :16], sample_ids]
    common.export(model, args, "charlm", signatures, check, samples, beside, step_models, **verify)


def streaming(model, vocabulary, config, out, val_text, sample_ids, check):
    """The step models, float32 and quantized (`seqkeras.export.streaming_variants`),
    and their loss over the first `check` validation characters beside Keras'."""
    from seqkeras.export import streaming_variants

    directory = os.path.join(out, "streaming")
    os.makedirs(directory, exist_ok=True)
    vocabulary.save(directory)
    ids = vocabulary.encode_text(val_text[: check + 1]) if val_text else sample_ids[0]
    total, count = windows_nll(model.predict_on_batch, *language_model_windows(ids, len(ids)))
    report = {"step_keras_loss": total / count, "step_loss_characters": count}
    keras_loss = f"Keras loss over the first {count} validation characters in one window"
    print(f"streaming step models ({directory}); {keras_loss}: {total / count:.4f}")
    variants = ("float32", "dynamic_int8", "float16")
    found = streaming_variants(model, directory, {"token_ids": sample_ids}, ids, variants)
    for variant, f in found.items():
        what = f"{f['ms']:.4f} ms per character, max |logit diff| {f['diff']:.2g}"
        print(f"  {variant:>12}: {f['mb']:.2f} MB, {what}, loss {f['loss']:.4f}")
        report.update({f"step_{variant}_{k}": f[k] for k in ("ms", "diff", "loss", "mb")})
    return report


def compare(args):
    """Validation (and training) loss against wall time of trained runs,
    on one plot, with each run's model and parameter count."""
    runs = common.training_runs(args.runs)
    for directory, (config, rows, seconds) in zip(args.runs, runs):
        best = min(float(r["val_loss"]) for r in rows)
        print(
            f"{directory}: {config['model']}, {config['parameters'] / 1e6:.2f}M parameters, "
            f"{len(rows)} epochs in {sum(seconds[: len(rows)]) / 60:.1f} min, best validation "
            f"loss {best:.4f}"
        )
    what = ("loss (nats per character)", "character LMs on tiny-shakespeare")
    print(f"plot: {plot_runs_against_time(runs, args.out, *what, target=1.47, ylim=(1.0, 2.6))}")


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train a character language model", train, False)
    t.add_argument("--model", default="lstm", choices=MODELS)
    shakespeare = common.shared_file("tinyshakespeare", "input.txt")
    t.add_argument("--text", default=shakespeare, help="first 90%% train, last 10%% validation")
    common.add_out(t)
    t.add_argument("--validation", help="a separate validation text")
    common.add_overrides(
        t,
        embedding_dim=int,
        units=int,
        hidden_dim=int,
        num_layers=int,
        num_heads=int,
        dropout=float,
    )
    t.add_argument("--block", type=int, default=256, help="characters per training window")
    common.add_fit_options(t, epochs=40, batch=32, lr=2e-3, warmup=200)
    t.add_argument("--steps-per-epoch", type=int, default=200)
    t.add_argument("--steps-per-execution", type=int, default=20)
    minutes = "train this much wall time, the cosine over it; --epochs is then a cap"
    t.add_argument("--minutes", type=float, help=minutes)
    t.add_argument("--weight-decay", type=float, default=0.1)
    common.add_training_options(t)
    e = common.subcommand(sub, "evaluate", "nats per character of a text", evaluate)
    tail = "score only this last share of the file (0.1: tiny-shakespeare's validation split)"
    e.add_argument("--text", required=True)
    e.add_argument("--tail", type=float, help=tail)
    s = common.subcommand(sub, "sample", "continue a prompt", sample)
    s.add_argument("--escapes", action="store_true", help="read backslash escapes in --prompt")
    s.add_argument("--strategy", default="top_p", choices=STRATEGIES)
    s.add_argument("--prompt", default="ROMEO:")
    s.add_argument("--length", type=int, default=200, help="characters to add")
    s.add_argument("--temperature", type=float, default=0.8)
    s.add_argument("--top-k", type=int, default=10)
    s.add_argument("--top-p", type=float, default=0.9)
    s.add_argument("--samples", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    x = common.subcommand(sub, "export", "SavedModel, TFLite (step model), ONNX, verified", export)
    common.add_export_options(x, 2000, "validation characters the step models score")
    x.add_argument("--length", type=int, default=128, help="generate signatures: characters in all")
    c = common.subcommand(sub, "compare", "loss against wall time of runs", compare, False)
    c.add_argument("runs", nargs="+", help="trained model directories")
    common.add_out(c, "the PNG file")
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("text",))


if __name__ == "__main__":
    main()
