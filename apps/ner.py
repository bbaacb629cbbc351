"""Named entities (CoNLL-2003) with seqkeras: a BiLSTM-CRF tagger over
word embeddings, a character CNN per word and casing features, trained
from scratch; or a pretrained BERT-family (`--init DIR`), GPT-2 or ELMo
(`--init` an `apps/pretrain.py --objective bilm` run) model fine-tuned.

    python apps/ner.py train --out runs/ner
    python apps/ner.py train --init checkpoints/all-MiniLM-L6-v2 --out runs/ner-minilm
    python apps/ner.py evaluate --model runs/ner \\
        --data ../shared/data/conll2003/valid.txt            # last line: F1 = ...
    echo "EU rejects German call to boycott British lamb ." | \\
        python apps/ner.py tag --model runs/ner
    python apps/ner.py export --model runs/ner

Data: the CoNLL format (the word first, the IOB tag last, a blank line
between sentences). The data formats, what each subcommand writes and
prints, and the errors: docs/guides/apps.md, "Command-line reference".
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quiet  # noqa: F401  (first: TensorFlow without its start-up lines)

import numpy as np

import common
from common import AppError

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

    model, config = common.load(directory)
    try:
        elmo = config["model"] == "elmo"
        init = config.get("init")
        casing = config["arguments"].get("casing", True)
        features = saved_features(directory, elmo, init, config["max_chars"], casing)
        return model, features, read_tags(directory), config
    except (ValueError, KeyError, OSError) as error:
        raise AppError(f"--model {directory}: unreadable vocabularies ({error})") from None


def saved_features(directory, elmo, init, max_chars, casing=True):
    """The word features a `train` run saved in `directory`."""
    from seqkeras.data import BertWordFeatures, WordFeatures
    from seqkeras.data.bert_text import ElmoWordFeatures

    if elmo:
        return ElmoWordFeatures.load(directory, max_chars)
    if init:
        return BertWordFeatures.load(directory, casing, max_chars)
    return WordFeatures.load(directory, max_chars)


def pretrained_features(args, sentences):
    """`--init`: the checkpoint's WordPiece tokenizer, the training set's
    characters, casing."""
    from seqkeras.data import BertTokenizer, BertWordFeatures
    from seqkeras.data.word_features import character_tokenizer

    tokenizer = common.read_data(BertTokenizer.load, args.init, what=f"--init {args.init}")
    characters = character_tokenizer(sentences)
    return BertWordFeatures(tokenizer, characters, casing=True, max_chars=args.max_chars)


def train(args):
    from seqkeras.data import BertTokenizer, WordFeatures, tag_vocabulary, tagging_dataset
    from seqkeras.data.bert_text import ElmoWordFeatures
    from seqkeras.metrics import EntityF1
    from seqkeras.training import cosine_schedule

    sentences, tags = read(args.train)
    val_sentences, val_tags = read(args.validation)
    init = common.read_init(args, kinds=("bert", "gpt2", "bilm"))
    common.init_options(args, init, "bilstm-crf", lr=(2e-3, 1e-4))
    elmo = init is not None and init.model_type == "bilm"  # ELMo beside today's features
    out = common.begin_training(args)
    if os.path.isfile(os.path.join(out, common.CONFIG)):  # a resumed run keeps its vocabularies
        vocabulary = read_tags(out)
        features = saved_features(out, elmo, init, args.max_chars)
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
        vocabulary = tag_vocabulary(tags)
        with open(os.path.join(out, TAGS), "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in vocabulary))
    batching = dict(batch_size=args.batch, max_length=args.max_length, seed=args.seed, name=PROG)
    try:
        data = tagging_dataset(sentences, tags, features, vocabulary, **batching)
        tagging_dataset(val_sentences, val_tags, features, vocabulary, name=PROG)  # checks tags
    except ValueError as error:
        files = f"training file {args.train}, validation file {args.validation}"
        raise AppError(f"{error} ({files})") from None
    data, steps = common.counted(data)
    sizes = {
        "vocab_size": features.sizes["token_ids"],
        "num_tags": len(vocabulary),
        "char_vocab_size": features.sizes["char_ids"],
    }
    schedule = cosine_schedule(args.lr, steps * args.epochs, alpha=0.05)
    options = {"learning_rate": schedule, "clipnorm": args.clipnorm}
    if elmo:
        sizes.update(elmo_vocab_size=features.sizes["elmo_ids"], elmo_arguments=init.architecture)
    elif init is not None:  # BERT's recipe: AdamW, linear warm-up and decay
        sizes = dict(sizes, architecture=init.architecture)
        del sizes["vocab_size"]
        schedule = common.bert_schedule(args, steps)
        options = {"learning_rate": schedule, "clipnorm": args.clipnorm, "weight_decay": 0.01}
    extra = dict(init=init, max_chars=args.max_chars, steps_per_epoch=steps)
    model = common.new_model(args, "ner", sizes, lambda model: options, **extra)[0]
    print(
        f"{args.model}: {model.count_params():,} parameters, {features.sizes['token_ids']:,} "
        f"words, {features.sizes['char_ids']:,} characters, {len(vocabulary) - 1} tags, "
        f"{len(sentences):,} sentences, {steps} batches per epoch, {args.epochs} epochs"
    )
    f1 = EntityF1(features, vocabulary, val_sentences, val_tags)  # val_f1 picks the best epoch
    curves = ("BiLSTM-CRF on CoNLL-2003", "CRF negative log-likelihood", "val_f1", "val F1 (%)")
    best = dict(monitor="val_f1", mode="max", extra_callbacks=[f1], shuffle=False)
    common.fit_and_report(model, args, data, KILL_ENV, curves, **best)


def evaluate(args):
    from seqkeras.metrics import entity_scores
    from seqkeras.models import predict_tags

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


def tag(args):
    from seqkeras.data import split_words
    from seqkeras.metrics import entity_spans
    from seqkeras.models import predict_tags

    model, features, vocabulary, _ = load(args.model)
    lines = common.stdin_lines(PROG)
    if not lines:
        return
    sentences = [split_words(line) for line in lines]
    for words, tags in zip(sentences, predict_tags(model, features, vocabulary, sentences)):
        spans = entity_spans(tags)
        print("\t".join(f"{kind}: {' '.join(words[a:b])}" for kind, a, b in spans) or "(no entity)")


def export(args):
    from seqkeras.export.signatures import Tag
    from seqkeras.metrics import entity_spans
    from seqkeras.models import predict_tags

    model, features, vocabulary, config = load(args.model)
    sentences = read(args.data)[0][: args.check]
    expected = predict_tags(model, features, vocabulary, sentences)

    def check(path):
        from seqkeras.export import fresh_signature

        served, seconds = fresh_signature(path, "tag", text=[" ".join(s) for s in sentences])
        tags = spans = 0
        for i, (words, want) in enumerate(zip(sentences, expected)):
            got = served["tags"][i]  # the Viterbi tags, padded with ""
            n = len(words)
            tags += got[:n] == want and all(t == "" for t in got[n:])
            found = zip(*(served[k][i] for k in ("entity_types", "entity_starts", "entity_ends")))
            spans += [(k, a, b) for k, a, b in found if a >= 0] == entity_spans(want)
        n = len(sentences)
        print(
            f"tag signature in a process without seqkeras: {tags}/{n} tag sequences (Viterbi) "
            f"and {spans}/{n} entity span lists equal to Keras"
        )
        if tags != n or spans != n:
            raise AppError(f"the exported tag signature differs from Keras ({path})")
        return {
            "tag_equal": f"{tags}/{n}",
            "spans_equal": f"{spans}/{n}",
            "tag_fresh_process_s": seconds,
        }

    rows = [sentences[:1], sentences[:8]]
    words = [[s + [""] * (max(map(len, r)) - len(s)) for s in r] for r in rows]
    samples = [{k: v.numpy() for k, v in features(np.array(w, object)).items()} for w in words]
    parts = ("characters",) if config.get("init") else ("words", "characters")
    beside = [(os.path.join(args.model, p, "vocabulary.txt"), f"{p}_vocabulary.txt") for p in parts]
    beside += [
        os.path.join(args.model, f) for f in [TAGS] + ["vocab.txt"] * bool(config.get("init"))
    ]
    signatures = [Tag(features, vocabulary)]
    common.export(model, args, "ner", signatures, check, samples, beside, tolerance=1e-4)


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train the BiLSTM-CRF tagger", train, False)
    t.add_argument("--model", choices=MODELS, help="the preset (default bilstm-crf)")
    t.add_argument("--train", default=conll("train.txt"))
    t.add_argument("--validation", default=conll("valid.txt"))
    common.add_out(t)
    init = (
        "fine-tune a pretrained checkpoint (a Hugging Face or keras-hub directory, or an "
        "apps/pretrain.py bilm run: ELMo); sets --model"
    )
    t.add_argument("--init", help=init)
    t.add_argument("--min-count", type=int, default=1)
    t.add_argument("--max-chars", type=int, default=20)
    common.add_fit_options(t, epochs=20, batch=32, warmup=0.1)  # --lr: with --init
    t.add_argument("--clipnorm", type=float, default=5.0)
    t.add_argument("--max-length", type=int, default=128)
    common.add_training_options(t)
    e = common.subcommand(sub, "evaluate", "entity F1 on a CoNLL file", evaluate)
    e.add_argument("--data", required=True)
    common.subcommand(sub, "tag", "stdin sentences -> entities", tag)
    x = common.subcommand(sub, "export", "SavedModel, TFLite, ONNX, verified", export)
    x.add_argument("--data", default=conll("valid.txt"), help="sentences the export is checked on")
    common.add_export_options(x, 128)
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("train", "validation", "data"))


if __name__ == "__main__":
    main()
