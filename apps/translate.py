"""German -> English translation (Multi30k) with seqkeras: a recurrent
seq2seq without attention, with additive attention, or a Transformer.

    python apps/translate.py vocabulary --out runs/vocab    # once
    python apps/translate.py train --model transformer --out runs/transformer \\
        --tokenizers runs/vocab
    python apps/translate.py evaluate --model runs/transformer \\
        --source ../shared/data/multi30k/val.de \\
        --reference ../shared/data/multi30k/val.en --beam 4
    echo "Ein Hund rennt im Schnee." | \\
        python apps/translate.py translate --model runs/transformer
    python apps/translate.py export --model runs/transformer

`train` learns two WordPiece vocabularies (`seqkeras.data.SubwordTokenizer`,
or reuses a run's with `--tokenizers DIR`), feeds `fit` from
`seqkeras.data.translation_dataset` (length buckets, dynamic padding) and
writes into `--out`: `config.json` (what rebuilds the model),
`source/vocabulary.txt`, `target/vocabulary.txt`, `best.weights.h5` (the
best validation loss), `history.csv`, `curves.png`, TensorBoard logs under
`logs/`, and `backup/` (`keras.callbacks.BackupAndRestore`: kill the run and
start the same command again, it resumes from the last finished epoch).
`evaluate` translates any line-aligned pair of UTF-8 files and prints
sacreBLEU (cased and lowercased, with its signatures), chrF and decoding
speed; its last line is `BLEU = <cased, detokenized BLEU>`. `translate`
reads German lines on stdin and writes English lines on stdout. `export`
writes a SavedModel in the TF Serving layout whose `translate` signature
takes and returns strings (tokenizer, beam search and detokenizer in the
graph), checks it in a process where seqkeras is not importable and audits
its ops against what the TF Serving binary registers, and writes the
forward pass as builtin-only TFLite and ONNX and (recurrent models) the
TFLite step pair (`encode`, then one token per call) with the vocabularies
beside it.

Bad input (a missing or non-UTF-8 file, files of unequal length, an empty
line, a directory that is not a trained model) ends with a one-line error
and exit status 2.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import common  # noqa: E402
from common import AppError  # noqa: E402

MODELS = {
    # builder, arguments (the vocabulary sizes and max_length are sizes)
    "rnn": (
        "seq2seq",
        {
            "embedding_dim": 256,
            "units": 512,
            "cell": "lstm",
            "attention": None,
            "bidirectional": True,
            "encoder_units": 256,
            "dropout": 0.1,
        },
    ),
    "rnn-attention": (
        "seq2seq",
        {
            "embedding_dim": 256,
            "units": 384,
            "cell": "gru",
            "attention": "additive",
            "attention_units": 256,
            "bidirectional": True,
            "encoder_units": 256,
            "dropout": 0.1,
        },
    ),
    "transformer": (
        "transformer_seq2seq",
        {
            "num_layers": 3,
            "num_heads": 8,
            "hidden_dim": 256,
            "intermediate_dim": 1024,
            "dropout": 0.1,
            "norm_first": True,
        },
    ),
}
TINY = {  # --tiny: smoke runs and tests
    "seq2seq": {"embedding_dim": 16, "units": 32, "encoder_units": 16, "attention_units": 16},
    "transformer_seq2seq": {
        "num_layers": 1,
        "num_heads": 2,
        "hidden_dim": 16,
        "intermediate_dim": 32,
    },
}
KILL_ENV = "TRANSLATE_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N


def multi30k(name):
    return common.shared_file("multi30k", name)


# -- the model directory ---------------------------------------------------


def load(directory):
    """`(model, source_tokenizer, target_tokenizer, config)` from a `train`
    output directory."""
    model, config = common.load(directory)
    src, tgt = _saved_tokenizers(directory, f"--model {directory}")
    return model, src, tgt, config


def _saved_tokenizers(directory, what):
    from seqkeras.data import SubwordTokenizer

    try:
        return (
            SubwordTokenizer.load(os.path.join(directory, "source")),
            SubwordTokenizer.load(os.path.join(directory, "target")),
        )
    except (ValueError, OSError) as error:
        raise AppError(f"{what}: unreadable vocabulary ({error})") from None


def read_pair(source, reference):
    from seqkeras.data import read_parallel

    return common.read_data(read_parallel, source, reference, name="translate.py")


# -- decoding --------------------------------------------------------------


def translate_texts(model, src, tgt, texts, config, beam=1, batch=64, alpha=0.0):
    """English strings for German `texts`, in order
    (`seqkeras.models.translate_texts`: greedy or beam search)."""
    import seqkeras

    out, cut = seqkeras.models.translate_texts(
        model,
        texts,
        src,
        tgt,
        config["target_length"],
        config["max_length"],
        beam_width=beam,
        length_penalty_alpha=alpha,
        batch_size=batch,
    )
    if cut:
        print(
            f"note: {cut} source sentences longer than {config['max_length']} tokens were cut",
            file=sys.stderr,
        )
    return out


def bleu_scores(hypotheses, references):
    """sacreBLEU cased and lowercased BLEU and chrF (metric objects kept
    for their signatures)."""
    from sacrebleu.metrics import BLEU, CHRF

    metrics = {"BLEU": BLEU(), "BLEU lowercased": BLEU(lowercase=True), "chrF": CHRF()}
    return {name: (m.corpus_score(hypotheses, [references]), m) for name, m in metrics.items()}


# -- train -----------------------------------------------------------------


def _tokenizers(args, sources, targets):
    from seqkeras.data import SubwordTokenizer

    if args.tokenizers:
        return _saved_tokenizers(args.tokenizers, f"--tokenizers {args.tokenizers}")
    start = time.perf_counter()
    src = SubwordTokenizer.train(sources, args.vocabulary_size)
    tgt = SubwordTokenizer.train(targets, args.vocabulary_size)
    print(
        f"WordPiece vocabularies learned in "
        f"{time.perf_counter() - start:.0f} s: {src.vocabulary_size} "
        f"German, {tgt.vocabulary_size} English tokens"
    )
    return src, tgt


def vocabulary(args):
    """Learns the two WordPiece vocabularies once, for several `train`
    runs (`--tokenizers DIR`)."""
    sources, targets = read_pair(args.train_source, args.train_target)
    args.tokenizers = None
    src, tgt = _tokenizers(args, sources, targets)
    print(
        "wrote",
        src.save(os.path.join(args.out, "source")),
        tgt.save(os.path.join(args.out, "target")),
    )


def train(args):
    from seqkeras.data import translation_dataset

    sources, targets = read_pair(args.train_source, args.train_target)
    val_sources, val_targets = read_pair(args.val_source, args.val_target)
    if os.path.isfile(os.path.join(args.out, common.CONFIG)):
        args.tokenizers = args.out  # a resumed run keeps its vocabularies
    out = common.begin_training(args)
    src, tgt = _tokenizers(args, sources, targets)
    src.save(os.path.join(out, "source"))
    tgt.save(os.path.join(out, "target"))
    data, kept = translation_dataset(
        sources,
        targets,
        src,
        tgt,
        batch_size=args.batch,
        max_length=args.max_length,
        seed=args.seed,
        pad_to_bucket=True,
        drop_remainder=True,
    )  # a few batch shapes: a few XLA programs
    val, _ = translation_dataset(
        val_sources,
        val_targets,
        src,
        tgt,
        batch_size=args.batch,
        max_length=args.max_length,
        shuffle=False,
        verbose=False,
        pad_to_bucket=True,
    )
    data, steps = common.counted(data)
    if not steps:
        raise AppError(f"no full batch of {args.batch} pairs: too little training data for --batch")
    builder, arguments = common.preset(MODELS, args.model, args.tiny, TINY[MODELS[args.model][0]])
    sizes = {"source_vocab_size": src.vocabulary_size, "target_vocab_size": tgt.vocabulary_size}
    if builder == "transformer_seq2seq":
        sizes["max_length"] = args.max_length
    config = common.model_config(
        args,
        builder,
        arguments,
        sizes,
        model=args.model,
        max_length=args.max_length,
        target_length=args.max_length,
        source_vocabulary="source/vocabulary.txt",
        target_vocabulary="target/vocabulary.txt",
        train_pairs_kept=kept,
        steps_per_epoch=steps,
    )
    total = steps * args.epochs
    warmup = min(args.warmup, total // 4)
    model, _ = common.build_and_compile(
        args,
        config,
        lambda model: {
            "learning_rate": common.cosine_schedule(args.lr, total, warmup, alpha=0.02),
            "label_smoothing": args.label_smoothing,
        },
    )
    common.write_config(out, config)
    print(
        f"{args.model}: {model.count_params():,} parameters, {kept} "
        f"training pairs, {steps} batches per epoch, {args.epochs} "
        f"epochs, precision {args.precision}, jit {args.jit}"
    )
    common.fit_and_report(
        model,
        args,
        data,
        KILL_ENV,
        validation=val,
        shuffle=False,
        curves=(
            f"{args.model} on Multi30k de-en",
            "masked cross-entropy (nats/token)",
            "accuracy",
            "token accuracy (teacher forcing)",
        ),
    )
    if args.evaluate_beams:
        model, src, tgt, config = load(out)
        results = {}
        for beam in args.evaluate_beams:
            score, speed, _ = _evaluate(model, src, tgt, config, val_sources, val_targets, beam)
            results[f"beam{beam}"] = {"bleu": score, "sentences_per_s": speed}
        with open(os.path.join(out, "val_bleu.json"), "w") as f:
            json.dump(results, f, indent=2)


# -- evaluate / translate --------------------------------------------------


def _evaluate(model, src, tgt, config, sources, references, beam, alpha=0.0):
    if beam < 1:
        raise AppError(f"--beam must be 1 (greedy) or more. Received: {beam}")
    translate_texts(
        model, src, tgt, sources[:8], config, beam=beam, alpha=alpha
    )  # compiles the decoder once
    start = time.perf_counter()
    hypotheses = translate_texts(model, src, tgt, sources, config, beam=beam, alpha=alpha)
    seconds = time.perf_counter() - start
    scores = bleu_scores(hypotheses, references)
    for name, (score, metric) in scores.items():
        print(f"{name}: {score}  [{metric.get_signature()}]")
    speed = len(sources) / seconds
    how = f"beam {beam}" if beam > 1 else "greedy"
    print(
        f"decoding: {len(sources)} sentences in {seconds:.1f} s, "
        f"{speed:.1f} sentences/s ({how}, batch 64)"
    )
    return scores["BLEU"][0].score, speed, hypotheses


def evaluate(args):
    sources, references = read_pair(args.source, args.reference)
    model, src, tgt, config = load(args.model)
    bleu, _, hypotheses = _evaluate(
        model, src, tgt, config, sources, references, args.beam, args.alpha
    )
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in hypotheses))
    print(f"BLEU = {bleu:.2f}")


def translate(args):
    model, src, tgt, config = load(args.model)
    lines = common.stdin_lines("translate.py")
    if not lines:
        return
    for line in translate_texts(model, src, tgt, lines, config, beam=args.beam, alpha=args.alpha):
        print(line)


# -- export ----------------------------------------------------------------


def export(args):
    from seqkeras.data import EOS, teacher_forcing
    from seqkeras.export import fresh_translate
    from seqkeras.export.signatures import Translate

    model, src, tgt, config = load(args.model)
    sources, references = read_pair(args.source, args.reference)
    texts = sources[: args.check]

    def check(path):
        expected = translate_texts(model, src, tgt, texts, config, beam=args.beam, alpha=args.alpha)
        served, seconds = fresh_translate(path, texts)
        same = sum(a == b for a, b in zip(served, expected))
        print(
            f"translate signature in a process without seqkeras: "
            f"{same}/{len(texts)} strings equal to Keras (beam "
            f"{args.beam})"
        )
        for a, b in zip(served, expected):
            if a != b:
                raise RuntimeError(f"served {a!r} != Keras {b!r}")
        return {
            "translate_fresh_process_equal": f"{same}/{len(texts)}",
            "translate_fresh_process_s": seconds,
        }

    ids = src.encode(texts[:8], add_eos=True).to_tensor(0).numpy()
    tgt_ids = tgt.encode(references[:8], add_eos=True).to_tensor(0).numpy()
    samples = [
        {"source_ids": ids[:1], "target_ids": teacher_forcing(tgt_ids[:1])},
        {"source_ids": ids, "target_ids": teacher_forcing(tgt_ids)},
    ]
    common.export(
        model,
        args,
        "translate",
        [
            Translate(
                src,
                tgt,
                max_length=config["target_length"],
                beam_width=args.beam,
                length_penalty_alpha=args.alpha,
            )
        ],
        check,
        samples,
        tolerance=1e-4,
        beside=[
            (os.path.join(args.model, side, "vocabulary.txt"), f"{side}_vocabulary.txt")
            for side in ("source", "target")
        ],
        generate={"max_length": config["target_length"], "beam_width": args.beam, "eos_id": EOS},
    )


# -- plots -----------------------------------------------------------------

LENGTH_BINS = ((1, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 99))


def plot(args):
    """BLEU by source length (words) for each model, on one plot, and an
    attention heatmap for each recurrent model with attention."""
    import sacrebleu

    sources, references = read_pair(args.source, args.reference)
    lengths = np.array([len(s.split()) for s in sources])
    os.makedirs(args.out, exist_ok=True)
    table, counts = {}, []
    for directory in args.models:
        model, src, tgt, config = load(directory)
        hyps = translate_texts(model, src, tgt, sources, config, beam=args.beam)
        scores, counts = [], []
        for lo, hi in LENGTH_BINS:
            idx = np.flatnonzero((lengths >= lo) & (lengths <= hi))
            counts.append(len(idx))
            scores.append(
                sacrebleu.corpus_bleu([hyps[i] for i in idx], [[references[i] for i in idx]]).score
                if len(idx)
                else np.nan
            )
        table[config["model"]] = scores
        if config["arguments"].get("attention"):
            heatmap(
                model,
                src,
                tgt,
                config,
                sources[args.sentence],
                os.path.join(args.out, f"attention-{config['model']}.png"),
            )
    how = "greedy" if args.beam == 1 else f"beam {args.beam}"
    path = common.plot_by_length(
        os.path.join(args.out, "bleu-by-length.png"),
        LENGTH_BINS,
        table,
        counts,
        "source sentence length in words (sentences)",
        "sacreBLEU (cased)",
        f"Multi30k de-en val: BLEU by source length ({how})",
    )
    print(
        "BLEU by source length (words):",
        [f"{lo}-{hi}" for lo, hi in LENGTH_BINS],
        "sentences",
        counts,
    )
    for label, scores in table.items():
        print(f"  {label}: " + " ".join(f"{x:.1f}" for x in scores))
    print(f"plot: {path}")


def heatmap(model, src, tgt, config, text, path):
    """The decoder's attention weights over the source pieces while it
    translates `text` greedily."""
    import seqkeras
    from seqkeras.data import BOS, EOS

    ids = src.encode([text], add_eos=True).numpy()[0]
    out = np.asarray(
        seqkeras.models.generate(
            model, ids[None].astype("int32"), max_length=config["target_length"]
        )
    )[0, 1:]
    n = int(np.argmax(out == EOS)) + 1 if (out == EOS).any() else len(out)
    out = out[:n]
    dec_in = np.concatenate([[BOS], out[:-1]])[None].astype("int32")
    _, weights = seqkeras.models.attention_model(model).predict(
        {"source_ids": ids[None].astype("int32"), "target_ids": dec_in}, verbose=0
    )
    common.plot_weights(
        path,
        np.asarray(weights)[0],
        [src.vocabulary[i] for i in ids],
        [tgt.vocabulary[i] for i in out],
        "additive attention weights (Multi30k val)",
        "German source pieces",
        "English output pieces",
    )
    print(f"attention heatmap: {path} ({text!r} -> {tgt.decode(out[None]).numpy()[0].decode()!r})")


# -- command line ----------------------------------------------------------


def parser():
    p = argparse.ArgumentParser(prog="translate.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train a model", train, choices=sorted(MODELS))
    t.add_argument("--out", required=True, help="the model directory")
    _data_options(t, "train", "val")
    t.add_argument(
        "--tokenizers",
        help="reuse the vocabularies of this model directory instead of learning them",
    )
    t.add_argument("--vocabulary-size", type=int, default=8000)
    t.add_argument("--epochs", type=int, default=10)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument(
        "--warmup", type=int, default=0, help="linear warm-up steps before the cosine decay"
    )
    t.add_argument("--label-smoothing", type=float, default=0.0)
    t.add_argument("--max-length", type=int, default=64)
    common.add_training_options(t)
    t.add_argument(
        "--evaluate-beams",
        type=int,
        nargs="*",
        default=[],
        help="after training, val BLEU with these beam widths",
    )
    v = common.subcommand(
        sub,
        "vocabulary",
        "learn the WordPiece vocabularies once (for train --tokenizers)",
        vocabulary,
        model=False,
    )
    v.add_argument("--out", required=True)
    _data_options(v, "train")
    v.add_argument("--vocabulary-size", type=int, default=8000)
    e = common.subcommand(sub, "evaluate", "BLEU on a line-aligned file pair", evaluate)
    e.add_argument("--source", required=True)
    e.add_argument("--reference", required=True)
    _beam_options(e, 1)
    e.add_argument("--output", help="also write the translations here")
    _beam_options(common.subcommand(sub, "translate", "stdin (German) -> stdout", translate), 1)
    x = common.subcommand(sub, "export", "SavedModel, TFLite, ONNX, verified", export)
    x.add_argument("--out", help="default: MODEL/export")
    x.add_argument(
        "--source", default=multi30k("val.de"), help="sentences the export is checked on"
    )
    x.add_argument("--reference", default=multi30k("val.en"))
    x.add_argument("--check", type=int, default=64, help="how many of them")
    _beam_options(x, 4)
    g = common.subcommand(
        sub, "plot", "BLEU by source length, attention heatmaps", plot, model=False
    )
    g.add_argument("--models", nargs="+", required=True)
    g.add_argument("--source", default=multi30k("val.de"))
    g.add_argument("--reference", default=multi30k("val.en"))
    g.add_argument("--beam", type=int, default=1)
    g.add_argument(
        "--sentence", type=int, default=1, help="which source line the heatmap shows (0-based)"
    )
    g.add_argument("--out", required=True, help="a directory for the PNGs")
    return p


def _data_options(parser, *splits):
    for split in splits:
        for side, language in (("source", "de"), ("target", "en")):
            parser.add_argument(f"--{split}-{side}", default=multi30k(f"{split}.{language}"))


def _beam_options(parser, beam):
    parser.add_argument("--beam", type=int, default=beam, help="1: greedy")
    parser.add_argument("--alpha", type=float, default=0.0, help="beam length penalty exponent")


def main(argv=None):
    common.run(
        "translate.py",
        parser(),
        argv,
        required=(
            "train_source",
            "train_target",
            "val_source",
            "val_target",
            "source",
            "reference",
        ),
    )


if __name__ == "__main__":
    main()
