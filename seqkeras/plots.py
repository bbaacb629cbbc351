"""Plots of training and evaluation, drawn with matplotlib on its Agg
backend (no screen needed; matplotlib comes with the `apps` extra):
training curves from a history CSV, loss against wall time for several
runs, a score by input length for several models, one attention heatmap
for every kind of attention weights, and a forecast with its interval.
Each function writes a PNG and returns its path."""

import csv
import os

import numpy as np

__all__ = [
    "length_bins",
    "plot_attention",
    "plot_by_length",
    "plot_curves",
    "plot_forecast",
    "plot_runs_against_time",
]


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "seqkeras.plots needs matplotlib: pip install 'seqkeras[apps]' (or matplotlib)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    _pyplot().close(fig)
    return os.fspath(path)


def _bins(name, bins):
    try:
        pairs = [(int(lo), int(hi)) for lo, hi in bins]
    except (TypeError, ValueError):
        raise ValueError(
            f"`{name}` expects `bins` as (low, high) pairs of ints. Received: {bins!r}"
        ) from None
    if not pairs or any(lo > hi for lo, hi in pairs):
        raise ValueError(f"`{name}` expects non-empty `bins` with low <= high. Received: {bins!r}")
    return pairs


def length_bins(lengths, bins):
    """The indices of the items in each length bin.

    Args:
        lengths: one length per item.
        bins: `(low, high)` pairs, both ends included.

    Returns:
        A list of index arrays, one per bin.

    Examples:
        >>> from seqkeras.plots import length_bins
        >>> [i.tolist() for i in length_bins([3, 12, 5, 30], [(1, 10), (11, 99)])]
        [[0, 2], [1, 3]]
    """
    bins = _bins("length_bins", bins)
    lengths = np.asarray(lengths)
    return [np.flatnonzero((lengths >= lo) & (lengths <= hi)) for lo, hi in bins]


def plot_by_length(path, bins, scores, counts, xlabel, ylabel, title):
    """One line per model over length bins, each bin labelled with its
    number of items.

    Args:
        path: the PNG to write.
        bins: `(low, high)` pairs (a high of 99 or more: no upper end).
        scores: `{label: one score per bin}`.
        counts: the number of items in each bin.
        xlabel, ylabel, title: the axes' labels and the title.

    Examples:
        >>> import os, tempfile
        >>> from seqkeras.plots import plot_by_length
        >>> path = os.path.join(tempfile.mkdtemp(), "by-length.png")
        >>> _ = plot_by_length(path, [(1, 10), (11, 99)], {"lstm": [80.0, 70.0]}, [5, 3],
        ...                    "length", "accuracy (%)", "by length")
        >>> os.path.getsize(path) > 0
        True
    """
    bins = _bins("plot_by_length", bins)
    for label, values in scores.items():
        if len(values) != len(bins):
            raise ValueError(
                f"`plot_by_length`: `scores[{label!r}]` has {len(values)} values for "
                f"{len(bins)} bins"
            )
    fig, ax = _pyplot().subplots(figsize=(7, 4))
    for label, values in scores.items():
        ax.plot(range(len(bins)), values, "o-", label=label)
    ax.set_xticks(
        range(len(bins)),
        [f"{lo}-{hi}\n({n})" if hi < 99 else f"{lo}+\n({n})" for (lo, hi), n in zip(bins, counts)],
    )
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_attention(path, weights, columns, rows=None, title="", xlabel="", ylabel=""):
    """A heatmap of attention weights, the axes labelled with the tokens:
    a decoder's weights over the source (one row per output token), or
    one row of pooling weights.

    Args:
        path: the PNG to write.
        weights: (len(rows), len(columns)), or (len(columns),) without
            `rows`.
        columns: the attended tokens (strings).
        rows: the attending tokens, or None for one row.
        title, xlabel, ylabel: the title and the axes' labels.

    Examples:
        >>> import os, tempfile, numpy as np
        >>> from seqkeras.plots import plot_attention
        >>> path = os.path.join(tempfile.mkdtemp(), "attention.png")
        >>> _ = plot_attention(path, np.full((2, 3), 1 / 3), ["a", "b", "c"], ["x", "y"])
        >>> os.path.getsize(path) > 0
        True
    """
    weights = np.asarray(weights, "float32")
    expected = (len(columns),) if rows is None else (len(rows), len(columns))
    if weights.shape != expected:
        raise ValueError(
            f"`plot_attention` expects `weights` of shape {expected} (rows x columns). "
            f"Received: {weights.shape}"
        )
    weights = weights if rows is not None else weights[None]
    width = max(5, 0.5 * len(columns))
    height = max(4, 0.35 * len(rows)) if rows is not None else 1.8
    fig, ax = _pyplot().subplots(figsize=(width, height))
    ax.imshow(weights, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(columns)), columns, rotation=60, ha="right")
    ax.set_yticks(range(len(rows)) if rows is not None else [], rows if rows is not None else [])
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    return _save(fig, path)


