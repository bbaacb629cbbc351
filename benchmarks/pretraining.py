"""Issue 28's comparison: each pretrained model's fine-tuning beside its
from-scratch control, from the runs' own `history.csv` and
`epoch_seconds.csv` (validation metric per epoch, wall time), as a table
with the targets and one plot per pair; and the pretraining curves.

    python benchmarks/pretraining.py --out benchmarks/pretraining \\
        --pair "SST-2 MLM" saved_models/pretrain/sst2-scratch saved_models/pretrain/sst2-mlm 3 \\
        --pretraining saved_models/pretrain/mlm saved_models/pretrain/bilm

A pair is NAME SCRATCH PRETRAINED TARGET (the gain in points the issue
asks for; the metric is the runs' `val_accuracy` (x100) or `val_f1`).
`--against NAME PRETRAINED REFERENCE TARGET` compares a run with a figure
measured elsewhere (REFERENCE: a from-scratch score of an earlier table,
drawn as a line; TARGET may be negative: "within 1 point" is -1), and
`--score` replaces a run's best epoch by what its app's `evaluate`
printed (a text-to-text model's history holds teacher-forced token
accuracy, not the decoded labels' accuracy): `--score DIR VALUE`.
"""

import argparse
import csv
import os

from seqkeras.plots import _pyplot as pyplot  # the figures' backend and saving, as
from seqkeras.plots import _save as save_figure  # seqkeras.plots draws its own


def rows_and_minutes(directory):
    """A run's `history.csv` rows and the wall time (minutes) at the end
    of each epoch."""
    with open(os.path.join(directory, "history.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(directory, "epoch_seconds.csv")) as f:
        seconds = [float(r["seconds"]) for r in csv.DictReader(f)]
    minutes, total = [], 0.0
    for s in seconds[: len(rows)]:
        total += s / 60
        minutes.append(total)
    return rows, minutes


def history(directory):
    """(metric name, values in percent, minutes) of a fine-tuning run."""
    rows, minutes = rows_and_minutes(directory)
    key = "val_f1" if "val_f1" in rows[0] else "val_accuracy"
    scale = 1.0 if key == "val_f1" else 100.0
    return key, [scale * float(r[key]) for r in rows], minutes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="benchmarks/pretraining")
    parser.add_argument("--pair", nargs=4, action="append", default=[])
    parser.add_argument("--against", nargs=4, action="append", default=[])
    parser.add_argument("--score", nargs=2, action="append", default=[])
    parser.add_argument("--pretraining", nargs="*", default=[])
    args = parser.parse_args(argv)
    scores = {os.path.normpath(d): float(v) for d, v in args.score}
    os.makedirs(args.out, exist_ok=True)
    print(
        "| comparison | from scratch | pretrained | gain | target | met "
        "| minutes (scratch / pretrained) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, scratch, pretrained, target in args.pair:
        fig, ax = pyplot().subplots(figsize=(6, 4))
        best = {}
        for label, directory in (("from scratch", scratch), ("pretrained", pretrained)):
            key, values, minutes = history(directory)
            ax.plot(minutes, values, marker="o", label=f"{label} ({os.path.basename(directory)})")
            best[label] = (scores.get(os.path.normpath(directory), max(values)), minutes[-1])
        row(name, best["from scratch"][0], best["pretrained"][0], target)
        print(f" {best['from scratch'][1]:.1f} / {best['pretrained'][1]:.1f} |")
        finish(ax, fig, key, name, args.out)
    for name, pretrained, reference, target in args.against:
        fig, ax = pyplot().subplots(figsize=(6, 4))
        key, values, minutes = history(pretrained)
        ax.plot(minutes, values, marker="o", label=f"pretrained ({os.path.basename(pretrained)})")
        ax.axhline(float(reference), color="C0", ls="--", label="from scratch (earlier table)")
        row(name, float(reference), scores.get(os.path.normpath(pretrained), max(values)), target)
        print(f" - / {minutes[-1]:.1f} |")
        finish(ax, fig, key, name, args.out)
    if args.pretraining:
        fig, ax = pyplot().subplots(figsize=(6, 4))
        for i, directory in enumerate(args.pretraining):
            rows, minutes = rows_and_minutes(directory)
            name = os.path.basename(directory)
            ax.plot(minutes, [float(r["val_loss"]) for r in rows], "-o", color=f"C{i}", label=name)
        ax.set(xlabel="pretraining wall time (minutes)", ylabel="validation loss (nats)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        print(f"plot: {save_figure(fig, os.path.join(args.out, 'pretraining.png'))}")


def row(name, scratch, pretrained, target):
    """The table row up to its minutes column."""
    gain, target = pretrained - scratch, float(target)
    met = "met" if gain >= target else "not met"
    print(
        f"| {name} | {scratch:.2f} | {pretrained:.2f} | {gain:+.2f} | >= {target:+g} | {met} |",
        end="",
    )


def finish(ax, fig, key, name, out):
    ax.set(xlabel="fine-tuning wall time (minutes, 2 CPU cores)", ylabel=f"{key} (%)", title=name)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    path = os.path.join(out, name.lower().replace(" ", "-").replace("/", "-") + ".png")
    print(f"plot: {save_figure(fig, path)}")


if __name__ == "__main__":
    main()
