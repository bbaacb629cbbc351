"""LiteRT files after the converter, without TensorFlow: the rewrites
of a converted flatbuffer (shared int8 embedding tables, EMBEDDING_LOOKUP
lookups), `litert-quantizer`'s int8 and int4 weights, and the filling of
stand-in weights (`seqkeras.export.tflite.save_functions(stand_ins=True)`).
This file imports NumPy, `ai_edge_litert`'s schema and `flatbuffers` only:
`convert_in_new_process` runs it in a process of its own, loaded by its
path, so that finishing a file does not hold TensorFlow's memory."""

import contextlib
import io
import json
import os

import numpy as np
from ai_edge_litert import schema_py_generated as schema


def _converted(converter, quantize):
    """The converter's own flatbuffer for `quantize` (int8 and float16 are
    the converter's options; int4 converts float32 for `_finish`).
    TensorFlow is imported here, not with this file."""
    import tensorflow as tf

    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    by_converter = quantize in ("dynamic_int8", "float16")
    converter.optimizations = [tf.lite.Optimize.DEFAULT] if by_converter else []
    converter.target_spec.supported_types = [tf.float16] if quantize == "float16" else []
    return converter.convert()


def _finish(flatbuffer, quantize):
    """What follows the converter: dynamic-range int8 files share their
    tied embedding tables (`share_embedding_tables`); int4 files are
    quantized from float32 (`quantize_int4`; "int4_q4_1" keeps Q4_1
    weights)."""
    if quantize == "dynamic_int8":
        return share_embedding_tables(flatbuffer)
    if quantize in ("int4", "int4_q4_1"):
        return quantize_int4(flatbuffer, keep_q4_1=quantize == "int4_q4_1")
    return flatbuffer


def quantize_int4(flatbuffer, keep_q4_1=False):
    """A float32 TFLite model with 4-bit weights: `litert-quantizer`'s
    `dynamic_wi4b32_afp32` recipe (symmetric int4 in blocks of 32 along
    each row, a scale per block; activations quantized at run time) on
    every FULLY_CONNECTED weight and every looked-up table of 1,024
    elements or more. Lookups of constant float tables are first rewritten as
    EMBEDDING_LOOKUP (the converter writes GATHER, which the quantizer
    leaves in float32), so an embedding table is quantized as well, and
    held once where tied logits multiply the same table (SmolLM2-135M:
    77 MB, against 98 MB for llama.cpp's Q4_1 file). Builtin ops only.

    With `keep_q4_1`, a weight that holds a GGUF Q4_1 tensor's values
    (every block of 32 is float32(d * q + m), d and m float16, q in
    0..15: what a Q4_1 checkpoint's dequantization gives) is not rounded
    again: its int4 codes are q - 8 with the block scales d, and the
    offsets m + 8 d reach the output through a float32 product of the
    input's block sums, added to the int4 product's output (the
    quantizer's own scales, max / 7, cannot be given, so this re-encoding
    is ours). What is left is the run time's: 8-bit activations, and
    XNNPACK holds block scales in bfloat16 (d to 8 bits). SmolLM2-135M:
    91 MB; its next-token choices on float32's tokens agree 80% of the
    time, against 66% without (`benchmarks/phone_file_agreement.py`),
    but three more small operators per product decode about a fifth
    slower (211 against 271 tokens/s on 2 cores).

    Products that read one input (a Transformer's query, key and value;
    gate and up) are stacked into one first (`_fused_products`): the
    same values, fewer operators.

    Args:
        flatbuffer: a float32 TFLite model, bytes.
        keep_q4_1: store weights that hold Q4_1 blocks exactly (above).

    Returns:
        The int4 model, bytes.

    Raises:
        TypeError: `flatbuffer` is not bytes.
        ValueError: `flatbuffer` is not a TFLite model, or a weight's rows
            are not a multiple of 32 long (a FULLY_CONNECTED's input size,
            a table's width).
        ImportError: `litert-quantizer` is not installed (`pip install
            litert-quantizer`; the `apps` extra has it).
    """
    flatbuffer = check_flatbuffer("quantize_int4", flatbuffer)
    flatbuffer = _prepared(flatbuffer)  # as the quantizer sees it
    exact = _q4_1_weights(flatbuffer) if keep_q4_1 else None
    quantized = _litert_quantized(
        "quantize_int4", flatbuffer, "dynamic_wi4b32_afp32", block=32, prepared=True
    )
    return _exact_q4_1(quantized, exact) if exact else quantized


def _fused_products(flatbuffer):
    """`flatbuffer` with the float32 FULLY_CONNECTEDs that read one input
    (a Transformer's query, key and value; gate and up) made one product
    of their weights stacked by rows, then SPLIT_V into their outputs: one
    operator to quantize and run instead of two or three (int8 and int4
    keep a scale per row or per block of a row, so the stacked weight
    quantizes as its parts do). Weights shared by several signatures stay
    shared; products with a bias or a fused activation stay apart."""
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    after = _fuse(model, flatbuffer)
    return flatbuffer if after is None else _pack(model, flatbuffer, after)


