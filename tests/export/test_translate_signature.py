"""The `translate` signature: subword tokenizer, beam search and
detokenizer in the graph; the same strings as the Keras path, served in a
process where seqkeras is not importable, with only standard TensorFlow
and TF Text ops."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import seqkeras
from seqkeras.data import SubwordTokenizer
from seqkeras.export import signatures as S
from seqkeras.export import saved_model
from seqkeras.export import NotServableError, assert_servable

DE = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee!",
    "Eine Frau fährt ein rotes Auto.",
    "Ein Kind spielt im Park.",
] * 3
EN = [
    "A man rides a bike.",
    "Two dogs play in the snow!",
    "A woman drives a red car.",
    "A child plays in the park.",
] * 3


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    src = SubwordTokenizer.train(DE, vocabulary_size=100)
    tgt = SubwordTokenizer.train(EN, vocabulary_size=100)
    model = seqkeras.models.recurrent_seq2seq(
        src.vocabulary_size, tgt.vocabulary_size, embedding_dim=8, units=16, attention="additive"
    )
    path = saved_model(
        model,
        tmp_path_factory.mktemp("t") / "1",
        signatures=[S.Translate(src, tgt, max_length=12, beam_width=3)],
    )
    return model, src, tgt, path


def keras_translate(model, src, tgt, texts, beam_width=3):
    ids = src.encode(texts, add_eos=True).to_tensor(0)
    out, _ = seqkeras.models.generate(
        model, ids, max_length=12, strategy="beam", beam_width=beam_width
    )
    return [t.decode() for t in tgt.decode(np.asarray(out)[:, 1:]).numpy()]


def test_translate_signature_equals_keras_without_seqkeras(exported, tmp_path):
    model, src, tgt, path = exported
    texts = DE[:4] + ["Ein Qualle."]  # an unknown character too
    expected = keras_translate(model, src, tgt, texts)
    code = (
        "import json, sys\n"
        "sys.modules['seqkeras'] = None\n"
        "import tensorflow as tf, tensorflow_text  # noqa: F401\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "out = m.signatures['translate'](text=tf.constant(json.loads("
        "sys.argv[2])))['text'].numpy()\n"
        "print(json.dumps([t.decode() for t in out]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(path), json.dumps(texts)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected


def test_translate_refuses_an_empty_text_in_a_fresh_process(exported):
    from seqkeras.export import fresh_signature

    *_, path = exported
    with pytest.raises(RuntimeError, match="`translate`: input `text` has an empty text"):
        fresh_signature(path, "translate", text=[DE[0], ""])


def test_translate_graph_is_servable(exported):
    from seqkeras.export.audit import TF_SERVING_TF_TEXT_OPS, audit_serving

    _, _, _, path = exported
    ops = assert_servable(path)["ops"]
    assert any(op.startswith("FastWordpiece") for op in ops)
    assert not any(op.startswith("Xla") for op in ops)
    report = audit_serving(path)
    assert report["ops"] == ops
    assert report["tf_text"] == [
        "FastWordpieceTokenizeWithOffsets",
        "TFText>FastWordpieceDetokenize",
    ]
    assert set(report["tf_text"]) <= TF_SERVING_TF_TEXT_OPS
    assert not (report["xla"] or report["tf_text_unsupported"] or report["no_kernel"])


def test_audit_flags_tf_text_ops_the_model_server_lacks(tmp_path):
    """RoundRobinTrim is in TF Text but not in the model server's ops
    (tensorflow/serving#4057): the audit must name it."""
    import tensorflow_text as tf_text

    from seqkeras.export.audit import audit_serving

    @tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.int32)])
    def trim(x):
        return tf_text.RoundRobinTrimmer(max_seq_length=4).trim([x, x])[0].flat_values

    module = tf.Module()
    module.trim = trim
    tf.saved_model.save(
        module, str(tmp_path), signatures={"serving_default": trim.get_concrete_function()}
    )
    report = audit_serving(tmp_path)
    assert report["tf_text_unsupported"] == ["TFText>RoundRobinTrim"]
    with pytest.raises(
        NotServableError, match="TF Text ops TF Serving does not register .*RoundRobinTrim"
    ):
        assert_servable(tmp_path)


def test_translate_refuses_tokenizers_of_another_size(exported, tmp_path):
    model, src, _, _ = exported
    small = SubwordTokenizer.train(EN[:2], vocabulary_size=30)
    with pytest.raises(ValueError, match="the tokenizer for `target_ids`"):
        saved_model(model, tmp_path / "x" / "1", signatures=[S.Translate(src, small, max_length=8)])


def test_greedy_translate_signature(exported, tmp_path):
    model, src, tgt, _ = exported
    path = saved_model(
        model, tmp_path / "g" / "1", signatures=[S.Translate(src, tgt, max_length=12, beam_width=1)]
    )
    served = (
        tf.saved_model.load(path).signatures["translate"](text=tf.constant(DE[:3]))["text"].numpy()
    )
    ids = src.encode(DE[:3], add_eos=True).to_tensor(0)
    out = seqkeras.models.generate(model, ids, max_length=12)
    expected = tgt.decode(np.asarray(out)[:, 1:]).numpy()
    assert list(served) == list(expected)


def test_translate_texts_equals_each_sentence_decoded_alone(exported):
    # batched, length-sorted and padded (seqkeras.models.translate_texts)
    # against one sentence at a time, unpadded
    model, src, tgt, _ = exported
    texts = DE * 2
    got, cut = seqkeras.models.translate_texts(model, texts, src, tgt, 12, batch_size=3)
    assert cut == 0
    for text, out in zip(texts, got):
        ids = src.encode([text], add_eos=True).to_tensor(0)
        alone = seqkeras.models.generate(model, ids, max_length=12)
        assert out == tgt.decode(np.asarray(alone)[:, 1:]).numpy()[0].decode("utf-8")
    _, cut = seqkeras.models.translate_texts(model, texts, src, tgt, 12, source_length=2)
    assert cut == sum(len(r) > 2 for r in src.encode(texts, add_eos=True).to_list())
    for bad in ({"batch_size": 0}, {"beam_width": 0}, {"source_length": -1}):
        with pytest.raises(ValueError, match=f"translate_texts.*{next(iter(bad))}"):
            seqkeras.models.translate_texts(model, texts, src, tgt, 12, **bad)