def plot_curves(history, path, title, loss_label, metric=None, metric_label=None, log=False):
    """Loss (and `metric`) per epoch, training and validation, from a
    history CSV (Keras' `CSVLogger`, as `training_callbacks` writes it).

    Args:
        history: the CSV.
        path: the PNG to write.
        title: the figure's title ("" for none).
        loss_label: the loss axis' label.
        metric: a second logged value (its own panel), or None.
        metric_label: its axis label.
        log: a logarithmic loss axis.

    Returns:
        The path, or None when the history has no rows yet.
    """
    with open(history, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    plt = _pyplot()
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
    return _save(fig, path)


def plot_runs_against_time(runs, path, ylabel, title, target=None, ylim=None):
    """Validation (solid) and training (dotted) loss of several runs
    against their training wall time, each labelled with its model and
    parameter count.

    Args:
        runs: `(config, history rows, epoch seconds)` of each run
            (`seqkeras.training.read_training_history`); the config has
            `model` and `parameters`.
        path: the PNG to write.
        ylabel, title: the loss axis' label and the title.
        target: a dashed line at this loss, or None.
        ylim: the loss axis' `(low, high)`, or None.
    """
    fig, ax = _pyplot().subplots(figsize=(7, 4.5))
    for i, (config, rows, seconds) in enumerate(runs):
        minutes = np.cumsum(seconds[: len(rows)]) / 60
        label = f"{config['model']}, {config['parameters'] / 1e6:.2f}M parameters"
        for key, style in (("val_loss", "-"), ("loss", ":")):
            what = "validation" if key == "val_loss" else "training"
            values = [float(r[key]) for r in rows]
            ax.plot(minutes, values, ls=style, color=f"C{i}", label=f"{label}: {what}")
    if target is not None:
        ax.axhline(target, color="k", lw=0.8, ls="--", label=f"{target} (target)")
    ax.set(xlabel="training wall time (minutes)", ylabel=ylabel, title=title)
    if ylim:
        ax.set_ylim(*ylim)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_forecast(path, dates, values, start, origins, horizon, forecasts, history=96):
    """History, truth, and forecasts from rolling origins `start`, `start +
    horizon`, ... (the last block from the last origin), each with its
    interval band.

    Args:
        path: the PNG to write.
        dates: one label per step.
        values: the series (n,).
        start: the first forecast step.
        origins: the origins forecasts start from (one per row of each
            forecast).
        horizon: the steps each forecast covers.
        forecasts: `(label, median, low, high)` tuples, each array
            (len(origins), horizon, 1); low and high may be None.
        history: steps of history drawn before `start`.
    """
    values = np.asarray(values, "float64")
    n = len(values)
    origins = np.asarray(origins)
    steps = np.arange(start, n)
    block = np.minimum((steps - start) // horizon * horizon + start, origins[-1])
    index = np.maximum(np.searchsorted(origins, block, side="right") - 1, 0)  # latest origin
    k = np.clip(steps - origins[index], 0, horizon - 1)
    fig, ax = _pyplot().subplots(figsize=(10, 4))
    first = max(0, start - history)
    ax.plot(np.arange(first, n), values[first:n], color="0.3", lw=1, label="history and truth")
    for i, (label, median, low, high) in enumerate(forecasts):
        color, style = f"C{0 if i == 0 else i + 2}", "-" if i == 0 else "--"
        ax.plot(steps, np.asarray(median)[index, k, 0], color=color, lw=1.5, ls=style, label=label)
        if low is not None and i == 0:
            band = np.asarray(low)[index, k, 0], np.asarray(high)[index, k, 0]
            ax.fill_between(steps, *band, color=color, alpha=0.25, label="interval")
    ax.axvline(start, color="k", ls=":", lw=1)
    ticks = np.linspace(first, n - 1, 6).astype(int)
    ax.set_xticks(ticks, [dates[i] for i in ticks])
    ax.set_title(
        f"held back from {dates[start]}: forecasts of {horizon} steps from origins {horizon} apart"
    )
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)
