"""TFLite conversion with builtin ops only, and running in LiteRT."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

# A private TensorFlow module (tests/test_private_apis.py fails loudly if it
# moves): TensorFlow has no public API that folds a concrete function's
# variables into constants inside its while-loop bodies, which LiteRT needs
# (it leaves variables read in a WHILE body uninitialised); the public
# `tf.compat.v1.graph_util.convert_variables_to_constants` works on v1
# sessions only.
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)

_BUILTIN_NAMES = {
    value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")
}


def _frozen_signatures(saved_model_dir, keys):
    """Each signature with its variables folded into constants, everywhere
    (also inside while-loop bodies, where the converter would otherwise
    leave resource-variable reads that LiteRT does not initialise)."""
    loaded = tf.saved_model.load(str(saved_model_dir))
    if not keys:  # as the converter: the default signature, if any
        keys = (
            ["serving_default"]
            if "serving_default" in loaded.signatures
            else list(loaded.signatures)
        )
    unknown = [key for key in keys if key not in loaded.signatures]
    if unknown:
        raise ValueError(
            "`convert_builtin` received an invalid value for `signature_key`: expected "
            f"signatures of the SavedModel, {sorted(loaded.signatures)}. Received: "
            f"signature_key={unknown[0]!r}"
        )
    signatures = {}
    for key in keys:
        fn = loaded.signatures[key]
        signatures[key] = _serve_frozen(fn).get_concrete_function()
    return signatures


def _serve_frozen(fn):
    frozen = convert_variables_to_constants_v2(fn)
    outputs = fn.structured_outputs

    @tf.function(autograph=False, input_signature=[fn.structured_input_signature[1]])
    def serve(inputs):
        return tf.nest.pack_sequence_as(outputs, frozen(**inputs))

    return serve


QUANTIZATIONS = (None, "dynamic_int8", "float16", "int4")


def quantize_modes(name, quantize):
    """`(several, modes)`: whether `quantize` is a list, and its modes as
    one; a ValueError naming the function `name` for an unknown mode."""
    several = isinstance(quantize, (list, tuple))
    modes = list(quantize) if several else [quantize]
    if not modes or any(mode not in QUANTIZATIONS for mode in modes):
        raise ValueError(
            f"`{name}` received an invalid value for `quantize`: "
            f"expected one of {QUANTIZATIONS} or a list of them. Received: quantize={quantize!r}"
        )
    return several, modes


def convert_builtin(saved_model_dir, signature_key=None, quantize=None):
    """Converts a SavedModel to a TFLite flatbuffer with builtin ops only.

    The `serving_default` signature (or `signature_key`, one name or a
    list) is converted, its variables frozen into constants first. Raises
    the converter's error if any op would need the Flex delegate.

    Args:
        saved_model_dir: the SavedModel directory.
        signature_key: the signature to convert (one name or a list; None:
            `serving_default`).
        quantize: None, `"dynamic_int8"` (weights stored as int8, dequantised
            or used by hybrid kernels at run time), `"float16"` (weights
            stored as float16) or `"int4"` (weights in blocks of 32:
            `quantize_int4`); or a list of these, each converted from the
            one frozen graph (frozen once: a second conversion of the same
            SavedModel costs the converter's time only).

    Returns:
        The flatbuffer, bytes; a list of them, in order, for a list of
        `quantize` modes.
    """
    from seqkeras.export.audit import saved_model_dir as checked_dir

    several, modes = quantize_modes("convert_builtin", quantize)
    saved_model_dir = checked_dir("convert_builtin", saved_model_dir, "saved_model_dir")
    keys = (
        None
        if signature_key is None
        else [signature_key]
        if isinstance(signature_key, str)
        else list(signature_key)
    )
    signatures = _frozen_signatures(saved_model_dir, keys)
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(
            tf.Module(),
            tmp,
            signatures=signatures,
            options=tf.saved_model.SaveOptions(experimental_custom_gradients=False),
        )
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp)
        flatbuffers = [_convert(converter, mode) for mode in modes]
    return flatbuffers if several else flatbuffers[0]


def _convert(converter, quantize):
    """`converter.convert()` with builtin ops only and `quantize`'s
    options (every option set, so one converter serves several modes),
    then `_finish`ed."""
    return _finish(_converted(converter, quantize), quantize)


def _converted(converter, quantize):
    """The converter's own flatbuffer for `quantize` (int8 and float16 are
    the converter's options; int4 converts float32 for `_finish`)."""
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    by_converter = quantize in ("dynamic_int8", "float16")
    converter.optimizations = [tf.lite.Optimize.DEFAULT] if by_converter else []
    converter.target_spec.supported_types = [tf.float16] if quantize == "float16" else []
    return converter.convert()


def _finish(flatbuffer, quantize):
    """What follows the converter: dynamic-range int8 files share their
    tied embedding tables (`share_embedding_tables`); int4 files are
    quantized from float32 (`quantize_int4`)."""
    if quantize == "dynamic_int8":
        return share_embedding_tables(flatbuffer)
    if quantize == "int4":
        return quantize_int4(flatbuffer)
    return flatbuffer


def quantize_int4(flatbuffer):
    """A float32 TFLite model with 4-bit weights: `litert-quantizer`'s
    `dynamic_wi4b32_afp32` recipe (symmetric int4 in blocks of 32 along
    each row, a scale per block; activations quantized at run time) on
    every FULLY_CONNECTED and EMBEDDING_LOOKUP weight of 1,024 elements or
    more. Lookups of constant float tables are first rewritten as
    EMBEDDING_LOOKUP (the converter writes GATHER, which the quantizer
    leaves in float32), so an embedding table is quantized as well, and
    held once where tied logits multiply the same table (SmolLM2-135M:
    77 MB, against 98 MB for llama.cpp's Q4_1 file). Builtin ops only.

    Args:
        flatbuffer: a float32 TFLite model, bytes.

    Returns:
        The int4 model, bytes.

    Raises:
        TypeError: `flatbuffer` is not bytes.
        ValueError: `flatbuffer` is not a TFLite model.
        ImportError: `litert-quantizer` is not installed (`pip install
            litert-quantizer`; the `apps` extra has it).
    """
    import contextlib
    import io

    flatbuffer = check_flatbuffer("quantize_int4", flatbuffer)
    try:
        from litert_quantizer import quantizer, recipe
    except ImportError as error:
        raise ImportError(
            "`quantize_int4` (quantize='int4') needs litert-quantizer: "
            "pip install litert-quantizer (seqkeras[apps] includes it)"
        ) from error
    q = quantizer.Quantizer(bytearray(_embedding_lookups(flatbuffer)))
    q.load_quantization_recipe(recipe.dynamic_wi4b32_afp32())
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        result = q.quantize()
    return bytes(result.quantized_model)


def _embedding_lookups(flatbuffer):
    """`flatbuffer` with each GATHER of rows (axis 0, int32 ids) from a
    constant float32 table of 1,024 elements or more rewritten as
    EMBEDDING_LOOKUP, which takes 1-D ids: RESHAPE(ids, [-1]),
    EMBEDDING_LOOKUP, then RESHAPE to the ids' shape + the row's (SHAPE
    and CONCATENATION where the ids' shape is dynamic). The same values."""
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    ops, kinds = schema.BuiltinOperator, schema.TensorType
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]

    def operator(*args):
        return _operator(model, codes, *args)

    def stored(tensor):
        b = model.buffers[tensor.buffer]
        return b.offset > 1 or (b.data is not None and len(b.data) > 0)

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
                or not stored(table)
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
    return _pack(model, flatbuffer) if changed else flatbuffer


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
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]

    def constant(index):
        buffer = model.buffers[index]
        if buffer.offset > 1:
            return np.frombuffer(flatbuffer, np.int8, buffer.size, buffer.offset)
        return None if buffer.data is None or not len(buffer.data) else buffer.data.view(np.int8)

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


