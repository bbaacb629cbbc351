"""Recurrent models export to SavedModel and to builtin-only TFLite.

Both from the default `model.export()` signature (dynamic batch and time)
and from a batch-1 signature, run in LiteRT at sequence lengths not fixed
at conversion, matching Keras within 1e-5.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqkeras.export import convert_builtin, op_names, run_tflite
from seqkeras.layers import (
    Bidirectional,
    GRUCell,
    LSTMCell,
    Recurrent,
    SimpleRNNCell,
    StackedRecurrent,
)

FEATURES = 3
MODELS = {
    "rnn": lambda: Recurrent(SimpleRNNCell(6), return_sequences=True),
    "gru": lambda: Recurrent(GRUCell(6)),
    "gru_reset_after": lambda: Recurrent(GRUCell(6, reset_after=True),
                                         return_sequences=True),
    "lstm": lambda: Recurrent(LSTMCell(6), go_backwards=True),
    "bidirectional": lambda: Bidirectional(
        Recurrent(LSTMCell(5), return_sequences=True)),
    "stacked": lambda: StackedRecurrent(
        [Bidirectional(Recurrent(GRUCell(4), return_sequences=True)),
         Recurrent(LSTMCell(8), return_sequences=True),
         Recurrent(SimpleRNNCell(8))], dropout=0.1),
}


def _assert_builtin_only(flatbuffer):
    names = op_names(flatbuffer)
    assert "WHILE" in names  # the time loop is a real loop, not unrolled
    bad = [n for n in names if n.startswith("Flex") or not n.isupper()]
    assert not bad, f"non-builtin ops: {bad}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_export_savedmodel_and_tflite_builtin(name, tmp_path):
    inp = keras.Input((None, FEATURES), name="features")
    model = keras.Model(inp, MODELS[name]()(inp))
    rng = np.random.default_rng(0)
    for w in model.weights:  # beyond the initial biases
        w.assign(rng.normal(size=w.shape, scale=0.4).astype("float32"))

    path = str(tmp_path / "saved")
    model.export(path, verbose=False)
    reloaded = tf.saved_model.load(path)
    x = rng.normal(size=(3, 9, FEATURES)).astype("float32")
    np.testing.assert_allclose(reloaded.serve(x), model(x), atol=1e-5)

    # Default signature: dynamic batch and sequence length.
    dynamic = convert_builtin(path)
    _assert_builtin_only(dynamic)
    for shape in [(1, 7), (4, 13)]:
        x = rng.normal(size=shape + (FEATURES,)).astype("float32")
        (got,) = run_tflite(dynamic, x)
        np.testing.assert_allclose(got, model(x), atol=1e-5)

    # Batch-1 signature with a free sequence length.
    path1 = str(tmp_path / "batch1")
    model.export(path1, verbose=False, input_signature=[
        tf.TensorSpec((1, None, FEATURES), tf.float32)])
    single = convert_builtin(path1)
    _assert_builtin_only(single)
    for steps in (5, 20):
        x = rng.normal(size=(1, steps, FEATURES)).astype("float32")
        (got,) = run_tflite(single, x)
        np.testing.assert_allclose(got, model(x), atol=1e-5)


def test_op_names_reports_flex_ops(tmp_path):
    """The builtin-only check can fail: a Flex op shows up by name."""
    fn = tf.function(
        lambda x: tf.strings.length(tf.strings.as_string(x)),
        input_signature=[tf.TensorSpec((None,), tf.float32)],
    )
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [fn.get_concrete_function()])
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    names = op_names(converter.convert())
    assert any(n.startswith("Flex") for n in names), names
    module = tf.Module()
    module.f = fn
    tf.saved_model.save(module, str(tmp_path / "flex"),
                        signatures=fn.get_concrete_function())
    with pytest.raises(Exception, match="(?i)flex|select|not supported"):
        convert_builtin(str(tmp_path / "flex"))
