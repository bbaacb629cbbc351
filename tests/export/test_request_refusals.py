"""Served signatures refuse what the model cannot compute: inputs longer
than its positions, prompts longer than `max_length`, empty texts and
prompts, batches above `max_batch_size`, ids outside the vocabulary. Each
request runs in a fresh process where seqkeras is not importable (as on a
model server) and must fail with InvalidArgument naming the signature and
the input; the requests just inside the limits are answered as Keras
answers them."""

import json
import subprocess
import sys

import numpy as np
import pytest

import seqkeras
from seqkeras.data import CharVocabulary
from seqkeras.export import fresh_signature, saved_model
from seqkeras.export import signatures as S

M = seqkeras.models
VOCAB = CharVocabulary("abcdefgh")
V = len(VOCAB)  # the reserved ids and the characters

_SERVER = r"""
import json, sys
sys.modules["seqkeras"] = None  # a server has no seqkeras
import numpy as np, tensorflow as tf
signatures = tf.saved_model.load(sys.argv[1]).signatures
answers = []
for name, inputs in json.load(sys.stdin):
    feed = {k: tf.constant(v) if isinstance(v[0], str) else tf.constant(np.array(v, "int32"))
            for k, v in inputs.items()}
    try:
        out = signatures[name](**feed)
        answers.append({k: v.numpy().tolist() for k, v in out.items()
                        if v.dtype != tf.string})
    except tf.errors.OpError as error:
        answers.append({"refused": type(error).__name__, "message": error.message})
print(json.dumps(answers))
"""


def serve(path, requests):
    """Each `(signature, inputs)` of `requests` called in one new process
    without seqkeras: its outputs (strings left out), or `{"refused":
    error name, "message": ...}`."""
    given = [
        (name, {k: np.asarray(v).tolist() for k, v in inputs.items()}) for name, inputs in requests
    ]
    result = subprocess.run(
        [sys.executable, "-c", _SERVER, str(path)],
        input=json.dumps(given),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_refused(answer, *words):
    assert answer.get("refused") == "InvalidArgumentError", answer
    for w in words:
        assert w in answer["message"], (w, answer["message"])


def _ids(rows, length, seed=0):
    return np.random.default_rng(seed).integers(4, V, (rows, length)).astype("int32")


@pytest.fixture(scope="module")
def language_model(tmp_path_factory):
    model = M.transformer_language_model(V, 8, num_layers=1, num_heads=2, hidden_dim=8)
    path = saved_model(
        model,
        tmp_path_factory.mktemp("lm") / "1",
        signatures=[S.Generate(6), S.GenerateText(VOCAB, 6)],
        max_batch_size=2,
    )
    return model, path


def test_language_model_refuses_what_it_cannot_compute(language_model):
    model, path = language_model
    full = _ids(2, 8)
    answers = serve(
        path,
        [
            ("serving_default", {"token_ids": full}),  # 8 positions, 2 rows: answered
            ("serving_default", {"token_ids": _ids(1, 9)}),
            ("serving_default", {"token_ids": _ids(3, 4)}),
            ("serving_default", {"token_ids": np.array([[5, V]])}),
            ("generate", {"prompt_ids": _ids(1, 6)}),  # max_length 6, prompt included
            ("generate", {"prompt_ids": _ids(1, 7)}),
            ("generate", {"prompt_ids": np.zeros((1, 0), "int32")}),
            ("generate_text", {"text": ["abcdefg"]}),
            ("generate_text", {"text": ["abc", ""]}),
            ("generate_text", {"text": ["abc"]}),  # answered
        ],
    )
    np.testing.assert_allclose(answers[0]["logits"], model(full), atol=1e-5)
    assert_refused(answers[1], "`serving_default`: input `token_ids`", "at most 8 positions", "[9]")
    assert_refused(answers[2], "`serving_default`: input `token_ids`", "max_batch_size=2", "[3]")
    assert_refused(answers[3], "`serving_default`: input `token_ids`", f"[0, {V})", f"{V}")
    assert np.asarray(answers[4]["ids"]).shape == (1, 6)
    assert_refused(answers[5], "`generate`: input `prompt_ids`", "at most 6 tokens", "[7]")
    assert_refused(answers[6], "`generate`: input `prompt_ids`", "at least one token", "[0]")
    assert_refused(answers[7], "`generate_text`: input `text`", "at most 6 tokens", "[7]")
    assert_refused(answers[8], "`generate_text`: input `text`", "empty text", "[1]")
    assert "refused" not in answers[9]


def test_refusals_go_through_fresh_signature(language_model):
    # the public helper says what the server said
    _, path = language_model
    with pytest.raises(RuntimeError, match=r"refused the request: InvalidArgumentError: .*"):
        fresh_signature(path, "serving_default", token_ids=_ids(1, 9))


def test_classifier_serve_text_refuses_empty_and_long_texts(tmp_path):
    model = M.classifier(
        V, 2, backbone="transformer", num_heads=2, embedding_dim=8, max_length=6, pooling="mean"
    )
    path = saved_model(model, tmp_path / "c" / "1", signatures=[S.ServeText(vocabulary=VOCAB)])
    answers = serve(
        path,
        [
            ("serve_text", {"text": ["abc", "abcdef"]}),
            ("serve_text", {"text": ["abcdefg"]}),
            ("serve_text", {"text": ["abc", ""]}),
        ],
    )
    ids = VOCAB.encode(["abc", "abcdef"])
    np.testing.assert_allclose(answers[0]["logits"], model(np.asarray(ids)), atol=1e-5)
    assert_refused(answers[1], "`serve_text`: input `text`", "at most 6 tokens", "[7]")
    assert_refused(answers[2], "`serve_text`: input `text`", "empty text", "[1]")


def test_encoder_decoder_refuses_sources_past_its_positions(tmp_path):
    model = M.transformer_seq2seq(
        V, V, 6, num_layers=1, num_heads=2, hidden_dim=8, positional="learned"
    )
    path = saved_model(model, tmp_path / "s" / "1", signatures=[S.Generate(6)])
    answers = serve(
        path,
        [
            ("generate", {"source_ids": _ids(1, 6)}),
            ("generate", {"source_ids": _ids(1, 7)}),
            ("serving_default", {"source_ids": _ids(1, 7), "target_ids": _ids(1, 3)}),
        ],
    )
    assert np.asarray(answers[0]["ids"]).shape[0] == 1
    assert_refused(answers[1], "`generate`: input `source_ids`", "at most 6 positions", "[7]")
    assert_refused(answers[2], "`serving_default`: input `source_ids`", "at most 6 positions")


def test_max_batch_size_is_checked_when_the_export_is_made(tmp_path):
    model = M.classifier(V, 2, units=4, embedding_dim=4)
    with pytest.raises(ValueError, match="`saved_model`.*max_batch_size"):
        saved_model(model, tmp_path / "a", max_batch_size=0)
    with pytest.raises(ValueError, match="`saved_model`.*max_batch_size.*target='serving'"):
        saved_model(model, tmp_path / "b", max_batch_size=4, target="tflite")
