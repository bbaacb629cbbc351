"""apps/sentiment.py on a tiny sentiment task made here: train (and
resume after a SIGKILL), evaluate any TSV (its accuracy recomputed from
the predictions), predict stdin, export (slow), and one-line errors for
bad input."""

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

SLOW_SECONDS = 42  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 1218  # (2 cores; the summed memory of its processes)

POSITIVE = ["good", "great", "fine", "lovely"]
NEGATIVE = ["bad", "awful", "dull", "boring"]
FILLER = ["the", "film", "plot", "was", "a", "very", "and", "acting"]


app = load_app("sentiment")


def _examples(n, seed):
    """Filler words and one sentiment word; the label is its polarity."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        label = int(rng.integers(0, 2))
        words = list(rng.choice(FILLER, rng.integers(2, 9)))
        word = rng.choice(POSITIVE if label else NEGATIVE)
        words.insert(int(rng.integers(0, len(words) + 1)), word)
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def _write(path, texts, labels, newline="\n"):
    body = "sentence\tlabel\n" + "".join(f"{t} \t{y}\n" for t, y in zip(texts, labels))
    path.write_bytes(body.replace("\n", newline).encode("utf-8"))
    return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("sst")
    train = _examples(400, 0)
    val = _examples(60, 1)
    return {
        "train": _write(d / "train.tsv", *train),
        "val": _write(d / "dev.tsv", *val, newline="\r\n"),
        "val_examples": val,
    }


def _train_args(data, out, epochs=3, model="bilstm"):
    return [
        "train",
        "--model",
        model,
        "--tiny",
        "--out",
        str(out),
        "--train",
        data["train"],
        "--validation",
        data["val"],
        "--epochs",
        str(epochs),
        "--batch",
        "16",
        "--lr",
        "0.02",
        "--verbose",
        "2",
        "--jit",
        "off",
    ]


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    app.main(_train_args(data, out))
    return out


def _run(argv, capsys, stdin=None, monkeypatch=None):
    return run_app(app, argv, capsys, stdin, monkeypatch)


def test_train_writes_what_rebuilds_the_model(trained):
    assert {
        "config.json",
        "vocabulary.txt",
        "best.weights.h5",
        "history.csv",
        "curves.png",
        "logs",
        "epoch_seconds.csv",
    } <= set(os.listdir(trained))
    config = json.loads((trained / "config.json").read_text())
    model, tokenizer, _ = app.load(str(trained))
    assert model.count_params() == config["parameters"]
    assert tokenizer.vocabulary[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert os.listdir(trained / "logs")


def test_evaluate_any_tsv_ends_with_the_true_accuracy(trained, data, tmp_path, capsys):
    texts, labels = _examples(50, 7)
    path = _write(tmp_path / "other.tsv", texts, labels, newline="\r\n")
    code, out, err = _run(["evaluate", "--model", str(trained), "--data", path], capsys)
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert last.startswith("accuracy = ")
    model, tokenizer, config = app.load(str(trained))
    # the true accuracy from the model's own predictions, one at a time
    predicted = [
        int(np.argmax(model.predict(tokenizer.encode([t]).to_tensor(0).numpy(), verbose=0)))
        for t in texts
    ]
    truth = 100 * np.mean(np.array(predicted) == np.array(labels))
    assert float(last.split("=")[1]) == pytest.approx(truth, abs=0.01)
    assert truth >= 85.0  # the task is learnable in 3 tiny epochs


def test_predict_reads_stdin(trained, capsys, monkeypatch):
    code, out, err = _run(
        ["predict", "--model", str(trained)],
        capsys,
        stdin=b"the film was great\nawful plot\n",
        monkeypatch=monkeypatch,
    )
    assert code == 0, err
    labels = [line.split("\t")[0] for line in out.splitlines()]
    assert labels == ["positive", "negative"]


def test_bad_input_gives_one_line(trained, data, tmp_path, capsys, monkeypatch):
    d = tmp_path
    bad = {
        "missing_column.tsv": (b"sentence\tlabel\ngood film\n", "line 2: expected 2 tab-separated"),
        "label.tsv": (b"sentence\tlabel\ngood film\t5\n", "the label must be an integer in [0, 2)"),
        "empty.tsv": (b"", "is empty"),
        "latin1.tsv": ("sentence\tlabel\ncafé\t1\n".encode("latin-1"), "line 2 is not UTF-8"),
        "header.tsv": (b"text\tlabel\ngood\t1\n", "no column 'sentence'"),
    }
    not_model = d / "not_a_model"
    not_model.mkdir()
    cases = []
    for name, (raw, needle) in bad.items():
        (d / name).write_bytes(raw)
        cases.append((["evaluate", "--model", str(trained), "--data", str(d / name)], needle))
    cases += [
        (["evaluate", "--model", str(not_model), "--data", data["val"]], "not a trained model"),
        (["predict", "--model", str(d / "nowhere")], "no such directory"),
        (_train_args(data, d / "o") + ["--train", str(d / "label.tsv")], "the label must be"),
        (_train_args(data, d / "o") + ["--validation", str(d / "nope")], "no such file"),
        (["export", "--model", str(trained), "--data", str(d / "empty.tsv")], "is empty"),
    ]
    for argv, needle in cases:
        code, _, err = _run(argv, capsys)
        assert_one_line_error(code, err, "sentiment.py", needle)
    code, _, err = _run(
        ["predict", "--model", str(trained)], capsys, stdin=b"good\n\xff\n", monkeypatch=monkeypatch
    )
    assert code == 2 and "stdin line 2 is not UTF-8" in err
    assert_process_error(
        "sentiment", ["evaluate", "--model", str(trained), "--data", str(d / "label.tsv")]
    )


@pytest.mark.slow  # the same callbacks as translate.py's fast resume test
def test_a_killed_training_resumes(data, tmp_path):
    out = tmp_path / "run"
    assert_resumes("sentiment", _train_args(data, out, epochs=2, model="bag"), app.KILL_ENV, out, 2)


@pytest.mark.slow
def test_export_serves_raw_sentences(trained, data, tmp_path, capsys):
    code, out, err = _run(
        [
            "export",
            "--model",
            str(trained),
            "--out",
            str(tmp_path / "e"),
            "--data",
            data["val"],
            "--check",
            "16",
        ],
        capsys,
    )
    assert code == 0, err
    assert "16/16 labels equal to Keras" in out and "XLA-only: none" in out
    report = json.loads((tmp_path / "e" / "report.json").read_text())
    assert report["serve_text_max_abs_diff"] < 1e-4
    assert "vocabulary.txt" in os.listdir(os.path.dirname(report["tflite"]))


def test_evaluate_an_ensemble_averages_probabilities(trained, data, capsys):
    code, out, err = _run(
        ["evaluate", "--model", str(trained), str(trained), "--data", data["val"]], capsys
    )
    assert code == 0, err
    assert "ensemble of 2" in out
    model, tokenizer, config = app.load(str(trained))
    texts, labels = data["val_examples"]
    probs = app.probabilities(model, tokenizer, config, texts)
    truth = 100 * np.mean(probs.argmax(-1) == np.array(labels))
    assert float(out.strip().splitlines()[-1].split("=")[1]) == pytest.approx(truth, abs=0.01)
