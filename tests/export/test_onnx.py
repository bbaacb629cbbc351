"""ONNX export (tf2onnx, opset 17) verified with onnxruntime at two
sequence lengths."""

import numpy as np
import pytest

import seqkeras
from seqkeras.export import onnx, run_onnx


def tagger():
    return seqkeras.models.tagger(20, 5, backbone="lstm", embedding_dim=8, units=8)


@pytest.mark.parametrize("kind", ["tagger", "seq2seq_attention", "transformer_lm"])
def test_models_match_in_onnxruntime(kind, tmp_path):
    rng = np.random.default_rng(0)
    if kind == "tagger":
        model = tagger()
    elif kind == "seq2seq_attention":
        model = seqkeras.models.recurrent_seq2seq(
            20, 20, units=8, embedding_dim=8, attention="additive"
        )
    else:
        model = seqkeras.models.transformer_language_model(
            20, 16, num_layers=1, num_heads=2, hidden_dim=8
        )
    path = onnx(model, tmp_path / "m.onnx")
    for steps in (5, 9):
        ids = rng.integers(4, 20, size=(3, steps)).astype("int32")
        ids[0, 3:] = 0
        if kind == "seq2seq_attention":
            inputs = {"source_ids": ids, "target_ids": ids[:, :4]}
        else:
            inputs = {"token_ids": ids}
        expected = np.asarray(model(inputs if len(inputs) > 1 else inputs["token_ids"]))
        got = run_onnx(path, **inputs)
        assert list(got) == ["logits"]
        np.testing.assert_allclose(got["logits"], expected, atol=1e-5)


def test_onnx_refuses_to_overwrite(tmp_path):
    model = tagger()
    path = onnx(model, tmp_path / "m.onnx")
    with pytest.raises(ValueError, match="exists; pass overwrite=True"):
        onnx(model, path)
    with pytest.raises(ValueError, match="is a directory"):
        onnx(model, tmp_path)
