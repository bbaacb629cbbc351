"""German -> English translation (Multi30k) with seqkeras: a recurrent
seq2seq without attention, with additive attention, or a Transformer
(its encoder optionally from an `apps/pretrain.py --objective span` run).

    python apps/translate.py vocabulary --out runs/vocab    # once
    python apps/translate.py train --model transformer --out runs/transformer \\
        --tokenizers runs/vocab
    python apps/translate.py evaluate --model runs/transformer \\
        --source ../shared/data/multi30k/val.de \\
        --reference ../shared/data/multi30k/val.en --beam 4  # last line: BLEU = ...
    echo "Ein Hund rennt im Schnee." | \\
        python apps/translate.py translate --model runs/transformer
    python apps/translate.py export --model runs/transformer

Data: line-aligned UTF-8 files, German source and English reference. The
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

import seqkeras
from seqkeras.data import (
    EOS,
    BertSubwordTokenizer,
    load_translation_tokenizers,
    read_parallel,
    save_translation_tokenizers,
    teacher_forcing,
    translation_dataset,
    translation_tokenizers,
)
from seqkeras.metrics import corpus_bleu
from seqkeras.models import attention_weights
from seqkeras.plots import length_bins, plot_attention
from seqkeras.training import cosine_schedule

import common
from common import AppError

MODELS = sorted(common.presets("translate")["models"])  # presets.json
KILL_ENV = "TRANSLATE_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
SIDES = ("source", "target")


def load(directory):
    """`(model, source_tokenizer, target_tokenizer, config)` of a `train` directory."""
    model, config = common.load(directory)
    return (model, *tokenizers(directory, f"--model {directory}"), config)


def tokenizers(directory, what):
    return common.read_data(load_translation_tokenizers, directory, what=f"{what}: vocabulary")


def read_pair(source, reference):
    return common.read_data(read_parallel, source, reference, name="translate.py")


def translate_texts(model, src, tgt, config, texts, beam=1, alpha=0.0):
    """English strings for German `texts` (`seqkeras.models.translate_texts`)."""
    limit = config["max_length"]
    out, cut = seqkeras.models.translate_texts(
        model,
        texts,
        src,
        tgt,
        config["target_length"],
        limit,
        beam_width=beam,
        length_penalty_alpha=alpha,
    )  # batches of 64 sentences (its default)
    if cut:
        print(f"note: {cut} source sentences longer than {limit} tokens were cut", file=sys.stderr)
    return out


def _tokenizers(args, sources, targets, init=None):
    if args.tokenizers:
        return tokenizers(args.tokenizers, f"--tokenizers {args.tokenizers}")
    start = time.perf_counter()
    pretrained = None
    if init is not None:  # the pretrained encoder's vocabulary on the source side
        pretrained = common.read_data(BertSubwordTokenizer.load, init.directory, what="--init")
    src, tgt = translation_tokenizers(sources, targets, args.vocabulary_size, pretrained)
    print(
        f"WordPiece vocabularies learned in {time.perf_counter() - start:.0f} s: "
        f"{src.vocabulary_size} source, {tgt.vocabulary_size} target tokens"
    )
    return src, tgt


def vocabulary(args):
    """The two WordPiece vocabularies, once, for several `train --tokenizers`."""
    sources, targets = read_pair(args.train_source, args.train_target)
    args.tokenizers = None
    pair = _tokenizers(args, sources, targets)
    print("wrote", *save_translation_tokenizers(pair, args.out))


def train(args):
    sources, targets = read_pair(args.train_source, args.train_target)
    val_sources, val_targets = read_pair(args.val_source, args.val_target)
    if os.path.isfile(os.path.join(args.out, common.CONFIG)):
        args.tokenizers = args.out  # a resumed run keeps its vocabularies
    init = common.read_init(args, kinds=("span",))
    if init is not None and args.model != "transformer":
        raise AppError("--init (a span-corruption run's encoder) needs --model transformer")
    if init is not None:
        init.encoder_only = True
    out = common.begin_training(args)
    src, tgt = _tokenizers(args, sources, targets, init)
    save_translation_tokenizers((src, tgt), out)
    # bucket widths: a few batch shapes, so a few XLA programs
    shared = dict(batch_size=args.batch, max_length=args.max_length, pad_to_bucket=True)
    fit = dict(seed=args.seed, drop_remainder=True)
    held = dict(shuffle=False, verbose=False)
    data, kept = translation_dataset(sources, targets, src, tgt, **fit, **shared)
    val, _ = translation_dataset(val_sources, val_targets, src, tgt, **held, **shared)
    data, steps = common.counted(data)
    total = steps * args.epochs
    schedule = cosine_schedule(args.lr, total, min(args.warmup, total // 4), alpha=0.02)
    options = {"learning_rate": schedule, "label_smoothing": args.label_smoothing}

    def sizes(builder, arguments):  # a Transformer's learned positions
        found = {"source_vocab_size": src.vocabulary_size, "target_vocab_size": tgt.vocabulary_size}
        if builder == "transformer_seq2seq":
            found["max_length"] = args.max_length
        if init is not None:  # the pretrained encoder's shape
            arguments.update(init.architecture)
            found["max_length"] = init.sizes["max_length"]
        return found

    extra = dict(max_length=args.max_length, target_length=args.max_length, init=init)
    extra.update(train_pairs_kept=kept, steps_per_epoch=steps)
    model = common.new_model(args, "translate", sizes, lambda model: options, **extra)[0]
    run = f"{steps} batches per epoch, {args.epochs} epochs, precision {args.precision}"
    print(f"{args.model}: {model.count_params():,} parameters, {kept} training pairs, {run}")
    curves = (f"{args.model} on Multi30k de-en", "masked cross-entropy (nats/token)")
    curves += ("accuracy", "token accuracy (teacher forcing)")
    common.fit_and_report(model, args, data, KILL_ENV, curves, val, shuffle=False)
    results = {}
    trained = load(out) if args.evaluate_beams else None
    for beam in args.evaluate_beams:  # validation BLEU of the best weights
        score, speed, _ = _evaluate(*trained, val_sources, val_targets, beam)
        results[f"beam{beam}"] = {"bleu": score, "sentences_per_s": speed}
    if results:
        with open(os.path.join(out, "val_bleu.json"), "w") as f:
            json.dump(results, f, indent=2)


def _evaluate(model, src, tgt, config, sources, references, beam, alpha=0.0):
    translate_texts(model, src, tgt, config, sources[:8], beam, alpha)  # compiles once
    start = time.perf_counter()
    hypotheses = translate_texts(model, src, tgt, config, sources, beam, alpha)
    seconds = time.perf_counter() - start
    scores = corpus_bleu(hypotheses, references)
    for name, (score, metric) in scores.items():
        print(f"{name}: {score}  [{metric.get_signature()}]")
    speed = len(sources) / seconds
    how = (f"beam {beam}" if beam > 1 else "greedy") + ", batch 64"
    print(f"decoding: {len(sources)} sentences in {seconds:.1f} s, {speed:.1f} sentences/s ({how})")
    return scores["BLEU"][0].score, speed, hypotheses


def evaluate(args):
    sources, references = read_pair(args.source, args.reference)
    given = (sources, references, args.beam, args.alpha)
    bleu, _, hypotheses = _evaluate(*load(args.model), *given)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in hypotheses))
    print(f"BLEU = {bleu:.2f}")


def translate(args):
    trained = load(args.model)  # a bad --model fails before stdin is read
    lines = common.stdin_lines("translate.py")
    for line in translate_texts(*trained, lines, args.beam, args.alpha) if lines else []:
        print(line)


def export(args):
    from seqkeras.export.signatures import Translate, generation

    model, src, tgt, config = load(args.model)
    sources, references = read_pair(args.source, args.reference)
    texts = sources[: args.check]
    beam = dict(beam_width=args.beam)
    length = config["target_length"]
    expected = translate_texts(model, src, tgt, config, texts, args.beam, args.alpha)

    def matches(out):  # the served strings against Keras'
        return [got == want for got, want in zip(out["text"], expected)]

    def check(path, label="translate signature", key="translate"):
        note = f" (beam {args.beam})"
        same, seconds = common.served(
            path, "translate", label, "strings", matches, note, text=texts
        )
        return {f"{key}_fresh_process_equal": same, f"{key}_fresh_process_s": seconds}

    ids = src.encode(texts[:8], add_eos=True).to_tensor(0).numpy()
    target = teacher_forcing(tgt.encode(references[:8], add_eos=True).to_tensor(0).numpy())
    pairs = ((ids[:1], target[:1]), (ids, target))
    samples = [{"source_ids": x, "target_ids": y} for x, y in pairs]
    options = dict(length_penalty_alpha=args.alpha, **beam)
    signatures = [Translate(src, tgt, length, **options)]
    signatures += generation(length, eos_id=EOS, **options)
    beside = [(os.path.join(args.model, s, "vocabulary.txt"), f"{s}_vocabulary.txt") for s in SIDES]
    label = "translate signature (XLA-compiled)"
    xla = None if args.no_xla else lambda path: check(path, label, "translate_xla")
    generate = dict(max_length=length, eos_id=EOS, **beam)
    verify = dict(tolerance=1e-4, generate=generate, xla=xla, batching=True)
    if hasattr(model, "stream_max_length"):  # the Transformer's TFLite step pair
        verify.update(stream_max_length=length)
    common.export(model, args, "translate", signatures, check, samples, beside, **verify)


LENGTH_BINS = ((1, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 99))


def bin_bleu(sacrebleu, hyps, references, idx):
    """Corpus BLEU of the sentences `idx` (NaN for an empty bin)."""
    if not len(idx):
        return float("nan")
    return sacrebleu.corpus_bleu([hyps[i] for i in idx], [[references[i] for i in idx]]).score


def plot(args):
    """BLEU by source length for each model; attention heatmaps (recurrent)."""
    import sacrebleu

    sources, references = read_pair(args.source, args.reference)
    bins = length_bins([len(s.split()) for s in sources], LENGTH_BINS)
    os.makedirs(args.out, exist_ok=True)
    table = {}
    for directory in args.models:
        model, src, tgt, config = load(directory)
        hyps = translate_texts(model, src, tgt, config, sources, args.beam)
        table[config["model"]] = [bin_bleu(sacrebleu, hyps, references, idx) for idx in bins]
        if config["arguments"].get("attention"):  # the decoder's weights, greedy decoding
            text = sources[args.sentence]
            ids = src.encode([text], add_eos=True).numpy()[0]
            out, weights = attention_weights(model, ids, config["target_length"], EOS)
            pieces = [src.vocabulary[i] for i in ids], [tgt.vocabulary[i] for i in out]
            path = os.path.join(args.out, f"attention-{config['model']}.png")
            what = ("additive attention weights (Multi30k val)", "German source pieces")
            plot_attention(path, weights, *pieces, *what, "English output pieces")
            english = tgt.decode(out[None]).numpy()[0].decode()
            print(f"attention heatmap: {path} ({text!r} -> {english!r})")
    how = "greedy" if args.beam == 1 else f"beam {args.beam}"
    what = ("source sentence length in words (sentences)", "sacreBLEU (cased)")
    what += (f"Multi30k de-en val: BLEU by source length ({how})",)
    common.by_length(os.path.join(args.out, "bleu-by-length.png"), LENGTH_BINS, table, bins, *what)


def parser():
    p = argparse.ArgumentParser(prog="translate.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train a model", train, choices=MODELS)
    _data_options(t, "train", "val")
    common.add_out(t)
    t.add_argument("--tokenizers", help="reuse this model directory's vocabularies")
    span = "an apps/pretrain.py span run: its encoder and vocabulary on the source side"
    t.add_argument("--init", help=span)
    t.add_argument("--vocabulary-size", type=int, default=8000)
    warmup = "linear warm-up steps before the cosine decay"
    common.add_fit_options(t, epochs=10, batch=64, lr=1e-3, warmup=0, warmup_help=warmup)
    t.add_argument("--label-smoothing", type=float, default=0.0)
    t.add_argument("--max-length", type=int, default=64)
    common.add_training_options(t)
    t.add_argument("--evaluate-beams", type=int, nargs="*", default=[], help="val BLEU after")
    v = common.subcommand(sub, "vocabulary", "learn the vocabularies once", vocabulary, False)
    _data_options(v, "train")
    common.add_out(v)
    v.add_argument("--vocabulary-size", type=int, default=8000)
    e = common.subcommand(sub, "evaluate", "BLEU on a line-aligned file pair", evaluate)
    e.add_argument("--source", required=True)
    e.add_argument("--reference", required=True)
    common.add_beam_options(e)
    e.add_argument("--output", help="also write the translations here")
    s = common.subcommand(sub, "translate", "stdin (German) -> stdout", translate)
    common.add_beam_options(s)
    x = common.subcommand(sub, "export", "SavedModel, TFLite, ONNX, verified", export)
    x.add_argument("--no-xla", action="store_true", help="skip the XLA-compiled SavedModel")
    _data_options(x, "")
    common.add_export_options(x, 64, "sentences checked")
    common.add_beam_options(x, beam=4)
    g = common.subcommand(sub, "plot", "BLEU by length, attention heatmaps", plot, False)
    g.add_argument("--models", nargs="+", required=True)
    _data_options(g, "")
    common.add_out(g, "a directory for the PNGs")
    common.add_beam_options(g, alpha=False)
    g.add_argument("--sentence", type=int, default=1, help="the heatmap's source line (0-based)")
    return p


def _data_options(parser, *splits):
    """--train-source ... (Multi30k); split "": --source, --reference (val)."""
    for split in splits:
        for side, language in (("source", "de"), ("target", "en")):
            name = f"{split}-{side}" if split else side if side == "source" else "reference"
            default = common.shared_file("multi30k", f"{split or 'val'}.{language}")
            parser.add_argument(f"--{name}", default=default)


def main(argv=None):
    required = "train_source train_target val_source val_target source reference".split()
    common.run("translate.py", parser(), argv, required=required)


if __name__ == "__main__":
    main()
