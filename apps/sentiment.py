"""Sentence sentiment (SST-2) with seqkeras: a BiLSTM with attention
pooling, a Transformer encoder, the seed notes' comparison models, or a
pretrained checkpoint fine-tuned (`--init DIR`: BERT-family, GPT-2, an
`apps/pretrain.py` ELMo biLM or span-corruption seq2seq).

    python apps/sentiment.py train --model bilstm --out runs/bilstm
    python apps/sentiment.py train --init checkpoints/all-MiniLM-L6-v2 --out runs/minilm
    python apps/sentiment.py evaluate --model runs/bilstm \\
        --data ../shared/data/sst2/dev.tsv                   # last line: accuracy = ...
    echo "a gorgeous , witty , seductive movie ." | \\
        python apps/sentiment.py predict --model runs/bilstm
    python apps/sentiment.py export --model runs/bilstm
    python apps/sentiment.py plot --models runs/bag runs/bilstm --out DIR

Data: GLUE's SST-2 TSV (a header `sentence<TAB>label`, label 0 or 1). The
data formats, what each subcommand writes and prints, and the errors:
docs/guides/apps.md, "Command-line reference".
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quiet  # noqa: F401  (first: TensorFlow without its start-up lines)

import numpy as np

import common

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
    """`(model, tokenizer, config)` of a `train` output directory."""
    from seqkeras.data import BertTokenizer, WordTokenizer

    model, config = common.load(directory)
    reader = BertTokenizer.load if config.get("init") else WordTokenizer.load
    path = directory if config.get("init") else vocabulary_file(directory, config)
    return model, common.read_data(reader, path, what=f"--model {directory}"), config


def vocabulary_file(directory, config):  # WordPiece's with --init, else the word vocabulary
    return os.path.join(directory, "vocab.txt" if config.get("init") else "vocabulary.txt")


def probabilities(model, tokenizer, config, texts, batch=256):
    """Class probabilities (n, classes) for `texts`; a text-to-text model's
    are 1 for the label word it wrote (a row of 0 where it wrote another)."""
    from seqkeras.models import class_probabilities, classify_by_generation

    if config["model"] != "text-to-text":
        return class_probabilities(model, tokenizer, texts, config["max_length"], batch)
    limit = config["max_length"]
    written = classify_by_generation(model, tokenizer, texts, LABELS, PREFIX, batch, limit)
    return np.eye(len(LABELS) + 1, len(LABELS), dtype="float32")[written]


def accuracy_report(probs, labels):
    """Accuracy (percent) and per-class precision / recall / F1 lines."""
    from seqkeras.metrics import classification_report

    accuracy, per_class = classification_report(probs, labels, LABELS)
    lines = [
        f"  {name:>9}: precision {p:5.1f}  recall {r:5.1f}  F1 {f:5.1f}  ({n} examples)"
        for name, (p, r, f, n) in per_class.items()
    ]
    return accuracy, lines


def train(args):
    from seqkeras.data import BertTokenizer, WordTokenizer, classification_dataset
    from seqkeras.data.pretraining import text_to_text_dataset
    from seqkeras.training import cosine_schedule

    texts, labels = read(args.train)
    val_texts, val_labels = read(args.validation)
    init = common.read_init(args)  # with --init: the BERT recipe's learning rate, weight decay
    common.init_options(args, init, "bilstm", lr=(2e-3, 1e-4), weight_decay=(0.0, 0.01))
    out = common.begin_training(args)
    vocabulary = os.path.join(out, "vocabulary.txt")
    what = f"--init {args.init}"
    if init is not None:  # the checkpoint's own WordPiece tokenizer
        tokenizer = common.read_data(BertTokenizer.load, args.init, args.max_length, what=what)
    elif os.path.isfile(os.path.join(out, common.CONFIG)) and os.path.isfile(vocabulary):
        tokenizer = WordTokenizer.load(vocabulary)  # a resumed run keeps its vocabulary
    else:
        tokenizer = WordTokenizer.train(texts, min_count=args.min_count)
    tokenizer.save(out)

    def dataset(x, y, batch_size, **options):
        if args.model == "text-to-text":  # T5: the label's word is the target
            words = [LABELS[k] for k in y]
            return text_to_text_dataset(x, words, tokenizer, PREFIX, batch_size, **options)
        return classification_dataset(x, y, tokenizer, batch_size=batch_size, **options)

    limit = dict(max_length=args.max_length)  # known lengths: no "ran out of data" at validation
    data, steps = common.counted(dataset(texts, labels, args.batch, seed=args.seed, **limit))
    val, _ = common.counted(dataset(val_texts, val_labels, 256, shuffle=False, **limit))
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

    schedule = cosine_schedule(args.lr, steps * args.epochs, alpha=0.05)
    if init is not None and init.model_type != "bilm":
        schedule = common.bert_schedule(args, steps)
    options = {"learning_rate": schedule, "weight_decay": args.weight_decay}
    extra = dict(init=init, labels=list(LABELS), max_length=args.max_length, steps_per_epoch=steps)
    model = common.new_model(
        args, "sentiment", with_length, lambda model: options, None, overrides, **extra
    )[0]
    words = f"{tokenizer.vocabulary_size:,} words"
    run = f"precision {args.precision}, jit {args.jit}"
    sentences = f"{len(texts):,} training sentences, {steps} batches per epoch"
    print(f"{args.model}: {model.count_params():,} parameters, {words}, {sentences}, {run}")
    curves = (f"{args.model} on SST-2", "cross-entropy (nats)", "accuracy", "accuracy")
    seconds, _ = common.fit_and_report(
        model, args, data, KILL_ENV, curves, val, "val_accuracy", "max", shuffle=False
    )
    acc, _ = accuracy_report(probabilities(*load(out), texts=val_texts), val_labels)
    print(f"best val accuracy {acc:.2f}%")
    with open(os.path.join(out, "val_accuracy.json"), "w") as f:
        json.dump({"accuracy": acc, "train_seconds_this_process": seconds}, f, indent=2)


def evaluate(args):
    """Accuracy of one model, or of several (their probabilities averaged)."""
    models = [load(directory) for directory in args.model]
    texts, labels = read(args.data, models[0][2]["sizes"].get("num_classes", len(LABELS)))
    probs = 0.0
    seconds = 0.0
    for model, tokenizer, config in models:
        probabilities(model, tokenizer, config, texts[:8])  # compiles
        start = time.perf_counter()
        own = probabilities(model, tokenizer, config, texts)
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
    for p in probabilities(model, tokenizer, config, lines) if lines else []:
        k = int(p.argmax())
        print(f"{config['labels'][k]}\t{p[k]:.3f}" if p.sum() else "(another word)\t0.000")


def export(args):
    from seqkeras.export.signatures import ServeText
    from seqkeras.models import class_probabilities

    model, tokenizer, config = load(args.model)
    if config["model"] == "text-to-text":
        seq2seq = "a seq2seq model; export it with seqkeras.export (generate signatures)"
        raise common.AppError(f"export: a text-to-text model is {seq2seq}")
    every, labels = read(args.data, config["sizes"].get("num_classes", len(LABELS)))
    texts = every[: args.check]

    def check(path):
        expected = probabilities(model, tokenizer, config, texts)
        diff = []

        def matches(out):
            served = np.asarray(out["probabilities"])
            diff.append(float(np.max(np.abs(served - expected))))
            return (served.argmax(-1) == expected.argmax(-1)) & (diff[0] <= 1e-4)

        name = "serve_text"
        note = ", probabilities within 1e-4"
        same, seconds = common.served(path, name, name, "labels", matches, note, text=texts)
        print(f"probabilities max abs diff {diff[0]:.2g}")
        keys = ("equal", "max_abs_diff", "fresh_process_s")
        return {f"serve_text_{k}": v for k, v in zip(keys, (same, diff[0], seconds))}

    def accuracy(predict):  # of Keras or a TFLite file on every sentence of --data
        def ids(x):
            return predict({"token_ids": x})

        probs = class_probabilities(ids, tokenizer, every, config["max_length"], 32)
        return 100.0 * float(np.mean(probs.argmax(-1) == np.asarray(labels)))

    ids = tokenizer.encode(texts[:8]).to_tensor(0).numpy()
    verify = {"tolerance": 1e-4}
    if config.get("init"):  # the float32 and int8 TFLite files' accuracy on --data
        verify.update(quantize=("dynamic_int8",), metric=accuracy)
    signatures = [ServeText(tokenizer=tokenizer)]
    beside = [vocabulary_file(args.model, config)]
    common.export(model, args, "sentiment", signatures, check, [ids[:1], ids], beside, **verify)


LENGTH_BINS = ((1, 10), (11, 20), (21, 30), (31, 99))


def plot(args):
    """Accuracy by sentence length for each model (one plot), and the
    attention-pooling weights of the first model that has them."""
    from seqkeras.models import pooling_weights
    from seqkeras.plots import length_bins, plot_attention

    texts, labels = read(args.data)
    bins = length_bins([len(t.split()) for t in texts], LENGTH_BINS)
    os.makedirs(args.out, exist_ok=True)
    table = {}
    drawn = False
    for directory in args.models:
        model, tokenizer, config = load(directory)
        right = probabilities(model, tokenizer, config, texts).argmax(-1) == np.asarray(labels)
        table[config["model"]] = [100 * float(np.mean(right[idx])) for idx in bins]
        if not drawn and config["arguments"].get("pooling") == "attention":
            text = texts[args.sentence]
            drawn = True
            ids = tokenizer.encode([text]).to_tensor(0).numpy()[0]
            weights, p = pooling_weights(model, ids)
            title = f"{config['model']}: attention pooling weights ({LABELS[int(p.argmax())]}, "
            path = os.path.join(args.out, "attention-pooling.png")
            plot_attention(path, weights, text.split(), title=title + f"p={p.max():.2f})")
            print(f"attention heatmap: {path}")
    where = os.path.join(args.out, "accuracy-by-length.png")
    what = ("sentence length in words (sentences)", "accuracy (%)")
    common.by_length(
        where, LENGTH_BINS, table, bins, *what, "SST-2 dev: accuracy by sentence length"
    )


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train a model", train, False)
    t.add_argument("--model", choices=MODELS, help="the preset (default bilstm)")
    t.add_argument("--random-init", action="store_true", help="with --init: random weights")
    t.add_argument("--train", default=sst2("train.tsv"))
    t.add_argument("--validation", default=sst2("dev.tsv"))
    common.add_out(t)
    init = (
        "fine-tune a pretrained model: a BERT-family or GPT-2 checkpoint (Hugging Face or "
        "keras-hub directory), or an apps/pretrain.py bilm (ELMo) or span (T5) run; sets --model"
    )
    t.add_argument("--init", help=init)
    common.add_overrides(t, embedding_dim=int, units=int, dropout=float, word_dropout=float)
    t.add_argument("--min-count", type=int, default=1, help="words seen fewer times are UNK")
    common.add_fit_options(t, epochs=4, batch=64, warmup=0.1)  # --lr: with --init
    t.add_argument("--weight-decay", type=float, help="AdamW's (default 0; with --init 0.01)")
    t.add_argument("--max-length", type=int, default=64)
    common.add_training_options(t)
    ensemble = dict(nargs="+", help="a model directory, or several: an ensemble")
    e = common.subcommand(sub, "evaluate", "accuracy on a TSV file", evaluate, **ensemble)
    e.add_argument("--data", required=True)
    common.subcommand(sub, "predict", "stdin sentences -> label, p", predict)
    x = common.subcommand(sub, "export", "SavedModel, TFLite, ONNX, verified", export)
    x.add_argument("--data", default=sst2("dev.tsv"), help="sentences the export is checked on")
    common.add_export_options(x, 256)
    g = common.subcommand(sub, "plot", "accuracy by length, attention", plot, False)
    g.add_argument("--models", nargs="+", required=True)
    g.add_argument("--data", default=sst2("dev.tsv"))
    common.add_out(g, "a directory for the PNGs")
    shown = "which sentence the heatmap shows (0-based)"
    g.add_argument("--sentence", type=int, default=0, help=shown)
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("train", "validation", "data"))


if __name__ == "__main__":
    main()
