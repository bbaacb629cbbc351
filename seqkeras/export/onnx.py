"""ONNX export through tf2onnx, verified with onnxruntime.

seqkeras' loops write their outputs with DynamicUpdateSlice (TensorFlow's
`XlaDynamicUpdateSlice`), for which tf2onnx 1.17 has no handler; this
module registers one that lowers it to ONNX `ScatterND` (the indices of
every updated element: the start offsets plus a broadcast `Range` per
axis), so recurrent and attention-decoder models convert to plain ONNX
`Loop`s; and one for `Erfc` (exact GELU) as `1 - Erf`.
"""

import logging
import os
import shutil

import numpy as np
import tensorflow as tf
from onnx import TensorProto
from tf2onnx import utils
from tf2onnx.graph_builder import GraphBuilder
from tf2onnx.handler import tf_op

from seqkeras.export.files import check_target, place_file, temporary_dir
from seqkeras.export.refusals import refuse_text_layers, refuse_unbuilt
from seqkeras.export.saved_model import saved_model
from seqkeras.layers import validation

OPSET = 17


@tf_op("XlaDynamicUpdateSlice")
class _DynamicUpdateSlice:
    @classmethod
    def version_13(cls, ctx, node, **kwargs):
        operand, update, starts = node.input
        rank = len(ctx.get_shape(update))

        def const(name, value):
            return ctx.make_const(utils.make_name(name), np.array(value, np.int64)).output[0]

        def op(kind, inputs, **attr):
            return ctx.make_node(kind, inputs, attr=attr).output[0]

        shape = op("Shape", [update])
        starts = op("Cast", [starts], to=TensorProto.INT64)
        parts = []
        for axis in range(rank):
            dim = op("Gather", [shape, const("axis", axis)])
            index = op(
                "Add",
                [
                    op("Range", [const("zero", 0), dim, const("one", 1)]),
                    op("Gather", [starts, const("axis", axis)]),
                ],
            )
            target = [1] * rank
            target[axis] = -1
            index = op("Expand", [op("Reshape", [index, const("shape", target)]), shape])
            parts.append(GraphBuilder(ctx).make_unsqueeze({"data": index, "axes": [rank]}))
        indices = op("Concat", parts, axis=rank)
        shapes = [ctx.get_shape(node.output[0])]
        dtypes = [ctx.get_dtype(node.output[0])]
        ctx.remove_node(node.name)
        ctx.make_node(
            "ScatterND",
            [operand, indices, update],
            outputs=node.output,
            name=node.name,
            shapes=shapes,
            dtypes=dtypes,
        )


@tf_op("Erfc")
class _Erfc:
    """erfc(x) = 1 - erf(x): exact GELU (`keras.activations.gelu`) uses
    Erfc, which tf2onnx 1.17 passes through as a non-ONNX op."""

    @classmethod
    def version_13(cls, ctx, node, **kwargs):
        x = node.input[0]
        dtype = ctx.get_dtype(x)
        one = ctx.make_const(
            utils.make_name("one"), np.array(1, utils.map_onnx_to_numpy_type(dtype))
        ).output[0]
        erf = ctx.make_node("Erf", [x]).output[0]
        shapes, dtypes = [ctx.get_shape(node.output[0])], [dtype]
        ctx.remove_node(node.name)
        ctx.make_node(
            "Sub", [one, erf], outputs=node.output, name=node.name, shapes=shapes, dtypes=dtypes
        )


MIN_OPSET = 13  # our handlers' version, and tf2onnx's oldest tested


