"""apps/translate.py on tiny data made here: train (and resume after a
SIGKILL), evaluate on an arbitrary file pair, translate stdin, export, and
one-line errors for bad input to every subcommand."""

import json
import os

import pytest

from tests.apps.app_checks import (
    assert_one_line_error,
    assert_process_error,
    assert_resumes,
    load_app,
    run_app,
)

SLOW_SECONDS = 79  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 2091  # (2 cores; the summed memory of its processes)

NUMBERS = [
    ("eins", "one"),
    ("zwei", "two"),
    ("drei", "three"),
    ("vier", "four"),
    ("fünf", "five"),
    ("sechs", "six"),
]


app = load_app("translate")


def _pairs(n, seed):
    """German number words -> English, e.g. 'zwei eins.' -> 'two one.'"""
    import numpy as np

    rng = np.random.default_rng(seed)
    de, en = [], []
    for _ in range(n):
        idx = rng.integers(0, len(NUMBERS), rng.integers(1, 5))
        de.append(" ".join(NUMBERS[i][0] for i in idx).capitalize() + ".")
        en.append(" ".join(NUMBERS[i][1] for i in idx).capitalize() + ".")
    return de, en


def _write(path, lines, raw=None):
    path.write_bytes(raw if raw is not None else "".join(s + "\n" for s in lines).encode("utf-8"))
    return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    de, en = _pairs(160, 0)
    vde, ven = _pairs(20, 1)
    return {
        "train_de": _write(d / "train.de", de),
        "train_en": _write(d / "train.en", en),
        "val_de": _write(d / "val.de", vde),
        "val_en": _write(d / "val.en", ven),
        "dir": d,
    }


def _train_args(data, out, epochs=2, model="rnn-attention"):
    return [
        "train",
        "--model",
        model,
        "--tiny",
        "--out",
        str(out),
        "--train-source",
        data["train_de"],
        "--train-target",
        data["train_en"],
        "--val-source",
        data["val_de"],
        "--val-target",
        data["val_en"],
        "--epochs",
        str(epochs),
        "--vocabulary-size",
        "60",
        "--batch",
        "16",
        "--jit",
        "off",
        "--verbose",
        "2",
        "--lr",
        "0.01",
    ]


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    app.main(_train_args(data, out, epochs=3))
    return out


def _run(argv, capsys, stdin=None, monkeypatch=None):
    return run_app(app, argv, capsys, stdin, monkeypatch)


