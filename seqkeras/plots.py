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
    if lengths.size and not np.issubdtype(lengths.dtype, np.number):
        raise TypeError(f"`length_bins` expects numeric `lengths`. Received: dtype={lengths.dtype}")
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
    if not isinstance(scores, dict):
        raise TypeError(
            "`plot_by_length` expects `scores` as {label: one score per bin}. "
            f"Received: {type(scores).__name__}"
        )
    if len(counts) != len(bins):
        raise ValueError(
            f"`plot_by_length` expects one of `counts` per bin ({len(bins)}). "
            f"Received: {len(counts)} counts"
        )
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
    for arg, tokens in (("columns", columns), ("rows", rows)):
        if (tokens is not None or arg == "columns") and (
            isinstance(tokens, str) or not hasattr(tokens, "__len__")
        ):
            raise TypeError(
                f"`plot_attention` expects `{arg}`, a list of token strings. "
                f"Received: {arg}={tokens!r}"
            )
    try:
        weights = np.asarray(weights, "float32")
    except (TypeError, ValueError):
        raise TypeError(
            f"`plot_attention` expects numeric `weights`. Received: {weights!r:.100}"
        ) from None
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
    if not os.path.isfile(history):
        raise FileNotFoundError(
            f"`plot_curves` expects `history`, a CSV file (Keras' `CSVLogger`). "
            f"Received: history={os.fspath(history)!r}, which does not exist"
        )
    with open(history, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    columns = set(rows[0])
    if not {"epoch", "loss"} <= columns:
        raise ValueError(
            f"`plot_curves` expects a `history` CSV with the columns epoch and loss "
            f"(Keras' `CSVLogger`). Received: columns {sorted(columns)} in {history!r}"
        )
    if metric and not {metric, "val_" + metric} & columns:
        raise ValueError(
            f"`plot_curves` received a `metric` the history does not log. "
            f"Received: metric={metric!r}; the columns are {sorted(columns)}"
        )
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


def _check_runs(runs):
    where = "`plot_runs_against_time`"
    if not runs:
        raise ValueError(f"{where} expects at least one of `runs`. Received: runs={runs!r}")
    for i, run in enumerate(runs):
        if not isinstance(run, (list, tuple)) or len(run) != 3:
            raise ValueError(
                f"{where} expects each of `runs` as (config, history rows, epoch seconds). "
                f"Received: runs[{i}] of type {type(run).__name__}"
            )
        config, rows, seconds = run
        missing = [k for k in ("model", "parameters") if k not in config]
        if missing:
            raise ValueError(
                f"{where} expects each config in `runs` to have `model` and `parameters`. "
                f"runs[{i}] lacks {missing}"
            )
        if len(seconds) < len(rows):
            raise ValueError(
                f"{where} expects the epoch seconds of `runs[{i}]` to cover its "
                f"{len(rows)} history rows. Received: {len(seconds)} epoch seconds"
            )
        for row in rows:
            if not {"loss", "val_loss"} <= set(row):
                raise ValueError(
                    f"{where} expects history rows in `runs[{i}]` with loss and val_loss. "
                    f"Received: columns {sorted(row)}"
                )


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
    _check_runs(runs)
    if ylim is not None and (isinstance(ylim, str) or np.shape(ylim) != (2,)):
        raise ValueError(
            "`plot_runs_against_time` expects `ylim` as (low, high) or None. "
            f"Received: ylim={ylim!r}"
        )
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


def _check_forecast(dates, n, start, origins, horizon, forecasts):
    where = "`plot_forecast`"
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ValueError(f"{where} expects `horizon` a positive int. Received: {horizon!r}")
    if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or not 0 <= start < n:
        raise ValueError(
            f"{where} expects `start` an int step of the series, in [0, {n}). Received: {start!r}"
        )
    if len(dates) != n:
        raise ValueError(
            f"{where} expects one of `dates` per value ({n}). Received: {len(dates)} dates"
        )
    if origins.ndim != 1 or not origins.size or not np.issubdtype(origins.dtype, np.integer):
        raise ValueError(
            f"{where} expects `origins`, a non-empty list of int steps. Received: "
            f"{origins.tolist()!r:.100}"
        )
    expected = (len(origins), horizon, 1)
    for item in forecasts:
        if not isinstance(item, (list, tuple)) or len(item) != 4:
            raise ValueError(
                f"{where} expects `forecasts` as (label, median, low, high) tuples. "
                f"Received: {item!r:.100}"
            )
        label, *arrays = item
        for array in arrays:
            if array is not None and np.shape(array) != expected:
                raise ValueError(
                    f"{where} expects each array of `forecasts` of shape (len(origins), "
                    f"horizon, 1) = {expected}. Received: {np.shape(array)} for {label!r}"
                )


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
    _check_forecast(dates, n, start, origins, horizon, forecasts)
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
