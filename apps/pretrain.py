"""Pretraining on local text with the seed notes' four objectives.

    python apps/pretrain.py train --objective mlm --out runs/pretrain-mlm --minutes 60
    python apps/pretrain.py train --objective mlm --init checkpoints/all-MiniLM-L6-v2 \\
        --out runs/minilm-domain --minutes 30          # continued pretraining
    python apps/pretrain.py evaluate --model runs/pretrain-mlm
    python apps/sentiment.py train --init runs/pretrain-mlm/checkpoint --out runs/sst2-mlm

Objectives: `mlm` (BERT: a masked LM over a BERT encoder), `causal` (GPT:
a GPT-2-shaped causal Transformer), `span` (T5: span corruption for
`transformer_seq2seq`), `bilm` (ELMo: forward and backward LSTM LMs).

Corpus: `--text FILE ...`, UTF-8, one sentence per line (default: the
English text in ../shared/data: Multi30k train.en, Tatoeba's English
column, the CoNLL-2003 train sentences, the SST-2 train sentences and
tiny-shakespeare). Every 100th line is held out for validation (or
`--validation FILE`). A WordPiece vocabulary is learned once
(`seqkeras.data.pretraining.pretraining_vocabulary`, `vocab.txt`);
`--vocabulary DIR` reuses another run's, so the objectives share one.

`train` writes the directory of every app (config.json, the best weights
by validation loss, TensorBoard logs, history.csv, curves.png; a killed
run resumes). `mlm` and `causal` also write `OUT/checkpoint`, a Hugging
Face checkpoint (BERT or GPT-2 layout, with its tokenizer) that
`sentiment.py train --init` and `ner.py train --init` read; `bilm` and
`span` runs are read by those apps' `--init` as they are, and a `span`
run's encoder by `translate.py train --init` (its source side). `evaluate`
ends with `perplexity = X` (of the masked tokens, the next tokens, the
span tokens, or both directions' tokens).
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quiet  # noqa: F401  (first: TensorFlow without its start-up lines)

import common
from common import AppError

PROG = "pretrain.py"
KILL_ENV = "PRETRAIN_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
OBJECTIVES = ("mlm", "causal", "span", "bilm")
HELD_OUT_EVERY = 100


def default_corpus():
    """The English sentences of ../shared/data (see the module docstring);
    AppError where it is absent."""
    from seqkeras.data import read_conll, read_labeled_tsv, read_lines

    def path(*parts):
        found = common.shared_file(*parts)
        if found is None or not os.path.isfile(found):
            raise AppError(f"no {'/'.join(parts)} under ../shared/data: give --text FILE")
        return found

    lines = read_lines(path("multi30k", "train.en"))
    lines += [line.split("\t")[0] for line in read_lines(path("tatoeba-fra-eng", "fra.txt"))]
    lines += [" ".join(words) for words in read_conll(path("conll2003", "train.txt"))[0]]
    lines += read_labeled_tsv(path("sst2", "train.tsv"))[0]
    lines += text_lines(path("tinyshakespeare", "input.txt"))
    return lines


def text_lines(path, what="--text"):
    """The lines of a UTF-8 file (empty ones too; AppError if unreadable)."""
    from seqkeras.data import read_text

    return common.read_data(read_text, path, what=what).splitlines()


def corpus(args):
    """`(train lines, validation lines)`, empty lines dropped."""
    if args.text:
        lines = [x for p in args.text for x in text_lines(p)]
    else:
        lines = default_corpus()
    lines = [x for x in lines if x.strip()]
    if args.validation:
        return lines, [x for x in text_lines(args.validation, "--validation") if x.strip()]
    train = [x for i, x in enumerate(lines) if i % HELD_OUT_EVERY]
    return train, lines[::HELD_OUT_EVERY]


def datasets(objective, tokenizer, train, val, args):
    from seqkeras.data import pretraining as p

    make = {
        "mlm": p.masked_lm_dataset,
        "causal": p.causal_lm_dataset,
        "span": p.span_corruption_dataset,
        "bilm": p.bilm_dataset,
    }[objective]
    out = []
    for lines, shuffle in ((train, True), (val, False)):
        data = make(lines, tokenizer, args.batch, args.max_length, shuffle=shuffle, seed=args.seed)
        if objective == "mlm":  # the PAD labels of unused selections are skipped
            data = data.map(lambda x, y, w: (x, y))
        out.append(data)
    return out


def architecture(objective, arguments, vocab_size, max_length):
    """mlm/causal: the preset's sizes move into the `architecture` dict
    of `seqkeras.pretrained` (what `config.json` of a checkpoint holds)."""
    keys = ("hidden_dim", "num_layers", "num_heads", "intermediate_dim")
    arch = {k: arguments.pop(k) for k in keys}
    arch.update(vocab_size=vocab_size, max_length=max_length, dropout=arguments["dropout"])
    if objective == "causal":
        arch.update(model_type="gpt2", activation="gelu_tanh", layer_norm_epsilon=1e-5)
    else:
        arch.update(model_type="bert", activation="gelu", layer_norm_epsilon=1e-12)
    return arch


def tokenizer_for(args, init, train, out):
    from seqkeras.data import BertTokenizer
    from seqkeras.data.pretraining import pretraining_vocabulary

    source = args.init or args.vocabulary or (out if os.path.isfile(f"{out}/vocab.txt") else None)
    if source:  # a checkpoint's, another run's, or a resumed run's own
        tokenizer = common.read_data(BertTokenizer.load, source, what=source)
    else:
        tokenizer = pretraining_vocabulary(train, args.vocab_size, max_length=args.max_length)
    tokenizer.save(out)
    return tokenizer


def train(args):
    import keras

    import seqkeras
    from seqkeras.training import cosine_schedule

    # --init: continued pretraining of a BERT (mlm) or a GPT-2 (causal)
    kind = {"mlm": "bert", "causal": "gpt2"}.get(args.objective, "bert or gpt2 (mlm or causal)")
    init = common.read_init(args, kinds=(kind,))
    train_lines, val_lines = corpus(args)
    args.model = args.objective
    out = common.begin_training(args)
    tokenizer = tokenizer_for(args, init, train_lines, out)
    data, val = datasets(args.objective, tokenizer, train_lines, val_lines, args)
    data, steps = common.counted(data)
    vocab = tokenizer.vocabulary_size

    def sizes(builder, arguments):
        if args.objective in ("mlm", "causal"):
            arch = architecture(args.objective, arguments, vocab, args.max_length)
            return {"architecture": init.architecture if init else arch}
        if args.objective == "span":
            return dict(
                source_vocab_size=vocab, target_vocab_size=vocab, max_length=args.max_length
            )
        return {"vocab_size": vocab}

    schedule = args.lr  # TimeBudget schedules it over --minutes; else a cosine over --epochs
    if not args.minutes:
        schedule = cosine_schedule(args.lr, steps * args.epochs, args.warmup, alpha=0.05)

    def options(model):
        optimizer = keras.optimizers.AdamW(schedule, weight_decay=0.01, global_clipnorm=1.0)
        optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
        return {"optimizer": optimizer}

    extra = dict(objective=args.objective, max_length=args.max_length, steps_per_epoch=steps)
    model, _, config = common.new_model(args, "pretrain", sizes, options, None, {}, init, **extra)
    print(
        f"{args.objective}: {model.count_params():,} parameters, {vocab:,} tokens in the "
        f"vocabulary, {len(train_lines):,} training / {len(val_lines):,} validation lines, "
        f"{steps} batches of {args.batch} per epoch"
    )
    extra = (
        [seqkeras.training.TimeBudget(args.minutes, args.lr, args.warmup)] if args.minutes else []
    )
    curves = (f"{args.objective} pretraining", "loss (nats per token)", "loss", "loss")
    common.fit_and_report(
        model, args, data, KILL_ENV, curves, val, extra_callbacks=extra, shuffle=False
    )
    model, _ = common.load(out)
    if args.objective in ("mlm", "causal"):
        from seqkeras.pretrained import save_checkpoint

        arch = config["sizes"]["architecture"]
        path = save_checkpoint(model, os.path.join(out, "checkpoint"), arch, tokenizer)
        print(f"checkpoint for --init: {path}")
    evaluate_model(model, args.objective, val)


def evaluate_model(model, objective, data):
    """Prints the validation losses and `perplexity = X`."""
    import seqkeras

    seqkeras.training.compile_model(model, jit_compile=False)
    logs = model.evaluate(data, verbose=0, return_dict=True)
    if objective == "bilm":  # "loss" sums the directions' means; Keras 3.x logs
        # `forward_loss`/`backward_loss` halved, so each comes from the total
        forward = math.log(logs["forward_perplexity"])
        backward = logs["loss"] - forward
        print(f"forward perplexity {math.exp(forward):.2f}")
        print(f"backward perplexity {math.exp(backward):.2f}")
        loss = logs["loss"] / 2
    else:
        loss = logs["loss"]
    print(f"loss {loss:.4f} nats per token")
    print(f"perplexity = {math.exp(loss):.2f}")


def evaluate(args):
    from seqkeras.data import BertTokenizer

    model, config = common.load(args.model)
    tokenizer = common.read_data(BertTokenizer.load, args.model, what=f"--model {args.model}")
    if args.text:
        lines = [x for x in text_lines(args.text) if x.strip()]
    else:  # the run's own held-out lines
        lines = corpus(argparse.Namespace(**config["training"]))[1]
    args.batch = 64
    args.seed = 0
    args.max_length = config["max_length"]
    _, data = datasets(config["objective"], tokenizer, lines[:1], lines, args)
    evaluate_model(model, config["objective"], data)


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(required=True)
    p = common.subcommand(sub, "train", "pretrain a model on text", train, model=False)
    p.add_argument("--objective", required=True, choices=OBJECTIVES)
    p.add_argument("--out", required=True)
    p.add_argument("--text", nargs="+", help="UTF-8 files, one sentence per line")
    p.add_argument("--validation", help="held-out text (default: every 100th line)")
    p.add_argument("--vocabulary", help="reuse the vocab.txt of this directory")
    p.add_argument("--init", help="continue pretraining this BERT (mlm) or GPT-2 (causal)")
    p.add_argument("--vocab-size", type=int, default=16000)
    p.add_argument("--max-length", type=int, default=128)
    common.add_fit_options(p, epochs=10, batch=64, lr=5e-4, warmup=1000)
    minutes = "train this much wall time (cosine over it); --epochs is then a cap"
    p.add_argument("--minutes", type=float, help=minutes)
    common.add_training_options(p)
    p = common.subcommand(sub, "evaluate", "validation perplexity", evaluate)
    p.add_argument("--text", help="UTF-8 text, one sentence per line (default: held-out lines)")
    common.run(PROG, parser, argv)


if __name__ == "__main__":
    main()
