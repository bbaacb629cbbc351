"""Shared export check: SavedModel reload and builtin-only TFLite."""

import numpy as np
import tensorflow as tf

from seqkeras.export import convert_builtin, op_names, run_tflite
from seqkeras.export.audit import serving_ops


def assert_builtin_only(flatbuffer, required=()):
    names = op_names(flatbuffer)
    bad = [n for n in names if n.startswith("Flex") or not n.isupper()]
    assert not bad, f"non-builtin ops: {bad}"
    for op in required:
        assert op in names, (op, names)
    return names


def check_export(model, path, features, rng, shapes=((1, 7), (4, 13)),
                 required_ops=(), input_signature=None):
    """Exports `model` to `path`, checks the reloaded SavedModel and the
    builtin-only TFLite conversion against Keras (<= 1e-5) on inputs of the
    given (batch, time) shapes."""
    model.export(str(path), verbose=False, input_signature=input_signature)
    reloaded = tf.saved_model.load(str(path))
    flatbuffer = convert_builtin(str(path))
    assert_builtin_only(flatbuffer, required_ops)
    for shape in shapes:
        x = rng.normal(size=tuple(shape) + (features,)).astype("float32")
        expected = np.asarray(model(x))
        np.testing.assert_allclose(reloaded.serve(x), expected, atol=1e-5)
        (got,) = run_tflite(flatbuffer, x)
        np.testing.assert_allclose(got, expected, atol=1e-5)
    return flatbuffer


def assert_servable(path):
    """No XLA-only op (pip TensorFlow registers a compile-on-demand CPU
    kernel for `XlaDynamicUpdateSlice`, so the name is checked, not only
    the kernel registry) and a regular CPU (or device-default) kernel for
    every op: what the TF Serving binary runs without experimental
    flags."""
    from tensorflow.python.framework import kernels

    ops = serving_ops(path)
    xla = sorted(op for op in ops if op.startswith("Xla"))
    assert not xla, f"{path}: XLA-only ops {xla}"
    missing = sorted(
        op for op in ops if not {k.device_type for k in
                                 kernels.get_registered_kernels_for_op(op)
                                 .kernel} & {"CPU", "DEFAULT"})
    assert not missing, f"{path}: ops without a CPU kernel {missing}"
    return ops
