"""The fixed-context bottleneck, measured (after Bahdanau et al. 2014,
Fig. 2): seq2seq without attention (the decoder sees the source only
through the encoder's final state) against the same model with additive
attention, on sequence reversal, accuracy by source length.

    python benchmarks/context_bottleneck.py               # ~5 min on 2 cores
    python benchmarks/context_bottleneck.py --epochs 2 --train 2000

Both models: the same bidirectional GRU encoder, GRU decoder, units,
data and epochs. Accuracy is teacher-forced token accuracy on held-out
pairs (each output token predicted from the true previous ones), grouped
by source length; the exact-sequence rate under the same forcing is shown
too. Writes a PNG plot to `--plot`.
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import seqkeras  # noqa: E402
from seqkeras.data import copy_task, teacher_forcing  # noqa: E402


def by_length(model, src, tgt, buckets):
    logits = model.predict(
        {"source_ids": src, "target_ids": teacher_forcing(tgt)}, batch_size=256, verbose=0
    )
    pred = np.argmax(logits, -1)
    valid = tgt != 0
    lengths = (src != 0).sum(1)
    rows = []
    for lo, hi in buckets:
        sel = (lengths >= lo) & (lengths <= hi)
        token = (pred[sel] == tgt[sel])[valid[sel]].mean()
        exact = np.all((pred[sel] == tgt[sel]) | ~valid[sel], axis=1).mean()
        rows.append((lo, hi, float(token), float(exact)))
    return rows


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, rows in results.items():
        centers = [(lo + hi) / 2 for lo, hi, _, _ in rows]
        ax.plot(centers, [r[2] for r in rows], marker="o", label=name)
    ax.set_xlabel("source length")
    ax.set_ylabel("token accuracy (held out)")
    ax.set_ylim(0, 1.02)
    ax.set_title("reversal: fixed context vs attention")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--val", type=int, default=3000)
    p.add_argument("--min-length", type=int, default=4)
    p.add_argument("--max-length", type=int, default=32)
    p.add_argument("--symbols", type=int, default=16)
    p.add_argument("--units", type=int, default=64)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default="benchmarks/context_bottleneck.png")
    args = p.parse_args(argv)
    src, tgt = copy_task(
        args.train, args.min_length, args.max_length, args.symbols, reverse=True, seed=args.seed
    )
    vsrc, vtgt = copy_task(
        args.val, args.min_length, args.max_length, args.symbols, reverse=True, seed=args.seed + 1
    )
    vocab = args.symbols + 4
    step = max(1, (args.max_length - args.min_length + 1) // 7)
    buckets = [
        (lo, min(lo + step - 1, args.max_length))
        for lo in range(args.min_length, args.max_length + 1, step)
    ]
    print(
        f"reversal: {args.train} train / {args.val} held-out pairs, "
        f"source length {args.min_length}-{args.max_length}, "
        f"{args.symbols} symbols; bidirectional GRU encoder, GRU decoder, "
        f"{args.units} units, {args.epochs} epochs; {os.cpu_count()} CPU "
        "cores"
    )
    results = {}
    for name, attention in (("no attention", None), ("additive attention", "additive")):
        keras.utils.set_random_seed(args.seed)
        model = seqkeras.models.recurrent_seq2seq(
            vocab, vocab, embedding_dim=32, units=args.units, cell="gru", attention=attention
        )
        schedule = keras.optimizers.schedules.CosineDecay(
            args.lr, args.epochs * (args.train // args.batch), alpha=0.05
        )
        seqkeras.training.compile_model(model, learning_rate=schedule)
        model.fit(
            {"source_ids": src, "target_ids": teacher_forcing(tgt)},
            tgt,
            batch_size=args.batch,
            epochs=args.epochs,
            verbose=0,
        )
        results[name] = by_length(model, vsrc, vtgt, buckets)
        print(f"  trained {name}: {model.count_params()} parameters", flush=True)
    header = f"{'source length':<15}" + "".join(f"{name + ' tok/seq':>30}" for name in results)
    print(header)
    print("-" * len(header))
    for i, (lo, hi) in enumerate(buckets):
        cells = "".join(f"{rows[i][2]:>21.1%} /{rows[i][3]:>6.1%}" for rows in results.values())
        print(f"{f'{lo}-{hi}':<15}{cells}")
    if args.plot:
        plot(results, args.plot)
        print(f"plot: {args.plot}")
    return results


if __name__ == "__main__":
    main()
