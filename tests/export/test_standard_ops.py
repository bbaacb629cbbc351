"""`seqkeras.export.standard_ops`: a SavedModel's slice updates rewritten
into standard ops for TF Serving, checked against NumPy's slice update."""

import os

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from seqkeras.export.audit import audit_serving, serving_ops
from seqkeras.export.standard_ops import finish_saved_model


def _reference(operand, update, starts):
    """XLA's DynamicUpdateSlice in NumPy: the starts clamped into range."""
    out = operand.copy()
    starts = [min(max(int(s), 0), o - u) for s, o, u in zip(starts, operand.shape, update.shape)]
    out[tuple(slice(s, s + u) for s, u in zip(starts, update.shape))] = update
    return out


def _save(fn, specs, path, jit_compile=False):
    function = tf.function(fn, input_signature=specs, jit_compile=jit_compile)
    tf.saved_model.save(tf.Module(), path, signatures={"serving_default": function})
    return path


@pytest.mark.parametrize("index_dtype", [tf.int32, tf.int64])
def test_lowered_slice_updates_equal_numpy_at_every_start(index_dtype, tmp_path):
    specs = [
        tf.TensorSpec((None, None, 3), tf.float32, name="operand"),
        tf.TensorSpec((None, None, 3), tf.float32, name="update"),
        tf.TensorSpec((3,), index_dtype, name="starts"),
    ]

    def write(operand, update, starts):  # keras.ops: XlaDynamicUpdateSlice on TensorFlow
        return {"out": ops.slice_update(operand, starts, update)}

    path = _save(write, specs, str(tmp_path / "m"))
    assert "XlaDynamicUpdateSlice" in serving_ops(path)
    assert finish_saved_model(path) == 1
    assert "XlaDynamicUpdateSlice" not in serving_ops(path)
    report = audit_serving(path)
    assert report["xla"] == [] and report["no_kernel"] == []
    assert not os.path.exists(os.path.join(path, "fingerprint.pb"))
    served = tf.saved_model.load(path).signatures["serving_default"]
    rng = np.random.default_rng(0)
    operand = rng.normal(size=(5, 4, 3)).astype("float32")
    # in range, at the end, and starts XLA clamps (too large, negative)
    for shape, starts in [
        ((1, 4, 3), (2, 0, 0)),
        ((2, 2, 3), (3, 2, 0)),
        ((1, 4, 3), (9, 0, 0)),
        ((2, 1, 3), (-3, 7, 5)),
    ]:
        update = rng.normal(size=shape).astype("float32")
        got = served(
            operand=tf.constant(operand),
            update=tf.constant(update),
            starts=tf.constant(starts, index_dtype),
        )["out"]
        np.testing.assert_array_equal(got.numpy(), _reference(operand, update, starts))


def test_a_loop_buffer_written_in_a_while_body_is_lowered(tmp_path):
    """The writes of a loop body (a library function): the buffer keeps
    each step's value."""

    def fill(x):
        steps = tf.shape(x)[0]

        def body(t, buffer):
            row = x[t] * tf.cast(t + 1, tf.float32)
            return t + 1, ops.slice_update(buffer, (t, 0), row[None])

        _, buffer = tf.while_loop(lambda t, _: t < steps, body, (0, tf.zeros_like(x)))
        return {"out": buffer}

    path = _save(fill, [tf.TensorSpec((None, 4), tf.float32, name="x")], str(tmp_path / "m"))
    assert finish_saved_model(path) == 1
    assert audit_serving(path)["xla"] == []
    x = np.arange(24, dtype="float32").reshape(6, 4)
    got = tf.saved_model.load(path).signatures["serving_default"](x=tf.constant(x))["out"]
    np.testing.assert_array_equal(got.numpy(), x * np.arange(1, 7, dtype="float32")[:, None])


def test_xla_clusters_keep_their_slice_updates(tmp_path):
    def write(operand, update):
        return {"out": ops.slice_update(operand, (1, 0), update)}

    specs = [tf.TensorSpec((4, 2), tf.float32), tf.TensorSpec((1, 2), tf.float32)]
    path = _save(write, specs, str(tmp_path / "m"), jit_compile=True)
    before = open(os.path.join(path, "saved_model.pb"), "rb").read()
    assert finish_saved_model(path) == 0
    assert open(os.path.join(path, "saved_model.pb"), "rb").read() == before


def test_not_a_saved_model_is_refused(tmp_path):
    with pytest.raises(ValueError, match="finish_saved_model.*path.*has no saved_model.pb"):
        finish_saved_model(str(tmp_path))


def test_an_exported_recurrent_model_loads_quietly_and_differentiates(tmp_path, caplog):
    """Written without its loops' custom gradients, a served model loads
    without the unsaved-gradient warning and TensorFlow differentiates
    its saved ops: the gradient equals Keras' (the custom gradient)."""
    import keras

    import seqkeras
    from seqkeras.export import saved_model

    inputs = keras.Input((None, 3), name="x")
    lstm = seqkeras.layers.Recurrent(seqkeras.layers.LSTMCell(4), return_sequences=True)
    model = keras.Model(inputs, lstm(inputs))
    path = saved_model(model, tmp_path / "m" / "1")
    with caplog.at_level("WARNING"):
        loaded = tf.saved_model.load(str(path))  # kept: the signature reads its variables
    served = loaded.signatures["serving_default"]
    assert "custom gradients" not in caplog.text
    x = tf.constant(np.random.default_rng(0).normal(size=(2, 5, 3)).astype("float32"))
    weights = tf.range(1.0, 5.0)
    grads = []
    for call in (lambda x: served(x=x)[model.output_names[0]], lambda x: model(x)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(call(x) * weights)
        grads.append(tape.gradient(loss, x).numpy())
    np.testing.assert_allclose(grads[0], grads[1], atol=1e-5)