def _fuse(model, flatbuffer):
    """`_fused_products` on `model` (a `schema.ModelT` of `flatbuffer`),
    in place; the stacked weights ({buffer index: values}, for `_pack`'s
    `after`), or None when nothing changed."""
    codes = _codes(model)
    fc = schema.BuiltinOperator.FULLY_CONNECTED
    plans = []  # (graph, input, keep_num_dims, input size, first operator, the group)
    for graph in model.subgraphs:
        groups = {}
        for op in graph.operators:
            if codes[op.opcodeIndex] != fc or len(op.inputs) < 2:
                continue
            weight, options = graph.tensors[op.inputs[1]], op.builtinOptions
            if (
                (len(op.inputs) > 2 and op.inputs[2] >= 0)
                or weight.type != schema.TensorType.FLOAT32
                or len(weight.shape) != 2
                or _buffer_bytes(model, flatbuffer, weight.buffer) is None
                or options is None
                or options.fusedActivationFunction != schema.ActivationFunctionType.NONE
            ):
                continue
            key = (int(op.inputs[0]), bool(options.keepNumDims), int(weight.shape[1]))
            groups.setdefault(key, []).append(op)
        for (x, keep, size), ops in groups.items():
            if len(ops) > 1:  # stacked in the order of their buffers: alike in every signature
                group = sorted(ops, key=lambda op: int(graph.tensors[op.inputs[1]].buffer))
                plans.append((graph, x, keep, size, ops[0], group))
    # a weight also read elsewhere, or stacked with others in another
    # signature, stays apart: stacking it would store it twice
    reads, stacks = {}, {}
    for graph in model.subgraphs:
        for op in graph.operators:
            for i in op.inputs[1:]:
                if i >= 0:
                    buffer = int(graph.tensors[i].buffer)
                    reads[buffer] = reads.get(buffer, 0) + 1
    for graph, *_, group in plans:
        buffers = tuple(int(graph.tensors[op.inputs[1]].buffer) for op in group)
        for buffer in buffers:
            stacks.setdefault(buffer, []).append(buffers)
    fused, after, dropped, replace = {}, {}, set(), {}
    for graph, x, keep, size, first, ops in plans:
        weights = [graph.tensors[op.inputs[1]] for op in ops]
        buffers = tuple(int(w.buffer) for w in weights)
        if any(len(set(stacks[b])) > 1 or reads[b] != len(stacks[b]) for b in buffers):
            continue
        if buffers not in fused:
            stacked = np.concatenate(
                [
                    np.frombuffer(_buffer_bytes(model, flatbuffer, b), np.uint8)
                    .view(np.float32)
                    .reshape(w.shape)
                    for b, w in zip(buffers, weights)
                ]
            )
            model.buffers.append(schema.BufferT())
            fused[buffers] = len(model.buffers) - 1
            after[fused[buffers]] = stacked
            dropped.update(buffers)
        rows = [int(w.shape[0]) for w in weights]
        outputs = [graph.tensors[op.outputs[0]] for op in ops]
        name = (graph.name or b"") + b"/fused:" + b"+".join(w.name for w in weights)
        weight = _new_tensor(graph, [sum(rows), size], buffer=fused[buffers], name=name)
        joined = _new_tensor(graph, like=outputs[0], last=sum(rows))
        sizes = _new_tensor(graph, [len(rows)], buffer=_add_buffer(model, np.int32(rows)))
        graph.tensors[sizes].type = schema.TensorType.INT32
        axis = _new_tensor(graph, [], buffer=_add_buffer(model, np.int32([-1])))
        graph.tensors[axis].type = schema.TensorType.INT32
        options = schema.FullyConnectedOptionsT()
        options.keepNumDims = keep
        split = schema.SplitVOptionsT()
        split.numSplits = len(rows)
        replace[id(first)] = [
            _operator(
                model,
                codes,
                fc,
                [x, weight, -1],
                [joined],
                schema.BuiltinOptions.FullyConnectedOptions,
                options,
            ),
            _operator(
                model,
                codes,
                schema.BuiltinOperator.SPLIT_V,
                [joined, sizes, axis],
                [int(op.outputs[0]) for op in ops],
                schema.BuiltinOptions.SplitVOptions,
                split,
            ),
        ]
        for op in ops:
            if op is not first:
                replace[id(op)] = []
    if not replace:
        return None
    for graph in model.subgraphs:
        graph.operators = [n for op in graph.operators for n in replace.get(id(op), [op])]
    used = {
        int(graph.tensors[i].buffer)
        for graph in model.subgraphs
        for op in graph.operators
        for i in list(op.inputs) + list(op.outputs)
        if i >= 0
    }
    for index in dropped - used:
        model.buffers[index] = schema.BufferT()
    for graph in model.subgraphs:  # the products' old weights: tensors no operator reads
        read = {i for op in graph.operators for i in list(op.inputs) + list(op.outputs)}
        for index, tensor in enumerate(graph.tensors):
            if tensor.buffer in dropped and index not in read:
                tensor.buffer = 0
    return after


#: the smallest positive normal float16: the scale of a Q4_1 block whose
#: values are all equal (its codes 0, its value carried by the offset)
_TINY_SCALE = np.float16(2.0**-14)


