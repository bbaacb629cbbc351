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
writes the model directory of every app (`common.py`: `config.json`, the
best weights by validation loss, history, curves, TensorBoard logs, a
backup it resumes from) with `source/` and `target/` vocabularies. With
`--init DIR` (an `apps/pretrain.py --objective span` run; `--model
transformer`) the encoder starts from that run's (`load_encoder`) and the
source side keeps its vocabulary (`BertSubwordTokenizer`).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quiet  # noqa: E402, F401  (first: TensorFlow without its start-up lines)

import numpy as np  # noqa: E402

from seqkeras.metrics import corpus_bleu  # noqa: E402

import common  # noqa: E402
import plots  # noqa: E402
from common import AppError  # noqa: E402

MODELS = sorted(common.presets("translate")["models"])  # presets.json
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
    from seqkeras.data import BertSubwordTokenizer, SubwordTokenizer
    from seqkeras.data.bert_text import SETTINGS

    def read(side):  # a span run's BertTokenizer on the source side after --init
        path = os.path.join(directory, side)
        bert = os.path.isfile(os.path.join(path, SETTINGS))
        return (BertSubwordTokenizer if bert else SubwordTokenizer).load(path)

    try:
        return read("source"), read("target")
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

    lengths, options = (config["target_length"], config["max_length"]), dict(batch_size=batch)
    out, cut = seqkeras.models.translate_texts(
        model, texts, src, tgt, *lengths, beam_width=beam, length_penalty_alpha=alpha, **options
    )
    if cut:
        limit = config["max_length"]
        print(f"note: {cut} source sentences longer than {limit} tokens were cut", file=sys.stderr)
    return out


# -- train -----------------------------------------------------------------


def _tokenizers(args, sources, targets, init=None):
    from seqkeras.data import BertSubwordTokenizer, SubwordTokenizer

    if args.tokenizers:
        return _saved_tokenizers(args.tokenizers, f"--tokenizers {args.tokenizers}")
    start = time.perf_counter()
    if init is not None:  # the pretrained encoder's vocabulary on the source side
        src = common.read_data(BertSubwordTokenizer.load, init.directory, what="--init")
        tgt = SubwordTokenizer.train(targets, args.vocabulary_size)
    else:
        src, tgt = (SubwordTokenizer.train(t, args.vocabulary_size) for t in (sources, targets))
    print(
        f"WordPiece vocabularies learned in {time.perf_counter() - start:.0f} s: "
        f"{src.vocabulary_size} source, {tgt.vocabulary_size} target tokens"
    )
    return src, tgt


def vocabulary(args):
    """Learns the two WordPiece vocabularies once, for several `train`
    runs (`--tokenizers DIR`)."""
    sources, targets = read_pair(args.train_source, args.train_target)
    args.tokenizers = None
    src, tgt = _tokenizers(args, sources, targets)
    print(
        "wrote", *(t.save(os.path.join(args.out, s)) for t, s in ((src, "source"), (tgt, "target")))
    )


