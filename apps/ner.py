"""Named entities (CoNLL-2003) with seqkeras: a BiLSTM-CRF tagger over
word embeddings, a character CNN per word and casing features, trained
from scratch; or a pretrained BERT-family checkpoint fine-tuned (`--init
DIR`: each word's first subword, the same character and casing features,
a CRF over words), a GPT-2 one (each word's last subword), or ELMo (`--init`
an `apps/pretrain.py --objective bilm` run: the frozen biLM's mixed layers
at each word's first subword, added to the from-scratch tagger's
features).

    python apps/ner.py train --out runs/ner
    python apps/ner.py train --init checkpoints/all-MiniLM-L6-v2 --out runs/ner-minilm
    python apps/ner.py evaluate --model runs/ner \\
        --data ../shared/data/conll2003/valid.txt
    echo "EU rejects German call to boycott British lamb ." | \\
        python apps/ner.py tag --model runs/ner
    python apps/ner.py export --model runs/ner

Data: the CoNLL format, one token per line with whitespace-separated
columns (the word first, the IOB tag last), a blank line between
sentences, `-DOCSTART-` lines ignored. `train` learns the word and
character vocabularies (`seqkeras.data.WordFeatures`) and writes the model
directory of every app (`common.py`; the best weights by validation entity
F1) with `words/vocabulary.txt`, `characters/vocabulary.txt` and
`tags.txt`. `evaluate` scores any file
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
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quiet  # noqa: E402, F401  (first: TensorFlow without its start-up lines)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import common  # noqa: E402
from common import AppError  # noqa: E402

MODELS = sorted(common.presets("ner")["models"])  # presets.json
KILL_ENV = "NER_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
PROG = "ner.py"
TAGS = "tags.txt"


def conll(name):
    return common.shared_file("conll2003", name)


def read(path):
    from seqkeras.data import read_conll

    return common.read_data(read_conll, path, name=PROG)


def read_tags(directory):
    with open(os.path.join(directory, TAGS), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def load(directory):
    """`(model, features, tag_vocabulary, config)` from a `train` output
    directory."""
    from seqkeras.data import BertWordFeatures, WordFeatures
    from seqkeras.data.bert_text import ElmoWordFeatures

    model, config = common.load(directory)
    try:
        if config["model"] == "elmo":
            features = ElmoWordFeatures.load(directory, config["max_chars"])
        elif config.get("init"):
            features = BertWordFeatures.load(
                directory, config["arguments"]["casing"], config["max_chars"]
            )
        else:
            features = WordFeatures.load(directory, config["max_chars"])
        tags = read_tags(directory)
    except (ValueError, KeyError, OSError) as error:
        raise AppError(f"--model {directory}: unreadable vocabularies ({error})") from None
    return model, features, tags, config


# -- tagging ---------------------------------------------------------------


def predict_tags(model, features, tag_vocabulary, sentences, batch=128):
    """The predicted tag strings of each sentence (lists of words), in
    order: sentences sorted by length, batches padded to a multiple of 8
    words, the CRF's Viterbi path."""
    from seqkeras.data import length_batches

    out = [None] * len(sentences)
    for chunk, words in length_batches(sentences, batch, fill="", dtype=object):
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


def pretrained_features(args, sentences):
    """`--init`: the checkpoint's WordPiece tokenizer, the training set's
    characters, casing."""
    from seqkeras.data import BertTokenizer, BertWordFeatures
    from seqkeras.data.word_features import character_tokenizer

    tokenizer = common.read_data(BertTokenizer.load, args.init, what=f"--init {args.init}")
    characters = character_tokenizer(sentences)
    return BertWordFeatures(tokenizer, characters, casing=True, max_chars=args.max_chars)


