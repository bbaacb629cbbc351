"""`--init DIR` in apps/sentiment.py and apps/ner.py: fine-tuning a BERT
checkpoint (a tiny one made here, Hugging Face layout) writes a model
directory that `evaluate` and `predict`/`tag` use as any other; the
evaluate line equals the accuracy / F1 recomputed from the predictions;
bad `--init` input is a one-line error."""

import json
import os
import warnings

import numpy as np
import pytest

from tests.apps.app_checks import assert_one_line_error, load_app, run_app
from tests.apps.test_sentiment_app import _examples, _write
from tests.pretrained_checks import tiny_bert_directory

pytest.importorskip("transformers")
pytest.importorskip("torch")

sentiment = load_app("sentiment")
ner = load_app("ner")

PEOPLE = ["Peter", "Anna", "John", "Maria"]
PLACES = ["Paris", "Berlin", "London", "Madrid"]
OTHER = ["visits", "likes", "sees", "the", "city", "of", "today", "."]


def _conll(n, seed):
    rng = np.random.default_rng(seed)
    rows = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(n):
        words, tags = [], []
        for _ in range(int(rng.integers(3, 8))):
            kind = rng.integers(0, 3)
            if kind == 0:
                words.append(str(rng.choice(PEOPLE)))
                tags.append("B-PER")
            elif kind == 1:
                words.append(str(rng.choice(PLACES)))
                tags.append("B-LOC")
            else:
                words.append(str(rng.choice(OTHER)))
                tags.append("O")
        rows += [f"{w} X X {t}" for w, t in zip(words, tags)] + [""]
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    texts, _ = _examples(200, 0)
    corpus = texts + [" ".join(PEOPLE + PLACES + OTHER)] * 5
    return tiny_bert_directory(str(tmp_path_factory.mktemp("ckpt")), corpus, vocab_size=150)


def _common(out, epochs=3):
    return ["--out", str(out), "--epochs", str(epochs), "--batch", "16", "--lr", "3e-3"] + [
        "--verbose",
        "2",
        "--jit",
        "off",
    ]


def test_sentiment_init_trains_evaluates_and_predicts(checkpoint, tmp_path, capsys):
    train = _write(tmp_path / "train.tsv", *_examples(300, 0))
    val_texts, val_labels = _examples(60, 1)
    val = _write(tmp_path / "dev.tsv", val_texts, val_labels)
    out = tmp_path / "model"
    argv = ["train", "--init", checkpoint, "--train", train, "--validation", val]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, _, err = run_app(sentiment, argv + _common(out), capsys)
    assert code == 0, err
    # quiet: no warning a user cannot act on (e.g. Keras' "Your input ran
    # out of data" at every validation of a dataset of unknown length)
    shown = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))
    ]
    assert not shown, shown
    assert "warning" not in err.lower(), err
    config = json.loads((out / "config.json").read_text())
    assert config["builder"] == "pretrained.bert_classifier" and config["init"] == checkpoint
    assert {"vocab.txt", "bert_tokenizer.json", "best.weights.h5"} <= set(os.listdir(out))
    code, printed, err = run_app(
        sentiment, ["evaluate", "--model", str(out), "--data", val], capsys
    )
    assert code == 0, err
    model, tokenizer, _ = sentiment.load(str(out))
    predicted = [
        int(np.argmax(model.predict(tokenizer.encode([t]).to_tensor(0).numpy(), verbose=0)))
        for t in val_texts
    ]
    truth = 100 * np.mean(np.array(predicted) == np.array(val_labels))
    assert float(printed.strip().splitlines()[-1].split("=")[1]) == pytest.approx(truth, abs=0.01)
    assert truth >= 80.0  # one polarity word decides: learnable from a random tiny BERT


def test_ner_init_trains_and_evaluates(checkpoint, tmp_path, capsys):
    train, val = tmp_path / "train.txt", tmp_path / "valid.txt"
    train.write_text(_conll(200, 0))
    val.write_text(_conll(40, 1))
    out = tmp_path / "tagger"
    argv = ["train", "--init", checkpoint, "--train", str(train), "--validation", str(val)]
    code, _, err = run_app(ner, argv + _common(out, epochs=4), capsys)
    assert code == 0, err
    code, printed, err = run_app(ner, ["evaluate", "--model", str(out), "--data", str(val)], capsys)
    assert code == 0, err
    f1 = float(printed.strip().splitlines()[-1].split("=")[1])
    assert f1 >= 80.0  # names and places are fixed words
    model, features, vocabulary, _ = ner.load(str(out))
    assert type(model).__name__ == "PretrainedCRFTagger"


def test_bad_init_is_a_one_line_error(checkpoint, tmp_path, capsys):
    train = _write(tmp_path / "train.tsv", *_examples(20, 0))
    base = ["train", "--train", train, "--validation", train, "--out", str(tmp_path / "m")]
    code, _, err = run_app(sentiment, base + ["--init", str(tmp_path / "none")], capsys)
    assert_one_line_error(code, err, "sentiment.py", "--init", "no such directory")
    code, _, err = run_app(sentiment, base + ["--init", checkpoint, "--model", "gru"], capsys)
    assert_one_line_error(code, err, "sentiment.py", "--init DIR sets --model", "pretrained")
