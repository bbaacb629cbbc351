"""apps/charlm.py on a tiny text made here: train (and resume after a
SIGKILL, slow), evaluate any UTF-8 file (its loss recomputed from the
model's logits character by character), sample with every strategy
(greedy equals step-by-step argmax), the streaming step model's
per-character loss equal to the full pass, and one-line errors for bad
input."""

import json
import math
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

SLOW_SECONDS = 47  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 1237  # (2 cores; the summed memory of its processes)

app = load_app("charlm")
TEXT = "".join(f"abc{d} hello, world!\n" for d in "0123456789" * 12)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("text")
    path = d / "input.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


def _train_args(data, out, model="lstm", epochs=2):
    return [
        "train",
        "--model",
        model,
        "--tiny",
        "--out",
        str(out),
        "--text",
        data,
        "--epochs",
        str(epochs),
        "--steps-per-epoch",
        "10",
        "--steps-per-execution",
        "5",
        "--block",
        "16",
        "--batch",
        "8",
        "--warmup",
        "5",
        "--lr",
        "0.01",
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


def _run(argv, capsys, stdin=None, monkeypatch=None):
    return run_app(app, argv, capsys, stdin, monkeypatch)


def test_train_writes_what_rebuilds_the_model(trained):
    assert {
        "config.json",
        "vocabulary.json",
        "best.weights.h5",
        "history.csv",
        "curves.png",
        "logs",
        "epoch_seconds.csv",
    } <= set(os.listdir(trained))
    config = json.loads((trained / "config.json").read_text())
    model, vocabulary, _ = app.load(str(trained))
    assert model.count_params() == config["parameters"]
    assert "".join(vocabulary.characters) == "".join(sorted(set(TEXT[: int(0.9 * len(TEXT))])))
    header = (trained / "history.csv").read_text().splitlines()[0]
    assert "val_loss" in header and "val_bpc" in header


def _reference_loss(model, vocabulary, text, block):
    """Mean -log p of each character after the first, windows of `block`
    predictions, softmax by hand in float64."""
    ids = [vocabulary.tokens.index(c) if c in vocabulary.characters else 3 for c in text]
    total, n = 0.0, 0
    for start in range(0, len(ids) - 1, block):
        x = np.array([ids[start : start + block]], "int32")
        y = ids[start + 1 : start + block + 1]
        logits = np.asarray(model(x[:, : len(y)]), "float64")[0]
        for t, target in enumerate(y):
            z = logits[t]
            total += math.log(np.exp(z - z.max()).sum()) + z.max() - z[target]
            n += 1
    return total / n


def test_evaluate_any_text_ends_with_the_true_loss(trained, tmp_path, capsys):
    other = tmp_path / "other.txt"
    other.write_text("hello, abc9 world!\r\nzebra", encoding="utf-8")
    code, out, _ = _run(["evaluate", "--model", str(trained), "--text", str(other)], capsys)
    assert code == 0
    last = out.strip().splitlines()[-1]
    assert last.startswith("loss = ")
    model, vocabulary, config = app.load(str(trained))
    want = _reference_loss(model, vocabulary, other.read_text(encoding="utf-8"), config["block"])
    assert float(last.split("=")[1]) == pytest.approx(want, abs=1e-4)
    assert "not in the vocabulary" in out


def test_sample_strategies(trained, capsys):
    import keras

    model, vocabulary, _ = app.load(str(trained))
    code, out, _ = _run(
        [
            "sample",
            "--model",
            str(trained),
            "--prompt",
            "abc",
            "--length",
            "6",
            "--strategy",
            "greedy",
        ],
        capsys,
    )
    assert code == 0
    text = out.strip("\n")
    assert text.startswith("abc") and len(text) == 9
    ids = list(vocabulary.encode_text("abc"))
    for _ in range(6):  # greedy: the argmax of the full pass each step
        logits = keras.ops.convert_to_numpy(model(np.array([ids])))
        ids.append(int(np.argmax(logits[0, -1])))
    assert text == vocabulary.decode(np.array([ids]))[0]
    for strategy in ("top_k", "top_p", "temperature"):
        code, out, _ = _run(
            [
                "sample",
                "--model",
                str(trained),
                "--prompt",
                "ab",
                "--length",
                "5",
                "--strategy",
                strategy,
                "--samples",
                "2",
            ],
            capsys,
        )
        assert code == 0 and out.count("--- sample") == 2


def test_step_model_equals_the_full_pass(trained, tmp_path):
    """The streaming TFLite step model (one character and the states in)
    gives the full pass's logits and the same loss over a text."""
    model, vocabulary, config = app.load(str(trained))
    text = TEXT[-200:]
    sample = vocabulary.encode_text(text[:16])[None]
    report = app.streaming(model, vocabulary, config, str(tmp_path), text, sample, check=120)
    assert report["step_float32_diff"] < 1e-4
    assert report["step_float32_loss"] == pytest.approx(report["step_keras_loss"], abs=1e-4)
    assert report["step_float16_loss"] == pytest.approx(report["step_keras_loss"], abs=0.05)
    assert os.path.isfile(tmp_path / "streaming" / "vocabulary.json")


def test_bad_input_gives_one_line(trained, data, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    binary = tmp_path / "latin1.txt"
    binary.write_bytes("caf\xe9".encode("latin-1"))
    cases = [
        (
            ["evaluate", "--model", str(trained), "--text", str(empty)],
            ["empty.txt", "0 characters"],
        ),
        (["evaluate", "--model", str(trained), "--text", str(binary)], ["not UTF-8"]),
        (["evaluate", "--model", str(trained), "--text", "/nonexistent"], ["no such file"]),
        (["evaluate", "--model", str(tmp_path), "--text", data], ["not a trained model"]),
        (["sample", "--model", str(trained), "--prompt", "XYZ"], ["does not know"]),
        (
            [
                "sample",
                "--model",
                str(trained),
                "--prompt",
                "ab",
                "--strategy",
                "top_k",
                "--top-k",
                "500",
            ],
            ["top_k"],
        ),
        (["train", "--out", str(tmp_path / "m"), "--text", str(empty)], ["0 characters"]),
        (
            [
                "train",
                "--out",
                str(tmp_path / "m"),
                "--text",
                data,
                "--model",
                "transformer",
                "--units",
                "8",
            ],
            ["--units"],
        ),
        (["evaluate", "--model", str(trained), "--text", data, "--tail", "2"], ["--tail"]),
    ]
    for argv, needles in cases:
        code, _, err = _run(argv, capsys)
        assert_one_line_error(code, err, "charlm.py", *needles)
    assert_process_error("charlm", ["evaluate", "--model", str(trained), "--text", str(binary)])


def test_a_transformer_trains_and_samples(data, tmp_path, capsys):
    out = tmp_path / "tf"
    app.main(_train_args(data, out, model="transformer", epochs=1))
    capsys.readouterr()
    code, text, _ = _run(
        ["sample", "--model", str(out), "--prompt", "ab", "--length", "5", "--strategy", "greedy"],
        capsys,
    )
    assert code == 0 and text.startswith("ab") and len(text) == 8
    code, _, err = _run(["sample", "--model", str(out), "--prompt", "ab", "--length", "50"], capsys)
    assert_one_line_error(code, err, "charlm.py", "context")


@pytest.mark.slow  # the same callbacks as translate.py's fast resume test
def test_a_killed_training_resumes(data, tmp_path):
    out = tmp_path / "resumed"
    assert_resumes("charlm", _train_args(data, out, epochs=3), app.KILL_ENV, str(out), 3)


@pytest.mark.slow
def test_export_writes_verified_files(trained, tmp_path, capsys):
    code, out, err = _run(
        [
            "export",
            "--model",
            str(trained),
            "--out",
            str(tmp_path),
            "--length",
            "12",
            "--check",
            "50",
        ],
        capsys,
    )
    assert code == 0, err
    assert "1/1 continuations equal" in out or "continuations equal" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["step_float32_diff"] < 1e-4
