"""apps/forecast.py on a small seasonal series made here: train (and
resume after a SIGKILL, slow), evaluate any CSV of the documented shape
(its MASE recomputed from the model's forecasts and the seasonal-naive
forecast), the exported SavedModel (raw values in and out) equal to Keras
in a process without seqkeras, and one-line errors for bad input."""

import json
import os

import numpy as np
import pytest

from tests.apps.app_checks import (
    assert_one_line_error,
    assert_process_error,
    assert_resumes,
    load_app,
    run_app,
)

SLOW_SECONDS = 32  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 1181  # (2 cores; the summed memory of its processes)

app = load_app("forecast")


def _series(n, seed=0):
    """Monthly: a trend, a 12-month season and noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return 100 + 2 * t + 20 * np.sin(2 * np.pi * t / 12) + rng.normal(0, 2, n)


def _write(path, values, newline="\n", quote=True):
    rows = ['"Month","Value"'] + [
        (
            f'"{1950 + i // 12}-{i % 12 + 1:02d}",{v:.2f}'
            if quote
            else f"{1950 + i // 12}-{i % 12 + 1:02d},{v:.2f}"
        )
        for i, v in enumerate(values)
    ]
    path.write_bytes(newline.join(rows).encode("utf-8"))
    return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("series")
    return {
        "train": _write(d / "train.csv", _series(144), "\r\n"),
        "other": _write(d / "other.csv", _series(120, 1), quote=False),
    }


def _train_args(data, out, model="lstm", epochs=3):
    return [
        "train",
        "--model",
        model,
        "--tiny",
        "--out",
        str(out),
        "--csv",
        data["train"],
        "--window",
        "24",
        "--horizon",
        "6",
        "--epochs",
        str(epochs),
        "--verbose",
        "2",
        "--jit",
        "off",
    ]


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("lstm")
    app.main(_train_args(data, out))
    return out


def _run(argv, capsys):
    return run_app(app, argv, capsys)


def test_train_writes_what_rebuilds_the_model(trained):
    assert {
        "config.json",
        "best.weights.h5",
        "history.csv",
        "curves.png",
        "logs",
        "epoch_seconds.csv",
    } <= set(os.listdir(trained))
    config = json.loads((trained / "config.json").read_text())
    model, _ = app.load(str(trained))
    assert model.count_params() == config["parameters"]
    assert config["season"] == 12 and config["arguments"]["quantiles"] == [0.1, 0.5, 0.9]
    # validation targets stop before the held-back last 20%
    assert config["validation_rows"] == [config["validation_rows"][0], 144 - 29]


def test_evaluate_any_csv_ends_with_the_true_mase(trained, data, tmp_path, capsys):
    plot = tmp_path / "plot.png"
    code, out, err = _run(
        [
            "evaluate",
            "--model",
            str(trained),
            "--csv",
            data["other"],
            "--baseline",
            "none",
            "--plot",
            str(plot),
        ],
        capsys,
    )
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert last.startswith("MASE = ")
    assert os.path.getsize(plot) > 10_000
    # recomputed: origins from row 96 (the last 24 of 120 held back)
    model, config = app.load(str(trained))
    values = _series(120, 1).round(2)
    origins = range(96, 120 - 6 + 1)
    x = np.stack([values[t - 24 : t] for t in origins])[..., None]
    y = np.stack([values[t : t + 6] for t in origins])
    f = np.asarray(model.predict(x.astype("float32"), verbose=0))[:, :, 0, 1]
    naive = np.stack([values[t - 12 : t - 6] for t in origins])
    want = np.abs(y - f).mean() / np.abs(y - naive).mean()
    assert float(last.split("=")[1]) == pytest.approx(want, rel=1e-3)
    assert "seasonal naive" in out and "coverage" in out


def test_evaluate_with_the_statsmodels_baseline(trained, data, capsys):
    code, out, err = _run(["evaluate", "--model", str(trained), "--csv", data["train"]], capsys)
    assert code == 0, err
    line = [r for r in out.splitlines() if "statsmodels" in r and "SARIMA" in r][0]
    mase = float(line.split()[-2])
    assert 0 < mase < 1  # the airline model beats seasonal naive on a trend


def test_exported_forecaster_takes_and_returns_raw_values(trained, tmp_path):
    from seqkeras.export import fresh_signature, saved_model

    model, config = app.load(str(trained))
    path = saved_model(model, str(tmp_path / "sm" / "1"))
    x = (_series(60, 2)[None, -24:, None] * np.array([[[1.0]], [[3.0]]])).astype("float32")
    fresh = np.asarray(fresh_signature(path, "serving_default", series=x)[0]["forecast"])
    want = np.asarray(model.predict(x, verbose=0))
    np.testing.assert_allclose(fresh, want, rtol=1e-5, atol=1e-3)
    # raw units: the second window is 3x the first, so are its forecasts
    np.testing.assert_allclose(fresh[1], 3 * fresh[0], rtol=1e-4)


def test_bad_input_gives_one_line(trained, data, tmp_path, capsys):
    def csv(name, text):
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    good = "".join(f"1950-{i % 12 + 1:02d},{i}\n" for i in range(60))
    missing = csv("missing.csv", "d,v\n" + good + "1955-01,\n")
    text = csv("text.csv", "d,v\n" + good.replace(",7\n", ",seven\n"))
    short = csv("short.csv", "d,v\n" + "".join(good.splitlines(True)[:20]))
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"d,v\n1950-01,1\n1950-02,\xe9\n")
    empty = csv("empty.csv", "")
    cases = [
        (["evaluate", "--model", str(trained), "--csv", missing], ["line 62", "missing"]),
        (["evaluate", "--model", str(trained), "--csv", text], ["line 9", "not a finite number"]),
        (["evaluate", "--model", str(trained), "--csv", short], ["window"]),
        (["evaluate", "--model", str(trained), "--csv", str(latin)], ["UTF-8"]),
        (["evaluate", "--model", str(trained), "--csv", empty], ["empty"]),
        (["evaluate", "--model", str(tmp_path), "--csv", data["train"]], ["not a trained model"]),
        (
            [
                "train",
                "--out",
                str(tmp_path / "m"),
                "--csv",
                short,
                "--window",
                "24",
                "--horizon",
                "6",
            ],
            ["needs at least"],
        ),
    ]
    for argv, needles in cases:
        code, _, err = _run(argv, capsys)
        assert_one_line_error(code, err, "forecast.py", *needles)
    assert_process_error("forecast", ["evaluate", "--model", str(trained), "--csv", missing])


@pytest.mark.parametrize("model", ["transformer", "seq2seq"])
def test_other_models_train_and_evaluate(model, data, tmp_path, capsys):
    out = tmp_path / model
    # the seq2seq run trains under --strategy mirrored (issue 15: the apps
    # take a tf.distribute strategy), with the default --jit auto
    extra = ["--strategy", "mirrored", "--jit", "auto"] * (model == "seq2seq")
    app.main(_train_args(data, out, model=model, epochs=2) + extra)
    code, text, err = _run(
        ["evaluate", "--model", str(out), "--csv", data["other"], "--baseline", "none"], capsys
    )
    assert code == 0, err
    assert text.strip().splitlines()[-1].startswith("MASE = ")


@pytest.mark.slow  # the same callbacks as translate.py's fast resume test
def test_a_killed_training_resumes(data, tmp_path):
    out = tmp_path / "resumed"
    assert_resumes("forecast", _train_args(data, out, epochs=3), app.KILL_ENV, str(out), 3)


@pytest.mark.slow
def test_export_writes_verified_files(trained, tmp_path, capsys):
    code, out, err = _run(["export", "--model", str(trained), "--out", str(tmp_path)], capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["fresh_process_max_diff"] < 1e-2