def train(args):
    from seqkeras.data import BertTokenizer, BertWordFeatures, WordFeatures, tagging_dataset
    from seqkeras.data.bert_text import ElmoWordFeatures

    sentences, tags = read(args.train)
    val_sentences, val_tags = read(args.validation)
    init = common.read_init(args, kinds=("bert", "gpt2", "bilm"))
    common.init_options(args, init, "bilstm-crf", lr=(2e-3, 1e-4))
    elmo = init is not None and init.model_type == "bilm"  # ELMo beside today's features
    out = common.begin_training(args)
    if os.path.isfile(os.path.join(out, common.CONFIG)):  # a resumed run keeps its vocabularies
        vocabulary = read_tags(out)
        if elmo:
            features = ElmoWordFeatures.load(out, args.max_chars)
        elif init:
            features = BertWordFeatures.load(out, max_chars=args.max_chars)
        else:
            features = WordFeatures.load(out, args.max_chars)
    else:
        if init and not elmo:
            features = pretrained_features(args, sentences)
        else:
            features = WordFeatures.train(
                sentences, min_count=args.min_count, max_chars=args.max_chars
            )
        if elmo:
            tokenizer = common.read_data(BertTokenizer.load, args.init, what=f"--init {args.init}")
            features = ElmoWordFeatures(features, tokenizer)
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
        tagging_dataset(val_sentences, val_tags, features, vocabulary, name=PROG)  # checks tags
    except ValueError as error:
        raise AppError(
            f"{error} (training file {args.train}, validation file {args.validation})"
        ) from None
    data, steps = common.counted(data)
    sizes = {
        "vocab_size": features.sizes["token_ids"],
        "num_tags": len(vocabulary),
        "char_vocab_size": features.sizes["char_ids"],
    }
    schedule = common.cosine_schedule(args.lr, steps * args.epochs, alpha=0.05)
    options = {"learning_rate": schedule, "clipnorm": args.clipnorm}
    if elmo:
        sizes.update(elmo_vocab_size=features.sizes["elmo_ids"], elmo_arguments=init.architecture)
    elif init is not None:  # BERT's recipe: AdamW, linear warm-up and decay
        sizes = dict(sizes, architecture=init.architecture)
        del sizes["vocab_size"]
        schedule = common.bert_schedule(args, steps)
        options = {"learning_rate": schedule, "clipnorm": args.clipnorm, "weight_decay": 0.01}
    model, _, _ = common.new_model(
        args,
        "ner",
        sizes,
        lambda model: options,
        init=init,
        max_chars=args.max_chars,
        steps_per_epoch=steps,
    )
    print(
        f"{args.model}: {model.count_params():,} parameters, {features.sizes['token_ids']:,} "
        f"words, {features.sizes['char_ids']:,} characters, {len(vocabulary) - 1} tags, "
        f"{len(sentences):,} sentences, {steps} batches per epoch, {args.epochs} epochs"
    )
    f1 = EntityF1(features, vocabulary, val_sentences, val_tags)
    curves = (
        "BiLSTM-CRF on CoNLL-2003",
        "CRF negative log-likelihood",
        "val_f1",
        "validation entity F1 (%)",
    )
    common.fit_and_report(
        model,
        args,
        data,
        KILL_ENV,
        curves,
        monitor="val_f1",
        mode="max",
        extra_callbacks=[f1],
        shuffle=False,
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
    from seqkeras.export import fresh_signature
    from seqkeras.export.signatures import Tag

    model, features, vocabulary, config = load(args.model)
    sentences = read(args.data)[0][: args.check]

    def check(path):
        expected = predict_tags(model, features, vocabulary, sentences)
        texts = [" ".join(s) for s in sentences]
        served, seconds = fresh_signature(path, "tag", text=texts)
        same_tags = same_spans = 0
        for i, (words, tags) in enumerate(zip(sentences, expected)):
            got, n = served["tags"][i], len(words)
            same_tags += got[:n] == tags and all(t == "" for t in got[n:])
            found = zip(*(served[k][i] for k in ("entity_types", "entity_starts", "entity_ends")))
            same_spans += [(k, a, b) for k, a, b in found if a >= 0] == entity_spans(tags)
        n = len(sentences)
        print(
            f"tag signature in a process without seqkeras: {same_tags}/{n} tag sequences "
            f"(Viterbi) and {same_spans}/{n} entity span lists equal to Keras"
        )
        if same_tags != n or same_spans != n:
            raise RuntimeError("the exported tag signature differs from Keras")
        return {
            "tag_equal": f"{same_tags}/{n}",
            "spans_equal": f"{same_spans}/{n}",
            "tag_fresh_process_s": seconds,
        }

    batch = sentences[:8]
    width = max(len(s) for s in batch)
    words = np.array([s + [""] * (width - len(s)) for s in batch], object)
    feats = {k: v.numpy() for k, v in features(words).items()}
    first = {k: v.numpy() for k, v in features(np.array([batch[0]], object)).items()}
    samples = [first, feats]
    parts = ("characters",) if config.get("init") else ("words", "characters")
    beside = [
        (os.path.join(args.model, part, "vocabulary.txt"), f"{part}_vocabulary.txt")
        for part in parts
    ] + [os.path.join(args.model, TAGS)]
    if config.get("init"):
        beside.append(os.path.join(args.model, "vocab.txt"))
    common.export(
        model, args, "ner", [Tag(features, vocabulary)], check, samples, beside, tolerance=1e-4
    )


# -- command line ----------------------------------------------------------


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train the BiLSTM-CRF tagger", train, False)
    t.add_argument(
        "--model", choices=MODELS, help="the preset (default bilstm-crf; with --init: pretrained)"
    )
    t.add_argument(
        "--init",
        help="fine-tune a pretrained BERT-family checkpoint: a Hugging Face or keras-hub directory",
    )
    t.add_argument("--out", required=True, help="the model directory")
    t.add_argument("--train", default=conll("train.txt"))
    t.add_argument("--validation", default=conll("valid.txt"))
    common.options(
        t,
        "min-count=1 max-chars=20 epochs=20 batch=32 lr=float clipnorm=5.0 warmup=0.1 "
        "max-length=128",
        lr="peak learning rate (default 2e-3; with --init 1e-4)",
        warmup="with --init: the fraction of steps that warm the learning rate up",
    )
    common.add_training_options(t)
    e = common.subcommand(sub, "evaluate", "entity F1 on a CoNLL file", evaluate)
    e.add_argument("--data", required=True)
    common.subcommand(sub, "tag", "stdin sentences -> entities", tag)
    x = common.subcommand(sub, "export", "SavedModel, TFLite, ONNX, verified", export)
    x.add_argument("--out", help="default: MODEL/export")
    x.add_argument("--data", default=conll("valid.txt"), help="sentences the export is checked on")
    common.options(x, "check=128")
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("train", "validation", "data"))


if __name__ == "__main__":
    main()
