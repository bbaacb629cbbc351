"""A character language model (tiny-shakespeare by default) with seqkeras:
an LSTM, GRU or Transformer over characters, trained from scratch, that
scores text, samples from a prompt and runs one character at a time on a
phone.

    python apps/charlm.py train --out runs/charlm --model lstm
    python apps/charlm.py evaluate --model runs/charlm --text some.txt
    python apps/charlm.py sample --model runs/charlm --prompt "ROMEO:" \\
        --strategy top_p --top-p 0.9 --temperature 0.8
    python apps/charlm.py export --model runs/charlm
    python apps/charlm.py compare runs/lstm runs/transformer --out cmp.png

Data: any UTF-8 text file; `train` takes its first 90% of characters for
training and the last 10% for validation (`--text`, default
tiny-shakespeare, nanoGPT's split), or a separate `--validation` file.
The vocabulary is the training text's characters (ids 0-3 reserved:
PAD, BOS, EOS, UNK). Each epoch is `--steps-per-epoch` batches of random
windows of `--block` characters; after each one the validation text is
scored in consecutive windows of `--block` characters. `train` writes
into `--out`: `config.json`, `vocabulary.json` (the characters in id
order), `best.weights.h5` (the lowest validation loss), `history.csv`
(loss in nats per character; `val_bpc` in bits), `curves.png`,
`epoch_seconds.csv`, TensorBoard logs under `logs/` and `backup/`
(`BackupAndRestore`: kill the run, start the same command again, it
resumes). With `--minutes` the learning rate follows a cosine over that
much wall time (after `--warmup` steps) and training stops there, so runs
of different models get equal time; otherwise the cosine runs over
`--epochs` x `--steps-per-epoch` steps.

`evaluate` scores any UTF-8 text file: the mean negative log-likelihood
of each character after the first given those before it, in windows of
the model's `--block` characters; characters the vocabulary lacks count
as the unknown id (the count is printed). Its last line is
`loss = <nats per character>`. `sample` continues `--prompt` with greedy,
top-k, top-p (nucleus) or temperature sampling. `export` writes a
SavedModel with `generate`, `generate_text` and `serving_default`
signatures (checked in a process without seqkeras), the forward pass as
builtin-only TFLite and ONNX, and for a recurrent model the streaming
TFLite step model (one character and the states in, logits and the new
states out) with `vocabulary.json` beside it, float32 and quantized
(dynamic-range int8, float16), each with its per-character latency, its
largest difference from Keras and its validation loss (the quantized
forward-pass files likewise). `compare` plots the loss curves of trained
runs against wall time on one plot.

Bad input (a missing, empty or non-UTF-8 file, a directory that is not a
trained model, a prompt of characters the model does not know, options
out of range) ends with a one-line error and exit status 2.
"""

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402

import common  # noqa: E402
from common import AppError  # noqa: E402

PROG = "charlm.py"
KILL_ENV = "CHARLM_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
VOCABULARY = "vocabulary.json"
MODELS = ("lstm", "gru", "transformer")
# the builders' arguments per --model; the command line overrides them
DEFAULTS = {
    "lstm": {"embedding_dim": 512, "units": 1024, "num_layers": 1, "dropout": 0.2},
    "gru": {"embedding_dim": 512, "units": 1024, "num_layers": 1, "dropout": 0.2},
    "transformer": {"hidden_dim": 256, "num_layers": 6, "num_heads": 4, "dropout": 0.1},
}
TINY = {
    "lstm": {"embedding_dim": 16, "units": 16},
    "gru": {"embedding_dim": 16, "units": 16},
    "transformer": {"hidden_dim": 16, "num_layers": 1, "num_heads": 2},
}
STRATEGIES = ("greedy", "top_k", "top_p", "temperature")


def shakespeare():
    return common.shared_file("tinyshakespeare", "input.txt")


def read_text(path, what="--text"):
    """A UTF-8 file's text, CRLF read as LF (AppError if missing,
    unreadable or shorter than 2 characters)."""
    from seqkeras.data import read_text as read

    if path is None:
        raise AppError(f"{what} is needed (no ../shared/data here)")
    try:
        text = read(path, name=PROG)
    except (ValueError, OSError) as error:
        raise AppError(f"{what}: {error}") from None
    if len(text) < 2:
        raise AppError(
            f"{what} {path} has {len(text)} characters; a language model needs at least 2"
        )
    return text


