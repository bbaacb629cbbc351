"""Date normalisation with an attention seq2seq: "3rd of March 2021" ->
"2021-03-03".

Trains `seqkeras.models.seq2seq` (bidirectional GRU encoder, GRU decoder
with additive / Bahdanau attention) on the built-in date task
(`seqkeras.data.dates`, 14 surface forms), decodes held-out dates greedily,
reports exact-match accuracy, saves an attention heatmap PNG, exports the
model as a SavedModel (TF Serving layout, `serving_default`: `source_ids`,
`target_ids` -> `logits`) and as a builtin-ops-only TFLite flatbuffer, and
verifies both against Keras in their own runtimes.

    python apps/dates.py                  # a few minutes on 2 CPU cores
    python apps/dates.py --attention none # the no-attention baseline
"""

import argparse
import sys
import os
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # when loaded by path

import quiet  # noqa: E402, F401  (first: TensorFlow without its start-up lines)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import seqkeras  # noqa: E402
from seqkeras.data import BOS, EOS, CharVocabulary, dates, teacher_forcing  # noqa: E402

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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ids = greedy(model, source[None])[0]
    decoded = vocab.decode(ids[None])[0]
    dec_in = np.concatenate([[BOS], ids[:-1]])[None].astype("int32")
    _, weights = seqkeras.models.attention_model(model).predict(
        {"source_ids": source[None], "target_ids": dec_in}, verbose=0
    )
    w = weights[0, : len(decoded) + 1, : len(text)]
    fig, ax = plt.subplots(figsize=(max(4, len(text) * 0.3), 4))
    ax.imshow(w, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(text)), list(text))
    ax.set_yticks(range(len(decoded) + 1), list(decoded) + ["<eos>"])
    ax.set_xlabel("source"), ax.set_ylabel("output")
    ax.set_title("additive attention weights")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--val", type=int, default=2000)
    p.add_argument("--units", type=int, default=64)
    p.add_argument("--embedding", type=int, default=32)
    p.add_argument("--cell", default="gru")
    p.add_argument("--attention", default="additive", help="a score name, or 'none'")
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="saved_models")
    p.add_argument("--no-export", action="store_true")
    args = p.parse_args(argv)

    keras.utils.set_random_seed(args.seed)
    vocab, (src, tgt), (vsrc, vtgt), vtext = make_data(args)
    attention = None if args.attention == "none" else args.attention
    model = seqkeras.models.seq2seq(
        len(vocab),
        len(vocab),
        embedding_dim=args.embedding,
        units=args.units,
        cell=args.cell,
        attention=attention,
        encoder_units=args.units // 2 if attention in ("dot", "scaled_dot", "cosine") else None,
    )
    schedule = keras.optimizers.schedules.CosineDecay(
        args.lr, args.epochs * (len(src) // args.batch), alpha=0.05
    )
    seqkeras.models.compile_model(model, learning_rate=schedule)
    print(
        f"date normalisation: {len(src)} train / {len(vsrc)} held-out "
        f"pairs, vocabulary {len(vocab)}, {model.count_params()} "
        f"parameters, attention={args.attention}"
    )
    start = time.perf_counter()
    model.fit(
        {"source_ids": src, "target_ids": teacher_forcing(tgt)},
        tgt,
        batch_size=args.batch,
        epochs=args.epochs,
        verbose=2,
        validation_data=({"source_ids": vsrc, "target_ids": teacher_forcing(vtgt)}, vtgt),
    )
    seconds = time.perf_counter() - start
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
        print("export report (metric: teacher-forced token accuracy on held-out pairs):")
        for key, value in report.items():
            print(f"  {key}: {value:.3g}" if isinstance(value, float) else f"  {key}: {value}")
    return {
        "exact_match": exact,
        "seconds": seconds,
        "model": model,
        "vocab": vocab,
        "report": report,
    }


if __name__ == "__main__":
    main()