def _add_buffer(model, values):
    """Appends the NumPy array `values` to `model`'s buffers (stored inside
    the flatbuffer); returns the buffer's index."""
    buffer = schema.BufferT()
    buffer.data = np.ascontiguousarray(values).view(np.uint8).reshape(-1)
    model.buffers.append(buffer)
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


def _pack(model, flatbuffer):
    """`model` (a `schema.ModelT`) as TFLite bytes; buffers that
    `flatbuffer` stored after the flatbuffer (offset and size) are
    stored after it again, each at a 16-byte boundary."""
    import flatbuffers

    def packed():
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())

    outside = {}
    for index, buffer in enumerate(model.buffers):
        if buffer.offset > 1:
            outside[index] = memoryview(flatbuffer)[buffer.offset : buffer.offset + buffer.size]
            buffer.offset = 1  # a placeholder of the same width
    if not outside:
        return packed()
    length = len(packed())
    end = length
    for index, data in outside.items():
        end = -(-end // 16) * 16
        model.buffers[index].offset, end = end, end + len(data)
    head = packed()
    if len(head) != length:
        raise RuntimeError("rewriting a TFLite flatbuffer: its length changed between two packings")
    out = bytearray(end)
    out[:length] = head
    for index, data in outside.items():
        out[model.buffers[index].offset : model.buffers[index].offset + len(data)] = data
    return bytes(out)


def convert_functions(functions, variables, quantize=None):
    """Converts `tf.function`s (each with an `input_signature`; the
    signature keys are their Python names) to a builtin-ops TFLite
    flatbuffer, the converter folding `variables` (the model's weights)
    into constants itself: a fraction of the memory of `convert_builtin`'s
    freezing in Python, which holds every weight in a protobuf once per
    signature (a 2-block model of SmolLM2's shape: 2.1 GB against 7.8 GB).
    For loop-free graphs (step models): the converter leaves variables
    read inside a loop body as variables that LiteRT does not initialise.

    Keras 3 variables are tracked through their `tf.Variable` (`.value`):
    the converter folds only variables the saved object tracks as
    TensorFlow variables, and leaves the others uninitialised.
    """
    if quantize not in QUANTIZATIONS:
        raise ValueError(
            "`convert_functions` received an invalid value for `quantize`: "
            f"expected one of {QUANTIZATIONS}. Received: quantize={quantize!r}"
        )
    holder = tf.Module()
    holder.weights = [getattr(v, "value", v) for v in variables]
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [fn.get_concrete_function() for fn in functions], holder
    )
    converter.exclude_conversion_metadata = True  # one rebuild of the flatbuffer fewer
    return _convert(converter, quantize)


