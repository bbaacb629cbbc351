"""int4 files can keep a GGUF Q4_1 checkpoint's weights exactly
(`quantize_int4(keep_q4_1=True)`, the "int4_q4_1" mode): a weight whose
every block of 32 holds Q4_1's values (float32(d * q + m), float16 d
and m, q in 0..15) is stored as the codes q - 8 with the block scales d,
and the offsets m + 8 d reach the output through a float32 product of
the input's block sums. Checked against a NumPy Q4_1 quantizer
(llama.cpp's rule) and a NumPy reading of the file's int4 nibbles,
scales and offsets; and, through LiteRT, against NumPy float32 products:
only the run time's rounding is left (8-bit activations, bfloat16 block
scales), far below `litert-quantizer`'s own re-quantization of the same
weights."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from ai_edge_litert import schema_py_generated as schema
from seqkeras.export.litert_files import _fused_products, _q4_1
from tests.export.export_checks import operators
from seqkeras.export.tflite import (
    convert_builtin,
    quantize_int4,
    run_tflite_signature,
    save_functions,
)

pytest.importorskip("litert_quantizer")


def q4_1(weight):
    """`weight` (out, in) rounded as llama.cpp's Q4_1 and dequantized as
    gguf does: per block of 32, d = (max - min) / 15 and m = min in
    float16, q = round((x - m) / d), then float32(d * q + m)."""
    out, size = weight.shape
    blocks = weight.reshape(out, size // 32, 32).astype(np.float32)
    low, high = blocks.min(-1, keepdims=True), blocks.max(-1, keepdims=True)
    d = ((high - low) / 15).astype(np.float16).astype(np.float32)
    m = low.astype(np.float16).astype(np.float32)
    q = np.clip(np.floor((blocks - m) / np.where(d > 0, d, 1) + 0.5), 0, 15)
    return (d * q + m).reshape(out, size).astype(np.float32)


def _weights():
    rng = np.random.default_rng(0)
    first = q4_1(rng.standard_normal((64, 96)) * np.logspace(-2, 0, 64)[:, None])
    second = q4_1(rng.standard_normal((40, 96)))
    second[3, :32] = second[3, 0]  # a block of one value (d = 0)
    third = q4_1(rng.standard_normal((96, 64)) * 0.1)
    return first, second, third


def _file(directory, first, second, third):
    """Two signatures sharing the weights (as prefill and decode do: one
    buffer, a tensor name in each): two products of one input (2-D and
    3-D, its time dynamic in one), a fused ReLU, float32."""
    weights = [keras.Variable(w) for w in (first, second, third)]

    def products(x):
        a = tf.nn.relu(tf.einsum("bti,oi->bto", x, weights[0].value))
        b = tf.matmul(tf.reshape(x, [-1, 96]), weights[1].value, transpose_b=True)
        return {"y": tf.einsum("bto,po->btp", a, weights[2].value), "b": b}

    @tf.function(input_signature=[tf.TensorSpec([1, None, 96], name="x")])
    def many(x):
        return products(x)

    @tf.function(input_signature=[tf.TensorSpec([1, 1, 96], name="x")])
    def one(x):
        return products(x)

    keys = save_functions([many, one], weights, str(directory))
    return convert_builtin(str(directory), keys)


def _stored(flatbuffer, signature=0):
    """{weight shape: the weight the int4 file holds}, read with NumPy:
    the FULLY_CONNECTED's int4 nibbles (low first) times its block scales,
    plus the offsets of the product its ADD sums in (none: zero)."""
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    graph = model.subgraphs[signature]
    codes = [c.builtinCode for c in model.operatorCodes]
    producer = {int(o): op for op in graph.operators for o in op.outputs}

    def data(tensor, dtype):
        return np.frombuffer(bytes(model.buffers[tensor.buffer].data), dtype)

    found = {}
    for op in graph.operators:
        tensor = graph.tensors[op.inputs[1]]
        if codes[op.opcodeIndex] != schema.BuiltinOperator.FULLY_CONNECTED:
            continue
        if tensor.type != schema.TensorType.INT4:
            continue
        out, size = tensor.shape
        raw = data(tensor, np.uint8)
        nibbles = np.stack([raw & 15, raw >> 4], -1).reshape(out, size).astype(np.int8)
        nibbles = np.where(nibbles > 7, nibbles - 16, nibbles).astype(np.float32)
        scales = data(graph.tensors[tensor.quantization.details.scales], np.float16)
        weight = nibbles.reshape(out, -1, 32) * scales.astype(np.float32).reshape(out, -1, 1)
        adds = [
            a
            for a in graph.operators
            if codes[a.opcodeIndex] == schema.BuiltinOperator.ADD and op.outputs[0] in a.inputs
        ]
        if adds:
            correction = producer[int(adds[0].inputs[1])]
            offsets = data(graph.tensors[correction.inputs[1]], np.float32).reshape(out, -1)
            weight = weight + offsets[..., None]
        found[(int(out), int(size))] = weight.reshape(out, size)
    return found


def test_q4_1_weights_are_stored_exactly_and_only_activations_round(tmp_path):
    first, second, third = _weights()
    flatbuffer = _file(tmp_path, first, second, third)
    exact = quantize_int4(flatbuffer, keep_q4_1=True)
    for signature in (0, 1):
        stored = _stored(exact, signature)
        for weight in (first, second, third):
            np.testing.assert_array_equal(stored[weight.shape], weight)  # lossless
    # the mode of every export function: the same file
    by_mode = convert_builtin(str(tmp_path), ["many", "one"], quantize="int4_q4_1")
    np.testing.assert_array_equal(_stored(by_mode, 1)[first.shape], first)
    requantized = quantize_int4(flatbuffer)  # the default: litert-quantizer's own int4
    assert np.abs(_stored(requantized)[first.shape] - first).max() > 1e-3

    x = np.random.default_rng(1).standard_normal((1, 5, 96)).astype("float32")
    want = {
        "y": np.maximum(x @ first.T, 0) @ third.T,
        "b": x[0] @ second.T,
    }
    errors = {}
    for name, file in (("exact", exact), ("requantized", requantized)):
        got = run_tflite_signature(file, "many", x=x)
        errors[name] = max(np.abs(got[k] - want[k]).max() / np.abs(want[k]).max() for k in want)
        one = run_tflite_signature(file, "one", x=x[:, :1])
        np.testing.assert_allclose(one["y"], got["y"][:, :1], rtol=1e-5, atol=1e-5)
    # measured: 0.7% (8-bit activations) against 13.5% (weights re-rounded too)
    assert errors["exact"] < 0.02 and errors["exact"] < errors["requantized"] / 5, errors


def test_only_exact_q4_1_blocks_are_recognised():
    first, _, _ = _weights()
    codes, scales, offsets = _q4_1(first)
    rebuilt = codes.reshape(64, 3, 32) * scales.astype(np.float32)[..., None] + offsets[..., None]
    np.testing.assert_allclose(rebuilt.reshape(first.shape), first, rtol=1e-6, atol=1e-7)
    assert codes.min() >= -8 and codes.max() <= 7
    nudged = first.copy()
    nudged[5, 40] = np.nextafter(nudged[5, 40], np.float32(np.inf))  # one value off the grid
    assert _q4_1(nudged) is None
    assert _q4_1(np.random.default_rng(2).standard_normal((8, 64)).astype("float32")) is None
    assert _q4_1(first[:, :80]) is None  # rows not whole blocks


def test_products_of_one_input_are_fused_and_keep_their_q4_1_blocks(tmp_path):
    """Query, key and value read one input: one product of the stacked
    weights, then SPLIT_V (float32 outputs as before; int4 keeping Q4_1:
    the stacked weight exact); a product with a bias stays apart."""
    rng = np.random.default_rng(4)
    weights = [q4_1(rng.standard_normal((rows, 64))) for rows in (64, 32, 32)]
    variables = [keras.Variable(w) for w in weights]
    bias = keras.Variable(rng.standard_normal(16).astype("float32"))
    apart = keras.Variable(q4_1(rng.standard_normal((16, 64))))

    @tf.function(input_signature=[tf.TensorSpec([1, None, 64], name="x")])
    def step(x):
        out = {f"y{i}": tf.einsum("bti,oi->bto", x, v.value) for i, v in enumerate(variables)}
        out["z"] = tf.einsum("bti,oi->bto", x, apart.value) + bias.value
        return out

    @tf.function(input_signature=[tf.TensorSpec([1, 1, 64], name="x")])
    def backwards(x):  # another signature, its products in the other order
        return {f"y{i}": tf.einsum("bti,oi->bto", x, variables[i].value) for i in (2, 1, 0)}

    keys = save_functions([step, backwards], variables + [bias, apart], str(tmp_path))
    flatbuffer = convert_builtin(str(tmp_path), keys)
    fused = _fused_products(flatbuffer)
    assert operators(flatbuffer).count("FULLY_CONNECTED") == 7
    names = operators(fused)
    assert names.count("FULLY_CONNECTED") == 3 and names.count("SPLIT_V") == 2, names
    # one stacked buffer for both signatures, the parts' own dropped
    assert len(fused) < len(flatbuffer) + 4096
    x = rng.standard_normal((1, 3, 64)).astype("float32")
    want = {f"y{i}": x @ w.T for i, w in enumerate(weights)}
    for file in (flatbuffer, fused):
        got = run_tflite_signature(file, "step", x=x)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5)
    back = run_tflite_signature(fused, "backwards", x=x[:, :1])
    for name, value in want.items():
        np.testing.assert_allclose(back[name], value[:, :1], rtol=1e-5, atol=1e-5)
    exact = quantize_int4(flatbuffer, keep_q4_1=True)
    for signature in (0, 1):
        np.testing.assert_array_equal(_stored(exact, signature)[(128, 64)], np.concatenate(weights))


def test_products_stacked_differently_by_two_signatures_stay_apart(tmp_path):
    """Query, key and value in one signature, query and key alone in
    another: stacking would store the query and key weights twice, so
    neither is stacked (a file unchanged)."""
    rng = np.random.default_rng(5)
    variables = [keras.Variable(rng.standard_normal((32, 64)).astype("float32")) for _ in "qkv"]

    def products(x, which):
        return {f"y{i}": tf.einsum("bti,oi->bto", x, variables[i].value) for i in which}

    @tf.function(input_signature=[tf.TensorSpec([1, 2, 64], name="x")])
    def three(x):
        return products(x, (0, 1, 2))

    @tf.function(input_signature=[tf.TensorSpec([1, 2, 64], name="x")])
    def two(x):
        return products(x, (0, 1))

    keys = save_functions([three, two], variables, str(tmp_path))
    flatbuffer = convert_builtin(str(tmp_path), keys)
    assert operators(flatbuffer).count("FULLY_CONNECTED") == 5
    assert _fused_products(flatbuffer) is flatbuffer
