"""Dynamic-range int8 files hold a tied embedding table once: the lookup
reads the output projection's per-channel int8 copy, each row with its own
scale (`seqkeras.export.tflite.share_embedding_tables`), checked against a
NumPy per-row quantization of the table."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqkeras.export.tflite import (
    convert_builtin,
    convert_in_new_process,
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


def _converted(path, table, tied=True):
    """The lookup's dynamic-range int8 file, converted in this process."""
    keys = save_functions(*_functions(table, tied), path)
    return convert_builtin(str(path), keys[0], quantize="dynamic_int8")


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


def test_tables_stored_after_the_flatbuffer(tmp_path):
    """The new-process conversion writes buffers after the flatbuffer
    (offset and size): they are laid out again after the rewrite."""
    table = _table()
    functions, variables = _functions(table)
    keys = save_functions(functions, variables, tmp_path / "saved")
    path = convert_in_new_process(tmp_path / "saved", keys, tmp_path / "m.tflite", "dynamic_int8")
    flatbuffer = path.read_bytes()
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    assert any(b.offset > 1 for b in model.buffers)  # the format under test
    assert len(_int8_tables(flatbuffer)) == 1
    _check_rows(flatbuffer, table)


@pytest.mark.parametrize("bad", [b"", b"not a model"])
def test_bad_flatbuffer_is_refused(bad):
    with pytest.raises((ValueError, TypeError), match="share_embedding_tables"):
        share_embedding_tables(bad)
