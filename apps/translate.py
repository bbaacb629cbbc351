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
import shutil
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402

import common  # noqa: E402
from common import AppError  # noqa: E402

MODELS = {
    # builder, arguments (the vocabulary sizes and max_length are added)
    "rnn": ("seq2seq", {
        "embedding_dim": 256, "units": 512, "cell": "lstm",
        "attention": None, "bidirectional": True, "encoder_units": 256,
        "dropout": 0.1}),
    "rnn-attention": ("seq2seq", {
        "embedding_dim": 256, "units": 384, "cell": "gru",
        "attention": "additive", "attention_units": 256,
        "bidirectional": True, "encoder_units": 256, "dropout": 0.1}),
    "transformer": ("transformer_seq2seq", {
        "num_layers": 3, "num_heads": 8, "hidden_dim": 256,
        "intermediate_dim": 1024, "dropout": 0.1, "norm_first": True}),
}
TINY = {  # --tiny: smoke runs and tests
    "seq2seq": {"embedding_dim": 16, "units": 32, "encoder_units": 16,
                "attention_units": 16},
    "transformer_seq2seq": {"num_layers": 1, "num_heads": 2,
                            "hidden_dim": 16, "intermediate_dim": 32},
}
CONFIG = common.CONFIG
WEIGHTS = common.WEIGHTS
KILL_ENV = "TRANSLATE_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N


def multi30k(name):
    return common.shared_file("multi30k", name)


# -- the model directory ---------------------------------------------------

def load(directory):
    """`(model, source_tokenizer, target_tokenizer, config)` from a `train`
    output directory."""
    import seqkeras
    from seqkeras.data import SubwordTokenizer

    config = common.read_config(directory)
    try:
        builder = getattr(seqkeras.models, config["builder"])
        src = SubwordTokenizer.load(os.path.join(directory, "source"))
        tgt = SubwordTokenizer.load(os.path.join(directory, "target"))
    except (ValueError, KeyError, AttributeError, OSError) as error:
        raise AppError(f"--model {directory}: unreadable {CONFIG} or "
                       f"vocabulary ({error})") from None
    model = builder(src.vocabulary_size, tgt.vocabulary_size,
                    **config["arguments"])
    return common.load_weights(model, directory), src, tgt, config


def read_pair(source, reference):
    from seqkeras.data import read_parallel

    try:
        return read_parallel(source, reference, name="translate.py")
    except (ValueError, FileNotFoundError) as error:
        raise AppError(str(error)) from None


# -- decoding --------------------------------------------------------------

