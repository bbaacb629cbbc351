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
scored in consecutive windows of `--block` characters. `train` writes the
model directory of every app (`common.py`; the best weights by validation
loss in nats per character, `val_bpc` in bits in the history) with
`vocabulary.json` (the characters in id order). With `--minutes` the
learning rate follows a cosine over that much wall time (after `--warmup`
steps) and training stops there, so runs of different models get equal
time; otherwise the cosine runs over `--epochs` x `--steps-per-epoch`
steps.

`evaluate` scores any UTF-8 text file: the mean negative log-likelihood
of each character after the first given those before it, in windows of
the model's `--block` characters; characters the vocabulary lacks count
as the unknown id (the count is printed). Its last line is
`loss = <nats per character>`. `sample` continues `--prompt` with greedy,
top-k, top-p (nucleus) or temperature sampling. `export` writes a
SavedModel with `generate`, `generate_text`, `serve_text` and
`serving_default` signatures (checked in a process without seqkeras), the
forward pass as builtin-only TFLite and ONNX, and for a recurrent model
the streaming TFLite step model (one character and the states in, logits
and the new states out), float32 and quantized, each with its latency,
its largest difference from Keras and its validation loss. `compare`
plots the loss curves of trained runs against wall time.

Bad input (a missing, empty or non-UTF-8 file, a directory that is not a
trained model, a prompt of characters the model does not know, options
out of range) ends with a one-line error and exit status 2.
"""

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quiet  # noqa: E402, F401  (first: TensorFlow without its start-up lines)

import numpy as np  # noqa: E402

from seqkeras.metrics import BitsPerCharacter, bits_per_character, token_nll  # noqa: E402

import common  # noqa: E402
import plots  # noqa: E402
from common import AppError  # noqa: E402

PROG = "charlm.py"
KILL_ENV = "CHARLM_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
VOCABULARY = "vocabulary.json"
MODELS = sorted(common.presets("charlm")["models"])  # presets.json
STRATEGIES = ("greedy", "top_k", "top_p", "temperature")


def shakespeare():
    return common.shared_file("tinyshakespeare", "input.txt")


def read_text(path, what="--text"):
    """A UTF-8 file's text, CRLF read as LF (AppError if missing,
    unreadable or shorter than 2 characters)."""
    from seqkeras.data import read_text as read

    if path is None:
        raise AppError(f"{what} is needed (no ../shared/data here)")
    text = common.read_data(read, path, name=PROG, what=what)
    if len(text) < 2:
        raise AppError(
            f"{what} {path} has {len(text)} characters; a language model needs at least 2"
        )
    return text


def vocabulary_of(directory):
    from seqkeras.data import CharVocabulary

    path = os.path.join(directory, VOCABULARY)
    return common.read_data(CharVocabulary.load, path, what=f"--model {directory}")


def load(directory):
    """`(model, vocabulary, config)` from a `train` output directory."""
    model, config = common.load(directory)
    return model, vocabulary_of(directory), config


def nll(predict, x, y, batch=64):
    """(sum of -log p(target), targets): every non-PAD target of the
    windows, from the logits `predict(ids)` (a model's `predict_on_batch`,
    or a runtime's)."""
    sums = [token_nll(predict(x[i : i + batch]), y[i : i + batch]) for i in range(0, len(x), batch)]
    return sum(t for t, _ in sums), sum(n for _, n in sums)


# -- train -----------------------------------------------------------------


def train(args):
    import keras

    import seqkeras
    from seqkeras.data import CharVocabulary, language_model_windows, random_windows_dataset

    text = read_text(args.text)
    split = len(text) if args.validation else int(0.9 * len(text))
    train_text = text[:split]
    val_text = read_text(args.validation, "--validation") if args.validation else text[split:]
    if len(train_text) < args.block + 2 or len(val_text) < 2:
        need = f"{args.block + 2} (and 2 for validation)"
        raise AppError(
            f"--text {args.text}: {len(train_text)} training characters; --block "
            f"{args.block} needs at least {need}"
        )
    out = common.begin_training(args)
    if os.path.isfile(os.path.join(out, VOCABULARY)):
        vocabulary = vocabulary_of(out)  # a resumed run keeps its own
    else:
        vocabulary = CharVocabulary.from_texts([train_text])
        vocabulary.save(out)
    keys = ("embedding_dim", "units", "hidden_dim", "num_layers", "num_heads", "dropout")
    steps = args.epochs * args.steps_per_epoch
    # a constant peak when `TimeBudget` schedules over wall time (--minutes)
    schedule = args.lr if args.minutes else common.cosine_schedule(args.lr, steps, args.warmup, 0.1)

    def options(model):
        optimizer = keras.optimizers.AdamW(
            schedule, weight_decay=args.weight_decay, beta_1=0.9, beta_2=0.99, global_clipnorm=1.0
        )
        # decay matrices only, as nanoGPT: not biases, norms or the 1-D rest
        optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
        return {"optimizer": optimizer, "steps_per_execution": args.steps_per_execution}

    def sizes(builder, arguments):  # a Transformer's context is the block
        if builder == "transformer_language_model":
            return {"vocab_size": len(vocabulary), "max_length": args.block}
        return {"vocab_size": len(vocabulary)}

    counts = dict(training_characters=len(train_text), validation_characters=len(val_text))
    overrides = {k: getattr(args, k) for k in keys}
    model, _, _ = common.new_model(
        args, "charlm", sizes, options, None, overrides, block=args.block, **counts
    )
    ids = vocabulary.encode_text(train_text)
    data = random_windows_dataset(ids, args.block, args.batch, args.seed)
    validation = language_model_windows(vocabulary.encode_text(val_text), args.block)
    print(
        f"{args.model} language model: {model.count_params():,} parameters, {len(vocabulary)} "
        f"symbols, {len(train_text):,} training / {len(val_text):,} validation characters, "
        f"{args.epochs} epochs of {args.steps_per_epoch} batches of {args.batch} x {args.block}"
    )
    extra = [seqkeras.models.TimeBudget(args.minutes, args.lr, args.warmup)] if args.minutes else []
    curves = (
        f"{args.model} character LM",
        "loss (nats per character)",
        "bpc",
        "bits per character",
    )
    fit = dict(steps_per_epoch=args.steps_per_epoch, validation_batch_size=64, shuffle=False)
    extra.append(BitsPerCharacter())  # val_bpc beside val_loss
    _, best = common.fit_and_report(
        model, args, data, KILL_ENV, curves, validation, extra_callbacks=extra, **fit
    )
    print(f"best validation loss {bits_per_character(best):.4f} bits per character")


# -- evaluate / sample -----------------------------------------------------


def score(model, vocabulary, config, text):
    """`(nats per character, characters scored, unknown characters)`."""
    from seqkeras.data import language_model_windows

    ids = vocabulary.encode_text(text)
    total, count = nll(model.predict_on_batch, *language_model_windows(ids, config["block"]))
    return total / count, count, int((ids == 3).sum())


def evaluate(args):
    model, vocabulary, config = load(args.model)
    text = read_text(args.text)
    if args.tail is not None:  # e.g. 0.1: the validation split of input.txt
        if not 0.0 < args.tail <= 1.0:
            raise AppError(f"--tail must be in (0, 1]; got {args.tail}")
        text = text[int((1.0 - args.tail) * len(text)) :]
        if len(text) < 2:
            left = f"{len(text)} characters; at least 2 are needed"
            raise AppError(f"--tail {args.tail} of {args.text} leaves {left}")
    start = time.perf_counter()
    loss, count, unknown = score(model, vocabulary, config, text)
    speed = count / (time.perf_counter() - start)
    print(
        f"{args.text}: {count:,} characters scored in windows of {config['block']} "
        f"({speed:,.0f} characters/s), {unknown} not in the vocabulary"
    )
    print(f"bits per character = {bits_per_character(loss):.4f}, perplexity = {math.exp(loss):.3f}")
    print(f"loss = {loss:.4f}")


def sample(args):
    import seqkeras

    model, vocabulary, config = load(args.model)
    prompt = args.prompt.encode().decode("unicode_escape") if args.escapes else args.prompt
    if not prompt:
        raise AppError("--prompt is empty; give at least one character")
    unknown = "".join(sorted(set(prompt) - set(vocabulary.characters)))
    if unknown:
        raise AppError(f"--prompt has characters the model does not know: {unknown!r}")
    length, limit = len(prompt) + args.length, model.max_generation_length
    if limit is not None and length > limit:
        raise AppError(
            f"--length {args.length} after a {len(prompt)}-character prompt is more "
            f"than the Transformer's context of {limit} characters"
        )
    strategy, options = "greedy", {}
    if args.strategy != "greedy":
        strategy, options = "sample", {"temperature": args.temperature, "seed": args.seed}
        if args.strategy in ("top_k", "top_p"):
            options[args.strategy] = getattr(args, args.strategy)
    ids = np.repeat(vocabulary.encode_text(prompt)[None], args.samples, 0)
    generate = seqkeras.models.generate
    options.update(prompt=ids, max_length=length, strategy=strategy, eos_id=None)
    out = common.read_data(generate, model, **options)  # a bad option: one line
    for i, row in enumerate(np.asarray(out)):
        if args.samples > 1:
            print(f"--- sample {i + 1}")
        print(vocabulary.decode(row[None])[0])


# -- export ----------------------------------------------------------------


def export(args):
    from seqkeras.data import language_model_windows
    from seqkeras.export import fresh_signature
    from seqkeras.export import signatures as S
    from seqkeras.models import generate

    model, vocabulary, config = load(args.model)
    val_text, training = None, config["training"]
    if training.get("validation"):
        val_text = read_text(training["validation"])
    elif training.get("text") and os.path.isfile(training["text"]):
        text = read_text(training["text"])
        val_text = text[int(0.9 * len(text)) :]
    length, known = min(config["block"], args.length), set(vocabulary.characters)
    prompts = [p for p in ("ROMEO:", "First Citizen:\n", "The ") if set(p) <= known]
    prompts = prompts or [vocabulary.characters[0]]

    def check(path):
        served, _ = fresh_signature(path, "generate_text", text=prompts)
        same = 0
        for prompt, got in zip(prompts, served["text"]):
            ids = vocabulary.encode_text(prompt)[None]
            ids = np.asarray(generate(model, prompt=ids, max_length=length, eos_id=None))
            same += got == vocabulary.decode(ids[:, len(prompt) :])[0]
        example = f"{prompts[0]!r} -> {served['text'][0][:40]!r}..."
        print(
            f"generate_text in a process without seqkeras: {same}/{len(prompts)} "
            f"continuations equal to Keras greedy ({example})"
        )
        if same != len(prompts):
            raise RuntimeError("the exported generate_text differs from Keras")
        return {"generate_text_equal": f"{same}/{len(prompts)}"}

    sample_ids = vocabulary.encode_text((val_text or "".join(prompts))[: config["block"]])[None]
    metric = None
    if val_text:  # nats per character over the first --check characters
        ids = vocabulary.encode_text(val_text[: args.check + 1])
        windows = language_model_windows(ids, config["block"])

        def metric(predict):
            total, count = nll(lambda ids: predict({"token_ids": ids}), *windows)
            return total / count

    def step_models(report, out):  # a Transformer needs the whole sequence
        if config["model"] == "transformer":
            return {}
        return streaming(model, vocabulary, config, out, val_text, sample_ids, args.check)

    signatures = [S.ServeText(vocabulary=vocabulary), *S.generation(length, vocabulary=vocabulary)]
    verify = dict(tolerance=1e-3, quantize=("dynamic_int8", "float16"), metric=metric)
    beside, samples = [os.path.join(args.model, VOCABULARY)], [sample_ids[:, :16], sample_ids]
    common.export(model, args, "charlm", signatures, check, samples, beside, step_models, **verify)


def step_loss(flatbuffer, ids):
    """Nats per character of the streaming step model over `ids`, one
    character per `invoke` (states carried from zeros)."""
    from seqkeras.export.tflite import tflite_runner

    step = tflite_runner(flatbuffer)
    details = step.input_details.items()
    states = {k: np.zeros((1, *v["shape"][1:]), v["dtype"]) for k, v in details if "state_" in k}
    logits = []
    for t in range(len(ids) - 1):
        out = step(token_ids=ids[t : t + 1], **states)
        states = {k[4:]: v for k, v in out.items() if k.startswith("new_state_")}
        logits.append(out["logits"][0])
    total, count = token_nll(np.stack(logits), np.asarray(ids[1:]))
    return total / count


def streaming(model, vocabulary, config, out, val_text, sample_ids, check):
    """The step model, float32 and quantized: file, size, latency per
    character, largest difference from Keras, validation loss over the
    first `check` validation characters (and Keras' over the same)."""
    from seqkeras.data import language_model_windows
    from seqkeras.export import streaming_tflite
    from seqkeras.export.streaming import verify_streaming

    directory = os.path.join(out, "streaming")
    os.makedirs(directory, exist_ok=True)
    vocabulary.save(directory)
    ids = vocabulary.encode_text(val_text[: check + 1]) if val_text else sample_ids[0]
    total, count = nll(model.predict_on_batch, *language_model_windows(ids, len(ids)))
    report = {"step_keras_loss": total / count, "step_loss_characters": count}
    print(
        f"streaming step models ({directory}); Keras loss over the first {count} validation "
        f"characters in one window: {total / count:.4f}"
    )
    for variant in ("float32", "dynamic_int8", "float16"):
        path = os.path.join(directory, f"step-{variant}.tflite")
        quantize = None if variant == "float32" else variant
        streaming_tflite(model, path, overwrite=True, quantize=quantize)
        with open(path, "rb") as f:
            flatbuffer = f.read()
        diff, ms, _ = verify_streaming(model, flatbuffer, {"token_ids": sample_ids})
        loss, mb = step_loss(flatbuffer, ids), len(flatbuffer) / 1e6
        print(
            f"  {variant:>12}: {mb:.2f} MB, {ms:.4f} ms per character, max |logit diff| "
            f"{diff:.2g}, loss {loss:.4f}"
        )
        found = {"ms": ms, "diff": diff, "loss": loss, "mb": mb}
        report.update({f"step_{variant}_{k}": v for k, v in found.items()})
    return report


# -- compare ---------------------------------------------------------------


def compare(args):
    """Validation (and training) loss against wall time of trained runs,
    on one plot, with each run's model and parameter count."""
    plots.runs_against_time(
        common.training_runs(args.runs),
        args.out,
        "loss (nats per character)",
        "character LMs on tiny-shakespeare",
        target=1.47,
        ylim=(1.0, 2.6),
    )


# -- command line ----------------------------------------------------------


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train a character language model", train, False)
    t.add_argument("--out", required=True, help="the model directory")
    t.add_argument("--model", default="lstm", choices=MODELS)
    t.add_argument("--text", default=shakespeare(), help="first 90%% train, last 10%% validation")
    t.add_argument("--validation", help="a separate validation text")
    common.options(
        t,
        "embedding-dim=int units=int hidden-dim=int num-layers=int num-heads=int dropout=float "
        "block=256 batch=32 epochs=40 steps-per-epoch=200 steps-per-execution=20 minutes=float "
        "lr=2e-3 warmup=200 weight-decay=0.1",
        block="characters per training window",
        minutes="train this much wall time, the cosine over it; --epochs is then a cap",
    )
    common.add_training_options(t)
    e = common.subcommand(sub, "evaluate", "nats per character of a text", evaluate)
    e.add_argument("--text", required=True)
    common.options(
        e,
        "tail=float",
        tail="score only this last share of the file (0.1: tiny-shakespeare's validation split)",
    )
    s = common.subcommand(sub, "sample", "continue a prompt", sample)
    s.add_argument("--prompt", default="ROMEO:")
    s.add_argument("--escapes", action="store_true", help="read backslash escapes in --prompt")
    s.add_argument("--strategy", default="top_p", choices=STRATEGIES)
    common.options(
        s,
        "length=200 temperature=0.8 top-k=10 top-p=0.9 samples=1 seed=0",
        length="characters to add",
    )
    x = common.subcommand(sub, "export", "SavedModel, TFLite (step model), ONNX, verified", export)
    x.add_argument("--out", help="default: MODEL/export")
    common.options(
        x,
        "length=128 check=2000",
        length="generate signatures: characters in all",
        check="validation characters the step models score",
    )
    c = common.subcommand(sub, "compare", "loss against wall time of runs", compare, False)
    c.add_argument("runs", nargs="+", help="trained model directories")
    c.add_argument("--out", required=True, help="the PNG file")
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("text",))


if __name__ == "__main__":
    main()
