"""The installed package, the main job and the benchmark run end to end."""

import importlib.metadata
import os
import subprocess
import sys

import numpy as np
import pytest

import seqkeras

SLOW_SECONDS = 90  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 1418  # (2 cores; the summed memory of its processes)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_installed_version_matches_source():
    assert importlib.metadata.version("seqkeras") == seqkeras.__version__


def test_readme_opens_with_the_two_commands():
    with open(os.path.join(ROOT, "README.md")) as f:
        head = f.read().split("---")[0]
    assert "<!-- main-command -->" in head and "<!-- test-command -->" in head
    assert 'pip install ".[apps]"' in head and "apps/dates.py" in head
    assert 'pip install ".[test]"' in head and "tests/run.py" in head


def _load(path, name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outside(tmp_path, *command, env=None):
    """Runs `python *command` in `tmp_path` (outside the checkout, with no
    PYTHONPATH): only the installed package can be imported."""
    env = {**os.environ, **(env or {})}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, *command], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    _outside.stderr = result.stderr
    return result.stdout


def test_tests_and_scripts_use_the_installed_package(tmp_path):
    out = _outside(tmp_path, "-c", "import seqkeras; print(seqkeras.__file__)")
    assert os.path.samefile(out.strip(), seqkeras.__file__)
    import json

    # (the checkout's own seqkeras.egg-info has no direct_url.json)
    editable = any(
        json.loads(d.read_text("direct_url.json") or "{}")
        .get("dir_info", {})
        .get("editable", False)
        for d in importlib.metadata.distributions(name="seqkeras")
    )
    if not editable:
        # a regular install: the package is not the source tree
        assert not os.path.abspath(seqkeras.__file__).startswith(os.path.join(ROOT, "seqkeras"))


# The main job as shipped (>= 99% exact match, quiet, its exports equal to
# Keras), from a directory outside the checkout, is tests/test_release.py:
# it runs from the installed wheel there (slow, in .ci/run).


def test_long_range_app_small_run_and_versioned_exports(tmp_path):
    from seqkeras.export import export_and_verify

    app = _load(os.path.join(ROOT, "apps", "long_range.py"), "long_range")
    results, report = app.main(
        [
            "--cells",
            "GRU",
            "--epochs",
            "1",
            "--train",
            "256",
            "--val",
            "64",
            "--steps",
            "12",
            "--out",
            str(tmp_path),
        ]
    )
    assert np.isfinite(results["GRU"][1]["val_mse"])
    assert report["savedmodel_max_abs_diff"] <= 1e-5
    assert report["tflite_max_abs_diff"] <= 1e-5
    # A second export goes to the next version, never over the first.
    report2 = export_and_verify(
        results["GRU"][0], "long_range", [np.zeros((2, 12, 2), "float32")], str(tmp_path)
    )
    assert report2["savedmodel"].endswith(os.path.join("long_range", "2"))


def test_reproduction_scripts_smoke(tmp_path):
    cells = _load(os.path.join(ROOT, "benchmarks", "cell_comparison.py"), "cell_comparison")
    rows = cells.main(
        [
            "--steps",
            "8",
            "--train",
            "128",
            "--val",
            "32",
            "--epochs",
            "1",
            "--cells",
            "GRU",
            "--plot",
            str(tmp_path / "cells.png"),
        ]
    )
    assert [(r[0], r[1]) for r in rows] == [(8, "GRU")]
    assert os.path.exists(tmp_path / "cells.png")
    bottleneck = _load(
        os.path.join(ROOT, "benchmarks", "context_bottleneck.py"), "context_bottleneck"
    )
    results = bottleneck.main(
        [
            "--train",
            "256",
            "--val",
            "64",
            "--epochs",
            "1",
            "--max-length",
            "10",
            "--units",
            "16",
            "--plot",
            str(tmp_path / "b.png"),
        ]
    )
    assert set(results) == {"no attention", "additive attention"}
    assert os.path.exists(tmp_path / "b.png")


def test_baby_gpt_quick_from_outside_the_checkout(tmp_path):
    from seqkeras.data.text import shared_data_dir

    data = shared_data_dir()
    if data is None:
        pytest.skip(
            "the shared data directory (tiny-shakespeare) is not "
            "present: set SEQKERAS_DATA or place it at ../shared/data"
        )
    out = _outside(
        tmp_path,
        os.path.join(ROOT, "benchmarks", "baby_gpt.py"),
        "--quick",
        env={"SEQKERAS_DATA": data},
    )
    assert "val loss" in out
    for name in ("greedy", "beam (4, alpha 0.6)", "top-k 10", "top-p 0.9", "temperature 0.7"):
        assert f"--- {name}" in out
    # without the data: a clear error naming both ways to give it
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "baby_gpt.py"), "--quick"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "SEQKERAS_DATA": str(tmp_path / "none")},
    )
    assert result.returncode != 0
    assert "SEQKERAS_DATA" in result.stderr and "`path`" in result.stderr


@pytest.mark.slow
def test_long_range_default_run_shows_gated_cells_win(tmp_path):
    """Gated cells solve the adding problem at T=50, the vanilla RNN does
    not."""
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "apps", "long_range.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    rows = {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.split() and line.split()[0] in ("SimpleRNN", "GRU", "LSTM")
    }
    assert float(rows["GRU"][3]) < 0.01 and float(rows["LSTM"][3]) < 0.01
    assert float(rows["SimpleRNN"][3]) > 0.1
    assert "tflite_max_abs_diff" in out