def save_functions(functions, variables, directory):
    """Writes `tf.function`s (each with an `input_signature`) and the
    `variables` they read as a SavedModel at `directory` whose signature
    keys are the functions' names: what `convert_in_new_process` reads, so
    that a conversion needs neither the model nor its process. Returns the
    signature keys, in order."""
    holder = tf.Module()
    holder.weights = [getattr(v, "value", v) for v in variables]  # Keras 3: the tf.Variable
    signatures = {fn.name: fn.get_concrete_function() for fn in functions}
    tf.saved_model.save(holder, str(directory), signatures=signatures)
    return list(signatures)


# The conversion of `convert_in_new_process`: TensorFlow alone (no seqkeras,
# no Keras; this file loaded by its path for `_converted`'s options). It sets
# one private converter attribute (tests/test_private_apis.py fails loudly
# if TensorFlow drops it): `_experimental_use_buffer_offset` writes the
# weights after the flatbuffer (a format LiteRT reads) and skips the
# converter's Python-side rebuild of the whole model to merge equal
# buffers, which held SmolLM2's weights once more (a fresh conversion
# peaked at 5.7 GB against 4.7 GB) and merged nothing: the converter
# already shares the signatures' weights.
_CONVERT = r"""
import importlib.util, json, sys
import tensorflow as tf
here, saved, keys, quantize, path = json.loads(sys.argv[1])
spec = importlib.util.spec_from_file_location("seqkeras_export_tflite", here)
tflite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tflite)
converter = tf.lite.TFLiteConverter.from_saved_model(saved, signature_keys=keys)
converter.exclude_conversion_metadata = True
converter._experimental_use_buffer_offset = True
flatbuffer = tflite._converted(converter, quantize)
with open(path, "wb") as f:
    f.write(flatbuffer)
"""

# `_finish` in a process of its own, after the conversion's has ended (its
# memory is not given back while the process lives: SmolLM2's int4 file,
# quantized in the converting process, raised the export's peak by 0.3 GB).
_FINISH = r"""
import importlib.util, json, os, sys
here, quantize, path = json.loads(sys.argv[1])
spec = importlib.util.spec_from_file_location("seqkeras_export_tflite", here)
tflite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tflite)
with open(path, "rb") as f:
    flatbuffer = f.read()
finished = tflite._finish(flatbuffer, quantize)
if finished is not flatbuffer:
    with open(path + ".part", "wb") as f:
        f.write(finished)
    os.replace(path + ".part", path)
"""


