"""Named entities (CoNLL-2003) with seqkeras: a BiLSTM-CRF tagger over
word embeddings, a character CNN per word and casing features, trained
from scratch.

    python apps/ner.py train --out runs/ner
    python apps/ner.py evaluate --model runs/ner \\
        --data ../shared/data/conll2003/valid.txt
    echo "EU rejects German call to boycott British lamb ." | \\
        python apps/ner.py tag --model runs/ner
    python apps/ner.py export --model runs/ner

Data: the CoNLL format, one token per line with whitespace-separated
columns (the word first, the IOB tag last), a blank line between
sentences, `-DOCSTART-` lines ignored. `train` learns the word and
character vocabularies (`seqkeras.data.WordFeatures`) and writes into
`--out`: `config.json`, `words/vocabulary.txt`,
`characters/vocabulary.txt`, `tags.txt`, `best.weights.h5` (the best
validation entity F1), `history.csv`, `curves.png`, `epoch_seconds.csv`,
TensorBoard logs under `logs/` and `backup/` (`BackupAndRestore`: kill the
run, start the same command again, it resumes). `evaluate` scores any file
in the CoNLL format: entity-level precision, recall and F1 per type and
micro-averaged (conlleval's rules), and its last line is
`F1 = <micro F1>`. `tag` reads sentences on stdin (words separated by
spaces, punctuation split off as in CoNLL) and prints each one's entities.
`export` writes a SavedModel whose `tag` signature takes raw sentences
and returns words, tags and entity spans (features and Viterbi in the
graph), checked in a process without seqkeras, plus the forward pass as
builtin-only TFLite and ONNX with the vocabularies beside them.

Bad input (a missing or non-UTF-8 file, a malformed CoNLL line, an
unknown tag, an empty file, a directory that is not a trained model) ends
with a one-line error and exit status 2.
"""

import argparse
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

ARGUMENTS = {  # `seqkeras.models.tagger` arguments (vocabularies added)
    "backbone": "lstm",
    "bidirectional": True,
    "embedding_dim": 100,
    "units": 200,
    "dropout": 0.5,
    "word_dropout": 0.05,
    "crf": True,
    "char_embedding_dim": 30,
    "char_filters": 50,
    "casing": True,
}
TINY = {"embedding_dim": 16, "units": 16, "char_embedding_dim": 8, "char_filters": 8}
KILL_ENV = "NER_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
PROG = "ner.py"
TAGS = "tags.txt"


def conll(name):
    return common.shared_file("conll2003", name)


def read(path):
    from seqkeras.data import read_conll

    try:
        return read_conll(path, name=PROG)
    except (ValueError, FileNotFoundError) as error:
        raise AppError(str(error)) from None


def load(directory):
    """`(model, features, tag_vocabulary, config)` from a `train` output
    directory."""
    import seqkeras
    from seqkeras.data import WordFeatures

    config = common.read_config(directory)
    try:
        features = WordFeatures.load(directory, config["max_chars"])
        with open(os.path.join(directory, TAGS), encoding="utf-8") as f:
            tags = [line.rstrip("\n") for line in f]
        model = seqkeras.models.tagger(
            features.sizes["token_ids"],
            len(tags),
            char_vocab_size=features.sizes["char_ids"],
            **config["arguments"],
        )
    except (ValueError, KeyError, TypeError, OSError) as error:
        raise AppError(
            f"--model {directory}: unreadable {common.CONFIG} or vocabularies ({error})"
        ) from None
    return common.load_weights(model, directory), features, tags, config


# -- tagging ---------------------------------------------------------------


