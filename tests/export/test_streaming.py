import numpy as np
import pytest

import seqkeras
from seqkeras.export.streaming import streaming_tflite
from seqkeras.export.tflite import op_names, run_tflite_signature
from tests.export.export_checks import assert_builtin_only


@pytest.mark.parametrize("cell,layers", [("lstm", 2), ("gru", 1)])
def test_streaming_step_model_equals_the_full_pass(cell, layers, tmp_path):
    model = seqkeras.models.recurrent_language_model(20, 8, units=12, cell=cell, num_layers=layers)
    path, shapes = streaming_tflite(model, tmp_path / "step.tflite")
    flatbuffer = open(path, "rb").read()
    assert_builtin_only(flatbuffer)
    assert "WHILE" not in op_names(flatbuffer)  # one step, no loop
    tokens = np.random.default_rng(0).integers(4, 20, size=(2, 9))
    expected = np.asarray(model(tokens.astype("int32")))
    states = {f"state_{i}": np.zeros((2,) + s, "float32") for i, s in enumerate(shapes)}
    for t in range(tokens.shape[1]):
        out = run_tflite_signature(flatbuffer, token_ids=tokens[:, t], **states)
        np.testing.assert_allclose(out["logits"], expected[:, t], atol=1e-5)
        states = {f"state_{i}": out[f"new_state_{i}"] for i in range(len(shapes))}


def _stream(flatbuffer, name, inputs, shapes):
    """Runs the step model over `inputs` (batch, time, ...); yields each
    step's output."""
    batch = inputs.shape[0]
    states = {f"state_{i}": np.zeros((batch,) + s, "float32") for i, s in enumerate(shapes)}
    for t in range(inputs.shape[1]):
        out = run_tflite_signature(flatbuffer, **{name: inputs[:, t]}, **states)
        states = {f"state_{i}": out[f"new_state_{i}"] for i in range(len(shapes))}
        yield out


