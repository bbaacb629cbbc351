"""The language models that generate with a fixed-size state (minGRU,
Mamba, Mamba-2, Griffin, a gated DeltaNet / mLSTM / sLSTM / attention
hybrid) in the three formats and the TFLite step model:
each export has builtin ops only (TFLite), standard ops only (SavedModel,
TF Serving's audit), loads in onnxruntime, and matches Keras; the TFLite
step model's state has the same size at every position (no key/value
cache for the recurrent blocks) and its logits equal the full pass."""

import keras
import numpy as np
import pytest

from seqkeras.export import assert_servable, convert_builtin, onnx, run_onnx
from seqkeras.export import run_tflite_signature, saved_model
from seqkeras.export.streaming import streaming_tflite, verify_streaming
from tests.export.export_checks import assert_builtin_only
from tests.export.one_step_checks import BUILDERS

# several exports and conversions per model: a group of its own
OWN_GROUP = True

NAMES = [
    "min_gru_language_model",
    "mamba_language_model",
    "mamba2_language_model",
    "griffin_language_model",
    pytest.param("hybrid_language_model", marks=pytest.mark.slow),
    pytest.param("rwkv7_language_model", marks=pytest.mark.slow),
]

#: tests/run.py --slow: the hybrid's exports (measured 62 s)
SLOW_SECONDS = 71
SLOW_PEAK_MB = 1150

# TFLite's float kernels and TensorFlow's agree to ~2e-6 on these models'
# logits (of magnitude 2)
TFLITE_ATOL: dict = {}


@pytest.mark.parametrize("name", NAMES)
def test_state_space_models_export_everywhere(name, tmp_path):
    model = BUILDERS[name]()
    rng = np.random.default_rng(0)
    path = saved_model(model, tmp_path / "saved" / "1")
    assert_servable(path)
    flatbuffer = convert_builtin(path)
    assert_builtin_only(flatbuffer)
    onnx_path = onnx(model, tmp_path / "model.onnx")
    for steps in (5, 9):
        ids = rng.integers(1, 15, (2, steps)).astype("int32")
        expected = np.asarray(model(ids))
        got = run_tflite_signature(flatbuffer, token_ids=ids)["logits"]
        atol = TFLITE_ATOL.get(name, 1e-5)
        np.testing.assert_allclose(got, expected, atol=atol, err_msg=f"{name} tflite")
        got = run_onnx(onnx_path, token_ids=ids)["logits"]
        np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=f"{name} onnx")
    length = 16 if hasattr(model, "stream_max_length") else None
    step_path, shapes = streaming_tflite(model, tmp_path / "step.tflite", max_length=length)
    step = open(step_path, "rb").read()
    assert_builtin_only(step)
    sample = {"token_ids": rng.integers(1, 15, (1, 12)).astype("int32")}
    diff, _, steps = verify_streaming(model, step, sample)
    assert steps == 12 and diff < 10 * TFLITE_ATOL.get(name, 1e-5), (name, diff)
    if name not in ("griffin_language_model", "hybrid_language_model"):  # nothing grows
        assert _state_shapes(model, 16) == _state_shapes(model, 4096)


def _state_shapes(model, max_length):
    """The shapes of the streamed states over `max_length` positions."""
    if hasattr(model, "stream_max_length"):
        states = model.stream_start(None, 1, max_length)
    else:  # a recurrent language model has no length at all
        states = model.stream_start(None, 1)
    return [tuple(x.shape) for x in keras.tree.flatten(states)]
