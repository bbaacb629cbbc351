"""Recurrent models export to SavedModel and to builtin-only TFLite.

Both from the default `model.export()` signature (dynamic batch and time)
and from a batch-1 signature, run in LiteRT at sequence lengths not fixed
at conversion, matching Keras within 1e-5.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqkeras.export import convert_builtin, op_names
from seqkeras.layers import (
    Bidirectional,
    GRUCell,
    LSTMCell,
    Recurrent,
    SimpleRNNCell,
    StackedRecurrent,
)
from tests.export.export_checks import check_export

FEATURES = 3
MODELS = {
    "rnn": lambda: Recurrent(SimpleRNNCell(6), return_sequences=True),
    "gru": lambda: Recurrent(GRUCell(6)),
    "gru_reset_after": lambda: Recurrent(GRUCell(6, reset_after=True), return_sequences=True),
    "lstm": lambda: Recurrent(LSTMCell(6), go_backwards=True),
    "bidirectional": lambda: Bidirectional(Recurrent(LSTMCell(5), return_sequences=True)),
    "stacked": lambda: StackedRecurrent(
        [
            Bidirectional(Recurrent(GRUCell(4), return_sequences=True)),
            Recurrent(LSTMCell(8), return_sequences=True),
            Recurrent(SimpleRNNCell(8)),
        ],
        dropout=0.1,
    ),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_export_savedmodel_and_tflite_builtin(name, tmp_path):
    inp = keras.Input((None, FEATURES), name="features")
    model = keras.Model(inp, MODELS[name]()(inp))
    rng = np.random.default_rng(0)
    for w in model.weights:  # beyond the initial biases
        w.assign(rng.normal(size=w.shape, scale=0.4).astype("float32"))
    # Default signature: dynamic batch and sequence length; the time loop
    # stays a real loop (WHILE), not unrolled.
    check_export(model, tmp_path / "saved", FEATURES, rng, required_ops=["WHILE"])
    # A batch-1 signature with a free sequence length.
    check_export(
        model,
        tmp_path / "batch1",
        FEATURES,
        rng,
        shapes=[(1, 5), (1, 20)],
        required_ops=["WHILE"],
        input_signature=[tf.TensorSpec((1, None, FEATURES))],
    )


def test_op_names_reports_flex_ops(tmp_path):
    """The builtin-only check can fail: a Flex op shows up by name."""
    fn = tf.function(
        lambda x: tf.strings.length(tf.strings.as_string(x)),
        input_signature=[tf.TensorSpec((None,), tf.float32)],
    )
    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()])
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS,
        tf.lite.OpsSet.SELECT_TF_OPS,
    ]
    names = op_names(converter.convert())
    assert any(n.startswith("Flex") for n in names), names
    module = tf.Module()
    module.f = fn
    tf.saved_model.save(module, str(tmp_path / "flex"), signatures=fn.get_concrete_function())
    with pytest.raises(Exception, match="(?i)flex|select|not supported"):
        convert_builtin(str(tmp_path / "flex"))