def _tokens(batch, steps, vocab=20, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(4, vocab, size=(batch, steps)).astype("int32")


def test_streaming_tagger_equals_the_full_pass(tmp_path):
    model = seqkeras.models.tagger(
        20, 3, backbone="lstm", units=6, embedding_dim=5, num_layers=2, bidirectional=False
    )
    path, shapes = streaming_tflite(model, tmp_path / "step.tflite")
    assert shapes == [(6,)] * 4
    flatbuffer = open(path, "rb").read()
    assert_builtin_only(flatbuffer)
    tokens = _tokens(2, 7)
    expected = np.asarray(model(tokens))
    for t, out in enumerate(_stream(flatbuffer, "token_ids", tokens, shapes)):
        np.testing.assert_allclose(out["logits"], expected[:, t], atol=1e-5)


@pytest.mark.filterwarnings("ignore:You are using a softmax")
@pytest.mark.parametrize("pooling", ["last", "mean", "max", "attention"])
def test_streaming_classifier_gives_the_logits_of_each_prefix(pooling, tmp_path):
    model = seqkeras.models.classifier(
        20, 3, backbone="gru", units=6, embedding_dim=5, pooling=pooling
    )
    path, shapes = streaming_tflite(model, tmp_path / "step.tflite")
    flatbuffer = open(path, "rb").read()
    assert_builtin_only(flatbuffer)
    tokens = _tokens(2, 6, seed=1)
    for t, out in enumerate(_stream(flatbuffer, "token_ids", tokens, shapes)):
        prefix = np.asarray(model(tokens[:, : t + 1]))
        np.testing.assert_allclose(out["logits"], prefix, atol=1e-5, err_msg=f"step {t}")


def test_streaming_forecaster_ends_at_the_full_forecast(tmp_path):
    model = seqkeras.models.forecaster(8, 3, features=2, backbone="lstm", units=6)
    path, shapes = streaming_tflite(model, tmp_path / "step.tflite")
    flatbuffer = open(path, "rb").read()
    series = np.random.default_rng(2).normal(size=(2, 8, 2)).astype("float32")
    outs = list(_stream(flatbuffer, "series", series, shapes))
    np.testing.assert_allclose(outs[-1]["forecast"], np.asarray(model(series)), atol=1e-5)


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: seqkeras.models.tagger(10, 2), "whole sequence"),
        (lambda: seqkeras.models.classifier(10, 2, backbone="transformer"), "whole sequence"),
        (
            lambda: seqkeras.models.transformer_language_model(
                10, 8, num_heads=2, hidden_dim=8, positional="sinusoidal"
            ),
            "sinusoidal",
        ),
        (
            lambda: seqkeras.models.transformer_seq2seq(10, 10, 8, num_heads=2, hidden_dim=8),
            "pass `max_length`",
        ),
    ],
)
def test_streaming_refuses_what_cannot_stream(build, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        streaming_tflite(build(), tmp_path / "x")


def test_streaming_transformer_language_model_with_key_value_caches(tmp_path):
    # one token per call, each block's cache a state: every step's logits
    # equal the full causal pass at that position
    model = seqkeras.models.transformer_language_model(
        30, 12, num_layers=2, num_heads=2, hidden_dim=8
    )
    path, shapes = streaming_tflite(model, tmp_path / "step.tflite")
    assert shapes == [(1,)] + [(2, 12, 4)] * 4  # each block's keys and values
    flatbuffer = open(path, "rb").read()
    assert_builtin_only(flatbuffer)
    ids = _tokens(1, 9, seed=5, vocab=30)
    expected = np.asarray(model(ids))
    outs = list(_stream(flatbuffer, "token_ids", ids, shapes))
    for t, out in enumerate(outs):
        np.testing.assert_allclose(out["logits"], expected[:, t], atol=1e-5)


def test_exports_take_lengths_as_arguments_and_leave_the_model_alone(tmp_path):
    # One model exported twice with different cache lengths: each file has
    # its own length and equals Keras; the model is unchanged (no length
    # left behind for a later export to reuse silently), and a third
    # export without a length has the model's own.
    model = seqkeras.models.transformer_language_model(
        30, 12, num_layers=1, num_heads=2, hidden_dim=8
    )
    ids = _tokens(1, 6, seed=4, vocab=30)
    expected = np.asarray(model(ids))
    for length in (6, 9):
        path, shapes = streaming_tflite(model, tmp_path / f"{length}.tflite", max_length=length)
        assert shapes == [(1,)] + [(2, length, 4)] * 2
        assert model.stream_max_length is None
        outs = list(_stream(open(path, "rb").read(), "token_ids", ids, shapes))
        for t, out in enumerate(outs):
            np.testing.assert_allclose(out["logits"], expected[:, t], atol=1e-5)
    _, shapes = streaming_tflite(model, tmp_path / "default.tflite")
    assert shapes == [(1,)] + [(2, 12, 4)] * 2


def test_streaming_decoder_language_model_with_grouped_query_caches(tmp_path):
    # rotary positions from the streamed position, grouped-query caches
    # (key/value heads only), a sliding window shorter than the text
    model = seqkeras.models.decoder_language_model(
        30, 8, 2, 4, 16, num_key_value_heads=2, window=3, max_length=12
    )
    path, shapes = streaming_tflite(model, tmp_path / "step.tflite")
    assert shapes == [(1,)] + [(2, 12, 2)] * 4  # (kv heads, positions, head dim)
    flatbuffer = open(path, "rb").read()
    assert_builtin_only(flatbuffer)
    ids = _tokens(1, 9, seed=5, vocab=30)
    expected = np.asarray(model(ids))
    for t, out in enumerate(_stream(flatbuffer, "token_ids", ids, shapes)):
        np.testing.assert_allclose(out["logits"], expected[:, t], atol=1e-5)


@pytest.mark.parametrize("kind", ["plain", "bahdanau", "luong", "conditioned", "transformer"])
def test_streaming_decoder_equals_the_teacher_forced_pass(kind, tmp_path):
    M = seqkeras.models
    length = None
    if kind == "transformer":  # self-attention caches of 6 positions, pre-LN
        model = M.transformer_seq2seq(20, 20, 16, num_heads=2, hidden_dim=8, norm_first=True)
        key, length = "source_ids", 6
        given = _tokens(2, 7, seed=3)
        given[1, 5:] = 0
    elif kind == "conditioned":
        model = M.conditioned_decoder(5, 20, units=6, embedding_dim=5)
        key = "features"
        given = np.random.default_rng(3).normal(size=(2, 5)).astype("float32")
    else:
        options = {
            "plain": {},
            "bahdanau": {"attention": "additive"},
            "luong": {"attention": "general", "style": "luong", "cell": "gru"},
        }[kind]
        model = M.recurrent_seq2seq(20, 20, units=6, embedding_dim=5, **options)
        key = "source_ids"
        given = _tokens(2, 7, seed=3)
        given[1, 5:] = 0  # padded source
    path, shapes = streaming_tflite(model, tmp_path / "step.tflite", max_length=length)
    flatbuffer = open(path, "rb").read()
    assert_builtin_only(flatbuffer)
    target = _tokens(2, 5, seed=4)
    target[:, 0] = 1  # BOS
    expected = np.asarray(model({key: given, "target_ids": target}))
    states = run_tflite_signature(flatbuffer, "encode", **{key: given})
    assert len(states) == len(shapes)
    for t in range(target.shape[1]):
        out = run_tflite_signature(flatbuffer, token_ids=target[:, t], **states)
        np.testing.assert_allclose(out["logits"], expected[:, t], atol=1e-5)
        states = {f"state_{i}": out[f"new_state_{i}"] for i in range(len(shapes))}
