"""Date normalisation with an attention seq2seq: "3rd of March 2021" ->
"2021-03-03".

Trains `seqkeras.models.recurrent_seq2seq` (bidirectional GRU encoder, GRU decoder
with additive / Bahdanau attention) on the built-in date task
(`seqkeras.data.dates`, 14 surface forms), decodes held-out dates greedily,
reports exact-match accuracy, saves an attention heatmap PNG, exports the
model as a SavedModel (TF Serving layout, `serving_default`: `source_ids`,
`target_ids` -> `logits`) and as a builtin-ops-only TFLite flatbuffer, and
verifies both against Keras in their own runtimes. `--out` is a model
directory as every app writes it (`config.json`, `vocabulary.json`, the best
weights, history, TensorBoard logs, a backup a killed run resumes from):
`seqkeras.training.load_model_directory(out)` rebuilds the model.

    python apps/dates.py                  # a few minutes on 2 CPU cores
    python apps/dates.py --attention none # the no-attention baseline
"""

import argparse
import sys
import os
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # when loaded by path

import quiet  # noqa: F401  (first: TensorFlow without its start-up lines)

import keras
import numpy as np

import seqkeras
from seqkeras.data import EOS, CharVocabulary, dates, teacher_forcing
from seqkeras.plots import plot_curves
from seqkeras.training import build_from_config, cosine_schedule, write_model_config
from seqkeras.training import training_callbacks

from cli import write_report

TARGET_LENGTH = 11  # "YYYY-MM-DD" + EOS


def make_data(args):
    src, tgt = dates(args.train + args.val, seed=args.seed)
    vocab = CharVocabulary.from_texts(src + tgt)
    source = vocab.encode(src)
    target = vocab.encode(tgt, max_length=TARGET_LENGTH, add_eos=True)
    n = args.train
    return vocab, (source[:n], target[:n]), (source[n:], target[n:]), src[n:]


def greedy(model, source):
    """Greedy decoding with the decoder's state cache (encoder run once),
    one compiled loop: the predicted ids (n, TARGET_LENGTH), EOS included."""
    out = np.concatenate(
        [
            np.asarray(
                seqkeras.models.generate(
                    model, source[i : i + 512], max_length=TARGET_LENGTH + 1, eos_id=EOS
                )
            )
            for i in range(0, len(source), 512)
        ]
    )
    return out[:, 1:]  # drop the BOS prompt


def heatmap(model, vocab, source, text, path):
    """The decoder's attention over the source characters while it
    normalises `text` greedily (`seqkeras.models.attention_weights`)."""
    from seqkeras.models import attention_weights
    from seqkeras.plots import plot_attention

    out, weights = attention_weights(model, source, TARGET_LENGTH + 1, EOS)
    rows = list(vocab.decode(out[None])[0]) + ["<eos>"] * bool((out == EOS).any())
    columns = list(text)
    weights = weights[: len(rows), : len(columns)]
    plot_attention(path, weights, columns, rows, "additive attention weights", "source", "output")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--val", type=int, default=2000)
    p.add_argument("--units", type=int, default=64)
    p.add_argument("--embedding", type=int, default=32)
    p.add_argument("--cell", default="gru")
    p.add_argument("--attention", default="additive", help="a score name, or 'none'")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="saved_models")
    p.add_argument("--no-export", action="store_true")
    args = p.parse_args(argv)

    keras.utils.set_random_seed(args.seed)
    vocab, (src, tgt), (vsrc, vtgt), vtext = make_data(args)
    attention = None if args.attention == "none" else args.attention
    arguments = dict(embedding_dim=args.embedding, units=args.units, cell=args.cell)
    arguments.update(attention=attention, encoder_units=None)
    if attention in ("dot", "scaled_dot", "cosine"):  # scores that need equal widths
        arguments["encoder_units"] = args.units // 2
    sizes = {"source_vocab_size": len(vocab), "target_vocab_size": len(vocab)}
    # the model directory of every app: its config.json rebuilds the model
    config = {"builder": "recurrent_seq2seq", "arguments": arguments, "sizes": sizes}
    model = build_from_config(config)
    steps = args.epochs * max(1, len(src) // args.batch)
    seqkeras.training.compile_model(model, learning_rate=cosine_schedule(args.lr, steps))
    write_model_config(args.out, {**config, "model": "dates", "training": vars(args)})
    vocab.save(args.out)
    print(
        f"date normalisation: {len(src)} train / {len(vsrc)} held-out "
        f"pairs, vocabulary {len(vocab)}, {model.count_params()} "
        f"parameters, attention={args.attention}"
    )
    callbacks, _ = training_callbacks(args.out)  # best weights, history, logs, resume
    start = time.perf_counter()
    model.fit(
        {"source_ids": src, "target_ids": teacher_forcing(tgt)},
        tgt,
        batch_size=args.batch,
        epochs=args.epochs,
        verbose=2,
        validation_data=({"source_ids": vsrc, "target_ids": teacher_forcing(vtgt)}, vtgt),
        callbacks=callbacks,
    )
    seconds = time.perf_counter() - start
    curves = ("date normalisation", "cross-entropy (nats/token)", "accuracy", "token accuracy")
    plot_curves(
        os.path.join(args.out, "history.csv"), os.path.join(args.out, "curves.png"), *curves
    )
    predicted = vocab.decode(greedy(model, vsrc))
    truth = vocab.decode(vtgt)
    exact = float(np.mean([a == b for a, b in zip(predicted, truth)]))
    print(f"trained in {seconds:.0f} s; held-out exact match (greedy): {exact:.2%}")
    for s, a, b in list(zip(vtext, predicted, truth))[:5]:
        print(f"  {s!r:32} -> {a}  {'ok' if a == b else 'expected ' + b}")
    os.makedirs(args.out, exist_ok=True)
    if attention is not None:
        png = os.path.join(args.out, "dates-attention.png")
        heatmap(model, vocab, vsrc[0], vtext[0], png)
        print(f"attention heatmap: {png}")
    report = None
    if not args.no_export:
        from seqkeras.export import export_and_verify

        samples = [
            {"source_ids": vsrc[:n, :width], "target_ids": teacher_forcing(vtgt[:n])}
            for n, width in ((1, vsrc.shape[1]), (8, vsrc.shape[1]))
        ]
        samples.append(
            {
                "source_ids": vsrc[8:12, :12],  # shorter sources
                "target_ids": teacher_forcing(vtgt[8:12])[:, :6],
            }
        )

        def token_accuracy(predict, n=min(400, len(vsrc))):
            """Teacher-forced token accuracy on held-out pairs."""
            hits = total = 0
            for i in range(0, n, 100):
                logits = predict(
                    {
                        "source_ids": vsrc[i : i + 100],
                        "target_ids": teacher_forcing(vtgt[i : i + 100]),
                    }
                )
                valid = vtgt[i : i + 100] != 0
                hits += (np.argmax(logits, -1) == vtgt[i : i + 100])[valid].sum()
                total += valid.sum()
            return hits / total

        report = export_and_verify(
            model,
            "dates",
            samples,
            args.out,
            generate={"max_length": TARGET_LENGTH + 1},
            vocabulary=vocab,
            texts=vtext[:16],
            quantize=("dynamic_int8", "float16"),
            metric=token_accuracy,
        )
        print("(export metric: teacher-forced token accuracy on held-out pairs)")
        write_report(report, args.out)
    return {
        "exact_match": exact,
        "seconds": seconds,
        "model": model,
        "vocab": vocab,
        "report": report,
    }


if __name__ == "__main__":
    main()