def convert_in_new_process(saved_model_dir, signature_keys, path, quantize=None):
    """Converts the signatures `signature_keys` of a `save_functions`
    SavedModel to a builtin-ops TFLite file at `path` in a new Python
    process that imports TensorFlow alone: the conversion's memory (about
    six copies of the weights at its peak) is not added to the caller's,
    and returns to the system when the process ends. What follows the
    converter (`_finish`: int8 files' shared tables, int4 quantization)
    runs in a second new process. Returns `path`."""
    if quantize not in QUANTIZATIONS:
        raise ValueError(
            "`convert_in_new_process` received an invalid value for `quantize`: "
            f"expected one of {QUANTIZATIONS}. Received: quantize={quantize!r}"
        )
    here = os.path.abspath(__file__)
    steps = [(_CONVERT, [here, str(saved_model_dir), list(signature_keys), quantize, str(path)])]
    if quantize in ("dynamic_int8", "int4"):
        steps.append((_FINISH, [here, quantize, str(path)]))
    for code, job in steps:
        result = subprocess.run(
            [sys.executable, "-c", code, json.dumps(job)],
            capture_output=True,
            text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        )
        if result.returncode:
            if code is _FINISH:  # not the file asked for: the converter's alone
                os.remove(path)
            lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
            raise RuntimeError(
                f"`convert_in_new_process`: converting {list(signature_keys)} of "
                f"{saved_model_dir} failed in the new process (exit status "
                f"{result.returncode}): {lines[-5:]}"
            )
    return path


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


def checked_feed(name, key, value, dtype, shape):
    """`value` as an array of `dtype` for the runtime input `key`, after
    checking that it fits: numbers, whole numbers for an integer input, the
    rank and the fixed dimensions of `shape` (None for a dynamic one). The
    TFLite and ONNX runners share it; `name` is the function the messages
    name."""
    dtype = np.dtype(dtype)
    where = f"`{name}`: input {key!r} of `inputs`"
    try:
        array = np.asarray(value)
    except ValueError as error:
        raise ValueError(f"{where} is not a rectangular array ({error})") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{where} must be numbers ({dtype.name}). Received dtype {array.dtype}")
    if dtype.kind in "iu" and array.dtype.kind == "f" and not np.all(array == np.round(array)):
        raise ValueError(f"{where} takes integers ({dtype.name}). Received non-integral floats")
    if array.ndim != len(shape) or any(
        want is not None and got != want for got, want in zip(array.shape, shape)
    ):
        raise ValueError(f"{where} has shape {tuple(shape)}. Received shape {array.shape}")
    return array.astype(dtype, copy=False)  # no copy of a right-typed state per step


def _fed(name, key, value, detail):
    """`checked_feed` for a LiteRT input `detail` (-1: a dynamic dimension)."""
    dims = detail.get("shape_signature", detail["shape"])
    shape = [None if d in (-1, None) else int(d) for d in dims]
    return checked_feed(name, key, value, detail["dtype"], shape)


def op_names(flatbuffer):
    """Names of every operator code in the model, all subgraphs included.

    Builtin ops give their builtin name (e.g. "WHILE"); custom and Flex ops
    give their custom code (e.g. "FlexTensorListReserve").

    Args:
        flatbuffer: the TFLite model, bytes.

    Returns:
        A sorted list of strings.
    """
    flatbuffer = check_flatbuffer("op_names", flatbuffer)
    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    names = set()
    for code in model.operatorCodes:
        builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
        if builtin == schema.BuiltinOperator.CUSTOM:
            custom = code.customCode
            names.add(custom.decode() if isinstance(custom, bytes) else custom)
        else:
            names.add(_BUILTIN_NAMES.get(builtin, str(builtin)))
    return sorted(names)


