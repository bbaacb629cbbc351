"""Regression tests for serving: token ids checked in the served graph,
raw-string vocabularies as plain lists, models with lookup layers,
stateful models, atomic overwrite, and SavedModels without XLA-only ops."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import seqkeras
from seqkeras.export import signatures as S
from seqkeras.export import onnx, saved_model, tflite
from seqkeras.export.audit import serving_ops
from seqkeras.export import NotServableError, assert_servable

M = seqkeras.models


def test_recurrent_saved_model_has_no_xla_ops(tmp_path):
    # Regression: every recurrent SavedModel carried XlaDynamicUpdateSlice
    # (from keras.ops.slice_update), which TF Serving does not run.
    model = M.recurrent_language_model(10, 4, units=4, cell="lstm")
    path = saved_model(model, tmp_path / "lm" / "1", signatures=S.generation(max_length=5))
    ops = assert_servable(path)["ops"]
    assert "TensorScatterUpdate" in ops and "While" in ops
    # the TFLite flavour keeps DynamicUpdateSlice for the converter
    tflite_graph = saved_model(model, tmp_path / "t" / "1", target="tflite")
    assert "XlaDynamicUpdateSlice" in serving_ops(tflite_graph)
    with pytest.raises(NotServableError, match="XLA-only ops.*XlaDynamicUpdateSlice"):
        assert_servable(tflite_graph)


def test_served_graph_refuses_out_of_range_token_ids(tmp_path):
    model = M.tagger(10, 3, units=4, embedding_dim=4)
    path = saved_model(model, tmp_path / "t" / "1")
    serve = tf.saved_model.load(path).signatures["serving_default"]
    ok = serve(token_ids=tf.constant([[4, 5, 0]]))["logits"]
    np.testing.assert_allclose(ok, np.asarray(model(np.array([[4, 5, 0]]))), atol=1e-5)
    for bad in (25, -1):
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"input `token_ids` has a token id outside "
            r"\[0, 10\)",
        ) as info:
            serve(token_ids=tf.constant([[4, bad]]))
        assert str(bad) in str(info.value)


def test_generate_signature_refuses_out_of_range_prompts(tmp_path):
    model = M.recurrent_language_model(10, 4, cell="gru")
    path = saved_model(model, tmp_path / "lm" / "1", signatures=S.generation(max_length=5))
    generate = tf.saved_model.load(path).signatures["generate"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="prompt_ids"):
        generate(prompt_ids=tf.constant([[4, 12]]))


def test_vocabulary_as_a_plain_list(tmp_path):
    # Regression: a list gave AttributeError: 'list' object has no
    # attribute 'characters'.
    model = M.classifier(8, 2, units=4, embedding_dim=4)
    vocab = seqkeras.data.CharVocabulary("abcd")
    expected = np.asarray(model(vocab.encode(["abc", "dx"])))
    for given in (list("abcd"), vocab.tokens):  # with or without reserved
        path = saved_model(
            model, tmp_path / str(len(given)) / "1", signatures=[S.ServeText(vocabulary=given)]
        )
        served = tf.saved_model.load(path).signatures["serve_text"](
            text=tf.constant(["abc", "dx"])
        )["logits"]
        np.testing.assert_allclose(served, expected, atol=1e-5)


def _text_model():
    vectorize = keras.layers.TextVectorization(max_tokens=20, output_sequence_length=4)
    vectorize.adapt(["a b c", "d e f"])
    text = keras.Input((1,), dtype="string", name="text")
    x = keras.layers.Embedding(20, 4)(vectorize(text))
    return keras.Model(text, keras.layers.GlobalAveragePooling1D()(x))


def test_text_layers_export_to_saved_model_and_refuse_tflite_onnx(tmp_path):
    # Regression: tflite() failed with "Binding inputs to tf.function
    # failed"; onnx() wrote a file onnxruntime rejects.
    model = _text_model()
    path = saved_model(model, tmp_path / "text" / "1")
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant([["a b"]]))
    np.testing.assert_allclose(
        list(served.values())[0], np.asarray(model(tf.constant([["a b"]]))), atol=1e-6
    )
    for export in (tflite, onnx):
        target = tmp_path / f"m.{export.__name__}"
        with pytest.raises(
            ValueError, match="TextVectorization 'text_vectorization'.*ship the vocabulary"
        ):
            export(model, target)
        assert not os.path.exists(target)
    assert sorted(os.listdir(tmp_path)) == ["text"]  # no temporary dirs


def test_a_layer_that_declares_lookup_tables_is_refused(tmp_path):
    # Refusal by the layer's declaration, not by its class name: a layer
    # of any name that declares `uses_lookup_tables` is refused; the same
    # layer declaring False exports.
    class Vocab(keras.layers.Layer):
        uses_lookup_tables = True

        def call(self, x):
            return x * 2.0

    inp = keras.Input((3,), name="x")
    model = keras.Model(inp, Vocab(name="vocab")(inp))
    with pytest.raises(ValueError, match="Vocab 'vocab' needs string ops"):
        tflite(model, tmp_path / "m.tflite")
    Vocab.uses_lookup_tables = False
    path = tflite(model, tmp_path / "m.tflite")
    assert os.path.isfile(path)


def test_two_signatures_of_one_name_are_refused(tmp_path):
    model = M.recurrent_language_model(10, 4, units=4)
    with pytest.raises(
        ValueError,
        match=r"two signatures are named "
        r"\['generate'\]",
    ):
        saved_model(
            model,
            tmp_path / "lm" / "1",
            signatures=[S.Generate(max_length=4), S.Generate(max_length=5)],
        )
    assert not os.path.exists(tmp_path / "lm" / "1")


def test_onnx_fails_with_tf2onnx_message_for_unsupported_ops(tmp_path):
    # Regression: unsupported ops were only logged and a path returned.
    @tf.function
    def strings(x):
        return tf.strings.length(tf.strings.as_string(x))

    class Odd(keras.layers.Layer):
        def call(self, x):
            return tf.cast(strings(x), "float32")

    inp = keras.Input((3,), name="x")
    model = keras.Model(inp, Odd()(inp))
    with pytest.raises(
        ValueError, match="`onnx`: tf2onnx could not convert.*(AsString|StringLength)"
    ):
        onnx(model, tmp_path / "odd.onnx")
    assert os.listdir(tmp_path) == []


def test_stateful_models_are_refused_with_the_way_out(tmp_path):
    # Regression: an exported stateful LM carried its state between
    # requests.
    model = M.recurrent_language_model(10, 4, stateful=True, batch_size=2)
    with pytest.raises(ValueError, match="stateful.*streaming_tflite"):
        saved_model(model, tmp_path / "lm" / "1")
    assert not os.path.exists(tmp_path / "lm" / "1")


def test_overwrite_keeps_the_previous_version_until_the_new_is_in(tmp_path, monkeypatch):
    # Regression: overwrite=True deleted the old version before moving the
    # new one in.
    model = M.classifier(8, 2, units=4, embedding_dim=4)
    path = saved_model(model, tmp_path / "c" / "1")
    before = sorted(os.listdir(path))
    real = os.replace
    calls = []

    def failing(src, dst):
        calls.append((src, dst))
        if os.path.basename(str(src)).startswith(".tmp-"):
            raise OSError("disk full")  # moving the new version in fails
        return real(src, dst)

    from seqkeras import _atomic

    monkeypatch.setattr(_atomic, "_exchange", lambda a, b: False)  # the rename-aside path
    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="disk full"):
        saved_model(model, path, overwrite=True)
    monkeypatch.setattr(os, "replace", real)
    assert sorted(os.listdir(path)) == before  # the old version is back
    assert sorted(os.listdir(tmp_path / "c")) == ["1"]  # nothing left over
    assert any(
        os.path.basename(str(s)).startswith(".old-") for _, s in calls
    )  # it was renamed aside, not deleted
