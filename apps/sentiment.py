"""Sentence sentiment (SST-2) with seqkeras: a BiLSTM with attention
pooling, a Transformer encoder, and the seed notes' comparison models (a
feed-forward network over averaged embeddings, SimpleRNN, GRU, LSTM).

    python apps/sentiment.py train --model bilstm --out runs/bilstm
    python apps/sentiment.py evaluate --model runs/bilstm \\
        --data ../shared/data/sst2/dev.tsv
    echo "a gorgeous , witty , seductive movie ." | \\
        python apps/sentiment.py predict --model runs/bilstm
    python apps/sentiment.py export --model runs/bilstm
    python apps/sentiment.py plot --models runs/bag runs/bilstm --out DIR

Data: GLUE's SST-2 TSV layout, a header line `sentence<TAB>label` then one
example per line (label 0 negative, 1 positive; LF or CRLF). `train` learns
a word vocabulary (`seqkeras.data.WordTokenizer`: lowercase, whitespace
words, Keras `StringLookup`) from the training file and writes into
`--out`: `config.json`, `vocabulary.txt`, `best.weights.h5` (the best
validation accuracy), `history.csv`, `curves.png`, `epoch_seconds.csv`,
TensorBoard logs under `logs/` and `backup/` (`BackupAndRestore`: kill the
run, start the same command again, it resumes). `evaluate` scores any file
in that layout (one model, or the average of several models'
probabilities); its last line is `accuracy = <percent>`. `predict` reads
sentences on stdin and prints the label and its probability. `export`
writes a SavedModel whose `serve_text` signature takes raw sentences and
returns class probabilities (tokenizer in the graph), checked in a process
without seqkeras, plus the forward pass as builtin-only TFLite and ONNX
with the vocabulary beside them.

Bad input (a missing or non-UTF-8 file, a header without the columns, a
line with a missing column, a label that is not 0 or 1, an empty file, a
directory that is not a trained model) ends with a one-line error and exit
status 2.
"""

import argparse
import json
import os
import shutil
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402

import common  # noqa: E402
from common import AppError  # noqa: E402

LABELS = ("negative", "positive")
MODELS = {  # `seqkeras.models.classifier` arguments
    "bag": {
        "backbone": "bag",
        "pooling": "mean",
        "embedding_dim": 300,
        "units": 256,
        "dropout": 0.5,
        "word_dropout": 0.1,
    },
    "rnn": {
        "backbone": "rnn",
        "pooling": "last",
        "embedding_dim": 300,
        "units": 256,
        "dropout": 0.5,
        "word_dropout": 0.1,
    },
    "gru": {
        "backbone": "gru",
        "pooling": "last",
        "embedding_dim": 300,
        "units": 256,
        "dropout": 0.5,
        "word_dropout": 0.1,
    },
    "lstm": {
        "backbone": "lstm",
        "pooling": "last",
        "embedding_dim": 300,
        "units": 256,
        "dropout": 0.5,
        "word_dropout": 0.1,
    },
    "bilstm": {
        "backbone": "lstm",
        "bidirectional": True,
        "pooling": "attention",
        "embedding_dim": 300,
        "units": 256,
        "dropout": 0.5,
        "word_dropout": 0.1,
    },
    "transformer": {
        "backbone": "transformer",
        "pooling": "attention",
        "embedding_dim": 256,
        "num_layers": 2,
        "num_heads": 8,
        "intermediate_dim": 512,
        "dropout": 0.3,
        "word_dropout": 0.1,
        "max_length": 128,
    },
}
TINY = {"embedding_dim": 16, "units": 16, "intermediate_dim": 32, "num_heads": 2}
KILL_ENV = "SENTIMENT_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
PROG = "sentiment.py"


def sst2(name):
    return common.shared_file("sst2", name)


