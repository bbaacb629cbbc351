"""Quantized files hold a tied embedding table once. Dynamic-range int8:
the lookup reads the output projection's per-channel int8 copy, each row
with its own scale (`seqkeras.export.tflite.share_embedding_tables`),
checked against a NumPy per-row quantization of the table. int4
(`quantize_int4`): the lookup becomes EMBEDDING_LOOKUP (the same values in
float32) and the table is stored once in int4 blocks of 32, checked
against a NumPy bound of half a block's step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqkeras.export.litert_files import _embedding_lookups
from seqkeras.export.tflite import (
    convert_builtin,
    convert_in_new_process,
    quantize_int4,
    run_tflite_signature,
    save_functions,
    share_embedding_tables,
)
from ai_edge_litert import schema_py_generated as schema

V, D = 96, 32


def _table():
    rng = np.random.default_rng(0)
    # rows of very different sizes: one scale for the whole table rounds the
    # small rows to a few levels, one scale per row does not
    return (rng.standard_normal((V, D)) * np.logspace(-2, 0, V)[:, None]).astype("float32")


def _functions(table, tied=True):
    weight = keras.Variable(table)  # as a model's weights reach the export
    var = weight.value

    @tf.function(input_signature=[tf.TensorSpec([1, None], tf.int32, name="ids")])
    def lookup(ids):
        rows = tf.gather(var, ids)
        out = {"rows": rows}
        if tied:
            out["logits"] = tf.matmul(tf.reshape(rows, [-1, D]), var, transpose_b=True)
        return out

    return [lookup], [weight]


def _converted(path, table, tied=True, quantize="dynamic_int8"):
    """The lookup's file, converted in this process."""
    keys = save_functions(*_functions(table, tied), path)
    return convert_builtin(str(path), keys[0], quantize=quantize)


def _int8_tables(flatbuffer):
    """(quantized_dimension, number of scales) of each distinct int8 [V, D]
    buffer the file stores, and the buffers' total size."""
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    found = {}
    for graph in model.subgraphs:
        for t in graph.tensors:
            if t.type == schema.TensorType.INT8 and list(t.shape) == [V, D] and t.buffer:
                b = model.buffers[t.buffer]
                size = b.size if b.offset > 1 else (0 if b.data is None else len(b.data))
                if size:
                    q = t.quantization
                    found.setdefault(t.buffer, set()).add(
                        None if q is None or q.scale is None else len(q.scale)
                    )
    return found


def _check_rows(flatbuffer, table):
    ids = np.array([[0, 5, 17, 40, 95, 3]], "int32")
    rows = run_tflite_signature(flatbuffer, "lookup", ids=ids)["rows"][0]
    step = np.abs(table).max(axis=1) / 127.0  # symmetric per-row int8 (NumPy reference)
    error = np.abs(rows - table[ids[0]])
    assert np.all(error <= 0.5 * step[ids[0], None] + 1e-7), error.max()
    return ids


def test_tied_table_is_stored_once_with_a_scale_per_row(tmp_path):
    table = _table()
    flatbuffer = _converted(tmp_path, table)
    tables = _int8_tables(flatbuffer)
    assert len(tables) == 1, tables  # the converter alone writes two
    (kinds,) = tables.values()
    assert V in kinds  # per channel: one scale per row
    ids = _check_rows(flatbuffer, table)
    logits = run_tflite_signature(flatbuffer, "lookup", ids=ids)["logits"]
    want = table[ids[0]] @ table.T
    np.testing.assert_allclose(logits, want, atol=0.02 * np.abs(want).max())
    assert share_embedding_tables(flatbuffer) == flatbuffer  # nothing left to share


def test_untied_table_is_left_as_converted(tmp_path):
    table = _table()
    flatbuffer = _converted(tmp_path, table, tied=False)
    assert share_embedding_tables(flatbuffer) == flatbuffer
    ids = np.array([[0, 95]], "int32")
    rows = run_tflite_signature(flatbuffer, "lookup", ids=ids)["rows"][0]
    whole = np.abs(table).max() / 127.0  # one scale for the table
    assert np.abs(rows - table[ids[0]]).max() <= 0.5 * whole + 1e-7