def _q4_1(weight):
    """`(codes, scales, offsets)` when every block of 32 along the rows of
    `weight` (float32, (out, in)) holds a GGUF Q4_1 block's values as
    llama.cpp's and gguf's dequantization writes them, float32(d * q + m)
    for float16 `d` and `m` and `q` in 0..15 (checked value by value);
    else None. codes: q - 8, int8 (out, in); scales: d, float16 (out,
    in / 32); offsets: m + 8 d, float32 (out, in / 32): block by block,
    weight = scales * codes + offsets."""
    out, size = weight.shape
    if weight.dtype != np.float32 or size % 32 or not size:
        return None
    blocks = weight.reshape(out, size // 32, 32)
    low = blocks.min(-1, keepdims=True)
    scales = ((blocks.max(-1, keepdims=True) - low) / np.float32(15)).astype(np.float16)
    d = scales.astype(np.float32)
    q = np.rint((blocks - low) / np.where(d > 0, d, np.float32(1)))
    if (
        not np.all(np.isfinite(q))
        or q.min() < 0
        or q.max() > 15
        or not np.array_equal(low.astype(np.float16).astype(np.float32), low)
        or not np.array_equal(d * q + low, blocks)
    ):
        return None
    codes = (q - 8).astype(np.int8)
    flat = d == 0  # every value m: codes 0, a positive scale
    codes[np.broadcast_to(flat, codes.shape)] = 0
    offsets = np.where(flat, low, low + np.float32(8) * d)[..., 0].astype(np.float32)
    scales = np.where(flat, _TINY_SCALE, scales)[..., 0]
    return codes.reshape(out, size), scales, offsets


def _q4_1_weights(flatbuffer):
    """`{name: (codes, scales, offsets)}` (`_q4_1`) of each float32
    FULLY_CONNECTED weight of `flatbuffer` that holds Q4_1 blocks."""
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    codes = _codes(model)
    names, blocks = {}, {}  # a weight shared by signatures: one buffer, a name in each
    for graph in model.subgraphs:
        for op in graph.operators:
            if codes[op.opcodeIndex] != schema.BuiltinOperator.FULLY_CONNECTED:
                continue
            tensor = graph.tensors[op.inputs[1]]
            if tensor.type != schema.TensorType.FLOAT32 or len(tensor.shape) != 2:
                continue
            names.setdefault(tensor.buffer, set()).add(tensor.name)
            if tensor.buffer in blocks:
                continue
            data = _buffer_bytes(model, flatbuffer, tensor.buffer)
            blocks[tensor.buffer] = None
            if data is not None and len(data) == 4 * np.prod(tensor.shape):
                weight = np.frombuffer(data, np.uint8).view(np.float32).reshape(tensor.shape)
                blocks[tensor.buffer] = _q4_1(weight)
    return {
        name: found
        for buffer, found in blocks.items()
        if found is not None
        for name in names[buffer]
    }


def _exact_q4_1(flatbuffer, exact):
    """`flatbuffer` (int4 by `litert-quantizer`) with each weight of
    `exact` (`_q4_1_weights`, by tensor name) holding its Q4_1 blocks
    exactly: its int4 codes become q - 8 and its block scales d (the
    quantizer's own scales, max / 7, cannot be given), and the offsets
    reach the output through float32 FULLY_CONNECTEDs: the input's sums
    over each block of 32 (a 0/1 matrix, one per input size and input),
    times the offsets, added to the weight's output. Lossless: a
    re-encoding of weights already in 4 bits, not a quantization."""
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    codes = _codes(model)
    fc, add = schema.BuiltinOperator.FULLY_CONNECTED, schema.BuiltinOperator.ADD
    by_buffer = {}  # by the weight's buffer: every product of it gets its offsets
    for graph in model.subgraphs:
        for op in graph.operators:
            weight = graph.tensors[op.inputs[1]] if codes[op.opcodeIndex] == fc else None
            if weight is not None and weight.type == schema.TensorType.INT4:
                if weight.name in exact and tuple(weight.shape) == exact[weight.name][0].shape:
                    by_buffer.setdefault(weight.buffer, exact[weight.name])
    written, offsets, sums = set(), {}, {}
    for graph in model.subgraphs:
        operators, block_sums = [], {}
        for op in graph.operators:
            weight = graph.tensors[op.inputs[1]] if codes[op.opcodeIndex] == fc else None
            if weight is None or weight.buffer not in by_buffer:
                operators.append(op)
                continue
            q, scales, offset = by_buffer[weight.buffer]
            if weight.buffer not in offsets:
                packed = (q[:, 0::2].view(np.uint8) & 15) | (q[:, 1::2].view(np.uint8) << 4)
                model.buffers[weight.buffer] = _inline_buffer(packed)
                offsets[weight.buffer] = _add_buffer(model, offset)
            scale_buffer = graph.tensors[weight.quantization.details.scales].buffer
            if scale_buffer not in written:
                model.buffers[scale_buffer] = _inline_buffer(scales.astype(np.float16))
                written.add(scale_buffer)
            size = int(weight.shape[1])
            if size not in sums:
                indicator = np.arange(size) // 32 == np.arange(size // 32)[:, None]
                sums[size] = _add_buffer(model, indicator.astype(np.float32))
            options, x, y = op.builtinOptions, op.inputs[0], op.outputs[0]
            added = schema.AddOptionsT()  # the activation moves after the sum
            added.fusedActivationFunction = options.fusedActivationFunction
            options.fusedActivationFunction = schema.ActivationFunctionType.NONE
            key = (x, size, bool(options.keepNumDims))
            if key not in block_sums:
                matrix = _new_tensor(graph, [size // 32, size], buffer=sums[size])
                block_sums[key] = _new_tensor(graph, like=graph.tensors[y], last=size // 32)
                operators.append(
                    _operator(
                        model,
                        codes,
                        fc,
                        [x, matrix, -1],
                        [block_sums[key]],
                        schema.BuiltinOptions.FullyConnectedOptions,
                        _fc_options(options),
                    )
                )
            table = _new_tensor(graph, list(offset.shape), buffer=offsets[weight.buffer])
            correction = _new_tensor(graph, like=graph.tensors[y])
            before = _new_tensor(graph, like=graph.tensors[y])
            op.outputs = np.array([before], np.int32)
            operators += [
                op,
                _operator(
                    model,
                    codes,
                    fc,
                    [block_sums[key], table, -1],
                    [correction],
                    schema.BuiltinOptions.FullyConnectedOptions,
                    _fc_options(options),
                ),
                _operator(
                    model,
                    codes,
                    add,
                    [before, correction],
                    [y],
                    schema.BuiltinOptions.AddOptions,
                    added,
                ),
            ]
        graph.operators = operators
    return _pack(model, flatbuffer)


def _inline_buffer(values):
    """A `schema.BufferT` holding the NumPy array `values`' bytes."""
    buffer = schema.BufferT()
    buffer.data = np.ascontiguousarray(values).view(np.uint8).reshape(-1)
    return buffer


def _fc_options(options):
    """Float32 FULLY_CONNECTED options with `options`' keep_num_dims."""
    new = schema.FullyConnectedOptionsT()
    new.keepNumDims = options.keepNumDims
    return new


def _new_tensor(graph, shape=None, buffer=0, like=None, last=None, name=None):
    """Appends a float32 tensor to `graph`: of `shape` (a constant when
    `buffer` is given), or shaped `like` another tensor with its last
    dimension `last` when given; returns its index."""
    tensor = schema.TensorT()
    tensor.type, tensor.buffer = schema.TensorType.FLOAT32, buffer
    if like is not None:
        tensor.shape = np.array(like.shape, np.int32)
        if like.shapeSignature is not None and len(like.shapeSignature):
            tensor.shapeSignature = np.array(like.shapeSignature, np.int32)
        if last is not None:
            tensor.shape[-1] = last
            if tensor.shapeSignature is not None:
                tensor.shapeSignature[-1] = last
    else:
        tensor.shape = np.array(shape, np.int32)
    # names unique in the model (litert-quantizer requires it): the graph's
    tensor.name = name or f"{(graph.name or b'').decode()}/added_{len(graph.tensors)}".encode()
    graph.tensors.append(tensor)
    return len(graph.tensors) - 1


def _embedding_lookups(flatbuffer):
    """`flatbuffer` with each GATHER of rows (axis 0, int32 ids) from a
    constant float32 table of 1,024 elements or more rewritten as
    EMBEDDING_LOOKUP, which takes 1-D ids: RESHAPE(ids, [-1]),
    EMBEDDING_LOOKUP, then RESHAPE to the ids' shape + the row's (SHAPE
    and CONCATENATION where the ids' shape is dynamic). The same values."""
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    return _pack(model, flatbuffer) if _rewrite_lookups(model, flatbuffer) else flatbuffer


def _prepared(flatbuffer):
    """`_fused_products(_embedding_lookups(flatbuffer))` in one pass over
    the file (one copy of its bytes the fewer: SmolLM2's int4 step)."""
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    changed = _rewrite_lookups(model, flatbuffer)
    after = _fuse(model, flatbuffer)
    return _pack(model, flatbuffer, after) if changed or after is not None else flatbuffer


def _rewrite_lookups(model, flatbuffer):
    """`_embedding_lookups` on `model` (a `schema.ModelT` of
    `flatbuffer`), in place; whether anything changed."""
    ops, kinds = schema.BuiltinOperator, schema.TensorType
    codes = _codes(model)

    def operator(*args):
        return _operator(model, codes, *args)

    changed = False
    for g, graph in enumerate(model.subgraphs):

        def tensor(name, kind, shape, buffer=0, signature=None):
            t = schema.TensorT()
            t.name, t.type, t.shape, t.buffer = f"{g}/{name}".encode(), kind, list(shape), buffer
            t.shapeSignature = None if signature is None else list(signature)
            graph.tensors.append(t)
            return len(graph.tensors) - 1

        rewritten = []
        for i, op in enumerate(graph.operators):
            options = op.builtinOptions
            table = graph.tensors[op.inputs[0]] if len(op.inputs) == 2 else None
            if (
                codes[op.opcodeIndex] != ops.GATHER
                or table is None
                or table.type != kinds.FLOAT32
                or len(table.shape) != 2
                or int(np.prod(table.shape)) < 1024
                or _buffer_bytes(model, flatbuffer, table.buffer) is None
                or (options is not None and (options.axis or options.batchDims))
                or graph.tensors[op.inputs[1]].type != kinds.INT32
            ):
                rewritten.append(op)
                continue
            ids = graph.tensors[op.inputs[1]]
            dims = list(ids.shapeSignature if ids.shapeSignature is not None else ids.shape)
            width = int(table.shape[1])
            flat = tensor(f"lookup{i}/ids", kinds.INT32, [int(np.prod(ids.shape))], signature=[-1])
            rows = tensor(
                f"lookup{i}/rows",
                kinds.FLOAT32,
                [int(np.prod(ids.shape)), width],
                signature=[-1, width],
            )
            minus_one = tensor(
                f"lookup{i}/flat", kinds.INT32, [1], _add_buffer(model, np.int32([-1]))
            )
            ops_here = [
                operator(ops.RESHAPE, [op.inputs[1], minus_one], [flat]),
                operator(ops.EMBEDDING_LOOKUP, [flat, op.inputs[0]], [rows]),
            ]
            if -1 in dims:
                shape = tensor(f"lookup{i}/ids_shape", kinds.INT32, [len(dims)])
                row = tensor(
                    f"lookup{i}/row", kinds.INT32, [1], _add_buffer(model, np.int32([width]))
                )
                target = tensor(f"lookup{i}/shape", kinds.INT32, [len(dims) + 1])
                shape_options = schema.ShapeOptionsT()
                shape_options.outType = kinds.INT32
                concat = schema.ConcatenationOptionsT()
                ops_here += [
                    operator(
                        ops.SHAPE,
                        [op.inputs[1]],
                        [shape],
                        schema.BuiltinOptions.ShapeOptions,
                        shape_options,
                    ),
                    operator(
                        ops.CONCATENATION,
                        [shape, row],
                        [target],
                        schema.BuiltinOptions.ConcatenationOptions,
                        concat,
                    ),
                ]
            else:
                target = tensor(
                    f"lookup{i}/shape",
                    kinds.INT32,
                    [len(dims) + 1],
                    _add_buffer(model, np.int32(list(ids.shape) + [width])),
                )
            ops_here.append(operator(ops.RESHAPE, [rows, target], list(op.outputs)))
            rewritten += ops_here
            changed = True
        graph.operators = rewritten
    return changed


def share_embedding_tables(flatbuffer):
    """Makes a dynamic-range int8 flatbuffer's embedding lookups read the
    per-channel int8 copy of their table that a tied output projection
    already holds, and drops the lookups' own copy.

    The converter quantizes a table that is both looked up (GATHER) and
    multiplied (FULLY_CONNECTED, tied logits) twice: per channel for the
    FULLY_CONNECTED and per tensor, one scale for the whole table, for the
    GATHER, which it then DEQUANTIZEs. Here the GATHER reads the per-channel
    copy and its rows are scaled by a gathered per-row scale instead
    (GATHER, CAST, GATHER of the scales, MUL: builtin ops), so the file
    holds the table once (SmolLM2: 28 MB less) and every looked-up row
    has its own scale rather than the whole table's. A lookup is rewritten
    only where a per-channel table of the same shape equals its table
    within the two quantizations' rounding; every other op is left as the
    converter wrote it.

    Args:
        flatbuffer: a TFLite model, bytes (buffers inside the flatbuffer or
            after it, as `_experimental_use_buffer_offset` writes them).

    Returns:
        The model as bytes (`flatbuffer` itself where nothing is shared).

    Raises:
        TypeError: `flatbuffer` is not bytes.
        ValueError: `flatbuffer` is not a TFLite model.
    """
    flatbuffer = check_flatbuffer("share_embedding_tables", flatbuffer)
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    ops = schema.BuiltinOperator
    codes = _codes(model)

    def constant(index):
        stored = _buffer_bytes(model, flatbuffer, index)
        return None if stored is None else stored.view(np.int8)

    def scales(tensor):
        q = tensor.quantization
        if q is None or q.scale is None or tensor.type != schema.TensorType.INT8:
            return None
        return (
            np.asarray(q.scale, np.float32),
            np.asarray(q.zeroPoint, np.float32),
            q.quantizedDimension,
        )

    per_channel = {}  # buffer -> (shape, per-row scales): symmetric, along axis 0
    for graph in model.subgraphs:
        for tensor in graph.tensors:
            q = scales(tensor)
            if (
                q is not None
                and len(tensor.shape) == 2
                and q[2] == 0
                and len(q[0]) == tensor.shape[0] > 1
                and not q[1].any()
                and constant(tensor.buffer) is not None
            ):
                per_channel[tensor.buffer] = (tuple(tensor.shape), q[0])
    matches = {}

    def twin(table):
        """The per-channel buffer equal to the per-tensor `table`, or None."""
        if table.buffer not in matches:
            matches[table.buffer] = None
            values = constant(table.buffer)
            scale, zero, _ = scales(table)
            for index, (shape, row_scales) in per_channel.items():
                if shape == tuple(table.shape) and _equal_quantized(
                    values.reshape(shape),
                    scale[0],
                    zero[0],
                    constant(index).reshape(shape),
                    row_scales,
                ):
                    matches[table.buffer] = index
                    break
        return matches[table.buffer]

    def operator(*args):
        return _operator(model, codes, *args)

    def new_tensor(graph, name, kind, like, extra=(), buffer=0):
        tensor = schema.TensorT()
        tensor.name, tensor.type, tensor.buffer = name, kind, buffer
        tensor.shape = list(like.shape) + list(extra)
        if like.shapeSignature is not None:
            tensor.shapeSignature = list(like.shapeSignature) + list(extra)
        graph.tensors.append(tensor)
        return len(graph.tensors) - 1

    scale_buffers = {}  # per-channel buffer -> the buffer of its scales as [rows, 1] float32
    dropped = set()
    for graph in model.subgraphs:
        consumers = {}
        for op in graph.operators:
            for i in op.inputs:
                consumers.setdefault(i, []).append(op)
        rewritten = []
        for op in graph.operators:
            if codes[op.opcodeIndex] != ops.GATHER or len(op.inputs) != 2:
                continue
            table, ids, out = graph.tensors[op.inputs[0]], op.inputs[1], op.outputs[0]
            options = op.builtinOptions
            after = consumers.get(out, [])
            q = scales(table)
            if (
                q is None
                or len(q[0]) != 1
                or len(table.shape) != 2
                or constant(table.buffer) is None
                or (options is not None and (options.axis or options.batchDims))
                or len(after) != 1
                or codes[after[0].opcodeIndex] != ops.DEQUANTIZE
                or out in graph.outputs
                or graph.tensors[ids].type != schema.TensorType.INT32
            ):
                continue
            shared = twin(table)
            if shared is None:
                continue
            if shared not in scale_buffers:
                scale_buffers[shared] = _add_buffer(model, per_channel[shared][1])
            dequantize, name = after[0], table.name or b"embedding"
            int8, float32 = schema.TensorType.INT8, schema.TensorType.FLOAT32
            rows = new_tensor(graph, name + b"/per_channel", int8, table, (), shared)
            row_scales = new_tensor(graph, name + b"/row_scales", float32, table)
            graph.tensors[row_scales].buffer = scale_buffers[shared]
            graph.tensors[row_scales].shape = [table.shape[0], 1]
            graph.tensors[row_scales].shapeSignature = None
            graph.tensors[out].quantization = None
            cast = new_tensor(graph, name + b"/rows", float32, graph.tensors[out])
            gathered = new_tensor(graph, name + b"/scales", float32, graph.tensors[ids], (1,))
            dropped.add(table.buffer)
            op.inputs = [rows, ids]
            cast_options = schema.CastOptionsT()
            cast_options.inDataType, cast_options.outDataType = int8, float32
            gather_options = schema.GatherOptionsT()
            rewritten.append(
                (
                    dequantize,
                    [
                        operator(
                            ops.CAST, [out], [cast], schema.BuiltinOptions.CastOptions, cast_options
                        ),
                        operator(
                            ops.GATHER,
                            [row_scales, ids],
                            [gathered],
                            schema.BuiltinOptions.GatherOptions,
                            gather_options,
                        ),
                        operator(
                            ops.MUL,
                            [cast, gathered],
                            list(dequantize.outputs),
                            schema.BuiltinOptions.MulOptions,
                            schema.MulOptionsT(),
                        ),
                    ],
                )
            )
        for dequantize, replacement in rewritten:
            at = graph.operators.index(dequantize)
            graph.operators[at : at + 1] = replacement
    if not dropped:
        return flatbuffer
    for graph in model.subgraphs:  # the lookups' own tables, now read by no op
        read = {i for op in graph.operators for i in op.inputs}
        for index, tensor in enumerate(graph.tensors):
            if tensor.buffer in dropped and index not in read:
                tensor.buffer = 0
    still_read = {t.buffer for graph in model.subgraphs for t in graph.tensors}
    for index in dropped - still_read:
        model.buffers[index] = schema.BufferT()
    return _pack(model, flatbuffer)


def _buffer_bytes(model, data, index):
    """The bytes buffer `index` of `model` (a `schema.ModelT`) holds, as a
    NumPy uint8 array (a view of `data`, the file's bytes, for a buffer
    stored after the flatbuffer), or None for an empty buffer."""
    buffer = model.buffers[index]
    if buffer.offset > 1:
        return np.frombuffer(data, np.uint8, buffer.size, buffer.offset)
    return None if buffer.data is None or not len(buffer.data) else buffer.data


def _operator(model, codes, builtin, inputs, outputs, options_type=0, options=None):
    """A `schema.OperatorT` of `builtin` for `model` (a `schema.ModelT`), its
    operator code added when absent (`codes`, the builtin of each code,
    kept in step)."""
    if builtin not in codes:
        model.operatorCodes.append(schema.OperatorCodeT())
        model.operatorCodes[-1].builtinCode = builtin
        model.operatorCodes[-1].deprecatedBuiltinCode = min(builtin, 127)
        model.operatorCodes[-1].version = 1
        codes.append(builtin)
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = codes.index(builtin), list(inputs), list(outputs)
    op.builtinOptionsType, op.builtinOptions = options_type, options
    return op


def _codes(model):
    """The builtin operator of each of `model`'s operator codes (a
    `schema.ModelT`; the larger of the two fields the schema keeps)."""
    return [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]


def _add_buffer(model, values):
    """Appends the NumPy array `values` to `model`'s buffers (stored inside
    the flatbuffer); returns the buffer's index."""
    model.buffers.append(_inline_buffer(values))
    return len(model.buffers) - 1


def _equal_quantized(values, scale, zero, rows, row_scales, chunk=4096):
    """Whether a per-tensor int8 table (`values`, `scale`, `zero`) and a
    symmetric per-row one (`rows`, `row_scales`) hold the same table:
    every entry within the two roundings (half a step of each), compared
    `chunk` rows at a time."""
    for start in range(0, len(values), chunk):
        step = row_scales[start : start + chunk, None]
        ours = (values[start : start + chunk] - zero) * scale
        theirs = rows[start : start + chunk] * step
        if np.any(np.abs(ours - theirs) > 0.5 * scale + 0.5 * step + 1e-6 * np.abs(ours)):
            return False
    return True


def _pack(model, flatbuffer, after=None):
    """`model` (a `schema.ModelT`) as TFLite bytes; buffers that
    `flatbuffer` stored after the flatbuffer (offset and size) are
    stored after it again, each at a 16-byte boundary, and so are the
    NumPy arrays of `after` ({buffer index: values}, new buffers kept
    out of the flatbuffer builder's copies)."""
    outside = {
        index: memoryview(flatbuffer)[buffer.offset : buffer.offset + buffer.size]
        for index, buffer in enumerate(model.buffers)
        if buffer.offset > 1
    }
    for index, values in (after or {}).items():
        outside[index] = memoryview(np.ascontiguousarray(values)).cast("B")
    if not outside:
        return _packed(model)
    head, end = _placed(model, {index: len(data) for index, data in outside.items()})
    out = bytearray(end)
    out[: len(head)] = head
    for index, data in outside.items():
        out[model.buffers[index].offset : model.buffers[index].offset + len(data)] = data
    return bytes(out)


def _packed(model):
    """`model` (a `schema.ModelT`) packed as a TFLite flatbuffer, bytes."""
    import flatbuffers

    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _placed(model, sizes):
    """`(flatbuffer, end)`: `model` packed with each buffer of `sizes`
    ({index: bytes}) placed after the flatbuffer, at a 16-byte boundary
    (its offset and size set), and where the last one ends."""
    for index, size in sizes.items():
        model.buffers[index].offset, model.buffers[index].size = 1, size  # same width
    length = len(_packed(model))
    end = length
    for index, size in sizes.items():
        end = -(-end // 16) * 16
        model.buffers[index].offset, end = end, end + size
    head = _packed(model)
    if len(head) != length:
        raise RuntimeError("rewriting a TFLite flatbuffer: its length changed between two packings")
    return head, end


def check_flatbuffer(name, flatbuffer):
    """`flatbuffer` as bytes when it is a TFLite model's bytes (file
    identifier `TFL3`); otherwise a clear error naming the function `name`
    and its `flatbuffer` (a path is the usual mistake: read the file)."""
    if isinstance(flatbuffer, (bytearray, memoryview)):
        flatbuffer = bytes(flatbuffer)
    if not isinstance(flatbuffer, bytes):
        hint = " (a path: pass open(path, 'rb').read())" if isinstance(flatbuffer, str) else ""
        raise TypeError(
            f"`{name}` expects `flatbuffer` to be a TFLite model's bytes{hint}. "
            f"Received: {type(flatbuffer).__name__}"
        )
    if flatbuffer[4:8] != b"TFL3":
        raise ValueError(
            f"`{name}` expects `flatbuffer` to be a TFLite model's bytes (file identifier "
            f"TFL3). Received {len(flatbuffer)} bytes starting {flatbuffer[:8]!r}"
        )
    return flatbuffer


def quantize_int8(flatbuffer):
    """A float32 TFLite model with int8 weights: `litert-quantizer`'s
    `dynamic_wi8_afp32` recipe (symmetric int8, a scale per output
    channel; activations quantized at run time) on every FULLY_CONNECTED
    and EMBEDDING_LOOKUP weight, lookups first rewritten as in
    `quantize_int4` (a tied embedding table held once). Builtin ops only.

    Args:
        flatbuffer: a float32 TFLite model, bytes.

    Returns:
        The int8 model, bytes.
    """
    return _litert_quantized("quantize_int8", flatbuffer, "dynamic_wi8_afp32")


def _litert_quantized(name, flatbuffer, recipe_name, block=None, prepared=False):
    """`flatbuffer` (lookups rewritten, products of one input fused:
    already, when `prepared`) quantized by litert-quantizer's recipe
    `recipe_name` (of blocks of `block` along each weight's rows, if
    given); the errors name the function `name`."""
    flatbuffer = check_flatbuffer(name, flatbuffer)
    try:
        from litert_quantizer import quantizer, recipe
    except ImportError as error:
        raise ImportError(
            f"`{name}` needs litert-quantizer: pip install litert-quantizer "
            "(seqkeras[apps] includes it)"
        ) from error
    if not prepared:
        flatbuffer = _prepared(flatbuffer)
    if block:
        _check_rows(name, flatbuffer, block)
    q = quantizer.Quantizer(bytearray(flatbuffer))
    q.load_quantization_recipe(getattr(recipe, recipe_name)())
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        result = q.quantize()
    return bytes(result.quantized_model)


def _check_rows(name, flatbuffer, block):
    """A ValueError naming the function `name` for the first weight the
    quantizer would cut into blocks of `block` whose rows are not a
    multiple of `block` long: a FULLY_CONNECTED's weights, an
    EMBEDDING_LOOKUP's table (litert-quantizer's own error names neither
    the function nor the rule)."""
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    ops = schema.BuiltinOperator
    codes = _codes(model)
    for graph in model.subgraphs:
        for op in graph.operators:
            if codes[op.opcodeIndex] not in (ops.FULLY_CONNECTED, ops.EMBEDDING_LOOKUP):
                continue
            weight = graph.tensors[op.inputs[1]]
            stored = _buffer_bytes(model, flatbuffer, weight.buffer) is not None
            if stored and weight.type == schema.TensorType.FLOAT32 and weight.shape[-1] % block:
                raise ValueError(
                    f"`{name}` quantizes weights in blocks of {block} along each row: every "
                    f"FULLY_CONNECTED's input size and every looked-up table's width must be a "
                    f"multiple of {block}. Received a weight of shape "
                    f"{tuple(map(int, weight.shape))} ({weight.name.decode()!r})"
                )


#: The file `save_functions(stand_ins=True)` writes beside the SavedModel:
#: one entry per stand-in weight, {"value", "file", "shape"}.
STAND_INS = "stand_ins.json"


def stand_in_value(index):
    """The constant that stands in for the `index`-th stand-in weight:
    1024 + index, exact in float32 and float16 (so a float16 conversion
    keeps it), for up to 1,024 weights."""
    if not 0 <= index < 1024:
        raise ValueError(f"`stand_in_value` takes 0 <= index < 1024. Received: index={index}")
    return 1024.0 + index


def fill_stand_ins(path, directory):
    """Writes the real weights into the TFLite file at `path` (weights
    after the flatbuffer: the converter's buffer-offset format), converted
    from a `save_functions(stand_ins=True)` SavedModel at `directory`
    whose large weights were constants of one value each (`stand_in_value`).
    The converter leaves each stand-in as a FILL of that value (a splat of
    a million bits or more: `_experimental_unfold_large_splat_constant`)
    or as a buffer holding it throughout, in float32 or float16. Each
    becomes the weight `STAND_INS` names, laid out as its readers take it
    (a FULLY_CONNECTED's (out, in) weights: the kernel's leading axes as
    `in`, transposed; a table multiplied on its last axis, or any other
    reader of the kernel's own shape: as stored); a weight read the same
    way in several places is stored once. Buffers are filled in place
    through a memory map; FILLs become constants in a file written one
    weight at a time (never all the weights in memory).

    Raises:
        ValueError: a stand-in the file no longer holds (the converter
            folded it into another weight), a weight whose readers do not
            say how it lies, or a file not in the buffer-offset format.
    """
    with open(os.path.join(directory, STAND_INS), encoding="utf-8") as f:
        entries = json.load(f)
    by_value = {float(np.float32(e["value"])): e for e in entries}
    data = np.memmap(path, np.uint8, mode="r+")
    model = schema.ModelT.InitFromPackedBuf(memoryview(data), 0)
    codes = _codes(model)
    kinds = {schema.TensorType.FLOAT32: np.float32, schema.TensorType.FLOAT16: np.float16}
    ops = schema.BuiltinOperator
    filled, new, shared = set(), {}, {}

    def weight(entry):
        return np.load(os.path.join(directory, entry["file"]), mmap_mode="r")

    def plan(entry, readers):
        plans = {_layout(tuple(entry["shape"]), reader) for reader in readers}
        if len(plans) != 1:
            raise ValueError(
                f"`fill_stand_ins`: the readers of weight {entry['file']} in {path} take it in "
                f"{len(plans)} different layouts ({sorted(plans)})"
            )
        return plans.pop()

    splats = {}  # buffer -> (entry, dtype, [reader]) of the buffers holding a stand-in
    for graph in model.subgraphs:
        uses = {}  # tensor -> [operator]
        for op in graph.operators:
            for index in op.inputs:
                uses.setdefault(index, []).append(op)

        def readers(index, dtype, graph=graph, uses=uses):
            """(builtin, input position, shape, dtype) of each reader of
            the tensor `index`; a DEQUANTIZE's readers for a float16 one."""
            found = []
            shape = tuple(int(d) for d in graph.tensors[index].shape)
            for op in uses.get(index, ()):
                code = codes[op.opcodeIndex]
                if code == ops.DEQUANTIZE:
                    found += readers(op.outputs[0], dtype)
                else:
                    found += [
                        (code, k, shape, dtype) for k, i in enumerate(op.inputs) if i == index
                    ]
            return found

        kept = []
        for op in graph.operators:
            entry = None
            if codes[op.opcodeIndex] == ops.FILL:
                out = graph.tensors[op.outputs[0]]
                value = _buffer_bytes(model, data, graph.tensors[op.inputs[1]].buffer)
                if value is not None and out.type in kinds:
                    entry = by_value.get(float(value.view(kinds[out.type])[0]))
            if entry is None:
                kept.append(op)
                continue
            dtype = kinds[out.type]
            layout = plan(entry, readers(op.outputs[0], dtype))
            key = (entry["file"], layout, np.dtype(dtype).str)
            if key not in shared:
                model.buffers.append(schema.BufferT())
                shared[key] = len(model.buffers) - 1
                nbytes = int(np.prod(entry["shape"])) * np.dtype(dtype).itemsize
                new[shared[key]] = (nbytes, entry, layout, dtype)
            out.buffer = shared[key]
            filled.add(entry["file"])
        graph.operators = kept
        for index, tensor in enumerate(graph.tensors):
            buffer = model.buffers[tensor.buffer]
            if tensor.type not in kinds or tensor.buffer in new or buffer.offset <= 1:
                continue
            dtype = kinds[tensor.type]
            if buffer.size < 2 * np.dtype(dtype).itemsize:
                continue
            first = data[buffer.offset : buffer.offset + np.dtype(dtype).itemsize].view(dtype)[0]
            entry = by_value.get(float(first))
            if entry is not None:
                splats.setdefault(tensor.buffer, (entry, dtype, []))[2].extend(
                    readers(index, dtype)
                )
    for index, (entry, dtype, found) in splats.items():
        buffer = model.buffers[index]
        values = data[buffer.offset : buffer.offset + buffer.size].view(dtype)
        if not np.all(values == values[0]):
            raise ValueError(
                f"`fill_stand_ins`: a buffer of {path} starts with stand-in "
                f"{entry['value']} but is not that constant throughout"
            )
        values[:] = _apply(weight(entry), plan(entry, found), dtype).reshape(-1)
        filled.add(entry["file"])
    data.flush()
    missing = [e["file"] for e in entries if e["file"] not in filled]
    if missing:
        raise ValueError(
            f"`fill_stand_ins`: {path} holds no buffer of the stand-ins of {missing[:3]} "
            f"({len(missing)} of {len(entries)}): the converter folded them into other "
            "constants"
        )
    if new:
        produce = {
            index: (nbytes, lambda e=entry, way=layout, d=dtype: _apply(weight(e), way, d))
            for index, (nbytes, entry, layout, dtype) in new.items()
        }
        _write_packed(model, data, path + ".part", produce)
        del data
        os.replace(path + ".part", path)


def _layout(kernel, reader):
    """How a weight of shape `kernel` lies in the input `reader`
    (`(builtin, input position, shape, dtype)`): `("transposed", (in,
    out))` for a FULLY_CONNECTED's weights that contract the kernel's
    leading axes, else `("reshaped", shape)`."""
    builtin, position, shape, _ = reader
    if builtin == schema.BuiltinOperator.FULLY_CONNECTED and position == 1 and len(shape) == 2:
        out, width = shape
        splits = [
            (int(np.prod(kernel[:k])), int(np.prod(kernel[k:]))) for k in range(1, len(kernel))
        ]
        if (width, out) in splits:  # x @ kernel: the leading axes contracted
            return ("transposed", (width, out))
        if (out, width) in splits:  # x @ table^T: the last axes contracted
            return ("reshaped", tuple(shape))
    elif tuple(shape) == tuple(kernel):
        return ("reshaped", tuple(shape))
    raise ValueError(
        f"`fill_stand_ins`: cannot tell how a weight of shape {kernel} lies in an input of "
        f"shape {shape} (operator {builtin}, input {position})"
    )


def _apply(weight, layout, dtype):
    """`weight` laid out by `layout` (`_layout`), as `dtype`."""
    kind, shape = layout
    if kind == "transposed":
        return np.ascontiguousarray(np.reshape(weight, shape).T, dtype)
    return np.ascontiguousarray(np.reshape(weight, shape), dtype)


def _write_packed(model, source, path, produce):
    """Writes `model` (a `schema.ModelT`) to `path` in the buffer-offset
    format: the buffers that `source` (the file's bytes) held after the
    flatbuffer, copied, and each buffer of `produce` ({index: (bytes,
    a function returning its array)}) made and written one at a time."""
    outside = {}
    for index, buffer in enumerate(model.buffers):
        if index in produce:
            outside[index] = produce[index]
        elif buffer.offset > 1:
            start, size = buffer.offset, buffer.size
            outside[index] = (size, lambda s=start, n=size: source[s : s + n])
    head, _ = _placed(model, {index: size for index, (size, _) in outside.items()})
    with open(path, "wb") as f:
        f.write(head)
        for index, (_, make) in outside.items():
            f.write(b"\0" * (model.buffers[index].offset - f.tell()))
            f.write(memoryview(np.ascontiguousarray(make())).cast("B"))


def finish_file(path, quantize, stand_ins=None):
    """What follows the converter, for the file at `path` (rewritten in
    place): with `stand_ins` (the directory of a `save_functions(
    stand_ins=True)` SavedModel), `fill_stand_ins`, then `quantize_int8`
    for "dynamic_int8" or `quantize_int4` for "int4" and "int4_q4_1" (for "float16" the
    converter wrote float16 weights); without, `_finish`."""
    if stand_ins:
        fill_stand_ins(path, stand_ins)
        step = {
            "dynamic_int8": quantize_int8,
            "int4": quantize_int4,
            "int4_q4_1": lambda flatbuffer: quantize_int4(flatbuffer, keep_q4_1=True),
        }.get(quantize)
        if step is None:
            return
    else:

        def step(flatbuffer):
            return _finish(flatbuffer, quantize)

    with open(path, "rb") as f:
        flatbuffer = f.read()
    finished = step(flatbuffer)
    if finished is not flatbuffer:
        with open(path + ".part", "wb") as f:
            f.write(finished)
        os.replace(path + ".part", path)
