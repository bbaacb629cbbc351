"""apps/pretrain.py on a small text made here: each objective trains a
tiny model over one shared vocabulary, `evaluate` ends with the perplexity
that the model's own loss gives, and sentiment.py's `--init` takes each
kind of run (a BERT or GPT-2 checkpoint, a biLM, a span-corruption
seq2seq); bad input gives one line."""

import json
import math
import os

import numpy as np
import pytest

from tests.apps.app_checks import assert_one_line_error, load_app, run_app
from tests.apps.test_sentiment_app import _examples, _write

SLOW_SECONDS = 255  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 2603  # (2 cores; the summed memory of its processes)

# Every test here needs the four pretrained runs (the `runs` fixture, about
# 40 s): the whole module is slow, so that .ci/run makes them once, not in
# the fast suite and again in the slow tests.
pytestmark = pytest.mark.slow

app = load_app("pretrain")
sentiment = load_app("sentiment")


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    d = tmp_path_factory.mktemp("text")
    lines = _examples(600, 11)[0]
    path = d / "text.txt"
    path.write_text("\n".join(lines[:500]) + "\n\n", encoding="utf-8")  # a blank line too
    val = d / "val.txt"
    val.write_text("\n".join(lines[500:]) + "\n", encoding="utf-8")
    return {"train": str(path), "val": str(val)}


def _pretrain(objective, text, out, vocabulary=None):
    argv = ["train", "--objective", objective, "--tiny", "--out", str(out)]
    argv += ["--text", text["train"], "--validation", text["val"], "--epochs", "1"]
    argv += ["--batch", "32", "--max-length", "32", "--vocab-size", "200", "--lr", "5e-3"]
    argv += ["--warmup", "10", "--verbose", "2", "--jit", "off"]
    if vocabulary:
        argv += ["--vocabulary", str(vocabulary)]
    app.main(argv)
    return out


@pytest.fixture(scope="module")
def runs(text, tmp_path_factory):
    mlm = _pretrain("mlm", text, tmp_path_factory.mktemp("mlm"))
    out = {"mlm": mlm}
    for objective in ("causal", "bilm", "span"):
        out[objective] = _pretrain(objective, text, tmp_path_factory.mktemp(objective), mlm)
    return out


def test_every_objective_writes_a_run_over_one_vocabulary(runs):
    vocabulary = (runs["mlm"] / "vocab.txt").read_text()
    for objective, out in runs.items():
        config = json.loads((out / "config.json").read_text())
        assert config["objective"] == objective
        assert {"best.weights.h5", "history.csv", "curves.png", "logs"} <= set(os.listdir(out))
        assert (out / "vocab.txt").read_text() == vocabulary  # learned once, reused
        history = (out / "history.csv").read_text().splitlines()
        assert len(history) == 2  # header + 1 epoch
    for objective, model_type in (("mlm", "bert"), ("causal", "gpt2")):
        hf = json.loads((runs[objective] / "checkpoint" / "config.json").read_text())
        assert hf["model_type"] == model_type
        assert (runs[objective] / "checkpoint" / "model.safetensors").is_file()


@pytest.mark.parametrize("objective", ["causal", "bilm"])
def test_evaluate_ends_with_the_models_perplexity(runs, text, objective, capsys):
    code, out, err = run_app(
        app, ["evaluate", "--model", str(runs[objective]), "--text", text["val"]], capsys
    )
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert last.startswith("perplexity = ")
    # recomputed here: the mean next-token (and previous-token) cross-entropy
    from seqkeras.data import BertTokenizer

    model, _ = app.common.load(str(runs[objective]))
    tokenizer = BertTokenizer.load(str(runs[objective]))
    lines = [x for x in open(text["val"], encoding="utf-8").read().splitlines() if x.strip()]
    total, count = 0.0, 0
    for row in tokenizer.encode(lines).to_list():
        ids = np.array([row])
        out = model(ids)
        pairs = [("forward", out["forward"], 1)] if isinstance(out, dict) else [(None, out, 1)]
        if isinstance(out, dict):
            pairs.append(("backward", out["backward"], -1))
        for _, logits, shift in pairs:
            logits = np.asarray(logits, "float64")[0]
            logp = logits - logits.max(-1, keepdims=True)
            logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
            n = len(row)
            steps = range(n - 1) if shift == 1 else range(1, n)
            for t in steps:
                total -= logp[t, row[t + shift]]
                count += 1
    assert float(last.split("=")[1]) == pytest.approx(math.exp(total / count), rel=0.02)