@pytest.mark.parametrize("quantize", ["dynamic_int8", "int4"])
def test_tables_stored_after_the_flatbuffer(tmp_path, quantize):
    """The new-process conversion writes buffers after the flatbuffer
    (offset and size), then rewrites the file in a second process: they
    are laid out again after the rewrite."""
    if quantize == "int4":
        pytest.importorskip("litert_quantizer")
    table = _table()
    functions, variables = _functions(table)
    keys = save_functions(functions, variables, tmp_path / "saved")
    path = convert_in_new_process(tmp_path / "saved", keys, tmp_path / "m.tflite", quantize)
    flatbuffer = path.read_bytes()
    if quantize == "int4":
        _check_int4(flatbuffer, table)
        return
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    assert any(b.offset > 1 for b in model.buffers)  # the format under test
    assert len(_int8_tables(flatbuffer)) == 1
    _check_rows(flatbuffer, table)


@pytest.mark.parametrize("bad", [b"", b"not a model"])
def test_bad_flatbuffer_is_refused(bad):
    with pytest.raises((ValueError, TypeError), match="share_embedding_tables"):
        share_embedding_tables(bad)


def _op_names(flatbuffer):
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    return [
        names[
            max(
                model.operatorCodes[op.opcodeIndex].builtinCode,
                model.operatorCodes[op.opcodeIndex].deprecatedBuiltinCode,
            )
        ]
        for graph in model.subgraphs
        for op in graph.operators
    ]


def test_lookups_become_embedding_lookups_with_the_same_values(tmp_path):
    table = _table()
    flatbuffer = _converted(tmp_path, table, quantize=None)
    assert "GATHER" in _op_names(flatbuffer)
    looked_up = _embedding_lookups(flatbuffer)
    assert "EMBEDDING_LOOKUP" in _op_names(looked_up) and "GATHER" not in _op_names(looked_up)
    for ids in (np.array([[0, 5, 95]], "int32"), np.array([[7]], "int32")):  # dynamic length
        want = run_tflite_signature(flatbuffer, "lookup", ids=ids)
        got = run_tflite_signature(looked_up, "lookup", ids=ids)
        np.testing.assert_array_equal(got["rows"], want["rows"])
        np.testing.assert_array_equal(got["logits"], want["logits"])


def test_int4_stores_the_tied_table_once_in_blocks_of_32(tmp_path):
    pytest.importorskip("litert_quantizer")
    table = _table()
    _check_int4(_converted(tmp_path, table, quantize="int4"), table)


def _check_int4(flatbuffer, table):
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    int4 = {
        t.buffer
        for graph in model.subgraphs
        for t in graph.tensors
        if t.type == schema.TensorType.INT4 and list(t.shape) == [V, D]
    }
    assert len(int4) == 1, int4  # the lookup's and the logits' table, once
    assert "EMBEDDING_LOOKUP" in _op_names(flatbuffer)
    ids = np.array([[0, 5, 17, 40, 95, 3]], "int32")
    out = run_tflite_signature(flatbuffer, "lookup", ids=ids)
    blocks = np.abs(table[ids[0]]).reshape(len(ids[0]), D // 32, 32).max(-1)
    step = np.repeat(blocks / 7.0, 32, axis=-1)  # symmetric int4, a scale per 32 (NumPy)
    error = np.abs(out["rows"][0] - table[ids[0]])
    assert np.all(error <= 0.5 * step * 1.01 + 1e-7), (error / step).max()
    assert np.abs(out["rows"][0] - table[ids[0]]).max() > 0  # it is quantized
    want = table[ids[0]] @ table.T
    np.testing.assert_allclose(out["logits"], want, atol=0.1 * np.abs(want).max())


def test_int4_refuses_what_is_not_a_model():
    with pytest.raises(ValueError, match="quantize_int4"):
        quantize_int4(b"not a model")


def test_int4_refuses_rows_that_are_not_whole_blocks():
    # a (48 -> 64) product: rows of 48, not a multiple of int4's blocks of 32
    # (litert-quantizer's own error names neither the function nor the rule)
    pytest.importorskip("litert_quantizer")
    weight = tf.constant(np.ones((48, 64), "float32"))

    @tf.function(input_signature=[tf.TensorSpec([1, 48])])
    def product(x):
        return {"y": tf.matmul(x, weight)}

    converter = tf.lite.TFLiteConverter.from_concrete_functions([product.get_concrete_function()])
    with pytest.raises(ValueError, match=r"`quantize_int4` .* blocks of 32 .* shape \(64, 48\)"):
        quantize_int4(converter.convert())