def vocabulary_of(directory):
    from seqkeras.data import CharVocabulary

    path = os.path.join(directory, VOCABULARY)
    try:
        with open(path, encoding="utf-8") as f:
            return CharVocabulary(json.load(f)["characters"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise AppError(f"--model {directory}: unreadable {VOCABULARY} ({error})") from None


def write_vocabulary(directory, vocabulary):
    """`directory/vocabulary.json`: the characters in id order."""
    with open(os.path.join(directory, VOCABULARY), "w", encoding="utf-8") as f:
        json.dump(vocabulary.get_config(), f)


def build(kind, vocab_size, block, arguments):
    import seqkeras

    if kind == "transformer":
        return seqkeras.models.transformer_language_model(vocab_size, block, **arguments)
    return seqkeras.models.rnn_language_model(vocab_size, cell=kind, **arguments)


def load(directory):
    """`(model, vocabulary, config)` from a `train` output directory."""
    config = common.read_config(directory)
    vocabulary = vocabulary_of(directory)
    try:
        model = build(config["model"], len(vocabulary), config["block"], config["arguments"])
    except (ValueError, KeyError, TypeError) as error:
        raise AppError(f"--model {directory}: unreadable {common.CONFIG} ({error})") from None
    return common.load_weights(model, directory), vocabulary, config


# -- data ------------------------------------------------------------------


def windows(ids, block):
    """Consecutive (inputs, targets) windows over `ids`: every character
    after the first is a target once; the last window is right-padded with
    0 (PAD; the loss skips it)."""
    n = len(ids) - 1
    rows = max(1, -(-n // block))
    x = np.zeros((rows, block), "int32")
    y = np.zeros((rows, block), "int32")
    for r in range(rows):
        a, b = r * block, min((r + 1) * block, n)
        x[r, : b - a] = ids[a:b]
        y[r, : b - a] = ids[a + 1 : b + 1]
    return x, y


def random_windows(ids, block, batch, seed):
    """An endless `tf.data` of (inputs, targets) batches of windows of
    `block` characters starting at random offsets (nanoGPT's sampler)."""
    import tensorflow as tf

    ids = tf.constant(ids, tf.int32)
    starts = int(ids.shape[0]) - block - 1
    offsets = tf.range(block + 1, dtype=tf.int64)

    def gather(r):
        chunk = tf.gather(ids, tf.math.floormod(r, starts)[:, None] + offsets)
        return chunk[:, :-1], chunk[:, 1:]

    return (
        tf.data.Dataset.random(seed=seed)
        .batch(batch)
        .map(gather, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


def nll(predict, x, y, batch=64):
    """(sum of -log p(target), targets): every non-PAD target of the
    windows, from the logits `predict(ids)` (a model's `predict_on_batch`,
    or a runtime's) in float64."""
    total, count = 0.0, 0
    for start in range(0, len(x), batch):
        logits = np.asarray(predict(x[start : start + batch]), "float64")
        t = y[start : start + batch]
        top = logits.max(-1, keepdims=True)
        log_z = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
        picked = np.take_along_axis(logits, t[..., None], -1)[..., 0]
        keep = t != 0
        total += float(((log_z - picked) * keep).sum())
        count += int(keep.sum())
    return total, count


class BitsPerCharacter(keras.callbacks.Callback):
    """Adds `val_bpc` (bits per character) beside `val_loss` (nats)."""

    def on_epoch_end(self, epoch, logs=None):
        if logs and "val_loss" in logs:
            logs["val_bpc"] = logs["val_loss"] / math.log(2)


class TimeBudget(keras.callbacks.Callback):
    """A learning rate scheduled over wall time: linear warm-up over the
    first `warmup` steps, then cosine decay to `alpha * peak` at `minutes`
    of training in this process, when training stops (checked before and
    after every call of the train step). Runs of different models then
    get the same time and the same schedule shape."""

    def __init__(self, minutes, peak, warmup, alpha=0.1):
        super().__init__()
        self.seconds = 60 * minutes
        self.peak, self.warmup, self.alpha = peak, warmup, alpha
        self.start = time.perf_counter()

    def on_train_batch_begin(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        frac = min(1.0, (time.perf_counter() - self.start) / self.seconds)
        decay = self.alpha + (1 - self.alpha) * 0.5 * (1 + math.cos(math.pi * frac))
        warm = min(1.0, (step + 1) / self.warmup) if self.warmup else 1.0
        self.model.optimizer.learning_rate.assign(self.peak * warm * decay)

    def on_train_batch_end(self, batch, logs=None):
        if time.perf_counter() - self.start > self.seconds:
            self.model.stop_training = True


# -- train -----------------------------------------------------------------


def model_arguments(args):
    arguments = dict(DEFAULTS[args.model])
    if args.tiny:
        arguments.update(TINY[args.model])
    for key in ("embedding_dim", "units", "hidden_dim", "num_layers", "num_heads", "dropout"):
        value = getattr(args, key)
        if value is not None:
            if key not in arguments:
                raise AppError(f"--{key.replace('_', '-')} does not apply to --model {args.model}")
            arguments[key] = value
    return arguments


def train(args):
    import seqkeras
    from seqkeras.data import CharVocabulary

    text = read_text(args.text)
    if args.validation:
        train_text, val_text = text, read_text(args.validation, "--validation")
    else:
        split = int(0.9 * len(text))
        train_text, val_text = text[:split], text[split:]
    if len(train_text) < args.block + 2 or len(val_text) < 2:
        raise AppError(
            f"--text {args.text}: {len(train_text)} training "
            f"characters; --block {args.block} needs at least "
            f"{args.block + 2} (and 2 for validation)"
        )
    out = args.out
    os.makedirs(out, exist_ok=True)
    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    keras.utils.set_random_seed(args.seed)
    if os.path.isfile(os.path.join(out, VOCABULARY)):
        vocabulary = vocabulary_of(out)  # a resumed run keeps its own
    else:
        vocabulary = CharVocabulary.from_texts([train_text])
        write_vocabulary(out, vocabulary)
    arguments = model_arguments(args)
    with common.strategy_scope(args):  # build, compile
        try:
            model = build(args.model, len(vocabulary), args.block, arguments)
        except ValueError as error:
            raise AppError(str(error)) from None
        steps = args.epochs * args.steps_per_epoch
        if args.minutes:  # scheduled over wall time by `TimeBudget`
            schedule = args.lr
        else:
            schedule = keras.optimizers.schedules.CosineDecay(
                0.0,
                max(1, steps - args.warmup),
                alpha=0.1,
                warmup_target=args.lr,
                warmup_steps=args.warmup,
            )
        optimizer = keras.optimizers.AdamW(
            schedule, weight_decay=args.weight_decay, beta_1=0.9, beta_2=0.99, global_clipnorm=1.0
        )
        # decay matrices only, as nanoGPT: not biases, norms or the 1-D rest
        optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
        seqkeras.models.compile_model(
            model,
            optimizer=optimizer,
            jit_compile=common.jit_option(args),
            steps_per_execution=args.steps_per_execution,
        )
    data = random_windows(vocabulary.encode_text(train_text), args.block, args.batch, args.seed)
    validation = windows(vocabulary.encode_text(val_text), args.block)
    config = {
        "model": args.model,
        "arguments": arguments,
        "block": args.block,
        "vocabulary": VOCABULARY,
        "weights": common.WEIGHTS,
        "precision": args.precision,
        "parameters": int(model.count_params()),
        "training_characters": len(train_text),
        "validation_characters": len(val_text),
        "training": {k: v for k, v in vars(args).items() if k != "func"},
    }
    common.write_config(out, config)
    print(
        f"{args.model} language model: {model.count_params():,} "
        f"parameters, {len(vocabulary)} symbols, {len(train_text):,} "
        f"training / {len(val_text):,} validation characters, "
        f"{args.epochs} epochs of {args.steps_per_epoch} batches of "
        f"{args.batch} x {args.block}"
    )
    callbacks, checkpoint = common.callbacks(out, KILL_ENV)
    callbacks.insert(0, BitsPerCharacter())
    if args.minutes:
        callbacks.insert(0, TimeBudget(args.minutes, args.lr, args.warmup))
    start = time.perf_counter()
    model.fit(
        data,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        validation_data=validation,
        validation_batch_size=64,
        callbacks=callbacks,
        verbose=args.verbose,
        shuffle=False,
    )
    seconds = time.perf_counter() - start
    png = common.plot_curves(
        os.path.join(out, "history.csv"),
        os.path.join(out, "curves.png"),
        f"{args.model} character LM",
        "loss (nats per character)",
        "bpc",
        "bits per character",
    )
    best = checkpoint.best
    print(
        f"trained in {seconds:.0f} s (this process); best validation "
        f"loss {best:.4f} nats/char ({best / math.log(2):.4f} bits); "
        f"curves: {png}"
    )


# -- evaluate / sample -----------------------------------------------------


def score(model, vocabulary, config, text):
    """`(nats per character, characters scored, unknown characters)`."""
    ids = vocabulary.encode_text(text)
    x, y = windows(ids, config["block"])
    total, count = nll(model.predict_on_batch, x, y)
    return total / count, count, int((ids == 3).sum())


def evaluate(args):
    model, vocabulary, config = load(args.model)
    text = read_text(args.text)
    if args.tail is not None:  # e.g. 0.1: the validation split of input.txt
        if not 0.0 < args.tail <= 1.0:
            raise AppError(f"--tail must be in (0, 1]; got {args.tail}")
        text = text[int((1.0 - args.tail) * len(text)) :]
        if len(text) < 2:
            raise AppError(
                f"--tail {args.tail} of {args.text} leaves "
                f"{len(text)} characters; at least 2 are needed"
            )
    start = time.perf_counter()
    loss, count, unknown = score(model, vocabulary, config, text)
    seconds = time.perf_counter() - start
    print(
        f"{args.text}: {count:,} characters scored in windows of "
        f"{config['block']} ({count / seconds:,.0f} characters/s), "
        f"{unknown} not in the vocabulary"
    )
    print(f"bits per character = {loss / math.log(2):.4f}, perplexity = {math.exp(loss):.3f}")
    print(f"loss = {loss:.4f}")


def sample(args):
    import seqkeras

    model, vocabulary, config = load(args.model)
    prompt = args.prompt.encode().decode("unicode_escape") if args.escapes else args.prompt
    if not prompt:
        raise AppError("--prompt is empty; give at least one character")
    unknown = sorted(set(prompt) - set(vocabulary.characters))
    if unknown:
        raise AppError(f"--prompt has characters the model does not know: {''.join(unknown)!r}")
    length = len(prompt) + args.length
    limit = config["block"] if config["model"] == "transformer" else None
    if limit is not None and length > limit:
        raise AppError(
            f"--length {args.length} after a {len(prompt)}-"
            f"character prompt is more than the Transformer's "
            f"context of {limit} characters"
        )
    options = {}
    if args.strategy == "greedy":
        strategy = "greedy"
    else:
        strategy = "sample"
        options = {"temperature": args.temperature, "seed": args.seed}
        if args.strategy == "top_k":
            options["top_k"] = args.top_k
        elif args.strategy == "top_p":
            options["top_p"] = args.top_p
    ids = np.repeat(vocabulary.encode_text(prompt)[None], args.samples, 0)
    try:
        out = seqkeras.models.generate(
            model, prompt=ids, max_length=length, strategy=strategy, eos_id=None, **options
        )
    except ValueError as error:
        raise AppError(str(error)) from None
    for i, row in enumerate(np.asarray(out)):
        if args.samples > 1:
            print(f"--- sample {i + 1}")
        print(vocabulary.decode(row[None])[0])


# -- export ----------------------------------------------------------------


def export(args):
    import shutil

    from seqkeras.export import export_and_verify, next_version, saved_model
    from seqkeras.export.audit import audit_serving, fresh_signature
    from seqkeras.models import generate

    model, vocabulary, config = load(args.model)
    out = args.out or os.path.join(args.model, "export")
    name = "charlm"
    val_text = None
    if config["training"].get("validation"):
        val_text = read_text(config["training"]["validation"])
    elif config["training"].get("text") and os.path.isfile(config["training"]["text"]):
        text = read_text(config["training"]["text"])
        val_text = text[int(0.9 * len(text)) :]
    length = min(config["block"], args.length)
    path = saved_model(
        model,
        os.path.join(out, name, str(next_version(os.path.join(out, name)))),
        generate={"max_length": length},
        vocabulary=vocabulary,
    )
    prompts = ["ROMEO:", "First Citizen:\n", "The "]
    prompts = [p for p in prompts if set(p) <= set(vocabulary.characters)]
    prompts = prompts or [vocabulary.characters[0]]
    served, _ = fresh_signature(path, "generate_text", prompts)
    same = 0
    for prompt, got in zip(prompts, served["text"]):
        ids = vocabulary.encode_text(prompt)[None]
        want = vocabulary.decode(
            np.asarray(generate(model, prompt=ids, max_length=length, eos_id=None))[
                :, len(prompt) :
            ]
        )[0]
        same += got == want
    print(
        f"SavedModel: {path}; generate_text in a process without "
        f"seqkeras: {same}/{len(prompts)} continuations equal to Keras "
        f"greedy ({prompts[0]!r} -> {served['text'][0][:40]!r}...)"
    )
    if same != len(prompts):
        raise RuntimeError("the exported generate_text differs from Keras")
    audit = audit_serving(path)
    if audit["xla"] or audit["no_kernel"]:
        raise RuntimeError(f"not servable by TF Serving: {audit}")
    sample_ids = vocabulary.encode_text((val_text or "".join(prompts))[: config["block"]])[None]
    metric = None
    if val_text:  # nats per character over the first --check characters
        x, y = windows(vocabulary.encode_text(val_text[: args.check + 1]), config["block"])

        def metric(predict):
            total, count = nll(lambda ids: predict({"token_ids": ids}), x, y)
            return total / count

    report = export_and_verify(
        model,
        name + "-forward",
        [sample_ids[:, :16], sample_ids],
        out,
        tolerance=1e-3,
        quantize=("dynamic_int8", "float16"),
        metric=metric,
    )
    report.update(
        savedmodel=path, generate_text_equal=f"{same}/{len(prompts)}", serving_ops=len(audit["ops"])
    )
    if config["model"] != "transformer":
        report.update(streaming(model, vocabulary, config, out, val_text, sample_ids, args.check))
    common.write_report(report, out)
    shutil.copy(
        os.path.join(args.model, VOCABULARY),
        os.path.join(os.path.dirname(report["tflite"]), VOCABULARY),
    )


def step_loss(flatbuffer, ids):
    """Nats per character of the streaming step model over `ids`, one
    character per `invoke` (states carried from zeros)."""
    from seqkeras.export.tflite import tflite_runner

    step = tflite_runner(flatbuffer)
    states = {
        k: np.zeros((1,) + tuple(v["shape"][1:]), v["dtype"])
        for k, v in step.input_details.items()
        if k.startswith("state_")
    }
    total = 0.0
    for t in range(len(ids) - 1):
        out = step(token_ids=ids[t : t + 1], **states)
        states = {k.replace("new_", ""): v for k, v in out.items() if k.startswith("new_state_")}
        logits = out["logits"][0].astype("float64")
        top = logits.max()
        total += np.log(np.exp(logits - top).sum()) + top - logits[ids[t + 1]]
    return total / (len(ids) - 1)


def streaming(model, vocabulary, config, out, val_text, sample_ids, check):
    """The step model, float32 and quantized: file, size, latency per
    character, largest difference from Keras, validation loss over the
    first `check` validation characters (and Keras' over the same)."""
    from seqkeras.export import streaming_tflite
    from seqkeras.export.streaming import verify_streaming

    directory = os.path.join(out, "streaming")
    os.makedirs(directory, exist_ok=True)
    write_vocabulary(directory, vocabulary)
    ids = vocabulary.encode_text(val_text[: check + 1]) if val_text else sample_ids[0]
    x, y = windows(ids, len(ids))
    total, count = nll(model.predict_on_batch, x, y)
    report = {"step_keras_loss": total / count, "step_loss_characters": count}
    print(
        f"streaming step models ({directory}); Keras loss over the "
        f"first {count} validation characters in one window: "
        f"{total / count:.4f}"
    )
    for variant in ("float32", "dynamic_int8", "float16"):
        path = os.path.join(directory, f"step-{variant}.tflite")
        streaming_tflite(
            model, path, overwrite=True, quantize=None if variant == "float32" else variant
        )
        with open(path, "rb") as f:
            flatbuffer = f.read()
        diff, ms, _ = verify_streaming(model, flatbuffer, {"token_ids": sample_ids})
        loss = step_loss(flatbuffer, ids)
        print(
            f"  {variant:>12}: {len(flatbuffer) / 1e6:.2f} MB, "
            f"{ms:.4f} ms per character, max |logit diff| {diff:.2g}, "
            f"loss {loss:.4f}"
        )
        report.update(
            {
                f"step_{variant}_ms": ms,
                f"step_{variant}_diff": diff,
                f"step_{variant}_loss": loss,
                f"step_{variant}_mb": len(flatbuffer) / 1e6,
            }
        )
    return report


# -- compare ---------------------------------------------------------------


def compare(args):
    """Validation (and training) loss against wall time of trained runs,
    on one plot, with each run's model and parameter count."""
    import csv

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, directory in enumerate(args.runs):
        config = common.read_config(directory)
        try:
            with open(os.path.join(directory, "history.csv")) as f:
                rows = list(csv.DictReader(f))
            with open(os.path.join(directory, "epoch_seconds.csv")) as f:
                seconds = [float(r["seconds"]) for r in csv.DictReader(f)]
        except (OSError, KeyError, ValueError) as error:
            raise AppError(f"{directory}: no training history ({error})") from None
        minutes = np.cumsum(seconds[: len(rows)]) / 60
        label = f"{config['model']}, {config['parameters'] / 1e6:.2f}M parameters"
        val = [float(r["val_loss"]) for r in rows]
        ax.plot(minutes, val, color=f"C{i}", label=f"{label}: validation")
        ax.plot(
            minutes,
            [float(r["loss"]) for r in rows],
            color=f"C{i}",
            ls=":",
            alpha=0.7,
            label=f"{label}: training",
        )
        print(
            f"{directory}: {label}, {len(rows)} epochs in "
            f"{minutes[-1]:.1f} min, best validation loss {min(val):.4f}"
        )
    ax.axhline(1.47, color="k", lw=0.8, ls="--", label="1.47 (target)")
    ax.set_xlabel("training wall time (minutes, 2 CPU cores)")
    ax.set_ylabel("loss (nats per character)")
    ax.set_ylim(1.0, 2.6)
    ax.set_title("character LMs on tiny-shakespeare")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    plt.close(fig)
    print(f"plot: {args.out}")


# -- command line ----------------------------------------------------------


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a character language model")
    t.add_argument("--out", required=True, help="the model directory")
    t.add_argument("--model", default="lstm", choices=MODELS)
    t.add_argument(
        "--text", default=shakespeare(), help="UTF-8 text: first 90%% train, last 10%% validation"
    )
    t.add_argument("--validation", help="a separate validation text")
    t.add_argument("--embedding-dim", type=int)
    t.add_argument("--units", type=int)
    t.add_argument("--hidden-dim", type=int)
    t.add_argument("--num-layers", type=int)
    t.add_argument("--num-heads", type=int)
    t.add_argument("--dropout", type=float)
    t.add_argument("--block", type=int, default=256, help="characters per training window")
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--epochs", type=int, default=40)
    t.add_argument("--steps-per-epoch", type=int, default=200)
    t.add_argument("--steps-per-execution", type=int, default=20)
    t.add_argument(
        "--minutes",
        type=float,
        help="train for this much wall time, the learning rate "
        "scheduled over it (cosine); --epochs is then a cap",
    )
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--warmup", type=int, default=200)
    t.add_argument("--weight-decay", type=float, default=0.1)
    common.add_training_options(t)
    t.set_defaults(func=train)
    e = sub.add_parser("evaluate", help="nats per character of a text")
    e.add_argument("--model", required=True)
    e.add_argument("--text", required=True)
    e.add_argument(
        "--tail",
        type=float,
        help="score only this last share of the file (0.1: tiny-shakespeare's validation split)",
    )
    e.set_defaults(func=evaluate)
    s = sub.add_parser("sample", help="continue a prompt")
    s.add_argument("--model", required=True)
    s.add_argument("--prompt", default="ROMEO:")
    s.add_argument(
        "--escapes", action="store_true", help="read backslash escapes in --prompt (\\n)"
    )
    s.add_argument("--length", type=int, default=200, help="characters to add")
    s.add_argument("--strategy", default="top_p", choices=STRATEGIES)
    s.add_argument("--temperature", type=float, default=0.8)
    s.add_argument("--top-k", type=int, default=10)
    s.add_argument("--top-p", type=float, default=0.9)
    s.add_argument("--samples", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=sample)
    x = sub.add_parser("export", help="SavedModel, TFLite (step model), ONNX, verified")
    x.add_argument("--model", required=True)
    x.add_argument("--out", help="default: MODEL/export")
    x.add_argument("--length", type=int, default=128, help="generate signatures: characters in all")
    x.add_argument(
        "--check", type=int, default=2000, help="validation characters the step models score"
    )
    x.set_defaults(func=export)
    c = sub.add_parser("compare", help="loss against wall time of runs, one plot")
    c.add_argument("runs", nargs="+", help="trained model directories")
    c.add_argument("--out", required=True, help="the PNG file")
    c.set_defaults(func=compare)
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("text",))


if __name__ == "__main__":
    main()
