"""The installed package, the main job and the benchmark run end to end."""

import importlib.metadata
import os
import subprocess
import sys

import numpy as np
import pytest

import seqkeras

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


def test_main_job_small_run_from_outside_the_checkout(tmp_path):
    # the README's main job (apps/dates.py), run as a user runs it, from
    # another directory, with the installed package
    out = _outside(
        tmp_path,
        os.path.join(ROOT, "apps", "dates.py"),
        "--epochs",
        "1",
        "--train",
        "512",
        "--val",
        "64",
        "--units",
        "16",
        "--out",
        str(tmp_path / "models"),
    )
    assert "held-out exact match" in out
    report = dict(
        line.strip().split(": ", 1)
        for line in out.splitlines()
        if line.startswith("  ") and ": " in line
    )
    scale = max(1.0, float(report["max_abs_output"]))  # the app's rule
    assert float(report["savedmodel_max_abs_diff"]) <= 1e-5 * scale
    assert float(report["tflite_max_abs_diff"]) <= 1e-5 * scale
    assert "Flex" not in report["tflite_ops"]
    assert os.path.exists(tmp_path / "models" / "dates" / "1" / "saved_model.pb")
    assert os.path.exists(tmp_path / "models" / "dates-attention.png")


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


def test_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "recurrent.py"), "bench")
    results = bench.main(["--quick", "--no-torch", "--cells", "gru", "--breakdown"])
    seconds, ratios = results["gru"]
    # ours and Keras, each in its four configurations
    assert len(seconds) == 8 and all(s > 0 for s in seconds.values())
    assert set(ratios) == {"keras"} and ratios["keras"] > 0


def test_attention_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "attention.py"), "abench")
    results = bench.main(["--quick", "--no-torch"])
    assert sorted(results) == [("encoder", 8), ("mha", 8)]
    seconds, ratios = results["encoder", 8]
    assert len(seconds) == 8 and set(ratios) == {"keras-hub"}
    assert results["mha", 8][1]["keras"] > 0


def test_tflite_latency_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "tflite_latency.py"), "tflite_latency")
    rows = bench.main(["--quick"])
    assert [r["threads"] for r in rows] == [1]
    # the three whole-sequence models carry the same weights
    assert rows[0]["max_abs_diff"] < 1e-5
    assert all(rows[0][k] > 0 for k in ("keras_ms", "ours_ms", "fused_ms", "step_ms"))


def test_attention_chunking_experiment_computes_the_same_block():
    bench = _load(os.path.join(ROOT, "benchmarks", "attention_chunking.py"), "chunking")
    x = np.random.default_rng(0).normal(size=(2, 20, 16)).astype("float32")
    one_shot = bench.make_block(None, False, 2, 32)
    want = np.asarray(one_shot(x))
    for remat in (False, True):
        block = bench.make_block(8, remat, 2, 32)  # 3 blocks, the last short
        block(x)
        block.set_weights(one_shot.get_weights())
        np.testing.assert_allclose(np.asarray(block(x)), want, atol=1e-5)
    rates = bench.main(["--quick"])
    assert set(rates) == {"one_shot", "chunk8", "chunk8_remat"}


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
    data = seqkeras.data.shared_data_dir()
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


def test_seq2seq_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "seq2seq.py"), "s2sbench")
    seconds = bench.main(["--quick", "--no-torch"])
    assert sorted(seconds) == sorted(
        f"ours, {p}, {j}" for p in ("float32", "mixed_bfloat16") for j in ("jit", "no jit")
    )
    assert all(s > 0 for s in seconds.values())
    # the FLOPs count grows with the source length only through attention
    assert (
        bench.train_flops_per_token(31) - bench.train_flops_per_token(30)
        == 3 * 2 * 2 * bench.ENC * 2
    )


def test_torch_seq2seq_peer_trains():
    pytest.importorskip("torch", reason="torch (a benchmark peer) is not installed")
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        peers = _load(os.path.join(ROOT, "benchmarks", "torch_peers.py"), "torch_peers")
        # seq2seq.py's batch: its vocabularies, lengths 10 to `steps`
        net, forward, loss, optimizer = peers.build(
            "seq2seq",
            dict(
                batch=4, steps=12, dims=dict(src_vocab=7800, tgt_vocab=5900, emb=8, enc=8, dec=16)
            ),
        )
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    out = forward()
    assert tuple(out.shape) == (4, 12, 5900)
    opt = optimizer(net.parameters(), lr=1e-2)
    first = float(loss(out))
    for _ in range(20):
        opt.zero_grad()
        loss(forward()).backward()
        opt.step()
    assert float(loss(forward())) < first


def test_decoding_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "decoding.py"), "dbench")
    rows = bench.main(["--quick", "--no-keras-hub"])
    assert rows["ours greedy"] > 0 and rows["beam 2"] > 0


@pytest.mark.slow
def test_main_job_default_run_reaches_99_percent(tmp_path):
    """The README's main job as shipped: >= 99% exact match on held-out
    dates, and verified exports."""
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "apps", "dates.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    line = [x for x in out.splitlines() if "exact match" in x][0]
    assert float(line.rsplit(" ", 1)[1].rstrip("%")) >= 99.0, line
    assert "tflite_max_abs_diff" in out


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


def test_readme_python_examples_run(tmp_path, monkeypatch):
    """The README's Python blocks, run in order in one namespace."""
    import re

    with open(os.path.join(ROOT, "README.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in blocks:
        if block.startswith("# needs a running server"):
            continue  # the TF Serving client example
        exec(compile(block, "README.md", "exec"), namespace)
    assert "WHILE" in namespace["op_names"](namespace["flatbuffer"])