@pytest.mark.slow  # 4 fine-tunings (about a minute)
def test_sentiment_init_takes_every_kind_of_run(runs, tmp_path, capsys):
    train = _write(tmp_path / "train.tsv", *_examples(120, 1))
    dev = _write(tmp_path / "dev.tsv", *_examples(30, 2))
    inits = {
        "pretrained": runs["mlm"] / "checkpoint",
        "pretrained-gpt2": runs["causal"] / "checkpoint",
        "elmo": runs["bilm"],
        "text-to-text": runs["span"],
    }
    for model, init in inits.items():
        out = tmp_path / model
        argv = ["train", "--init", str(init), "--out", str(out), "--tiny", "--epochs", "1"]
        argv += ["--train", train, "--validation", dev, "--verbose", "2", "--jit", "off"]
        code, printed, err = run_app(sentiment, argv, capsys)
        assert code == 0, (model, err)
        assert json.loads((out / "config.json").read_text())["model"] == model
        code, printed, err = run_app(
            sentiment, ["evaluate", "--model", str(out), "--data", dev], capsys
        )
        assert code == 0, (model, err)
        assert printed.strip().splitlines()[-1].startswith("accuracy = ")
        if model == "text-to-text":
            assert "outputs other than a label word:" in printed
        if model == "elmo":  # the biLM stayed frozen: its weights are the pretrained ones
            trained, _ = app.common.load(str(runs["bilm"]))
            tuned, _, _ = sentiment.load(str(out))
            layer = trained.get_layer("bilm_forward_lstm_0")
            for a, b in zip(layer.get_weights(), tuned.get_layer(layer.name).get_weights()):
                np.testing.assert_array_equal(a, b)


def test_bad_input_gives_one_line(runs, text, tmp_path, capsys):
    base = ["train", "--tiny", "--out", str(tmp_path / "x"), "--text", text["train"]]
    code, _, err = run_app(
        app, base + ["--objective", "mlm", "--init", str(runs["causal"] / "checkpoint")], capsys
    )
    assert_one_line_error(code, err, "pretrain.py", "--init", "gpt2")
    code, _, err = run_app(
        app, base + ["--objective", "bilm", "--text", str(tmp_path / "none.txt")], capsys
    )
    assert_one_line_error(code, err, "pretrain.py", "none.txt")
    code, _, err = run_app(app, ["evaluate", "--model", str(tmp_path)], capsys)
    assert_one_line_error(code, err, "pretrain.py", "config.json")
    ner = load_app("ner")
    code, _, err = run_app(
        ner, ["train", "--init", str(runs["span"]), "--out", str(tmp_path / "n")], capsys
    )
    assert_one_line_error(code, err, "ner.py", "span", "bert")


@pytest.mark.slow
def test_ner_init_adds_elmo_or_fine_tunes_gpt2(runs, tmp_path, capsys):
    from tests.apps.test_ner_app import _sentences
    from tests.apps.test_ner_app import _write as write_conll

    ner = load_app("ner")
    train = write_conll(tmp_path / "train.txt", *_sentences(80, 0))
    dev = write_conll(tmp_path / "dev.txt", *_sentences(20, 1))
    for model, init in (("elmo", runs["bilm"]), ("pretrained-gpt2", runs["causal"] / "checkpoint")):
        out = tmp_path / model
        argv = ["train", "--init", str(init), "--out", str(out), "--tiny", "--epochs", "1"]
        argv += ["--train", train, "--validation", dev, "--verbose", "2", "--jit", "off"]
        code, printed, err = run_app(ner, argv, capsys)
        assert code == 0, (model, err)
        code, printed, err = run_app(ner, ["evaluate", "--model", str(out), "--data", dev], capsys)
        assert code == 0, (model, err)
        assert printed.strip().splitlines()[-1].startswith("F1 = ")
    tagger, features, _, config = ner.load(str(tmp_path / "elmo"))
    assert {"elmo_ids", "word_starts", "char_ids", "casing_ids", "token_ids"} == set(
        features(np.array([["Paris", "today"]])).keys()
    )
    trained, _ = app.common.load(str(runs["bilm"]))  # the biLM stayed frozen
    for name in ("bilm_embedding", "bilm_backward_lstm_0"):
        for a, b in zip(
            trained.get_layer(name).get_weights(), tagger.get_layer(name).get_weights()
        ):
            np.testing.assert_array_equal(a, b)


