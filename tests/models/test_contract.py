"""A model class defined outside the library that implements the
generation and streaming contract generates, exports with `generate`
signatures and streams like a built-in one; a model without the contract
is refused clearly."""

import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import seqkeras
from seqkeras import layers as sk
from seqkeras.export import signatures as S
from seqkeras.export import saved_model
from seqkeras.export.streaming import streaming_tflite
from seqkeras.export.tflite import run_tflite_signature
from tests.export.export_checks import assert_builtin_only

V = 15
M = seqkeras.models


@keras.saving.register_keras_serializable(package="user_tests")
class MLPHeadGRU(seqkeras.models.SequenceModel):
    """A GRU language model whose head is a two-layer MLP (no built-in
    class has one). Parts: `embedding`, `gru`, `hidden`, `out`."""

    prompt_input = "token_ids"
    streamable = True

    def init_cache(self, inputs, batch_size, max_length):
        return [self.part("gru").cell.get_initial_state(batch_size)]

    def call_with_cache(self, token_ids, cache, index):
        h, states = self.part("gru").cell(self.part("embedding")(token_ids), list(cache[0]))
        logits = self.part("out")(self.part("hidden")(h))
        states = states if isinstance(states, (list, tuple)) else [states]
        return keras.ops.cast(logits, "float32"), [list(states)]


def build():
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    embedding = keras.layers.Embedding(V, 8, mask_zero=True)
    gru = sk.Recurrent(sk.GRUCell(12), return_sequences=True)
    hidden = keras.layers.Dense(16, activation="relu")
    out = keras.layers.Dense(V, name="logits")
    model = MLPHeadGRU(
        ids,
        out(hidden(gru(embedding(ids)))),
        vocabulary_sizes={"token_ids": V},
        parts={"embedding": embedding, "gru": gru, "hidden": hidden, "out": out},
    )
    # never predict PAD: the full pass over a prefix holding PAD would
    # mask it, the cached steps not
    out.bias.assign(np.eye(V, dtype="float32")[0] * -100.0)
    return model


def greedy_by_recomputation(model, prompt, length):
    tokens = prompt
    while tokens.shape[1] < length:
        nxt = np.argmax(np.asarray(model(tokens))[:, -1], -1)
        tokens = np.concatenate([tokens, nxt[:, None].astype("int32")], 1)
    return tokens


PROMPT = np.array([[4, 5], [6, 7]], "int32")


def test_user_model_generates_like_a_builtin_one():
    model = build()
    out = seqkeras.models.generate(model, prompt=PROMPT, max_length=7, eos_id=None)
    np.testing.assert_array_equal(np.asarray(out), greedy_by_recomputation(model, PROMPT, 7))
    ids, scores = seqkeras.models.generate(
        model, prompt=PROMPT, max_length=7, strategy="beam", beam_width=3
    )
    assert np.asarray(ids).shape == (2, 7)
    assert np.all(np.isfinite(np.asarray(scores)))
    with pytest.raises(ValueError, match="token id 20"):
        seqkeras.models.generate(model, prompt=np.array([[4, 20]]))


def test_user_model_exports_generate_signatures(tmp_path):
    model = build()
    path = saved_model(model, tmp_path / "1", signatures=S.generation(max_length=7))
    served = (
        tf.saved_model.load(path)
        .signatures["generate"](prompt_ids=tf.constant(PROMPT))["ids"]
        .numpy()
    )
    np.testing.assert_array_equal(
        served, np.asarray(seqkeras.models.generate(model, prompt=PROMPT, max_length=7))
    )


def test_user_model_streams_and_round_trips(tmp_path):
    model = build()
    path, shapes = streaming_tflite(model, tmp_path / "step.tflite")
    assert shapes == [(12,)]
    flatbuffer = open(path, "rb").read()
    assert_builtin_only(flatbuffer)
    tokens = np.random.default_rng(0).integers(4, V, size=(2, 6)).astype("int32")
    expected = np.asarray(model(tokens))
    state = np.zeros((2, 12), "float32")
    for t in range(tokens.shape[1]):
        out = run_tflite_signature(flatbuffer, token_ids=tokens[:, t], state_0=state)
        np.testing.assert_allclose(out["logits"], expected[:, t], atol=1e-5)
        state = out["new_state_0"]
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras", safe_mode=True)
    assert type(loaded) is MLPHeadGRU
    assert loaded.part("gru").name == model.part("gru").name
    np.testing.assert_allclose(np.asarray(loaded(tokens)), expected, atol=1e-6)
    np.testing.assert_array_equal(
        np.asarray(seqkeras.models.generate(loaded, prompt=PROMPT, max_length=6)),
        np.asarray(seqkeras.models.generate(model, prompt=PROMPT, max_length=6)),
    )


def test_a_model_without_the_contract_is_refused(tmp_path):
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(V, 4)(ids)
    plain = seqkeras.models.SequenceModel(ids, keras.layers.Dense(V)(x))
    with pytest.raises(ValueError, match="generation contract"):
        seqkeras.models.generate(plain, prompt=PROMPT)
    with pytest.raises(ValueError, match="generation contract"):
        saved_model(plain, tmp_path / "1", signatures=[S.Generate(max_length=4)])
    with pytest.raises(ValueError, match="streaming contract"):
        streaming_tflite(plain, tmp_path / "s.tflite")
    functional = keras.Model(ids, keras.layers.Dense(V)(x))
    with pytest.raises(ValueError, match="generation contract"):
        seqkeras.models.generate(functional, prompt=PROMPT)


@pytest.mark.parametrize(
    "build_model",
    [
        lambda: seqkeras.models.recurrent_seq2seq(
            V, V, embedding_dim=4, units=6, attention="additive"
        ),
        lambda: seqkeras.models.transformer_language_model(
            V, 8, num_layers=1, num_heads=2, hidden_dim=8
        ),
        lambda: seqkeras.models.tagger(V, 3, units=4, embedding_dim=4),
    ],
)
def test_builtin_parts_survive_a_safe_round_trip(build_model, tmp_path):
    model = build_model()
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras", safe_mode=True)
    assert type(loaded) is type(model)
    assert loaded.get_config()["parts"] == model.get_config()["parts"]
    for role, part in model._parts.items():
        if isinstance(part, keras.layers.Layer):  # the loaded model's own
            assert loaded.part(role) is loaded.get_layer(part.name)


def test_builder_classes_state_their_task_and_parts():
    assert M.classifier(10, 3, units=4).task == "classes"
    assert M.tagger(10, 3, units=4).task == "tokens"
    assert M.recurrent_language_model(10, 4).task == "tokens"
    assert M.recurrent_seq2seq(10, 10, units=4).task == "tokens"
    assert M.forecaster(6, 2, units=4).task == "regression"
    # the task is declared, not guessed from shapes: infer_task reads it
    model = M.classifier(10, 3, units=4, pooling="attention", backbone="gru")
    assert M.infer_task(model) == "classes"
    pooling = model.part("pooling")
    assert isinstance(pooling, seqkeras.layers.SequencePooling) and pooling.mode == "attention"
    # the part survives a save and load
    path = os.path.join(tempfile.mkdtemp(), "c.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.part("pooling").name == pooling.name
    assert M.classifier(10, 3, units=4, pooling="last").part("pooling") is None