def _width(n, limit):
    """Source widths are rounded up to a multiple of 8 (few compiled
    shapes)."""
    return min(limit, max(8, -(-n // 8) * 8))


def translate_texts(model, src, tgt, texts, config, beam=1, batch=64,
                    alpha=0.0):
    """English strings for German `texts`, in order: sources sorted by
    length, batches of `batch` (the last padded), decoded with
    `seqkeras.models.generate` (greedy or beam), detokenized."""
    import seqkeras
    from seqkeras.data import EOS, PAD

    limit = config["max_length"]
    ids = src.encode(list(texts), add_eos=True)
    rows = [r[:limit] for r in ids.numpy()]
    if any(len(r) == limit and r[-1] != EOS for r in rows):
        long = sum(len(r) == limit and r[-1] != EOS for r in rows)
        print(f"note: {long} source sentences longer than {limit} tokens "
              "were cut", file=sys.stderr)
    order = np.argsort([len(r) for r in rows], kind="stable")
    out = [None] * len(rows)
    for start in range(0, len(rows), batch):
        chunk = order[start:start + batch]
        width = _width(max(len(rows[i]) for i in chunk), limit)
        x = np.full((batch, width), PAD, "int32")
        x[:, 0] = EOS  # padding rows: an empty sentence
        for j, i in enumerate(chunk):
            x[j, :len(rows[i])] = rows[i]
        if beam > 1:
            y, _ = seqkeras.models.generate(
                model, x, max_length=config["target_length"],
                strategy="beam", beam_width=beam,
                length_penalty_alpha=alpha)
        else:
            y = seqkeras.models.generate(model, x,
                                         max_length=config["target_length"])
        strings = tgt.decode(np.asarray(y)[:len(chunk), 1:]).numpy()
        for j, i in enumerate(chunk):
            out[i] = strings[j].decode("utf-8")
    return out


def bleu_scores(hypotheses, references):
    """sacreBLEU cased and lowercased BLEU and chrF (metric objects kept
    for their signatures)."""
    from sacrebleu.metrics import BLEU, CHRF

    metrics = {"BLEU": BLEU(), "BLEU lowercased": BLEU(lowercase=True),
               "chrF": CHRF()}
    return {name: (m.corpus_score(hypotheses, [references]), m)
            for name, m in metrics.items()}


# -- train -----------------------------------------------------------------

def _tokenizers(args, sources, targets):
    from seqkeras.data import SubwordTokenizer

    if args.tokenizers:
        try:
            return (SubwordTokenizer.load(os.path.join(args.tokenizers,
                                                       "source")),
                    SubwordTokenizer.load(os.path.join(args.tokenizers,
                                                       "target")))
        except (ValueError, FileNotFoundError) as error:
            raise AppError(f"--tokenizers {args.tokenizers}: {error}") \
                from None
    start = time.perf_counter()
    src = SubwordTokenizer.train(sources, args.vocabulary_size)
    tgt = SubwordTokenizer.train(targets, args.vocabulary_size)
    print(f"WordPiece vocabularies learned in "
          f"{time.perf_counter() - start:.0f} s: {src.vocabulary_size} "
          f"German, {tgt.vocabulary_size} English tokens")
    return src, tgt


def vocabulary(args):
    """Learns the two WordPiece vocabularies once, for several `train`
    runs (`--tokenizers DIR`)."""
    sources, targets = read_pair(args.train_source, args.train_target)
    args.tokenizers = None
    src, tgt = _tokenizers(args, sources, targets)
    print("wrote", src.save(os.path.join(args.out, "source")),
          tgt.save(os.path.join(args.out, "target")))


def train(args):
    import tensorflow as tf

    import seqkeras
    from seqkeras.data import translation_dataset

    sources, targets = read_pair(args.train_source, args.train_target)
    val_sources, val_targets = read_pair(args.val_source, args.val_target)
    out = args.out
    os.makedirs(out, exist_ok=True)
    config_path = os.path.join(out, CONFIG)
    if os.path.isfile(config_path):  # a resumed run keeps its vocabularies
        args.tokenizers = out
    if args.precision != "float32":
        keras.mixed_precision.set_global_policy(args.precision)
    keras.utils.set_random_seed(args.seed)
    src, tgt = _tokenizers(args, sources, targets)
    src.save(os.path.join(out, "source"))
    tgt.save(os.path.join(out, "target"))
    data, kept = translation_dataset(
        sources, targets, src, tgt, batch_size=args.batch,
        max_length=args.max_length, seed=args.seed, pad_to_bucket=True,
        drop_remainder=True)  # a few batch shapes: a few XLA programs
    val, _ = translation_dataset(
        val_sources, val_targets, src, tgt, batch_size=args.batch,
        max_length=args.max_length, shuffle=False, verbose=False,
        pad_to_bucket=True)
    steps = sum(1 for _ in data)
    if not steps:
        raise AppError(f"no full batch of {args.batch} pairs: too little "
                       "training data for --batch")
    data = data.apply(tf.data.experimental.assert_cardinality(steps))
    builder, arguments = MODELS[args.model]
    arguments = dict(arguments)
    if args.tiny:
        arguments.update({k: v for k, v in TINY[builder].items()
                          if k in arguments})
    if builder == "transformer_seq2seq":
        arguments["max_length"] = args.max_length
    with common.strategy_scope(args):  # build, compile
        model = getattr(seqkeras.models, builder)(
            src.vocabulary_size, tgt.vocabulary_size, **arguments)
        total = steps * args.epochs
        warmup = min(args.warmup, total // 4)
        schedule = keras.optimizers.schedules.CosineDecay(
            0.0 if warmup else args.lr, total - warmup, alpha=0.02,
            warmup_target=args.lr if warmup else None, warmup_steps=warmup)
        seqkeras.models.compile_model(model, learning_rate=schedule,
                                      jit_compile=common.jit_option(args),
                                      label_smoothing=args.label_smoothing)
    config = {
        "model": args.model, "builder": builder, "arguments": arguments,
        "max_length": args.max_length,
        "target_length": args.max_length,
        "source_vocabulary": "source/vocabulary.txt",
        "target_vocabulary": "target/vocabulary.txt",
        "weights": WEIGHTS, "precision": args.precision,
        "training": {k: v for k, v in vars(args).items()
                     if k not in ("func",)},
        "parameters": int(model.count_params()),
        "train_pairs_kept": kept, "steps_per_epoch": steps,
    }
    common.write_config(out, config)
    print(f"{args.model}: {model.count_params():,} parameters, {kept} "
          f"training pairs, {steps} batches per epoch, {args.epochs} "
          f"epochs, precision {args.precision}, jit {args.jit}")
    history = os.path.join(out, "history.csv")
    callbacks, checkpoint = common.callbacks(out, KILL_ENV)
    start = time.perf_counter()
    model.fit(data, validation_data=val, epochs=args.epochs,
              callbacks=callbacks, verbose=args.verbose,
              shuffle=False)  # the dataset shuffles itself
    seconds = time.perf_counter() - start
    png = common.plot_curves(
        history, os.path.join(out, "curves.png"),
        f"{args.model} on Multi30k de-en",
        "masked cross-entropy (nats/token)", "accuracy",
        "token accuracy (teacher forcing)")
    print(f"trained in {seconds:.0f} s (this process); best val_loss "
          f"{checkpoint.best:.4f}; curves: {png}")
    if args.evaluate_beams:
        model, src, tgt, config = load(out)
        results = {}
        for beam in args.evaluate_beams:
            score, speed, _ = _evaluate(model, src, tgt, config,
                                        val_sources,
                                     val_targets, beam)
            results[f"beam{beam}"] = {"bleu": score, "sentences_per_s":
                                      speed}
        with open(os.path.join(out, "val_bleu.json"), "w") as f:
            json.dump(results, f, indent=2)


# -- evaluate / translate --------------------------------------------------

def _evaluate(model, src, tgt, config, sources, references, beam,
              alpha=0.0):
    translate_texts(model, src, tgt, sources[:8], config, beam=beam,
                    alpha=alpha)  # compiles the decoder once
    start = time.perf_counter()
    hypotheses = translate_texts(model, src, tgt, sources, config,
                                 beam=beam, alpha=alpha)
    seconds = time.perf_counter() - start
    scores = bleu_scores(hypotheses, references)
    for name, (score, metric) in scores.items():
        print(f"{name}: {score}  [{metric.get_signature()}]")
    speed = len(sources) / seconds
    print(f"decoding: {len(sources)} sentences in {seconds:.1f} s, "
          f"{speed:.1f} sentences/s ({'beam ' + str(beam) if beam > 1 else 'greedy'}, "  # noqa: E501
          "batch 64)")
    return scores["BLEU"][0].score, speed, hypotheses


def evaluate(args):
    sources, references = read_pair(args.source, args.reference)
    model, src, tgt, config = load(args.model)
    if args.beam < 1:
        raise AppError(f"--beam must be 1 (greedy) or more. Received: "
                       f"{args.beam}")
    bleu, _, hypotheses = _evaluate(model, src, tgt, config, sources,
                                    references, args.beam, args.alpha)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in hypotheses))
    print(f"BLEU = {bleu:.2f}")


def translate(args):
    model, src, tgt, config = load(args.model)
    lines = common.stdin_lines("translate.py")
    if not lines:
        return
    for line in translate_texts(model, src, tgt, lines, config,
                                beam=args.beam, alpha=args.alpha):
        print(line)


# -- export ----------------------------------------------------------------

def export(args):
    from seqkeras.data import EOS, teacher_forcing
    from seqkeras.export import export_and_verify, next_version, saved_model
    from seqkeras.export.audit import audit_serving, fresh_translate

    model, src, tgt, config = load(args.model)
    out = args.out or os.path.join(args.model, "export")
    sources, references = read_pair(args.source, args.reference)
    texts = sources[:args.check]
    name = "translate"
    version = next_version(os.path.join(out, name))
    path = saved_model(model, os.path.join(out, name, str(version)),
                       translate={"source_tokenizer": src,
                                  "target_tokenizer": tgt,
                                  "max_length": config["target_length"],
                                  "beam_width": args.beam,
                                  "length_penalty_alpha": args.alpha})
    print(f"SavedModel: {path} (signatures serving_default, translate)")
    expected = translate_texts(model, src, tgt, texts, config,
                               beam=args.beam, alpha=args.alpha)
    served, seconds = fresh_translate(path, texts)
    same = sum(a == b for a, b in zip(served, expected))
    print(f"translate signature in a process without seqkeras: "
          f"{same}/{len(texts)} strings equal to Keras (beam {args.beam})")
    if same != len(texts):
        for a, b in zip(served, expected):
            if a != b:
                raise RuntimeError(f"served {a!r} != Keras {b!r}")
    audit = audit_serving(path)
    print(f"serving audit: {len(audit['ops'])} ops, XLA-only: "
          f"{audit['xla'] or 'none'}, TF Text ops: {audit['tf_text']}, "
          "not in TF Serving's TF Text 2.12: "
          f"{audit['tf_text_unsupported'] or 'none'}")
    if audit["xla"] or audit["tf_text_unsupported"] or audit["no_kernel"]:
        raise RuntimeError(f"not servable by TF Serving: {audit}")
    ids = src.encode(texts[:8], add_eos=True).to_tensor(0).numpy()
    tgt_ids = tgt.encode(references[:8], add_eos=True).to_tensor(0).numpy()
    samples = [{"source_ids": ids[:1], "target_ids":
                teacher_forcing(tgt_ids[:1])},
               {"source_ids": ids, "target_ids": teacher_forcing(tgt_ids)}]
    report = export_and_verify(
        model, name + "-forward", samples, out,
        generate={"max_length": config["target_length"],
                  "beam_width": args.beam, "eos_id": EOS},
        tolerance=1e-4)
    report["translate_savedmodel"] = path
    report["translate_fresh_process_equal"] = f"{same}/{len(texts)}"
    report["translate_fresh_process_s"] = seconds
    report["serving_ops"] = len(audit["ops"])
    tflite_dir = os.path.dirname(report["tflite"])
    for side in ("source", "target"):
        shutil.copy(os.path.join(args.model, side, "vocabulary.txt"),
                    os.path.join(tflite_dir, f"{side}_vocabulary.txt"))
    common.write_report(report, out)


# -- plots -----------------------------------------------------------------

LENGTH_BINS = ((1, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 99))


def plot(args):
    """BLEU by source length (words) for each model, on one plot, and an
    attention heatmap for each recurrent model with attention."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import sacrebleu

    sources, references = read_pair(args.source, args.reference)
    lengths = np.array([len(s.split()) for s in sources])
    os.makedirs(args.out, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    table = {}
    for directory in args.models:
        model, src, tgt, config = load(directory)
        hyps = translate_texts(model, src, tgt, sources, config,
                               beam=args.beam)
        scores, counts = [], []
        for lo, hi in LENGTH_BINS:
            idx = np.flatnonzero((lengths >= lo) & (lengths <= hi))
            counts.append(len(idx))
            scores.append(sacrebleu.corpus_bleu(
                [hyps[i] for i in idx],
                [[references[i] for i in idx]]).score if len(idx) else
                np.nan)
        label = config["model"]
        table[label] = scores
        ax.plot(range(len(LENGTH_BINS)), scores, "o-", label=label)
        if config["arguments"].get("attention"):
            heatmap(model, src, tgt, config, sources[args.sentence],
                    os.path.join(args.out, f"attention-{label}.png"))
    ax.set_xticks(range(len(LENGTH_BINS)), [
        f"{lo}-{hi}\n({n})" if hi < 99 else f"{lo}+\n({n})"
        for (lo, hi), n in zip(LENGTH_BINS, counts)])
    ax.set_xlabel("source sentence length in words (sentences)")
    ax.set_ylabel("sacreBLEU (cased)")
    ax.set_title(f"Multi30k de-en val: BLEU by source length "
                 f"({'greedy' if args.beam == 1 else f'beam {args.beam}'})")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = os.path.join(args.out, "bleu-by-length.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print("BLEU by source length (words):", [
        f"{lo}-{hi}" for lo, hi in LENGTH_BINS], "sentences", counts)
    for label, scores in table.items():
        print(f"  {label}: " + " ".join(f"{x:.1f}" for x in scores))
    print(f"plot: {path}")


def heatmap(model, src, tgt, config, text, path):
    """The decoder's attention weights over the source pieces while it
    translates `text` greedily."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import seqkeras
    from seqkeras.data import BOS, EOS

    ids = src.encode([text], add_eos=True).numpy()[0]
    out = np.asarray(seqkeras.models.generate(
        model, ids[None].astype("int32"),
        max_length=config["target_length"]))[0, 1:]
    n = int(np.argmax(out == EOS)) + 1 if (out == EOS).any() else len(out)
    out = out[:n]
    dec_in = np.concatenate([[BOS], out[:-1]])[None].astype("int32")
    _, weights = seqkeras.models.attention_model(model).predict(
        {"source_ids": ids[None].astype("int32"), "target_ids": dec_in},
        verbose=0)
    w = np.asarray(weights)[0]
    fig, ax = plt.subplots(figsize=(max(5, len(ids) * 0.45),
                                    max(4, n * 0.35)))
    ax.imshow(w, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(ids)), [src.vocabulary[i] for i in ids],
                  rotation=60, ha="right")
    ax.set_yticks(range(n), [tgt.vocabulary[i] for i in out])
    ax.set_xlabel("German source pieces")
    ax.set_ylabel("English output pieces")
    ax.set_title("additive attention weights (Multi30k val)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"attention heatmap: {path} ({text!r} -> "
          f"{tgt.decode(out[None]).numpy()[0].decode()!r})")


# -- command line ----------------------------------------------------------

def parser():
    p = argparse.ArgumentParser(
        prog="translate.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a model")
    t.add_argument("--model", choices=sorted(MODELS), required=True)
    t.add_argument("--out", required=True, help="the model directory")
    t.add_argument("--train-source", default=multi30k("train.de"))
    t.add_argument("--train-target", default=multi30k("train.en"))
    t.add_argument("--val-source", default=multi30k("val.de"))
    t.add_argument("--val-target", default=multi30k("val.en"))
    t.add_argument("--tokenizers", help="reuse the vocabularies of this "
                   "model directory instead of learning them")
    t.add_argument("--vocabulary-size", type=int, default=8000)
    t.add_argument("--epochs", type=int, default=10)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--warmup", type=int, default=0,
                   help="linear warm-up steps before the cosine decay")
    t.add_argument("--label-smoothing", type=float, default=0.0)
    t.add_argument("--max-length", type=int, default=64)
    common.add_training_options(t)
    t.add_argument("--evaluate-beams", type=int, nargs="*", default=[],
                   help="after training, val BLEU with these beam widths")
    t.set_defaults(func=train)
    v = sub.add_parser("vocabulary", help="learn the WordPiece "
                       "vocabularies once (for train --tokenizers)")
    v.add_argument("--out", required=True)
    v.add_argument("--train-source", default=multi30k("train.de"))
    v.add_argument("--train-target", default=multi30k("train.en"))
    v.add_argument("--vocabulary-size", type=int, default=8000)
    v.set_defaults(func=vocabulary)
    e = sub.add_parser("evaluate", help="BLEU on a line-aligned file pair")
    e.add_argument("--model", required=True)
    e.add_argument("--source", required=True)
    e.add_argument("--reference", required=True)
    e.add_argument("--beam", type=int, default=1, help="1: greedy")
    e.add_argument("--alpha", type=float, default=0.0,
                   help="beam length penalty exponent")
    e.add_argument("--output", help="also write the translations here")
    e.set_defaults(func=evaluate)
    r = sub.add_parser("translate", help="stdin (German) -> stdout")
    r.add_argument("--model", required=True)
    r.add_argument("--beam", type=int, default=1)
    r.add_argument("--alpha", type=float, default=0.0)
    r.set_defaults(func=translate)
    x = sub.add_parser("export", help="SavedModel, TFLite, ONNX, verified")
    x.add_argument("--model", required=True)
    x.add_argument("--out", help="default: MODEL/export")
    x.add_argument("--source", default=multi30k("val.de"),
                   help="sentences the export is checked on")
    x.add_argument("--reference", default=multi30k("val.en"))
    x.add_argument("--check", type=int, default=64,
                   help="how many of them")
    x.add_argument("--beam", type=int, default=4)
    x.add_argument("--alpha", type=float, default=0.0)
    x.set_defaults(func=export)
    g = sub.add_parser("plot", help="BLEU by source length, attention "
                       "heatmaps")
    g.add_argument("--models", nargs="+", required=True)
    g.add_argument("--source", default=multi30k("val.de"))
    g.add_argument("--reference", default=multi30k("val.en"))
    g.add_argument("--beam", type=int, default=1)
    g.add_argument("--sentence", type=int, default=1,
                   help="which source line the heatmap shows (0-based)")
    g.add_argument("--out", required=True, help="a directory for the PNGs")
    g.set_defaults(func=plot)
    return p


def main(argv=None):
    common.run("translate.py", parser(), argv, required=(
        "train_source", "train_target", "val_source", "val_target",
        "source", "reference"))


if __name__ == "__main__":
    main()
