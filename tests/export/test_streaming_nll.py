"""The streaming step model scored one token per invoke in LiteRT gives
Keras' loss over the whole sequence; each variant is written and
measured."""

import numpy as np
import pytest

import seqkeras
from seqkeras.data import language_model_windows
from seqkeras.export import streaming_nll, streaming_tflite, streaming_variants
from seqkeras.metrics import windows_nll


def test_streaming_nll_equals_keras_and_variants_are_measured(tmp_path):
    model = seqkeras.models.recurrent_language_model(20, 8, units=12, cell="gru")
    ids = np.random.default_rng(0).integers(4, 20, 24)
    total, count = windows_nll(model.predict_on_batch, *language_model_windows(ids, len(ids)))
    path, _ = streaming_tflite(model, str(tmp_path / "step.tflite"))
    with open(path, "rb") as f:
        assert streaming_nll(f.read(), ids) == pytest.approx(total / count, abs=1e-5)
    found = streaming_variants(model, str(tmp_path / "v"), {"token_ids": ids[None]}, ids)
    assert set(found) == {"float32", "dynamic_int8"}
    assert found["float32"]["loss"] == pytest.approx(total / count, abs=1e-5)
    assert found["float32"]["diff"] < 1e-5 and found["dynamic_int8"]["mb"] > 0
    with pytest.raises(ValueError, match="streaming_nll.*at least 2"):
        streaming_nll(b"", ids[:1])
    with pytest.raises(ValueError, match="streaming_variants.*'int4'"):
        streaming_variants(model, str(tmp_path / "w"), {"token_ids": ids[None]}, ids, ("int4",))
