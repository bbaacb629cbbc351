import numpy as np
import pytest

import seqkeras
from seqkeras.export.streaming import streaming_tflite
from seqkeras.export.tflite import op_names, run_tflite_signature
from tests.export.export_checks import assert_builtin_only


@pytest.mark.parametrize("cell,layers", [("lstm", 2), ("gru", 1)])
def test_streaming_step_model_equals_the_full_pass(cell, layers, tmp_path):
    model = seqkeras.models.rnn_language_model(20, 8, units=12, cell=cell,
                                               num_layers=layers)
    path, shapes = streaming_tflite(model, tmp_path / "step.tflite")
    flatbuffer = open(path, "rb").read()
    assert_builtin_only(flatbuffer)
    assert "WHILE" not in op_names(flatbuffer)  # one step, no loop
    tokens = np.random.default_rng(0).integers(4, 20, size=(2, 9))
    expected = np.asarray(model(tokens.astype("int32")))
    states = {f"state_{i}": np.zeros((2,) + s, "float32")
              for i, s in enumerate(shapes)}
    for t in range(tokens.shape[1]):
        out = run_tflite_signature(flatbuffer, token_ids=tokens[:, t],
                                   **states)
        np.testing.assert_allclose(out["logits"], expected[:, t], atol=1e-5)
        states = {f"state_{i}": out[f"new_state_{i}"]
                  for i in range(len(shapes))}


def test_streaming_needs_an_rnn_language_model(tmp_path):
    with pytest.raises(ValueError, match="rnn_language_model"):
        streaming_tflite(seqkeras.models.tagger(10, 2), tmp_path / "x")
