"""Shared export check: SavedModel reload and builtin-only TFLite."""

import numpy as np
import tensorflow as tf

from seqkeras.export import convert_builtin, op_names, run_tflite


def operators(flatbuffer):
    """The builtin name of every operator of every signature, in order
    (`op_names` lists each operator code once)."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    return [names[codes[op.opcodeIndex]] for g in model.subgraphs for op in g.operators]


def assert_builtin_only(flatbuffer, required=()):
    names = op_names(flatbuffer)
    bad = [n for n in names if n.startswith("Flex") or not n.isupper()]
    assert not bad, f"non-builtin ops: {bad}"
    for op in required:
        assert op in names, (op, names)
    return names


def check_export(
    model, path, features, rng, shapes=((1, 7), (4, 13)), required_ops=(), input_signature=None
):
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
