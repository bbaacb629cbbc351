"""`tagger(..., crf=True)`: trains under XLA on a task whose tags depend on
the previous tag, survives a `.keras` round trip, and its Viterbi tags are
identical in the SavedModel, builtin-only TFLite and ONNX."""

import keras
import numpy as np
import pytest

import seqkeras
from seqkeras.models import CRFTagger
from seqkeras.training import compile_model
from tests.layers.test_crf import _chunks


def _data(n, seed):
    """Token ids 1..5 (0 pads) and tags 1 + {O, B, I} (0 pads), rows of
    different lengths."""
    rng = np.random.default_rng(seed)
    x, y = _chunks(n, rng)
    y = y + 1
    lengths = rng.integers(4, 11, n)
    pad = np.arange(10)[None] >= lengths[:, None]
    x[pad], y[pad] = 0, 0
    return x.astype("int32"), y.astype("int32")


@pytest.fixture(scope="module")
def trained():
    keras.utils.set_random_seed(0)
    model = seqkeras.models.tagger(6, 4, backbone="gru", units=16, embedding_dim=8, crf=True)
    assert isinstance(model, CRFTagger)
    compile_model(model, learning_rate=2e-2)
    x, y = _data(768, 0)
    model.fit(x, y, epochs=12, batch_size=64, verbose=0)
    return model


def test_crf_tagger_learns_to_a_bar_under_jit(trained):
    x, y = _data(256, 1)
    tags = np.asarray(trained.predict(x, verbose=0)["tags"])
    valid = y != 0
    assert (tags[~valid] == 0).all()
    accuracy = (tags == y)[valid].mean()
    assert accuracy >= 0.98, accuracy
    # the loss is the CRF's negative log-likelihood of the labels
    out = trained(x[:8])
    nll = -np.mean(trained.part("crf").log_likelihood(out["logits"], y[:8], x[:8] != 0))
    assert float(trained.compute_loss(x[:8], y[:8], out)) == pytest.approx(nll, rel=1e-5)


def test_crf_tagger_round_trip(trained, tmp_path):
    path = tmp_path / "t.keras"
    trained.save(path)
    again = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(again, CRFTagger)
    x, _ = _data(16, 2)
    np.testing.assert_array_equal(
        again.predict(x, verbose=0)["tags"], trained.predict(x, verbose=0)["tags"]
    )
    with pytest.raises(ValueError, match="computes its own loss"):
        compile_model(again, label_smoothing=0.1)


def test_crf_tagger_exports_identical_paths(trained, tmp_path):
    from seqkeras.export import export_and_verify
    from seqkeras.export.onnx import onnx_runner
    from seqkeras.export.tflite import tflite_runner

    x, _ = _data(8, 3)
    report = export_and_verify(trained, "crf_tagger", [x[:1], x], str(tmp_path), tolerance=1e-4)
    expected = np.asarray(trained.predict(x, verbose=0)["tags"])
    import tensorflow as tf

    served = (
        tf.saved_model.load(report["savedmodel"])
        .signatures["serving_default"](token_ids=tf.constant(x))["tags"]
        .numpy()
    )
    with open(report["tflite"], "rb") as f:
        lite = tflite_runner(f.read())(token_ids=x)["tags"]
    onnx_tags = onnx_runner(report["onnx"].split(" ")[0])(token_ids=x)["tags"]
    for got in (served, lite, onnx_tags):
        np.testing.assert_array_equal(np.asarray(got), expected)


def test_word_features_keep_the_padding_mask():
    """Keras' Concatenate ORs masks: the character and casing features
    must mask padding words too, or the BiLSTM and the CRF would read
    padding. Tags and logits at real words do not depend on padding."""
    import numpy as np

    import seqkeras
    from seqkeras.data import WordFeatures

    features = WordFeatures.train([["EU", "rejects", "German", "call"]])
    model = seqkeras.models.tagger(
        features.sizes["token_ids"],
        5,
        crf=True,
        units=6,
        embedding_dim=6,
        char_vocab_size=features.sizes["char_ids"],
        char_filters=4,
        casing=True,
    )
    crf = model.get_layer("crf")
    rng = np.random.default_rng(0)
    crf.set_weights([rng.normal(0, 3, w.shape) for w in crf.get_weights()])
    outs = []
    for pad in (0, 5):
        words = np.array([["German", "call", "xyz"] + [""] * pad], object)
        out = model({k: v.numpy() for k, v in features(words).items()})
        outs.append((np.asarray(out["logits"])[0, :3], np.asarray(out["tags"])[0]))
    np.testing.assert_allclose(outs[0][0], outs[1][0], atol=1e-5)
    assert outs[0][1].tolist() == outs[1][1][:3].tolist()
    assert outs[1][1][3:].tolist() == [0] * 5