def read(path, num_classes=len(LABELS)):
    from seqkeras.data import read_labeled_tsv

    try:
        return read_labeled_tsv(path, num_classes=num_classes, name=PROG)
    except (ValueError, FileNotFoundError) as error:
        raise AppError(str(error)) from None


def load(directory):
    """`(model, tokenizer, config)` from a `train` output directory."""
    import seqkeras
    from seqkeras.data import WordTokenizer

    config = common.read_config(directory)
    try:
        tokenizer = WordTokenizer.load(os.path.join(directory, "vocabulary.txt"))
        model = seqkeras.models.classifier(
            tokenizer.vocabulary_size, config["num_classes"], **config["arguments"]
        )
    except (ValueError, KeyError, TypeError, OSError) as error:
        raise AppError(
            f"--model {directory}: unreadable {common.CONFIG} or vocabulary ({error})"
        ) from None
    return common.load_weights(model, directory), tokenizer, config


# -- prediction ------------------------------------------------------------


def _width(n, limit):
    """Batch widths are rounded up to a multiple of 8 (few compiled
    shapes)."""
    return min(limit, max(8, -(-n // 8) * 8))


def probabilities(model, tokenizer, texts, config, batch=256):
    """Class probabilities (n, classes) for `texts`, in order: sorted by
    length, batches padded to a multiple of 8 tokens, float32."""
    from seqkeras.data import PAD

    limit = config["max_length"]
    rows = [r[:limit] for r in tokenizer.encode(list(texts)).to_list()]
    order = np.argsort([len(r) for r in rows], kind="stable")
    out = np.zeros((len(rows), config["num_classes"]), "float32")
    for start in range(0, len(rows), batch):
        chunk = order[start : start + batch]
        x = np.full((len(chunk), _width(max(len(rows[i]) for i in chunk), limit)), PAD, "int32")
        for j, i in enumerate(chunk):
            x[j, : len(rows[i])] = rows[i]
        logits = np.asarray(model.predict_on_batch(x), "float32")
        out[chunk] = np.asarray(keras.ops.softmax(logits))
    return out


def accuracy_report(probs, labels):
    """Accuracy (percent) and per-class precision / recall / F1 lines."""
    predicted = probs.argmax(-1)
    labels = np.asarray(labels)
    lines = []
    for k, name in enumerate(LABELS[: probs.shape[1]]):
        tp = int(np.sum((predicted == k) & (labels == k)))
        precision = tp / max(1, int(np.sum(predicted == k)))
        recall = tp / max(1, int(np.sum(labels == k)))
        f1 = 2 * precision * recall / max(1e-12, precision + recall)
        lines.append(
            f"  {name:>9}: precision {100 * precision:5.1f}  "
            f"recall {100 * recall:5.1f}  F1 {100 * f1:5.1f}  "
            f"({int(np.sum(labels == k))} examples)"
        )
    return 100.0 * float(np.mean(predicted == labels)), lines


# -- train -----------------------------------------------------------------


def train(args):
    import tensorflow as tf

    import seqkeras
    from seqkeras.data import WordTokenizer, classification_dataset

    texts, labels = read(args.train)
    val_texts, val_labels = read(args.validation)
    out = args.out
    os.makedirs(out, exist_ok=True)
    vocabulary = os.path.join(out, "vocabulary.txt")
    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    keras.utils.set_random_seed(args.seed)
    if os.path.isfile(os.path.join(out, common.CONFIG)) and os.path.isfile(
        vocabulary
    ):  # a resumed run keeps its vocabulary
        tokenizer = WordTokenizer.load(vocabulary)
    else:
        tokenizer = WordTokenizer.train(texts, min_count=args.min_count)
        tokenizer.save(out)
    data = classification_dataset(
        texts, labels, tokenizer, batch_size=args.batch, max_length=args.max_length, seed=args.seed
    )
    val = classification_dataset(
        val_texts, val_labels, tokenizer, batch_size=256, max_length=args.max_length, shuffle=False
    )
    steps = sum(1 for _ in data)
    data = data.apply(tf.data.experimental.assert_cardinality(steps))
    arguments = dict(MODELS[args.model])
    for key in ("embedding_dim", "units", "dropout", "word_dropout"):
        if getattr(args, key) is not None and key in arguments:
            arguments[key] = getattr(args, key)
    if args.tiny:
        arguments.update({k: v for k, v in TINY.items() if k in arguments})
    if arguments["backbone"] == "transformer":
        arguments["max_length"] = args.max_length
    with common.strategy_scope(args):  # build, compile
        model = seqkeras.models.classifier(tokenizer.vocabulary_size, len(LABELS), **arguments)
        schedule = keras.optimizers.schedules.CosineDecay(args.lr, steps * args.epochs, alpha=0.05)
        seqkeras.models.compile_model(
            model,
            learning_rate=schedule,
            jit_compile=common.jit_option(args),
            weight_decay=args.weight_decay,
        )
    config = {
        "model": args.model,
        "builder": "classifier",
        "arguments": arguments,
        "num_classes": len(LABELS),
        "labels": list(LABELS),
        "max_length": args.max_length,
        "vocabulary": "vocabulary.txt",
        "weights": common.WEIGHTS,
        "precision": args.precision,
        "training": {k: v for k, v in vars(args).items() if k != "func"},
        "parameters": int(model.count_params()),
        "vocabulary_size": tokenizer.vocabulary_size,
        "steps_per_epoch": steps,
    }
    common.write_config(out, config)
    print(
        f"{args.model}: {model.count_params():,} parameters, "
        f"{tokenizer.vocabulary_size:,} words, {len(texts):,} training "
        f"sentences, {steps} batches per epoch, {args.epochs} epochs, "
        f"precision {args.precision}, jit {args.jit}"
    )
    callbacks, checkpoint = common.callbacks(out, KILL_ENV, monitor="val_accuracy", mode="max")
    start = time.perf_counter()
    model.fit(
        data,
        validation_data=val,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=args.verbose,
        shuffle=False,
    )
    seconds = time.perf_counter() - start
    png = common.plot_curves(
        os.path.join(out, "history.csv"),
        os.path.join(out, "curves.png"),
        f"{args.model} on SST-2",
        "cross-entropy (nats)",
        "accuracy",
        "accuracy",
    )
    model, tokenizer, config = load(out)
    acc, _ = accuracy_report(probabilities(model, tokenizer, val_texts, config), val_labels)
    print(f"trained in {seconds:.0f} s (this process); best val accuracy {acc:.2f}%; curves: {png}")
    with open(os.path.join(out, "val_accuracy.json"), "w") as f:
        json.dump({"accuracy": acc, "train_seconds_this_process": seconds}, f, indent=2)


# -- evaluate / predict ----------------------------------------------------


def evaluate(args):
    """Accuracy of one model, or of the ensemble of several (`--model A
    B ...`: their class probabilities averaged)."""
    models = [load(directory) for directory in args.model]
    texts, labels = read(args.data, models[0][2]["num_classes"])
    probs, seconds = 0.0, 0.0
    for model, tokenizer, config in models:
        probabilities(model, tokenizer, texts[:8], config)  # compiles
        start = time.perf_counter()
        own = probabilities(model, tokenizer, texts, config)
        seconds += time.perf_counter() - start
        probs = probs + own
        if len(models) > 1:
            acc, _ = accuracy_report(own, labels)
            print(f"  {config['model']}: {acc:.2f}")
    probs = probs / len(models)
    acc, lines = accuracy_report(probs, labels)
    what = "" if len(models) == 1 else f" (ensemble of {len(models)}: probabilities averaged)"
    print(f"{args.data}: {len(texts)} sentences, {len(texts) / seconds:.0f} sentences/s{what}")
    print("\n".join(lines))
    print(f"accuracy = {acc:.2f}")


def predict(args):
    model, tokenizer, config = load(args.model)
    lines = common.stdin_lines(PROG)
    if not lines:
        return
    for p in probabilities(model, tokenizer, lines, config):
        k = int(p.argmax())
        print(f"{config['labels'][k]}\t{p[k]:.3f}")


# -- export ----------------------------------------------------------------


def export(args):
    from seqkeras.export import export_and_verify, next_version, saved_model
    from seqkeras.export.audit import audit_serving, fresh_signature

    model, tokenizer, config = load(args.model)
    out = args.out or os.path.join(args.model, "export")
    texts, _ = read(args.data, config["num_classes"])
    texts = texts[: args.check]
    name = "sentiment"
    path = saved_model(
        model,
        os.path.join(out, name, str(next_version(os.path.join(out, name)))),
        tokenizer=tokenizer,
    )
    print(f"SavedModel: {path} (signatures serving_default, serve_text)")
    expected = probabilities(model, tokenizer, texts, config)
    served, seconds = fresh_signature(path, "serve_text", texts)
    diff = float(np.max(np.abs(np.asarray(served["probabilities"]) - expected)))
    same = int(np.sum(np.asarray(served["probabilities"]).argmax(-1) == expected.argmax(-1)))
    print(
        f"serve_text in a process without seqkeras: {same}/{len(texts)} "
        f"labels equal to Keras, probabilities max abs diff {diff:.2g}"
    )
    if same != len(texts) or diff > 1e-4:
        raise RuntimeError("the exported serve_text differs from Keras")
    audit = audit_serving(path)
    print(
        f"serving audit: {len(audit['ops'])} ops, XLA-only: "
        f"{audit['xla'] or 'none'}, ops without a CPU kernel: "
        f"{audit['no_kernel'] or 'none'}"
    )
    if audit["xla"] or audit["tf_text_unsupported"] or audit["no_kernel"]:
        raise RuntimeError(f"not servable by TF Serving: {audit}")
    ids = tokenizer.encode(texts[:8]).to_tensor(0).numpy()
    samples = [ids[:1], ids]
    report = export_and_verify(model, name + "-forward", samples, out, tolerance=1e-4)
    report.update(
        serve_text_savedmodel=path,
        serve_text_equal=f"{same}/{len(texts)}",
        serve_text_max_abs_diff=diff,
        serve_text_fresh_process_s=seconds,
        serving_ops=len(audit["ops"]),
    )
    shutil.copy(
        os.path.join(args.model, "vocabulary.txt"),
        os.path.join(os.path.dirname(report["tflite"]), "vocabulary.txt"),
    )
    common.write_report(report, out)


# -- plots -----------------------------------------------------------------

LENGTH_BINS = ((1, 10), (11, 20), (21, 30), (31, 99))


def plot(args):
    """Accuracy by sentence length for each model (one plot), and the
    attention-pooling weights of the first model that has them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    texts, labels = read(args.data)
    labels = np.asarray(labels)
    lengths = np.array([len(t.split()) for t in texts])
    os.makedirs(args.out, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    counts, drawn = [], False
    for directory in args.models:
        model, tokenizer, config = load(directory)
        predicted = probabilities(model, tokenizer, texts, config).argmax(-1)
        scores, counts = [], []
        for lo, hi in LENGTH_BINS:
            idx = (lengths >= lo) & (lengths <= hi)
            counts.append(int(idx.sum()))
            scores.append(100 * float(np.mean(predicted[idx] == labels[idx])))
        ax.plot(range(len(LENGTH_BINS)), scores, "o-", label=config["model"])
        print(f"  {config['model']}: " + " ".join(f"{s:.1f}" for s in scores))
        if not drawn and config["arguments"].get("pooling") == "attention":
            heatmap(
                model,
                tokenizer,
                texts[args.sentence],
                os.path.join(args.out, "attention-pooling.png"),
                config["model"],
            )
            drawn = True
    ax.set_xticks(
        range(len(LENGTH_BINS)),
        [
            f"{lo}-{hi}\n({n})" if hi < 99 else f"{lo}+\n({n})"
            for (lo, hi), n in zip(LENGTH_BINS, counts)
        ],
    )
    ax.set_xlabel("sentence length in words (sentences)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("SST-2 dev: accuracy by sentence length")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = os.path.join(args.out, "accuracy-by-length.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot: {path}")


def heatmap(model, tokenizer, text, path, label):
    """The attention-pooling weights over the words of `text`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pooling = model.get_layer("pooling")
    sequence = pooling.input  # (sequence, mask) when called with a mask
    sequence = sequence[0] if isinstance(sequence, list) else sequence
    probe = keras.Model(model.inputs, sequence)
    ids = tokenizer.encode([text]).to_tensor(0).numpy()
    h = np.asarray(probe(ids))
    scores = np.tanh(h @ np.asarray(pooling.kernel) + np.asarray(pooling.bias)) @ np.asarray(
        pooling.query
    )
    weights = np.exp(scores[0] - scores[0].max())
    weights /= weights.sum()
    words = text.split()
    fig, ax = plt.subplots(figsize=(max(5, 0.55 * len(words)), 1.8))
    ax.imshow(weights[None], cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(words)), words, rotation=45, ha="right")
    ax.set_yticks([])
    p = np.asarray(keras.ops.softmax(model.predict(ids, verbose=0)))[0]
    ax.set_title(f"{label}: attention pooling weights ({LABELS[int(p.argmax())]}, p={p.max():.2f})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"attention heatmap: {path}")


# -- command line ----------------------------------------------------------


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a model")
    t.add_argument("--model", choices=sorted(MODELS), default="bilstm")
    t.add_argument("--out", required=True, help="the model directory")
    t.add_argument("--train", default=sst2("train.tsv"))
    t.add_argument("--validation", default=sst2("dev.tsv"))
    t.add_argument("--embedding-dim", type=int, help="override the model's embedding width")
    t.add_argument("--units", type=int, help="override its units")
    t.add_argument("--dropout", type=float, help="override its dropout")
    t.add_argument("--word-dropout", type=float, help="override its word dropout (UNK replacement)")
    t.add_argument("--min-count", type=int, default=1, help="words seen fewer times are UNK")
    t.add_argument("--epochs", type=int, default=4)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--weight-decay", type=float, default=0.0)
    t.add_argument("--max-length", type=int, default=64)
    common.add_training_options(t)
    t.set_defaults(func=train)
    e = sub.add_parser("evaluate", help="accuracy on a TSV file")
    e.add_argument(
        "--model", required=True, nargs="+", help="a model directory, or several: an ensemble"
    )
    e.add_argument("--data", required=True)
    e.set_defaults(func=evaluate)
    r = sub.add_parser("predict", help="stdin sentences -> label, p")
    r.add_argument("--model", required=True)
    r.set_defaults(func=predict)
    x = sub.add_parser("export", help="SavedModel, TFLite, ONNX, verified")
    x.add_argument("--model", required=True)
    x.add_argument("--out", help="default: MODEL/export")
    x.add_argument("--data", default=sst2("dev.tsv"), help="sentences the export is checked on")
    x.add_argument("--check", type=int, default=256)
    x.set_defaults(func=export)
    g = sub.add_parser("plot", help="accuracy by length, attention")
    g.add_argument("--models", nargs="+", required=True)
    g.add_argument("--data", default=sst2("dev.tsv"))
    g.add_argument(
        "--sentence", type=int, default=0, help="which sentence the heatmap shows (0-based)"
    )
    g.add_argument("--out", required=True)
    g.set_defaults(func=plot)
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("train", "validation", "data"))


if __name__ == "__main__":
    main()
