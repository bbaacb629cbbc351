"""The seed notes' comparison on SST-2 dev: a feed-forward network over
averaged embeddings vs SimpleRNN vs GRU vs LSTM vs BiLSTM vs Transformer,
each trained by `apps/sentiment.py train` with the same budget (epochs,
batch, learning rate, 300-d embeddings, 256 units), one after the other.
Prints a Markdown table (dev accuracy, parameters, training seconds) and
writes a bar plot; `apps/sentiment.py plot` then draws accuracy by length.

    python benchmarks/sst2_comparison.py --out saved_models/sentiment/compare \\
        --epochs 2 --plot benchmarks/sentiment/comparison.png
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(os.path.dirname(HERE), "apps", "sentiment.py")
MODELS = ("bag", "rnn", "gru", "lstm", "bilstm", "transformer")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--plot", required=True)
    p.add_argument("extra", nargs="*", help="more `train` arguments (after --)")
    args = p.parse_args(argv)
    rows = []
    for model in args.models:
        directory = os.path.join(args.out, model)
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                APP,
                "train",
                "--model",
                model,
                "--out",
                directory,
                "--epochs",
                str(args.epochs),
                "--verbose",
                "2",
                *args.extra,
            ],
            check=True,
        )
        wall = time.perf_counter() - start
        with open(os.path.join(directory, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(directory, "val_accuracy.json")) as f:
            accuracy = json.load(f)["accuracy"]
        with open(os.path.join(directory, "epoch_seconds.csv")) as f:
            seconds = sum(float(r["seconds"]) for r in csv.DictReader(f))
        rows.append((model, accuracy, config["parameters"], seconds, wall))
    print(
        "| model | dev accuracy (%) | parameters | training (s, "
        f"{args.epochs} epochs) | whole command (s) |"
    )
    print("|---|---|---|---|---|")
    for model, acc, params, seconds, wall in rows:
        print(f"| {model} | {acc:.2f} | {params:,} | {seconds:.0f} | {wall:.0f} |")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    names = [r[0] for r in rows]
    axes[0].bar(names, [r[1] for r in rows], color="tab:blue")
    axes[0].set_ylim(min(r[1] for r in rows) - 3, max(r[1] for r in rows) + 2)
    axes[0].set_ylabel("SST-2 dev accuracy (%)")
    for i, r in enumerate(rows):
        axes[0].text(i, r[1] + 0.2, f"{r[1]:.1f}", ha="center")
    axes[1].bar(names, [r[3] for r in rows], color="tab:orange")
    axes[1].set_ylabel(f"training seconds ({args.epochs} epochs, 2 cores)")
    for ax in axes:
        ax.tick_params(axis="x", rotation=30)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("Same budget on SST-2: bag of embeddings vs recurrent vs Transformer")
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.plot) or ".", exist_ok=True)
    fig.savefig(args.plot, dpi=100)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
