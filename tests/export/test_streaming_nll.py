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
    with pytest.raises(ValueError, match="streaming_variants.*'int2'"):
        streaming_variants(model, str(tmp_path / "w"), {"token_ids": ids[None]}, ids, ("int2",))
    with pytest.raises(ValueError, match="quantize_int4.*32"):  # rows of 8 and 12
        streaming_variants(model, str(tmp_path / "w"), {"token_ids": ids[None]}, ids, ("int4",))


def test_streaming_variants_measure_int4(tmp_path):
    """int4 (blocks of 32) beside float32 on a model whose weight rows are
    whole blocks: its loss near float32's, its file smaller."""
    model = seqkeras.models.recurrent_language_model(40, 32, units=32, cell="gru")
    rng = np.random.default_rng(2)
    for weight in model.weights:  # logits far from uniform (measured: 5.10 nats against 3.69)
        weight.assign(rng.normal(0, 0.5, weight.shape).astype("float32"))
    ids = np.random.default_rng(1).integers(4, 40, 24)
    found = streaming_variants(
        model, str(tmp_path / "v"), {"token_ids": ids[None]}, ids, ("float32", "int4")
    )
    assert abs(found["float32"]["loss"] - np.log(40)) > 1.0
    assert found["int4"]["loss"] == pytest.approx(found["float32"]["loss"], abs=0.1)  # 0.04
    assert found["int4"]["mb"] < 0.4 * found["float32"]["mb"]  # 4 bits a weight (0.32)
    assert found["int4"]["diff"] > 1e-3  # quantized (2.1: logits of a few units)
