"""Sentence sentiment (SST-2) with seqkeras: a BiLSTM with attention
pooling, a Transformer encoder, and the seed notes' comparison models (a
feed-forward network over averaged embeddings, SimpleRNN, GRU, LSTM).

    python apps/sentiment.py train --model bilstm --out runs/bilstm
    python apps/sentiment.py train --init checkpoints/all-MiniLM-L6-v2 --out runs/minilm
    python apps/sentiment.py evaluate --model runs/bilstm \\
        --data ../shared/data/sst2/dev.tsv
    echo "a gorgeous , witty , seductive movie ." | \\
        python apps/sentiment.py predict --model runs/bilstm
    python apps/sentiment.py export --model runs/bilstm
    python apps/sentiment.py plot --models runs/bag runs/bilstm --out DIR

Data: GLUE's SST-2 TSV layout, a header line `sentence<TAB>label` then one
example per line (label 0 negative, 1 positive; LF or CRLF). `--init DIR`
fine-tunes a BERT-family or GPT-2 checkpoint (Hugging Face or keras-hub
directory; GPT-2 reads the last token) with its own WordPiece tokenizer
(`vocab.txt` in the model directory), adds ELMo to the BiLSTM (an
`apps/pretrain.py --objective bilm` run, frozen), or fine-tunes a span-
corruption seq2seq text-to-text (`sst2 sentence: ...` -> `positive`,
decoded by `generate`; `evaluate` counts other outputs as wrong and says
how many); `--random-init` keeps the network and recipe without the weights;
otherwise `train` learns a word vocabulary (`seqkeras.data.WordTokenizer`:
lowercase, whitespace words, Keras `StringLookup`) from the training file.
Either way it writes the model
directory of every app (`common.py`; the best weights by validation
accuracy) with `vocabulary.txt`. `evaluate` scores any file
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
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quiet  # noqa: E402, F401  (first: TensorFlow without its start-up lines)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import common  # noqa: E402
import plots  # noqa: E402

LABELS = ("negative", "positive")
PREFIX = "sst2 sentence: "  # T5's task prefix (text-to-text models)
MODELS = sorted(common.presets("sentiment")["models"])  # presets.json
KILL_ENV = "SENTIMENT_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
PROG = "sentiment.py"


def sst2(name):
    return common.shared_file("sst2", name)


def read(path, num_classes=len(LABELS)):
    from seqkeras.data import read_labeled_tsv

    return common.read_data(read_labeled_tsv, path, num_classes=num_classes, name=PROG)


def load(directory):
    """`(model, tokenizer, config)` from a `train` output directory (a
    word vocabulary, or a pretrained checkpoint's WordPiece tokenizer)."""
    from seqkeras.data import BertTokenizer, WordTokenizer

    model, config = common.load(directory)
    if config.get("init"):
        tokenizer = common.read_data(BertTokenizer.load, directory, what=f"--model {directory}")
        return model, tokenizer, config
    path = os.path.join(directory, "vocabulary.txt")
    tokenizer = common.read_data(WordTokenizer.load, path, what=f"--model {directory}")
    return model, tokenizer, config


def vocabulary_file(directory, config):
    return os.path.join(directory, "vocab.txt" if config.get("init") else "vocabulary.txt")


# -- prediction ------------------------------------------------------------


def probabilities(model, tokenizer, texts, config, batch=256):
    """Class probabilities (n, classes) for `texts`, in order: sorted by
    length, batches padded to a multiple of 8 tokens, float32. A
    text-to-text model's are 1 for the label word it wrote (a row of 0
    where it wrote another word)."""
    from seqkeras.data import length_batches

    limit = config["max_length"]
    if config["model"] == "text-to-text":
        from seqkeras.models import classify_by_generation

        written = classify_by_generation(model, tokenizer, texts, LABELS, PREFIX, batch, limit)
        return np.eye(len(LABELS) + 1, len(LABELS), dtype="float32")[written]
    rows = [r[:limit] for r in tokenizer.encode(list(texts)).to_list()]
    out = np.zeros((len(rows), config["sizes"].get("num_classes", len(LABELS))), "float32")
    for chunk, x in length_batches(rows, batch, limit):
        logits = np.asarray(model.predict_on_batch(x), "float32")
        out[chunk] = np.asarray(keras.ops.softmax(logits))
    return out


def accuracy_report(probs, labels):
    """Accuracy (percent) and per-class precision / recall / F1 lines
    (`seqkeras.metrics.classification_report`)."""
    from seqkeras.metrics import classification_report

    accuracy, per_class = classification_report(probs, labels, LABELS)
    lines = [
        f"  {name:>9}: precision {p:5.1f}  recall {r:5.1f}  F1 {f:5.1f}  ({n} examples)"
        for name, (p, r, f, n) in per_class.items()
    ]
    return accuracy, lines


# -- train -----------------------------------------------------------------


def train(args):
    from seqkeras.data import BertTokenizer, WordTokenizer, classification_dataset

    texts, labels = read(args.train)
    val_texts, val_labels = read(args.validation)
    init = common.read_init(args)
    # with --init: the BERT recipe's learning rate and weight decay
    common.init_options(args, init, "bilstm", lr=(2e-3, 1e-4), weight_decay=(0.0, 0.01))
    out = common.begin_training(args)
    vocabulary = os.path.join(out, "vocabulary.txt")
    resumed = os.path.isfile(os.path.join(out, common.CONFIG))
    if init is not None:  # the checkpoint's own WordPiece tokenizer
        tokenizer = common.read_data(
            BertTokenizer.load, args.init, max_length=args.max_length, what=f"--init {args.init}"
        )
        tokenizer.save(out)
    elif resumed and os.path.isfile(vocabulary):
        tokenizer = WordTokenizer.load(vocabulary)  # a resumed run keeps its vocabulary
    else:
        tokenizer = WordTokenizer.train(texts, min_count=args.min_count)
        tokenizer.save(out)
    if args.model == "text-to-text":  # T5: the label's word is the target
        from seqkeras.data.pretraining import text_to_text_dataset

        words = [[LABELS[k] for k in y] for y in (labels, val_labels)]
        data = text_to_text_dataset(
            texts, words[0], tokenizer, PREFIX, args.batch, args.max_length, seed=args.seed
        )
        val = text_to_text_dataset(
            val_texts, words[1], tokenizer, PREFIX, 256, args.max_length, shuffle=False
        )
    else:
        data = classification_dataset(
            texts,
            labels,
            tokenizer,
            batch_size=args.batch,
            max_length=args.max_length,
            seed=args.seed,
        )
        val = classification_dataset(
            val_texts,
            val_labels,
            tokenizer,
            batch_size=256,
            max_length=args.max_length,
            shuffle=False,
        )
    data, steps = common.counted(data)
    val, _ = common.counted(val)  # a known length: no "ran out of data" at validation
    overrides = {k: getattr(args, k) for k in ("embedding_dim", "units", "dropout", "word_dropout")}
    sizes = {"vocab_size": tokenizer.vocabulary_size, "num_classes": len(LABELS)}

    def with_length(builder, arguments):  # a Transformer's learned positions
        if init is not None and init.model_type == "bilm":
            return dict(sizes, bilm_arguments=init.architecture)
        if init is not None and init.model_type == "span":  # the pretrained seq2seq's shape
            arguments.update(init.architecture)
            return init.sizes
        if init is not None:
            return {"architecture": init.architecture, "num_classes": len(LABELS)}
        if arguments["backbone"] == "transformer":
            arguments["max_length"] = args.max_length
        return sizes

    schedule = common.cosine_schedule(args.lr, steps * args.epochs, alpha=0.05)
    if init is not None and init.model_type != "bilm":
        schedule = common.bert_schedule(args, steps)
    options = {"learning_rate": schedule, "weight_decay": args.weight_decay}
    model, _, _ = common.new_model(
        args,
        "sentiment",
        with_length,
        lambda model: options,
        None,
        overrides,
        init=init,
        labels=list(LABELS),
        max_length=args.max_length,
        steps_per_epoch=steps,
    )
    print(
        f"{args.model}: {model.count_params():,} parameters, {tokenizer.vocabulary_size:,} "
        f"words, {len(texts):,} training sentences, {steps} batches per epoch, "
        f"{args.epochs} epochs, precision {args.precision}, jit {args.jit}"
    )
    curves = (f"{args.model} on SST-2", "cross-entropy (nats)", "accuracy", "accuracy")
    seconds, _ = common.fit_and_report(
        model, args, data, KILL_ENV, curves, val, "val_accuracy", "max", shuffle=False
    )
    model, tokenizer, config = load(out)
    acc, _ = accuracy_report(probabilities(model, tokenizer, val_texts, config), val_labels)
    print(f"best val accuracy {acc:.2f}%")
    with open(os.path.join(out, "val_accuracy.json"), "w") as f:
        json.dump({"accuracy": acc, "train_seconds_this_process": seconds}, f, indent=2)


# -- evaluate / predict ----------------------------------------------------


def evaluate(args):
    """Accuracy of one model, or of the ensemble of several (`--model A
    B ...`: their class probabilities averaged)."""
    models = [load(directory) for directory in args.model]
    texts, labels = read(args.data, models[0][2]["sizes"].get("num_classes", len(LABELS)))
    probs, seconds = 0.0, 0.0
    for model, tokenizer, config in models:
        probabilities(model, tokenizer, texts[:8], config)  # compiles
        start = time.perf_counter()
        own = probabilities(model, tokenizer, texts, config)
        seconds += time.perf_counter() - start
        probs = probs + own
        if config["model"] == "text-to-text":
            print(f"  outputs other than a label word: {int(np.sum(own.sum(-1) == 0))}")
        if len(models) > 1:
            print(f"  {config['model']}: {accuracy_report(own, labels)[0]:.2f}")
    acc, lines = accuracy_report(probs / len(models), labels)
    what = f" (ensemble of {len(models)}: probabilities averaged)" if len(models) > 1 else ""
    print(f"{args.data}: {len(texts)} sentences, {len(texts) / seconds:.0f} sentences/s{what}")
    print("\n".join(lines))
    print(f"accuracy = {acc:.2f}")


def predict(args):
    model, tokenizer, config = load(args.model)
    lines = common.stdin_lines(PROG)
    for p in probabilities(model, tokenizer, lines, config) if lines else []:
        k = int(p.argmax())
        print(f"{config['labels'][k]}\t{p[k]:.3f}" if p.sum() else "(another word)\t0.000")


# -- export ----------------------------------------------------------------


def export(args):
    from seqkeras.export import fresh_signature
    from seqkeras.export.signatures import ServeText

    model, tokenizer, config = load(args.model)
    if config["model"] == "text-to-text":
        raise common.AppError(
            "export: a text-to-text model is a seq2seq model; export it with "
            "seqkeras.export (generate signatures)"
        )
    texts = read(args.data, config["sizes"].get("num_classes", len(LABELS)))[0][: args.check]

    def check(path):
        expected = probabilities(model, tokenizer, texts, config)
        served, seconds = fresh_signature(path, "serve_text", text=texts)
        served = np.asarray(served["probabilities"])
        diff = float(np.max(np.abs(served - expected)))
        same = int(np.sum(served.argmax(-1) == expected.argmax(-1)))
        print(
            f"serve_text in a process without seqkeras: {same}/{len(texts)} labels equal to "
            f"Keras, probabilities max abs diff {diff:.2g}"
        )
        if same != len(texts) or diff > 1e-4:
            raise RuntimeError("the exported serve_text differs from Keras")
        return {
            "serve_text_equal": f"{same}/{len(texts)}",
            "serve_text_max_abs_diff": diff,
            "serve_text_fresh_process_s": seconds,
        }

    ids = tokenizer.encode(texts[:8]).to_tensor(0).numpy()
    verify = {"tolerance": 1e-4}
    if config.get("init"):  # the float32 and int8 TFLite files' accuracy on --data
        verify.update(quantize=("dynamic_int8",), metric=tflite_accuracy(args, tokenizer, config))
    common.export(
        model,
        args,
        "sentiment",
        [ServeText(tokenizer=tokenizer)],
        check,
        [ids[:1], ids],
        [vocabulary_file(args.model, config)],
        **verify,
    )


def tflite_accuracy(args, tokenizer, config):
    """`metric(predict)`: the accuracy (percent) of `predict` (an id model:
    Keras, or a TFLite file) on every sentence of `--data`, batches of 32
    sorted by length."""
    from seqkeras.data import length_batches

    texts, labels = read(args.data, config["sizes"].get("num_classes", len(LABELS)))
    rows = [r[: config["max_length"]] for r in tokenizer.encode(texts).to_list()]
    labels = np.asarray(labels)

    def metric(predict):
        right = 0
        for chunk, x in length_batches(rows, 32, config["max_length"]):
            logits = np.asarray(predict({"token_ids": x.astype("int32")}))
            right += int(np.sum(logits.argmax(-1) == labels[chunk]))
        return 100.0 * right / len(rows)

    return metric


# -- plots -----------------------------------------------------------------

LENGTH_BINS = ((1, 10), (11, 20), (21, 30), (31, 99))


def plot(args):
    """Accuracy by sentence length for each model (one plot), and the
    attention-pooling weights of the first model that has them."""
    texts, labels = read(args.data)
    bins = plots.by_length([len(t.split()) for t in texts], LENGTH_BINS)
    os.makedirs(args.out, exist_ok=True)
    table, drawn = {}, False
    for directory in args.models:
        model, tokenizer, config = load(directory)
        right = probabilities(model, tokenizer, texts, config).argmax(-1) == np.asarray(labels)
        table[config["model"]] = [100 * float(np.mean(right[idx])) for idx in bins]
        if not drawn and config["arguments"].get("pooling") == "attention":
            path = os.path.join(args.out, "attention-pooling.png")
            heatmap(model, tokenizer, texts[args.sentence], path, config["model"])
            drawn = True
    path = plots.plot_by_length(
        os.path.join(args.out, "accuracy-by-length.png"),
        LENGTH_BINS,
        table,
        [len(i) for i in bins],
        "sentence length in words (sentences)",
        "accuracy (%)",
        "SST-2 dev: accuracy by sentence length",
    )
    print(f"plot: {path}")


def heatmap(model, tokenizer, text, path, label):
    """The attention-pooling weights over the words of `text`: the model's
    pooling part (`model.part("pooling")`) scoring its input sequence."""
    pooling = model.part("pooling")
    sequence = pooling.input  # (sequence, mask) when called with a mask
    sequence = sequence[0] if isinstance(sequence, (list, tuple)) else sequence
    ids = tokenizer.encode([text]).to_tensor(0).numpy()
    sequence = keras.Model(model.inputs, sequence)(ids)
    weights = np.asarray(keras.ops.softmax(pooling.scores(sequence)))[0]
    p = np.asarray(keras.ops.softmax(model.predict(ids, verbose=0)))[0]
    title = f"{label}: attention pooling weights ({LABELS[int(p.argmax())]}, p={p.max():.2f})"
    plots.plot_weights(path, weights, text.split(), title=title)
    print(f"attention heatmap: {path}")


# -- command line ----------------------------------------------------------


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train a model", train, False)
    t.add_argument(
        "--model", choices=MODELS, help="the preset (default bilstm; with --init: pretrained)"
    )
    t.add_argument(
        "--init",
        help="fine-tune a pretrained model: a BERT-family or GPT-2 checkpoint (Hugging Face or "
        "keras-hub directory), or an apps/pretrain.py bilm (ELMo) or span (T5) run",
    )
    t.add_argument(
        "--random-init",
        action="store_true",
        help="with --init: its network, tokenizer and recipe, but random weights (the "
        "from-scratch control of a pretraining comparison)",
    )
    t.add_argument("--out", required=True, help="the model directory")
    t.add_argument("--train", default=sst2("train.tsv"))
    t.add_argument("--validation", default=sst2("dev.tsv"))
    common.options(
        t,
        "embedding-dim=int units=int dropout=float word-dropout=float min-count=1 epochs=4 "
        "batch=64 lr=float weight-decay=float warmup=0.1 max-length=64",
        embedding_dim="override the preset's",
        units="override the preset's",
        dropout="override the preset's",
        word_dropout="override the preset's (UNK replacement)",
        min_count="words seen fewer times are UNK",
        lr="peak learning rate (default 2e-3; with --init 1e-4)",
        weight_decay="AdamW's (default 0; with --init 0.01)",
        warmup="with --init: the fraction of steps that warm the learning rate up",
    )
    common.add_training_options(t)
    e = common.subcommand(
        sub,
        "evaluate",
        "accuracy on a TSV file",
        evaluate,
        nargs="+",
        help="a model directory, or several: an ensemble",
    )
    e.add_argument("--data", required=True)
    common.subcommand(sub, "predict", "stdin sentences -> label, p", predict)
    x = common.subcommand(sub, "export", "SavedModel, TFLite, ONNX, verified", export)
    x.add_argument("--out", help="default: MODEL/export")
    x.add_argument("--data", default=sst2("dev.tsv"), help="sentences the export is checked on")
    common.options(x, "check=256")
    g = common.subcommand(sub, "plot", "accuracy by length, attention", plot, False)
    g.add_argument("--models", nargs="+", required=True)
    g.add_argument("--data", default=sst2("dev.tsv"))
    common.options(g, "sentence=0", sentence="which sentence the heatmap shows (0-based)")
    g.add_argument("--out", required=True)
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("train", "validation", "data"))


if __name__ == "__main__":
    main()