def _translate_init(runs, tmp_path, capsys, *extra):
    from tests.apps.test_translate_app import _pairs
    from tests.apps.test_translate_app import _write as write_lines

    translate = load_app("translate")
    de, en = _pairs(120, 0)
    files = {
        "train-source": write_lines(tmp_path / "train.de", de),
        "train-target": write_lines(tmp_path / "train.en", en),
        "val-source": write_lines(tmp_path / "val.de", de[:16]),
        "val-target": write_lines(tmp_path / "val.en", en[:16]),
    }
    out = tmp_path / "translate"
    argv = ["train", "--model", "transformer", "--init", str(runs["span"]), "--out", str(out)]
    argv += ["--tiny", "--batch", "16", "--verbose", "2", "--jit", "off", *extra]
    for name, path in files.items():
        argv += [f"--{name}", path]
    code, printed, err = run_app(translate, argv, capsys)
    assert code == 0, err
    return translate, out, files


def test_translate_init_takes_a_span_runs_encoder_and_exports(runs, tmp_path, capsys):
    # --lr 0: the weights stay as --init left them
    translate, out, files = _translate_init(runs, tmp_path, capsys, "--epochs", "1", "--lr", "0")
    model, src, tgt, config = translate.load(str(out))
    span, _ = app.common.load(str(runs["span"]))
    assert config["arguments"] == dict(
        config["arguments"], **json.loads((runs["span"] / "config.json").read_text())["arguments"]
    )
    copied = [layer for layer in span.layers if layer.name.startswith(("source_", "encoder_"))]
    assert any(layer.name.startswith("encoder_block") for layer in copied)
    for layer in copied:
        for a, b in zip(layer.get_weights(), model.get_layer(layer.name).get_weights()):
            np.testing.assert_array_equal(a, b)
    assert (
        model.vocabulary_sizes["target_ids"]
        == tgt.vocabulary_size
        != span.vocabulary_sizes["target_ids"]
    )
    # the source side reads text as the span run did: its pieces, then EOS
    from seqkeras.data import BertTokenizer

    bert = BertTokenizer.load(str(runs["span"]))
    text = ["Zwei eins drei."]
    expected = bert.encode(text, special_tokens=False).to_list()[0] + [2]
    assert src.encode(text, add_eos=True).to_list()[0] == expected
    code, printed, err = run_app(
        translate,
        [
            "evaluate",
            "--model",
            str(out),
            "--source",
            files["val-source"],
            "--reference",
            files["val-target"],
        ],
        capsys,
    )
    assert code == 0, err
    assert printed.strip().splitlines()[-1].startswith("BLEU = ")
    # the run exports: its translate signature served in a process without
    # seqkeras, equal to Keras
    argv = ["export", "--model", str(out), "--no-xla", "--check", "8"]
    argv += ["--source", files["val-source"], "--reference", files["val-target"]]
    code, printed, err = run_app(translate, argv, capsys)
    assert code == 0, err
    assert "translate signature in a process without seqkeras: 8/8" in printed
    report = json.loads((out / "export" / "report.json").read_text())
    assert report["translate_fresh_process_equal"] == "8/8"


def test_translate_init_refuses_other_runs(runs, tmp_path, capsys):
    translate = load_app("translate")
    base = ["train", "--out", str(tmp_path / "t")]
    code, _, err = run_app(
        translate, base + ["--model", "transformer", "--init", str(runs["bilm"])], capsys
    )
    assert_one_line_error(code, err, "translate.py", "bilm", "span")
    code, _, err = run_app(
        translate, base + ["--model", "rnn", "--init", str(runs["span"])], capsys
    )
    assert_one_line_error(code, err, "translate.py", "--init", "transformer")
