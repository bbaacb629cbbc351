"""Models with each attention layer and positional encoding export to a
SavedModel and to builtin-only TFLite, matching Keras within 1e-5."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqkeras.export import convert_builtin, op_names, run_tflite
from seqkeras.layers import (
    Attention,
    MultiHeadAttention,
    PositionalEmbedding,
    SinusoidalPositionalEncoding,
)

D = 8


def _attention_model(score):
    inp = keras.Input((None, D))
    x = SinusoidalPositionalEncoding()(inp)
    y = Attention(score, units=5)(x, x, use_causal_mask=True)
    return keras.Model(inp, y)


def _mha_model():
    inp = keras.Input((None, D))
    x = PositionalEmbedding(max_length=32)(inp)
    y = MultiHeadAttention(2, 4)(x, x, use_causal_mask=True)
    return keras.Model(inp, y)


MODELS = {s: (lambda s=s: _attention_model(s))
          for s in ("dot", "scaled_dot", "general", "additive", "cosine")}
MODELS["multi_head"] = _mha_model


@pytest.mark.parametrize("name", sorted(MODELS))
def test_attention_exports_builtin_tflite(name, tmp_path):
    model = MODELS[name]()
    rng = np.random.default_rng(0)
    for w in model.weights:
        w.assign(rng.normal(size=w.shape, scale=0.4).astype("float32"))
    path = str(tmp_path / "saved")
    model.export(path, verbose=False)
    reloaded = tf.saved_model.load(path)
    x = rng.normal(size=(2, 7, D)).astype("float32")
    np.testing.assert_allclose(reloaded.serve(x), model(x), atol=1e-5)
    flatbuffer = convert_builtin(path)
    names = op_names(flatbuffer)
    assert all(n.isupper() and not n.startswith("FLEX") for n in names), names
    for shape in [(1, 5), (3, 11)]:
        x = rng.normal(size=shape + (D,)).astype("float32")
        (got,) = run_tflite(flatbuffer, x)
        np.testing.assert_allclose(got, model(x), atol=1e-5)
