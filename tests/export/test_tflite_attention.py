"""Models with each attention layer and positional encoding export to a
SavedModel and to builtin-only TFLite, matching Keras within 1e-5."""

import keras
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from seqkeras.export import convert_builtin, run_tflite
from seqkeras.layers import (
    Attention,
    MultiHeadAttention,
    PositionalEmbedding,
    SinusoidalPositionalEncoding,
)
from tests.export.export_checks import assert_builtin_only, check_export

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


def _float_selects(flatbuffer):
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    selects = (schema.BuiltinOperator.SELECT, schema.BuiltinOperator.SELECT_V2)
    return sum(
        codes[op.opcodeIndex] in selects
        and graph.tensors[op.outputs[0]].type == schema.TensorType.FLOAT32
        for graph in model.subgraphs
        for op in graph.operators
    )


def test_masked_attention_needs_no_select(tmp_path):
    """The masked softmax adds and multiplies its mask: LiteRT's XNNPACK
    delegate runs ADD and MUL but not SELECT, whose kernel ran outside the
    delegate twice per attention block (SmolLM2's int8 prefill: 618 ->
    1,741 tokens/s). Padding and causal masks, against Keras."""
    ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(20, D, mask_zero=True)(ids)
    y = MultiHeadAttention(2, 4)(x, x, use_causal_mask=True)
    model = keras.Model(ids, y)
    model.export(str(tmp_path), verbose=False)
    flatbuffer = convert_builtin(str(tmp_path))
    assert_builtin_only(flatbuffer)
    assert _float_selects(flatbuffer) == 0  # (Keras' Embedding selects on the int ids)
    batch = np.array([[3, 4, 5, 0, 0], [0, 0, 7, 8, 9]], "int32")  # padding at both ends
    (got,) = run_tflite(flatbuffer, batch)
    np.testing.assert_allclose(got, model(batch), atol=1e-5)
