"""Models with each attention layer and positional encoding export to a
SavedModel and to builtin-only TFLite, matching Keras within 1e-5."""

import keras
import numpy as np
import pytest

from seqkeras.layers import (
    Attention,
    MultiHeadAttention,
    PositionalEmbedding,
    SinusoidalPositionalEncoding,
)
from tests.export.export_checks import check_export

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


MODELS = {
    s: (lambda s=s: _attention_model(s))
    for s in ("dot", "scaled_dot", "general", "additive", "cosine")
}
MODELS["multi_head"] = _mha_model


@pytest.mark.parametrize("name", sorted(MODELS))
def test_attention_exports_builtin_tflite(name, tmp_path):
    model = MODELS[name]()
    rng = np.random.default_rng(0)
    for w in model.weights:
        w.assign(rng.normal(size=w.shape, scale=0.4).astype("float32"))
    check_export(model, tmp_path / "saved", D, rng, shapes=[(2, 7), (1, 5), (3, 11)])
