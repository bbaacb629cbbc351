"""apps/ner.py on a tiny CoNLL task made here: train (and resume after a
SIGKILL), evaluate any CoNLL file (its F1 recomputed from the
predictions), tag stdin, export (slow), and one-line errors for bad
input."""

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

SLOW_SECONDS = 55  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 1314  # (2 cores; the summed memory of its processes)

PEOPLE = [["Peter", "Blackburn"], ["Anna"], ["John", "Smith"], ["Maria"]]
PLACES = [["Paris"], ["New", "York"], ["Berlin"], ["Lyon"]]
FILLER = ["the", "visit", "to", "said", "in", "met", "today", "a", "."]


app = load_app("ner")


def _sentences(n, seed):
    """Filler words with a person and a place at random positions."""
    rng = np.random.default_rng(seed)
    sentences, tags = [], []
    for _ in range(n):
        words, labels = [], []
        for _ in range(int(rng.integers(3, 9))):
            words.append(str(rng.choice(FILLER)))
            labels.append("O")
        for names, kind in ((PEOPLE, "PER"), (PLACES, "LOC")):
            name = names[int(rng.integers(len(names)))]
            at = int(rng.integers(0, len(words) + 1))
            words[at:at] = name
            labels[at:at] = [f"B-{kind}"] + [f"I-{kind}"] * (len(name) - 1)
        sentences.append(words)
        tags.append(labels)
    return sentences, tags


def _write(path, sentences, tags, newline="\n"):
    lines = ["-DOCSTART- -X- -X- O", ""]
    for words, labels in zip(sentences, tags):
        lines += [f"{w} NN O {t}" for w, t in zip(words, labels)] + [""]
    path.write_bytes("\n".join(lines).replace("\n", newline).encode())
    return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("conll")
    return {
        "train": _write(d / "train.txt", *_sentences(300, 0)),
        "val": _write(d / "valid.txt", *_sentences(40, 1), "\r\n"),
    }


def _train_args(data, out, epochs=4):
    return [
        "train",
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
        "words",
        "characters",
        "tags.txt",
        "best.weights.h5",
        "history.csv",
        "curves.png",
        "logs",
    } <= set(os.listdir(trained))
    config = json.loads((trained / "config.json").read_text())
    model, features, tags, _ = app.load(str(trained))
    assert model.count_params() == config["parameters"]
    assert tags[:2] == ["<pad>", "O"]
    with open(trained / "history.csv") as f:
        assert "val_f1" in f.readline()


def test_evaluate_any_conll_file_ends_with_the_true_f1(trained, tmp_path, capsys):
    sentences, tags = _sentences(30, 5)
    path = _write(tmp_path / "other.txt", sentences, tags)
    code, out, err = _run(["evaluate", "--model", str(trained), "--data", path], capsys)
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert last.startswith("F1 = ")
    # the true F1 from the model's Viterbi tags, one sentence at a time,
    # counted here: an entity is right when its type and both ends are
    model, features, vocabulary, _ = app.load(str(trained))
    hits = predicted_n = true_n = 0
    for words, truth in zip(sentences, tags):
        feats = {k: v.numpy() for k, v in features(np.array([words], object)).items()}
        ids = np.asarray(model.predict(feats, verbose=0)["tags"])[0]
        pred = [vocabulary[k] for k in ids]
        t_spans = set(_spans(truth))
        p_spans = set(_spans(pred))
        hits += len(t_spans & p_spans)
        predicted_n += len(p_spans)
        true_n += len(t_spans)
    precision, recall = hits / max(1, predicted_n), hits / true_n
    f1 = 100 * 2 * precision * recall / max(1e-12, precision + recall)
    assert float(last.split("=")[1]) == pytest.approx(f1, abs=0.01)
    assert f1 >= 80.0  # learnable from casing, characters and words
    assert "PER" in out and "LOC" in out


def _spans(tags):
    """IOB2 spans written out plainly (B- starts, I- of the same type
    continues): the tiny task only has well-formed tags."""
    spans, start = [], None
    for i, t in enumerate(tags + ["O"]):
        if start is not None and not (t.startswith("I-") and t[2:] == tags[start][2:]):
            spans.append((tags[start][2:], start, i))
            start = None
        if t.startswith("B-") or (t.startswith("I-") and start is None):
            start = i
    return spans


def test_tag_reads_stdin(trained, capsys, monkeypatch):
    code, out, err = _run(
        ["tag", "--model", str(trained)],
        capsys,
        stdin=b"Anna met the visit in Berlin today .\n",
        monkeypatch=monkeypatch,
    )
    assert code == 0, err
    assert "PER: Anna" in out and "LOC: Berlin" in out


def test_split_words():
    from seqkeras.data import split_words

    assert split_words('"Hello," said (EU) Germany\'s team.') == [
        '"',
        "Hello",
        ",",
        '"',
        "said",
        "(",
        "EU",
        ")",
        "Germany",
        "'s",
        "team",
        ".",
    ]


def test_bad_input_gives_one_line(trained, data, tmp_path, capsys, monkeypatch):
    d = tmp_path
    bad = {
        "columns.txt": (b"EU NNP B-ORG\nrejects O\n", "line 2: expected 3 columns"),
        "one.txt": (b"EU\n", "line 1: expected a token and its tag"),
        "empty.txt": (b"", "has no tagged sentence"),
        "latin1.txt": ("café NN O\n".encode("latin-1"), "line 1 is not UTF-8"),
        "tag.txt": (b"Paris NN B-CITY\n", "tags the model does not know"),
    }
    not_model = d / "not_a_model"
    not_model.mkdir()
    cases = []
    for name, (raw, needle) in bad.items():
        (d / name).write_bytes(raw)
        cases.append((["evaluate", "--model", str(trained), "--data", str(d / name)], needle))
    cases += [
        (["evaluate", "--model", str(not_model), "--data", data["val"]], "not a trained model"),
        (["tag", "--model", str(d / "nowhere")], "no such directory"),
        (_train_args(data, d / "o") + ["--train", str(d / "columns.txt")], "expected 3 columns"),
        (_train_args(data, d / "o2") + ["--validation", str(d / "tag.txt")], "B-CITY"),
        (
            ["export", "--model", str(trained), "--data", str(d / "empty.txt")],
            "has no tagged sentence",
        ),
    ]
    for argv, needle in cases:
        code, _, err = _run(argv, capsys)
        assert_one_line_error(code, err, "ner.py", needle)
    code, _, err = _run(
        ["tag", "--model", str(trained)], capsys, stdin=b"Anna\n\xff\n", monkeypatch=monkeypatch
    )
    assert code == 2 and "stdin line 2 is not UTF-8" in err
    assert_process_error(
        "ner", ["evaluate", "--model", str(trained), "--data", str(d / "columns.txt")]
    )


@pytest.mark.slow  # the same callbacks as translate.py's fast resume test
def test_a_killed_training_resumes(data, tmp_path):
    out = tmp_path / "run"
    assert_resumes("ner", _train_args(data, out, epochs=2), app.KILL_ENV, out, 2)


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
    assert "16/16 tag sequences (Viterbi) and 16/16 entity span" in out
    assert "XLA-only: none" in out
    report = json.loads((tmp_path / "e" / "report.json").read_text())
    assert {"words_vocabulary.txt", "characters_vocabulary.txt", "tags.txt"} <= set(
        os.listdir(os.path.dirname(report["tflite"]))
    )
