"""The seed notes' RNN vs GRU vs LSTM table, measured: parameters, train
tokens/s and accuracy on the adding problem at T = 50, 100, 200, 400, with
the same budget for every cell (same data, units, epochs, optimizer).

    python benchmarks/cell_comparison.py              # ~10 min on 2 cores
    python benchmarks/cell_comparison.py --steps 50 100 --epochs 4

Writes the table to stdout and a plot to `--plot` (PNG). Accuracy is the
share of validation predictions within 0.04 of the target; chance (always
predicting the mean) scores about 8%.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps"))
import long_range  # noqa: E402

from seqkeras.data import adding_problem  # noqa: E402


def plot(rows, cells, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for kind in cells:
        pts = [(t, r["val_acc"]) for t, k, r in rows if k == kind]
        ax.plot(*zip(*pts), marker="o", label=kind)
    ax.set_xscale("log", base=2)
    ax.set_xticks(
        [t for t, k, _ in rows if k == cells[0]], [str(t) for t, k, _ in rows if k == cells[0]]
    )
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("validation accuracy (|error| < 0.04)")
    ax.set_ylim(0, 1.02)
    ax.set_title("adding problem, same budget per cell")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, nargs="+", default=[50, 100, 200, 400])
    p.add_argument("--train", type=int, default=10000)
    p.add_argument("--val", type=int, default=2000)
    p.add_argument("--units", type=int, default=64)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cells", nargs="+", default=list(long_range.CELLS))
    p.add_argument("--plot", default="benchmarks/cell_comparison.png")
    args = p.parse_args(argv)
    print(
        f"adding problem: {args.train} train / {args.val} validation "
        f"sequences, {args.epochs} epochs, {args.units} units, batch "
        f"{args.batch}, Adam {args.lr} with clipnorm 1; {os.cpu_count()} "
        "CPU cores"
    )
    header = f"{'T':>5}  {'cell':<10}{'params':>8}{'train tok/s':>13}{'val MSE':>10}{'val acc':>9}"
    print(header)
    print("-" * len(header))
    rows = []
    for steps in args.steps:
        data = (
            adding_problem(args.train, steps, seed=args.seed),
            adding_problem(args.val, steps, seed=args.seed + 1),
        )
        args.steps_now = steps
        for kind in args.cells:
            _, r = long_range.train(kind, args, data)
            rows.append((steps, kind, r))
            print(
                f"{steps:>5}  {kind:<10}{r['params']:>8}"
                f"{r['tokens_per_s']:>13.0f}{r['val_mse']:>10.4f}"
                f"{r['val_acc']:>8.1%}",
                flush=True,
            )
    if args.plot:
        plot(rows, args.cells, args.plot)
        print(f"plot: {args.plot}")
    return rows


if __name__ == "__main__":
    main()
