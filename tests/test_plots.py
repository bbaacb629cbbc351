"""seqkeras.plots writes PNGs of the size its figures have and refuses
weights that do not match their labels."""

import csv
import os

import numpy as np
import pytest

from seqkeras import plots


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_length_bins_pick_the_items_of_each_bin():
    lengths = [1, 10, 11, 20, 99, 5]
    bins = plots.length_bins(lengths, [(1, 10), (11, 20), (21, 99)])
    assert [b.tolist() for b in bins] == [[0, 1, 5], [2, 3], [4]]
    with pytest.raises(ValueError, match="length_bins.*low <= high"):
        plots.length_bins(lengths, [(5, 1)])
    with pytest.raises(ValueError, match="length_bins.*pairs of ints"):
        plots.length_bins(lengths, [5])


def test_every_plot_writes_a_png(tmp_path):
    history = tmp_path / "history.csv"
    with open(history, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["epoch", "loss", "val_loss", "accuracy", "val_accuracy"])
        w.writerows([[i, 1 / (i + 1), 1.1 / (i + 1), i / 4, i / 5] for i in range(4)])
    curves = plots.plot_curves(str(history), str(tmp_path / "c.png"), "t", "loss", "accuracy", "a")
    assert _png_size(curves) == (900, 350)
    one = plots.plot_curves(str(history), str(tmp_path / "c1.png"), "", "loss", log=True)
    assert _png_size(one) == (500, 350)
    by = plots.plot_by_length(
        str(tmp_path / "b.png"), [(1, 5), (6, 99)], {"a": [1, 2]}, [3, 4], "x", "y", "t"
    )
    assert _png_size(by) == (700, 400)
    heat = plots.plot_attention(str(tmp_path / "h.png"), np.eye(3), list("abc"), list("xyz"))
    assert _png_size(heat) == (500, 400)
    row = plots.plot_attention(str(tmp_path / "r.png"), np.ones(12) / 12, list("abcdefghijkl"))
    assert _png_size(row) == (600, 180)
    runs = [({"model": "m", "parameters": 1e6}, [{"loss": "1", "val_loss": "2"}] * 2, [60, 60])]
    assert os.path.getsize(plots.plot_runs_against_time(runs, str(tmp_path / "t.png"), "y", "t"))
    values = np.arange(40.0)
    origins = np.array([30, 34])
    fc = values[None, :4, None] + np.zeros((2, 1, 1))
    f = plots.plot_forecast(
        str(tmp_path / "f.png"), [str(i) for i in range(40)], values, 30, origins, 4,
        [("model", fc, fc - 1, fc + 1), ("baseline", fc, None, None)],
    )  # fmt: skip
    assert _png_size(f) == (1000, 400)
    assert plots.plot_curves(str(_empty(tmp_path)), str(tmp_path / "e.png"), "", "l") is None


def _empty(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("epoch,loss\n")
    return path


def test_mismatched_shapes_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"plot_attention.*\(2, 3\).*Received: \(3, 3\)"):
        plots.plot_attention(str(tmp_path / "h.png"), np.eye(3), list("abc"), list("xy"))
    with pytest.raises(ValueError, match="plot_by_length.*2 values for 3 bins"):
        plots.plot_by_length(
            str(tmp_path / "b.png"), [(1, 2), (3, 4), (5, 6)], {"a": [1, 2]}, [1, 1, 1], "", "", ""
        )