def test_train_writes_what_rebuilds_the_model(trained):
    names = set(os.listdir(trained))
    assert {
        "config.json",
        "best.weights.h5",
        "history.csv",
        "curves.png",
        "logs",
        "source",
        "target",
    } <= names
    config = json.loads((trained / "config.json").read_text())
    assert config["builder"] == "recurrent_seq2seq"
    model, src, tgt, _ = app.load(str(trained))
    assert model.count_params() == config["parameters"]
    assert src.vocabulary[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert os.listdir(trained / "logs")  # TensorBoard event files


def test_evaluate_an_arbitrary_pair_ends_with_bleu(trained, tmp_path, capsys):
    import sacrebleu

    de = _write(tmp_path / "x.txt", ["Drei eins.", "Vier vier zwei."])
    en = _write(tmp_path / "y.txt", ["Three one.", "Four four two."])
    hyp = tmp_path / "hyp.txt"
    code, out, _ = _run(
        [
            "evaluate",
            "--model",
            str(trained),
            "--source",
            de,
            "--reference",
            en,
            "--beam",
            "2",
            "--output",
            str(hyp),
        ],
        capsys,
    )
    assert code == 0
    last = out.strip().splitlines()[-1]
    assert last.startswith("BLEU = ")
    hypotheses = hyp.read_text(encoding="utf-8").splitlines()
    expected = sacrebleu.corpus_bleu(hypotheses, [["Three one.", "Four four two."]]).score
    assert float(last.split("=")[1]) == pytest.approx(expected, abs=0.01)
    assert "case:mixed" in out and "case:lc" in out and "chrF" in out


def test_translate_reads_stdin(trained, capsys, monkeypatch):
    code, out, err = _run(
        ["translate", "--model", str(trained)],
        capsys,
        stdin="Zwei.\nEins drei.\n".encode(),
        monkeypatch=monkeypatch,
    )
    assert code == 0, err
    model, src, tgt, config = app.load(str(trained))
    assert out.splitlines() == app.translate_texts(model, src, tgt, config, ["Zwei.", "Eins drei."])


def _one_line_error(code, err, *needles):
    assert_one_line_error(code, err, "translate.py", *needles)


def test_bad_input_to_every_subcommand(trained, data, tmp_path, capsys, monkeypatch):
    d = tmp_path
    good_de, good_en = data["val_de"], data["val_en"]
    short = _write(d / "short.en", ["One."])
    empty = _write(d / "empty.en", [], raw=b"One.\n\nTwo.\n" + b"Three.\n" * 18)
    latin1 = _write(d / "latin1.de", [], raw="Fünf.\n".encode("latin-1") * 20)
    missing = str(d / "missing.de")
    not_model = d / "not_a_model"
    not_model.mkdir()
    model = str(trained)
    cases = [
        (
            ["evaluate", "--model", model, "--source", missing, "--reference", good_en],
            "no such file",
        ),
        (
            ["evaluate", "--model", model, "--source", good_de, "--reference", short],
            "not line-aligned",
        ),
        (
            ["evaluate", "--model", model, "--source", good_de, "--reference", empty],
            "line 2 is empty",
        ),
        (
            ["evaluate", "--model", model, "--source", latin1, "--reference", good_en],
            "line 1 is not UTF-8",
        ),
        (
            ["evaluate", "--model", str(not_model), "--source", good_de, "--reference", good_en],
            "not a trained model",
        ),
        (["export", "--model", str(not_model)], "not a trained model"),
        (
            ["export", "--model", model, "--source", good_de, "--reference", short],
            "not line-aligned",
        ),
        (["translate", "--model", str(d / "nowhere")], "no such directory"),
        (_train_args(data, d / "o")[:-12] + ["--train-target", short], "not line-aligned"),
        (_train_args(data, d / "o") + ["--val-source", latin1], "not UTF-8"),
        (_train_args(data, d / "o") + ["--train-source", missing], "no such file"),
        (_train_args(data, d / "o") + ["--val-target", empty], "is empty"),
        (
            [
                "vocabulary",
                "--out",
                str(d / "v"),
                "--train-source",
                latin1,
                "--train-target",
                good_en,
            ],
            "not UTF-8",
        ),
    ]
    for argv, needle in cases:
        code, _, err = _run(argv, capsys)
        _one_line_error(code, err, needle)
    for stdin, needle in (
        (b"Eins.\n\nZwei.\n", "stdin line 2 is empty"),
        (b"Eins.\n\xfcnf.\n", "stdin line 2 is not UTF-8"),
    ):
        code, _, err = _run(
            ["translate", "--model", model], capsys, stdin=stdin, monkeypatch=monkeypatch
        )
        _one_line_error(code, err, needle)
    # as a process: one line on stderr, no traceback, exit status 2
    assert_process_error(
        "translate",
        ["evaluate", "--model", str(not_model), "--source", good_de, "--reference", good_en],
    )


def test_a_killed_training_resumes_where_it_stopped(data, tmp_path):
    """BackupAndRestore: SIGKILL after epoch 1, the same command again
    runs epochs 2-3 only and the history has three rows."""
    out = tmp_path / "run"
    assert_resumes("translate", _train_args(data, out, epochs=3), app.KILL_ENV, out, 3)


@pytest.mark.slow
def test_export_serves_the_same_strings(trained, data, tmp_path, capsys):
    code, out, err = _run(
        [
            "export",
            "--model",
            str(trained),
            "--out",
            str(tmp_path / "e"),
            "--source",
            data["val_de"],
            "--reference",
            data["val_en"],
            "--check",
            "8",
            "--beam",
            "2",
        ],
        capsys,
    )
    assert code == 0, err
    assert "8/8 strings equal to Keras" in out
    assert "XLA-only: none" in out
    # the XLA-compiled variant serves the same strings, and the batching file
    assert "translate signature (XLA-compiled) in a process without seqkeras: 8/8" in out
    report = json.loads((tmp_path / "e" / "report.json").read_text())
    assert report["translate_xla_fresh_process_equal"] == "8/8"
    batching = (tmp_path / "e" / "batching_parameters.txt").read_text()
    assert "max_batch_size { value: 32 }" in batching
    report = json.loads((tmp_path / "e" / "report.json").read_text())
    assert report["tflite_step_max_abs_diff"] < 1e-4
    tflite_dir = os.path.dirname(report["tflite"])
    assert {"source_vocabulary.txt", "target_vocabulary.txt", "step.tflite", "model.tflite"} <= set(
        os.listdir(tflite_dir)
    )