class _ErrorLog(logging.Handler):
    """Collects tf2onnx's ERROR records (unsupported ops are logged, not
    raised, and the file is written anyway)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def onnx(model, path, opset=OPSET, overwrite=False):
    """Writes `model` as an ONNX file (dynamic batch and time axes, the
    model's input and output names) through its exported SavedModel
    signature; the file appears only once complete and loaded by
    onnxruntime.

    Args:
        model: a built Keras model (numeric inputs).
        path: the `.onnx` file to write.
        opset: the ONNX opset, an integer from 13 to the installed onnx
            package's newest.
        overwrite: replace an existing file (atomically: the old one
            stays until the new one is complete).

    Raises:
        ValueError: a bad `opset`; a model with string inputs or lookup
            layers; ops tf2onnx could not convert (its own message); a
            file onnxruntime cannot load (its message).

    Returns:
        `path`.
    """
    import onnx as onnx_lib
    import onnxruntime
    import tf2onnx

    newest = onnx_lib.defs.onnx_opset_version()
    if (
        isinstance(opset, bool)
        or not isinstance(opset, (int, np.integer))
        or not MIN_OPSET <= opset <= newest
    ):
        raise ValueError(
            "`onnx` received an invalid value for `opset`: expected an "
            f"integer from {MIN_OPSET} to {newest}. Received: opset={opset!r}"
        )
    refuse_unbuilt("onnx", model)
    refuse_text_layers("onnx", model)
    path = check_target("onnx", path, overwrite)
    tmp = temporary_dir(path)  # beside `path`: the file moves into place in one rename
    try:
        saved = saved_model(model, os.path.join(tmp, "saved"))
        loaded = tf.saved_model.load(saved)  # owns the variables
        serve = loaded.signatures["serving_default"]
        specs = serve.structured_input_signature[1]
        names = sorted(specs)

        def run(*args):
            return serve(**dict(zip(names, args)))

        output = os.path.join(tmp, "model.onnx")
        errors = _ErrorLog()
        logger = logging.getLogger("tf2onnx")
        logger.addHandler(errors)
        try:
            tf2onnx.convert.from_function(
                tf.function(run, autograph=False),
                input_signature=[specs[n] for n in names],
                opset=int(opset),
                output_path=output,
            )
        finally:
            logger.removeHandler(errors)
        if errors.messages:
            unsupported = [m for m in errors.messages if "Unsupported" in m]
            raise ValueError(
                f"`onnx`: tf2onnx could not convert model {model.name!r} at "
                f"opset {opset}: " + "; ".join((unsupported or errors.messages)[:3])
            )
        try:
            onnxruntime.InferenceSession(output, providers=["CPUExecutionProvider"])
        except Exception as error:
            raise ValueError(
                f"`onnx`: onnxruntime cannot load the converted model {model.name!r}: {error}"
            ) from None
        place_file(output, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _fed(name, key, value, spec):
    """`checked_feed` for an onnxruntime input `spec` (a name or None: a
    dynamic dimension)."""
    from seqkeras.export.tflite import checked_feed

    dtype = "int32" if "int32" in spec.type else "int64" if "int64" in spec.type else "float32"
    shape = [want if isinstance(want, int) else None for want in spec.shape]
    return checked_feed(name, key, value, dtype, shape)


def onnx_runner(path, name="run_onnx"):
    """`run(**inputs) -> dict of named outputs`, the onnxruntime session
    made once; inputs are checked (names, rank, fixed dimensions) and
    cast to the model's input types; `name`: the function the messages
    name."""
    import onnxruntime

    path = validation.path(name, "path", path, "an ONNX file's path")
    if not os.path.isfile(path):
        raise ValueError(
            f"`{name}` expects `path` to be an ONNX file. Received: path={os.fspath(path)!r}, "
            f"which {'is a directory' if os.path.isdir(path) else 'does not exist'}"
        )
    try:
        session = onnxruntime.InferenceSession(os.fspath(path), providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime's own exception types
        raise ValueError(
            f"`{name}`: onnxruntime cannot load `path` {os.fspath(path)!r}: {error}"
        ) from None
    names = [o.name for o in session.get_outputs()]
    specs = {i.name: i for i in session.get_inputs()}

    def run(**inputs):
        missing = set(specs) - set(inputs)
        unknown = set(inputs) - set(specs)
        if missing or unknown:
            raise ValueError(
                f"`{name}` is missing inputs {sorted(missing)} or got unknown inputs "
                f"{sorted(unknown)} in `inputs`; the model takes {sorted(specs)}"
            )
        feed = {k: _fed(name, k, v, specs[k]) for k, v in inputs.items()}
        return dict(zip(names, session.run(None, feed)))

    return run


def run_onnx(path, **inputs):
    """Runs an ONNX file in onnxruntime with named inputs; returns a dict
    of named outputs.

    Args:
        path: the `.onnx` file.
        **inputs: the model's inputs by name.

    Returns:
        A dict of NumPy arrays by output name.

    Raises:
        ValueError: missing or unknown inputs, or an input of the wrong
            rank or kind.
    """
    return onnx_runner(path)(**inputs)