def run_tflite(flatbuffer, *inputs):
    """Runs the model's first signature-free entry on `inputs` (resizing
    dynamic dimensions) and returns the list of outputs as NumPy arrays.

    Args:
        flatbuffer: the TFLite model, bytes.
        *inputs: one array per model input, in order.

    Returns:
        A list of NumPy arrays.

    Raises:
        ValueError: a number of inputs the model does not take, or an
            input of the wrong rank, fixed dimensions or kind.
    """
    interpreter = Interpreter(model_content=check_flatbuffer("run_tflite", flatbuffer))
    details = interpreter.get_input_details()
    if len(details) != len(inputs):
        raise ValueError(f"`run_tflite` got {len(inputs)} inputs; the model takes {len(details)}.")
    arrays = [_fed("run_tflite", d["name"], v, d) for d, v in zip(details, inputs)]
    for detail, value in zip(details, arrays):
        interpreter.resize_tensor_input(detail["index"], value.shape)
    interpreter.allocate_tensors()
    for detail, value in zip(details, arrays):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def tflite_runner(flatbuffer, signature_key="serving_default", name="run_tflite_signature"):
    """`run(**inputs) -> dict of named outputs` for one signature, its
    LiteRT interpreter made once (for repeated calls: step models,
    latency); inputs are checked against the signature (names, rank,
    fixed dimensions), cast to its dtypes and dynamic dimensions resized.
    `run.input_details` and `run.output_details` are the signature's;
    `name`: the function the messages name."""
    interpreter = Interpreter(model_content=check_flatbuffer(name, flatbuffer))
    keys = sorted(interpreter.get_signature_list())
    if signature_key not in keys:
        raise ValueError(
            f"`{name}` received an invalid value for `signature_key`: expected one of the "
            f"model's signatures {keys}. Received: signature_key={signature_key!r}"
        )
    runner = interpreter.get_signature_runner(signature_key)
    details = runner.get_input_details()

    def run(**inputs):
        missing = set(details) - set(inputs)
        unknown = set(inputs) - set(details)
        if missing or unknown:
            raise ValueError(
                f"`{name}` is missing inputs {sorted(missing)} or got unknown inputs "
                f"{sorted(unknown)} in `inputs`; the signature takes {sorted(details)}"
            )
        return runner(**{k: _fed(name, k, v, details[k]) for k, v in inputs.items()})

    run.input_details = details
    run.output_details = runner.get_output_details()
    return run


def run_tflite_signature(flatbuffer, signature_key="serving_default", **inputs):
    """Runs a named signature with named inputs (dynamic dimensions
    resized); returns its dict of named outputs.

    Args:
        flatbuffer: the TFLite model, bytes.
        signature_key: the signature's name.
        **inputs: the signature's inputs by name.

    Returns:
        A dict of NumPy arrays by output name.

    Raises:
        ValueError: an unknown signature, missing or unknown inputs, or an
            input of the wrong rank, fixed dimensions or kind.
    """
    return tflite_runner(flatbuffer, signature_key)(**inputs)


def tflite(model, path, quantize=None, overwrite=False):
    """Writes `model` as a builtin-ops-only TFLite file at `path` (via its
    SavedModel `serving_default` signature; optionally quantized, see
    `convert_builtin`). The file appears only once complete; an existing
    `path` raises unless `overwrite`.

    Args:
        model: a built Keras model, not stateful, without text layers.
        path: the `.tflite` file to write.
        quantize: None, `"dynamic_int8"`, `"float16"` or `"int4"` (see
            `convert_builtin`).
        overwrite: replace an existing file.

    Returns:
        `path`.
    """
    import os
    import shutil

    from seqkeras.export.files import check_target, place_file, temporary_dir
    from seqkeras.export.refusals import refuse_text_layers
    from seqkeras.export.saved_model import saved_model

    import keras

    from seqkeras.export.refusals import refuse_stateful, refuse_unbuilt

    if not isinstance(model, keras.Model):
        raise TypeError(
            f"`tflite` expects `model` to be a Keras model. Received: {type(model).__name__}"
        )
    refuse_unbuilt("tflite", model)
    if quantize not in QUANTIZATIONS:
        raise ValueError(
            "`tflite` received an invalid value for `quantize`: "
            f"expected one of {QUANTIZATIONS}. Received: quantize={quantize!r}"
        )
    refuse_stateful("tflite", model)
    refuse_text_layers("tflite", model)
    path = check_target("tflite", path, overwrite)
    tmp = temporary_dir(path)  # beside `path`: the file moves into place in one rename
    try:
        saved = saved_model(model, os.path.join(tmp, "saved"), target="tflite")
        flatbuffer = convert_builtin(saved, quantize=quantize)
        with open(os.path.join(tmp, "model.tflite"), "wb") as f:
            f.write(flatbuffer)
        place_file(os.path.join(tmp, "model.tflite"), path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path
