"""The plots the apps draw: training curves, a score by input length for
several models, attention weights, and loss against wall time for several
runs (matplotlib on the Agg backend: no screen needed)."""

import csv

import numpy as np


def pyplot():
    """matplotlib's pyplot on the Agg backend (no screen needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot().close(fig)
    return path


def by_length(lengths, bins):
    """The indices of the examples in each length bin ((low, high) pairs,
    both ends included)."""
    import numpy as np

    lengths = np.asarray(lengths)
    return [np.flatnonzero((lengths >= lo) & (lengths <= hi)) for lo, hi in bins]


def plot_by_length(path, bins, scores, counts, xlabel, ylabel, title):
    """One line per model (`scores`: label -> a score per length bin) over
    the length `bins` ((low, high) pairs; 99: no upper end), each bin
    labelled with its count; prints the table."""
    print(f"{ylabel} by length:", [f"{lo}-{hi}" for lo, hi in bins], "examples", counts)
    for label, values in scores.items():
        print(f"  {label}: " + " ".join(f"{x:.1f}" for x in values))
    fig, ax = pyplot().subplots(figsize=(7, 4))
    for label, values in scores.items():
        ax.plot(range(len(bins)), values, "o-", label=label)
    ax.set_xticks(
        range(len(bins)),
        [f"{lo}-{hi}\n({n})" if hi < 99 else f"{lo}+\n({n})" for (lo, hi), n in zip(bins, counts)],
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return save_figure(fig, path)


def plot_weights(path, weights, columns, rows=None, title="", xlabel="", ylabel=""):
    """A heatmap of attention `weights` (len(rows) x len(columns); one row
    without `rows`), each cell a weight, the axes labelled with the
    tokens."""
    weights = weights if rows is not None else weights[None]
    width = max(5, 0.5 * len(columns))
    height = max(4, 0.35 * len(rows)) if rows is not None else 1.8
    fig, ax = pyplot().subplots(figsize=(width, height))
    ax.imshow(weights, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(columns)), columns, rotation=60, ha="right")
    ax.set_yticks(range(len(rows)) if rows is not None else [], rows if rows is not None else [])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return save_figure(fig, path)


def plot_curves(history, path, title, loss_label, metric=None, metric_label=None, log=False):
    """Loss and `metric` per epoch (train and validation) from a
    history.csv, as a PNG (the loss alone without `metric`; `log`: a
    logarithmic loss axis)."""
    plt = pyplot()
    with open(history, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    epochs = [int(r["epoch"]) + 1 for r in rows]
    fig, axes = plt.subplots(1, 2 if metric else 1, figsize=(9, 3.5) if metric else (5, 3.5))
    axes = list(axes) if metric else [axes]
    panels = [("loss", loss_label)] + ([(metric, metric_label)] if metric else [])
    for ax, (key, label) in zip(axes, panels):
        for name, style in ((key, "-"), ("val_" + key, "--")):
            if name in rows[0]:
                ax.plot(epochs, [float(r[name]) for r in rows], style, label=name)
        ax.set_ylabel(label)
    if log:
        axes[0].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("epoch")
        ax.legend()
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def runs_against_time(runs, path, ylabel, title, target=None, ylim=None):
    """Validation (solid) and training (dotted) loss of trained runs
    against their training wall time, with each run's model and parameter
    count; a dashed line at `target`. `runs`: `(directory, config,
    history rows, epoch seconds)` for each run (`common.training_runs`)."""
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    for i, (directory, config, rows, seconds) in enumerate(runs):
        minutes = np.cumsum(seconds[: len(rows)]) / 60
        label = f"{config['model']}, {config['parameters'] / 1e6:.2f}M parameters"
        for key, style in (("val_loss", "-"), ("loss", ":")):
            what = "validation" if key == "val_loss" else "training"
            values = [float(r[key]) for r in rows]
            ax.plot(minutes, values, ls=style, color=f"C{i}", label=f"{label}: {what}")
        best = min(float(r["val_loss"]) for r in rows)
        print(
            f"{directory}: {label}, {len(rows)} epochs in {minutes[-1]:.1f} min, best "
            f"validation loss {best:.4f}"
        )
    if target is not None:
        ax.axhline(target, color="k", lw=0.8, ls="--", label=f"{target} (target)")
    ax.set(xlabel="training wall time (minutes, 2 CPU cores)", ylabel=ylabel, title=title)
    if ylim:
        ax.set_ylim(*ylim)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    print(f"plot: {save_figure(fig, path)}")