def train(args):
    from seqkeras.data import translation_dataset

    sources, targets = read_pair(args.train_source, args.train_target)
    val_sources, val_targets = read_pair(args.val_source, args.val_target)
    if os.path.isfile(os.path.join(args.out, common.CONFIG)):
        args.tokenizers = args.out  # a resumed run keeps its vocabularies
    init = common.read_init(args, kinds=("span",))
    if init is not None:
        if args.model != "transformer":
            raise AppError("--init (a span-corruption run's encoder) needs --model transformer")
        init.encoder_only = True
    out = common.begin_training(args)
    src, tgt = _tokenizers(args, sources, targets, init)
    src.save(os.path.join(out, "source"))
    tgt.save(os.path.join(out, "target"))
    # bucket widths: a few batch shapes, so a few XLA programs
    shared = dict(batch_size=args.batch, max_length=args.max_length, pad_to_bucket=True)
    data, kept = translation_dataset(
        sources, targets, src, tgt, seed=args.seed, drop_remainder=True, **shared
    )
    val, _ = translation_dataset(
        val_sources, val_targets, src, tgt, shuffle=False, verbose=False, **shared
    )
    data, steps = common.counted(data)
    if not steps:
        raise AppError(f"no full batch of {args.batch} pairs: too little training data for --batch")
    total = steps * args.epochs
    schedule = common.cosine_schedule(args.lr, total, min(args.warmup, total // 4), alpha=0.02)
    options = {"learning_rate": schedule, "label_smoothing": args.label_smoothing}

    def sizes(builder, arguments):  # a Transformer's learned positions
        found = {"source_vocab_size": src.vocabulary_size, "target_vocab_size": tgt.vocabulary_size}
        if builder == "transformer_seq2seq":
            found["max_length"] = args.max_length
        if init is not None:  # the pretrained encoder's shape
            arguments.update(init.architecture)
            found["max_length"] = init.sizes["max_length"]
        return found

    lengths = dict(max_length=args.max_length, target_length=args.max_length)
    model, _, _ = common.new_model(
        args,
        "translate",
        sizes,
        lambda model: options,
        init=init,
        train_pairs_kept=kept,
        steps_per_epoch=steps,
        **lengths,
    )
    print(
        f"{args.model}: {model.count_params():,} parameters, {kept} training pairs, {steps} "
        f"batches per epoch, {args.epochs} epochs, precision {args.precision}, jit {args.jit}"
    )
    curves = (
        f"{args.model} on Multi30k de-en",
        "masked cross-entropy (nats/token)",
        "accuracy",
        "token accuracy (teacher forcing)",
    )
    common.fit_and_report(model, args, data, KILL_ENV, curves, val, shuffle=False)
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
    options = dict(beam=beam, alpha=alpha)
    translate_texts(model, src, tgt, sources[:8], config, **options)  # compiles once
    start = time.perf_counter()
    hypotheses = translate_texts(model, src, tgt, sources, config, **options)
    seconds = time.perf_counter() - start
    scores = corpus_bleu(hypotheses, references)
    for name, (score, metric) in scores.items():
        print(f"{name}: {score}  [{metric.get_signature()}]")
    speed, how = len(sources) / seconds, f"beam {beam}" if beam > 1 else "greedy"
    print(
        f"decoding: {len(sources)} sentences in {seconds:.1f} s, {speed:.1f} sentences/s "
        f"({how}, batch 64)"
    )
    return scores["BLEU"][0].score, speed, hypotheses


def evaluate(args):
    sources, references = read_pair(args.source, args.reference)
    model, src, tgt, config = load(args.model)
    given = (sources, references, args.beam, args.alpha)
    bleu, _, hypotheses = _evaluate(model, src, tgt, config, *given)
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
    from seqkeras.export.audit import fresh_translate
    from seqkeras.export.signatures import Translate, generation

    model, src, tgt, config = load(args.model)
    sources, references = read_pair(args.source, args.reference)
    texts, beam = sources[: args.check], dict(beam_width=args.beam)
    expected = []

    def check(path, what="translate signature", equal=True):
        if not expected:
            expected.extend(
                translate_texts(model, src, tgt, texts, config, beam=args.beam, alpha=args.alpha)
            )
        served, seconds = fresh_translate(path, texts)
        same = f"{sum(a == b for a, b in zip(served, expected))}/{len(texts)}"
        print(
            f"{what} in a process without seqkeras: {same} strings equal to "
            f"Keras (beam {args.beam})"
        )
        for a, b in zip(served, expected):
            if a != b and equal:
                raise RuntimeError(f"served {a!r} != Keras {b!r}")
        return {"translate_fresh_process_equal": same, "translate_fresh_process_s": seconds}

    ids = src.encode(texts[:8], add_eos=True).to_tensor(0).numpy()
    target = teacher_forcing(tgt.encode(references[:8], add_eos=True).to_tensor(0).numpy())
    samples = [
        {"source_ids": ids[:1], "target_ids": target[:1]},
        {"source_ids": ids, "target_ids": target},
    ]
    length = config["target_length"]
    if hasattr(model, "stream_max_length"):  # the Transformer's TFLite step pair
        model.stream_max_length = length

    options = dict(length_penalty_alpha=args.alpha, **beam)
    signatures = [Translate(src, tgt, length, **options)]
    signatures += generation(length, eos_id=EOS, **options)
    beside = [
        (os.path.join(args.model, side, "vocabulary.txt"), f"{side}_vocabulary.txt")
        for side in ("source", "target")
    ]

    def serving_files(report, out):
        """The XLA-compiled variant and TF Serving's batching file."""
        from seqkeras.export import assert_servable, batching_parameters, next_version
        from seqkeras.export import saved_model

        found = {"batching_parameters": os.path.join(out, "batching_parameters.txt")}
        batching_parameters(found["batching_parameters"])
        print(f"TF Serving batching file: {found['batching_parameters']}")
        if args.no_xla:
            return found
        base = os.path.join(out, "translate-xla")
        path = saved_model(
            model, os.path.join(base, str(next_version(base))), signatures, jit_compile=True
        )
        checked = check(path, "translate signature (XLA-compiled)")
        audit = assert_servable(path, xla_jit=True)
        print(
            f"XLA SavedModel: {path} ({len(audit['xla_compiled'])} functions compiled by XLA; "
            f"XLA-only ops outside them: {audit['xla'] or 'none'}; TF Serving needs "
            "--xla_cpu_compilation_enabled=true)"
        )
        found.update({"translate_xla_savedmodel": path})
        found.update({k.replace("translate_", "translate_xla_"): v for k, v in checked.items()})
        return found

    common.export(
        model,
        args,
        "translate",
        signatures,
        check,
        samples,
        beside,
        serving_files,
        tolerance=1e-4,
        generate=dict(max_length=length, eos_id=EOS, **beam),
    )


# -- plots -----------------------------------------------------------------

LENGTH_BINS = ((1, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 99))


def plot(args):
    """BLEU by source length (words) for each model, on one plot, and an
    attention heatmap for each recurrent model with attention."""
    import sacrebleu

    sources, references = read_pair(args.source, args.reference)
    bins = plots.by_length([len(s.split()) for s in sources], LENGTH_BINS)
    os.makedirs(args.out, exist_ok=True)
    table = {}
    for directory in args.models:
        model, src, tgt, config = load(directory)
        hyps = translate_texts(model, src, tgt, sources, config, beam=args.beam)
        table[config["model"]] = [
            sacrebleu.corpus_bleu([hyps[i] for i in idx], [[references[i] for i in idx]]).score
            if len(idx)
            else np.nan
            for idx in bins
        ]
        if config["arguments"].get("attention"):
            path = os.path.join(args.out, f"attention-{config['model']}.png")
            heatmap(model, src, tgt, config, sources[args.sentence], path)
    how = "greedy" if args.beam == 1 else f"beam {args.beam}"
    path = plots.plot_by_length(
        os.path.join(args.out, "bleu-by-length.png"),
        LENGTH_BINS,
        table,
        [len(i) for i in bins],
        "source sentence length in words (sentences)",
        "sacreBLEU (cased)",
        f"Multi30k de-en val: BLEU by source length ({how})",
    )
    print(f"plot: {path}")


def heatmap(model, src, tgt, config, text, path):
    """The decoder's attention weights over the source pieces while it
    translates `text` greedily."""
    import seqkeras
    from seqkeras.data import BOS, EOS

    ids = src.encode([text], add_eos=True).numpy()[0][None].astype("int32")
    out = np.asarray(seqkeras.models.generate(model, ids, max_length=config["target_length"]))[
        0, 1:
    ]
    out = out[: int(np.argmax(out == EOS)) + 1 if (out == EOS).any() else len(out)]
    dec_in = np.concatenate([[BOS], out[:-1]])[None].astype("int32")
    _, weights = seqkeras.models.attention_model(model).predict(
        {"source_ids": ids, "target_ids": dec_in}, verbose=0
    )
    labels = [src.vocabulary[i] for i in ids[0]], [tgt.vocabulary[i] for i in out]
    plots.plot_weights(
        path,
        np.asarray(weights)[0],
        *labels,
        "additive attention weights (Multi30k val)",
        "German source pieces",
        "English output pieces",
    )
    print(f"attention heatmap: {path} ({text!r} -> {tgt.decode(out[None]).numpy()[0].decode()!r})")


# -- command line ----------------------------------------------------------


def parser():
    p = argparse.ArgumentParser(prog="translate.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train a model", train, choices=MODELS)
    t.add_argument("--out", required=True, help="the model directory")
    _data_options(t, "train", "val")
    t.add_argument("--tokenizers", help="reuse this model directory's vocabularies")
    t.add_argument(
        "--init",
        help="an apps/pretrain.py span run: its encoder and vocabulary on the source side",
    )
    common.options(
        t,
        "vocabulary-size=8000 epochs=10 batch=64 lr=1e-3 warmup=0 label-smoothing=0.0 "
        "max-length=64",
        warmup="linear warm-up steps before the cosine decay",
    )
    common.add_training_options(t)
    t.add_argument("--evaluate-beams", type=int, nargs="*", default=[], help="val BLEU after")
    v = common.subcommand(sub, "vocabulary", "learn the vocabularies once", vocabulary, False)
    v.add_argument("--out", required=True)
    _data_options(v, "train")
    common.options(v, "vocabulary-size=8000")
    e = common.subcommand(sub, "evaluate", "BLEU on a line-aligned file pair", evaluate)
    e.add_argument("--source", required=True)
    e.add_argument("--reference", required=True)
    _beam_options(e, 1)
    e.add_argument("--output", help="also write the translations here")
    _beam_options(common.subcommand(sub, "translate", "stdin (German) -> stdout", translate), 1)
    x = common.subcommand(sub, "export", "SavedModel, TFLite, ONNX, verified", export)
    x.add_argument("--out", help="default: MODEL/export")
    x.add_argument(
        "--no-xla",
        action="store_true",
        help="skip the XLA-compiled SavedModel (translate-xla), whose check compiles a while",
    )
    _data_options(x, "")
    common.options(x, "check=64", check="how many sentences the export is checked on")
    _beam_options(x, 4)
    g = common.subcommand(sub, "plot", "BLEU by length, attention heatmaps", plot, False)
    g.add_argument("--models", nargs="+", required=True)
    _data_options(g, "")
    common.options(g, "beam=1 sentence=1", sentence="the heatmap's source line (0-based)")
    g.add_argument("--out", required=True, help="a directory for the PNGs")
    return p


def _data_options(parser, *splits):
    """--train-source ... (Multi30k by default); split "": --source,
    --reference (validation)."""
    for split in splits:
        for side, language in (("source", "de"), ("target", "en")):
            name = f"{split}-{side}" if split else {"source": "source"}.get(side, "reference")
            parser.add_argument(f"--{name}", default=multi30k(f"{split or 'val'}.{language}"))


def _beam_options(parser, beam):
    parser.add_argument("--beam", type=int, default=beam, help="1: greedy")
    parser.add_argument("--alpha", type=float, default=0.0, help="beam length penalty exponent")


def main(argv=None):
    required = "train_source train_target val_source val_target source reference".split()
    common.run("translate.py", parser(), argv, required=required)


if __name__ == "__main__":
    main()