def _width(n):
    """Batch widths are rounded up to a multiple of 8 (few compiled
    shapes)."""
    return max(8, -(-n // 8) * 8)


def predict_tags(model, features, tag_vocabulary, sentences, batch=128):
    """The predicted tag strings of each sentence (lists of words), in
    order: sentences sorted by length, batches padded to a multiple of 8
    words, the CRF's Viterbi path."""
    order = np.argsort([len(s) for s in sentences], kind="stable")
    out = [None] * len(sentences)
    for start in range(0, len(sentences), batch):
        chunk = order[start : start + batch]
        width = _width(max(len(sentences[i]) for i in chunk))
        words = np.full((len(chunk), width), "", object)
        for j, i in enumerate(chunk):
            words[j, : len(sentences[i])] = sentences[i]
        feats = {k: v.numpy() for k, v in features(words).items()}
        ids = np.asarray(model.predict_on_batch(feats)["tags"])
        for j, i in enumerate(chunk):
            out[i] = [tag_vocabulary[k] for k in ids[j, : len(sentences[i])]]
    return out


class EntityF1(keras.callbacks.Callback):
    """Adds `val_f1` (entity-level micro F1, percent) to each epoch's logs,
    from the Viterbi tags of the validation sentences."""

    def __init__(self, features, tag_vocabulary, sentences, tags):
        super().__init__()
        self.args = features, tag_vocabulary, sentences
        self.tags = tags

    def on_epoch_end(self, epoch, logs=None):
        from seqkeras.data.entities import entity_scores

        features, vocabulary, sentences = self.args
        predicted = predict_tags(self.model, features, vocabulary, sentences)
        f1 = entity_scores(self.tags, predicted)["micro"]["f1"]
        if logs is not None:
            logs["val_f1"] = f1
        print(f" - val_f1: {f1:.2f}")


# -- train -----------------------------------------------------------------


def train(args):
    import tensorflow as tf

    import seqkeras
    from seqkeras.data import WordFeatures, tagging_dataset

    sentences, tags = read(args.train)
    val_sentences, val_tags = read(args.validation)
    out = args.out
    os.makedirs(out, exist_ok=True)
    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    keras.utils.set_random_seed(args.seed)
    resumed = os.path.isfile(os.path.join(out, common.CONFIG))
    if resumed:  # a resumed run keeps its vocabularies
        features = WordFeatures.load(out, args.max_chars)
        with open(os.path.join(out, TAGS), encoding="utf-8") as f:
            vocabulary = [line.rstrip("\n") for line in f]
    else:
        features = WordFeatures.train(sentences, min_count=args.min_count, max_chars=args.max_chars)
        features.save(out)
        seen = sorted({t for s in tags for t in s} - {"O"})
        vocabulary = ["<pad>", "O"] + sorted(seen, key=lambda t: (t[2:], t))
        with open(os.path.join(out, TAGS), "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in vocabulary))
    try:
        data = tagging_dataset(
            sentences,
            tags,
            features,
            vocabulary,
            batch_size=args.batch,
            max_length=args.max_length,
            seed=args.seed,
            name=PROG,
        )
        tagging_dataset(
            val_sentences, val_tags, features, vocabulary, name=PROG
        )  # checks the validation tags
    except ValueError as error:
        raise AppError(
            f"{error} (training file {args.train}, validation file {args.validation})"
        ) from None
    steps = sum(1 for _ in data)
    data = data.apply(tf.data.experimental.assert_cardinality(steps))
    arguments = dict(ARGUMENTS)
    if args.tiny:
        arguments.update(TINY)
    with common.strategy_scope(args):  # build, compile
        model = seqkeras.models.tagger(
            features.sizes["token_ids"],
            len(vocabulary),
            char_vocab_size=features.sizes["char_ids"],
            **arguments,
        )
        schedule = keras.optimizers.schedules.CosineDecay(args.lr, steps * args.epochs, alpha=0.05)
        seqkeras.models.compile_model(
            model,
            learning_rate=schedule,
            jit_compile=common.jit_option(args),
            clipnorm=args.clipnorm,
        )
    config = {
        "builder": "tagger",
        "arguments": arguments,
        "max_chars": args.max_chars,
        "tags": TAGS,
        "vocabularies": ["words/vocabulary.txt", "characters/vocabulary.txt"],
        "weights": common.WEIGHTS,
        "precision": args.precision,
        "training": {k: v for k, v in vars(args).items() if k != "func"},
        "parameters": int(model.count_params()),
        "sizes": features.sizes,
        "steps_per_epoch": steps,
    }
    common.write_config(out, config)
    print(
        f"BiLSTM-CRF: {model.count_params():,} parameters, "
        f"{features.sizes['token_ids']:,} words, "
        f"{features.sizes['char_ids']:,} characters, "
        f"{len(vocabulary) - 1} tags, {len(sentences):,} sentences, "
        f"{steps} batches per epoch, {args.epochs} epochs"
    )
    callbacks, checkpoint = common.callbacks(out, KILL_ENV, monitor="val_f1", mode="max")
    # val_f1 must be in the logs before the checkpoint and the CSV read it
    callbacks.insert(1, EntityF1(features, vocabulary, val_sentences, val_tags))
    start = time.perf_counter()
    model.fit(data, epochs=args.epochs, callbacks=callbacks, verbose=args.verbose, shuffle=False)
    seconds = time.perf_counter() - start
    png = common.plot_curves(
        os.path.join(out, "history.csv"),
        os.path.join(out, "curves.png"),
        "BiLSTM-CRF on CoNLL-2003",
        "CRF negative log-likelihood",
        "val_f1",
        "validation entity F1 (%)",
    )
    print(
        f"trained in {seconds:.0f} s (this process); best val F1 "
        f"{checkpoint.best:.2f}; curves: {png}"
    )


# -- evaluate / tag --------------------------------------------------------


def evaluate(args):
    from seqkeras.data.entities import entity_scores

    model, features, vocabulary, _ = load(args.model)
    sentences, tags = read(args.data)
    unknown = sorted({t for s in tags for t in s} - set(vocabulary[1:]))
    if unknown:
        raise AppError(
            f"{args.data} has tags the model does not know: "
            f"{unknown[:5]} (it knows {vocabulary[1:]})"
        )
    predict_tags(model, features, vocabulary, sentences[:8])  # compiles
    start = time.perf_counter()
    predicted = predict_tags(model, features, vocabulary, sentences)
    seconds = time.perf_counter() - start
    try:
        scores = entity_scores(tags, predicted)
    except ValueError as error:
        raise AppError(f"{args.data}: {error}") from None
    words = sum(len(s) for s in sentences)
    print(
        f"{args.data}: {len(sentences)} sentences, {words} words, "
        f"{len(sentences) / seconds:.0f} sentences/s"
    )
    print(f"{'type':>8} {'precision':>9} {'recall':>7} {'F1':>6} {'support':>7}")
    for kind, s in scores.items():
        print(
            f"{kind:>8} {s['precision']:9.2f} {s['recall']:7.2f} {s['f1']:6.2f} {s['support']:7d}"
        )
    print(f"F1 = {scores['micro']['f1']:.2f}")


def split_words(line):
    """CoNLL-style words of a raw sentence: whitespace, and punctuation at
    a word's ends split off ("Germany's" stays; "(EU)," -> "(", "EU",
    ")", ",")."""
    import re

    words = []
    for token in line.split():
        lead = re.match(r"^[(\"'\[]*", token).group()
        tail = re.search(r"[)\"'\],.;:!?]*$", token[len(lead) :]).group()
        core = token[len(lead) : len(token) - len(tail)]
        if core.endswith("'s") and tail == "" and len(core) > 2:
            core, tail = core[:-2], "'s"
        words += list(lead) + ([core] if core else []) + ([tail] if tail == "'s" else list(tail))
    return words


def tag(args):
    from seqkeras.data.entities import entity_spans

    model, features, vocabulary, _ = load(args.model)
    lines = common.stdin_lines(PROG)
    if not lines:
        return
    sentences = [split_words(line) for line in lines]
    for words, tags in zip(sentences, predict_tags(model, features, vocabulary, sentences)):
        spans = entity_spans(tags)
        print("\t".join(f"{kind}: {' '.join(words[a:b])}" for kind, a, b in spans) or "(no entity)")


# -- export ----------------------------------------------------------------


def export(args):
    from seqkeras.data.entities import entity_spans
    from seqkeras.export import export_and_verify, next_version, saved_model
    from seqkeras.export.audit import audit_serving, fresh_signature

    model, features, vocabulary, config = load(args.model)
    out = args.out or os.path.join(args.model, "export")
    sentences, _ = read(args.data)
    sentences = sentences[: args.check]
    name = "ner"
    path = saved_model(
        model,
        os.path.join(out, name, str(next_version(os.path.join(out, name)))),
        tagging={"features": features, "tag_vocabulary": vocabulary},
    )
    print(f"SavedModel: {path} (signatures serving_default, tag)")
    expected = predict_tags(model, features, vocabulary, sentences)
    served, seconds = fresh_signature(path, "tag", [" ".join(s) for s in sentences])
    same_tags = same_spans = 0
    for i, (words, tags) in enumerate(zip(sentences, expected)):
        n = len(words)
        got = served["tags"][i][:n]
        same_tags += got == tags and all(t == "" for t in served["tags"][i][n:])
        spans = [
            (k, a, b)
            for k, a, b in zip(
                served["entity_types"][i], served["entity_starts"][i], served["entity_ends"][i]
            )
            if a >= 0
        ]
        same_spans += spans == entity_spans(tags)
    print(
        f"tag signature in a process without seqkeras: {same_tags}/"
        f"{len(sentences)} tag sequences (Viterbi) and {same_spans}/"
        f"{len(sentences)} entity span lists equal to Keras"
    )
    if same_tags != len(sentences) or same_spans != len(sentences):
        raise RuntimeError("the exported tag signature differs from Keras")
    audit = audit_serving(path)
    print(
        f"serving audit: {len(audit['ops'])} ops, XLA-only: "
        f"{audit['xla'] or 'none'}, ops without a CPU kernel: "
        f"{audit['no_kernel'] or 'none'}"
    )
    if audit["xla"] or audit["tf_text_unsupported"] or audit["no_kernel"]:
        raise RuntimeError(f"not servable by TF Serving: {audit}")
    batch = sentences[:8]
    width = max(len(s) for s in batch)
    words = np.array([s + [""] * (width - len(s)) for s in batch], object)
    feats = {k: v.numpy() for k, v in features(words).items()}
    samples = [{k: v[:1, : len(batch[0])] for k, v in feats.items()}, feats]
    report = export_and_verify(model, name + "-forward", samples, out, tolerance=1e-4)
    report.update(
        tag_savedmodel=path,
        tag_equal=f"{same_tags}/{len(sentences)}",
        spans_equal=f"{same_spans}/{len(sentences)}",
        tag_fresh_process_s=seconds,
        serving_ops=len(audit["ops"]),
    )
    tflite_dir = os.path.dirname(report["tflite"])
    for part in ("words", "characters"):
        shutil.copy(
            os.path.join(args.model, part, "vocabulary.txt"),
            os.path.join(tflite_dir, f"{part}_vocabulary.txt"),
        )
    shutil.copy(os.path.join(args.model, TAGS), tflite_dir)
    common.write_report(report, out)


# -- command line ----------------------------------------------------------


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train the BiLSTM-CRF tagger")
    t.add_argument("--out", required=True, help="the model directory")
    t.add_argument("--train", default=conll("train.txt"))
    t.add_argument("--validation", default=conll("valid.txt"))
    t.add_argument("--min-count", type=int, default=1)
    t.add_argument("--max-chars", type=int, default=20)
    t.add_argument("--epochs", type=int, default=20)
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--clipnorm", type=float, default=5.0)
    t.add_argument("--max-length", type=int, default=128)
    common.add_training_options(t)
    t.set_defaults(func=train)
    e = sub.add_parser("evaluate", help="entity F1 on a CoNLL file")
    e.add_argument("--model", required=True)
    e.add_argument("--data", required=True)
    e.set_defaults(func=evaluate)
    r = sub.add_parser("tag", help="stdin sentences -> entities")
    r.add_argument("--model", required=True)
    r.set_defaults(func=tag)
    x = sub.add_parser("export", help="SavedModel, TFLite, ONNX, verified")
    x.add_argument("--model", required=True)
    x.add_argument("--out", help="default: MODEL/export")
    x.add_argument("--data", default=conll("valid.txt"), help="sentences the export is checked on")
    x.add_argument("--check", type=int, default=128)
    x.set_defaults(func=export)
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("train", "validation", "data"))


if __name__ == "__main__":
    main()
