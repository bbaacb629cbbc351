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

from seqkeras.export import litert_files
from seqkeras.export.litert_files import (  # noqa: F401  (names of this module before)
    _converted,
    _finish,
    check_flatbuffer,
    quantize_int4,
    share_embedding_tables,
)

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


QUANTIZATIONS = (None, "dynamic_int8", "float16", "int4", "int4_q4_1")


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
            stored as float16), `"int4"` (weights in blocks of 32:
            `quantize_int4`) or `"int4_q4_1"` (the same, a GGUF Q4_1
            checkpoint's weights kept exactly: `quantize_int4(
            keep_q4_1=True)`); or a list of these, each converted from the
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


def save_functions(functions, variables, directory, stand_ins=False):
    """Writes `tf.function`s (each with an `input_signature`) and the
    `variables` they read as a SavedModel at `directory` whose signature
    keys are the functions' names: what `convert_in_new_process` reads, so
    that a conversion needs neither the model nor its process. Returns the
    signature keys, in order.

    With `stand_ins` (True, or the least number of elements: True is
    65,536), each large float32 Keras variable (at most 1,024 of them)
    whose axes cannot be split into two equal halves (a (d, d) kernel
    could lie in a file either way round) is traced as a constant of one
    value (`litert_files.stand_in_value`), which the converter holds as
    one number, and saved as a NumPy file beside the SavedModel
    (`litert_files.STAND_INS` lists them); `convert_in_new_process`
    converts that, then writes the real weights into the file
    (`litert_files.fill_stand_ins`). SmolLM2-135M's conversion then holds
    its weights once instead of about six times.
    """
    holder = tf.Module()
    if stand_ins is True:
        stand_ins = 65536
    if stand_ins is not False and (isinstance(stand_ins, bool) or not isinstance(stand_ins, int)):
        raise TypeError(
            "`save_functions` expects `stand_ins` to be a bool or an int (the least number "
            f"of elements). Received: stand_ins={stand_ins!r}"
        )
    standing = _stand_ins(variables, stand_ins) if stand_ins else {}
    holder.weights = [
        getattr(v, "value", v) for i, v in enumerate(variables) if i not in standing
    ]  # Keras 3: the tf.Variable
    if standing:
        functions = [_traced_with_stand_ins(fn, standing) for fn in functions]
    signatures = {fn.name: fn.get_concrete_function() for fn in functions}
    tf.saved_model.save(holder, str(directory), signatures=signatures)
    if standing:
        entries = []
        for n, (i, (variable, value)) in enumerate(standing.items()):
            name = f"stand_in_{n}.npy"
            np.save(os.path.join(directory, name), variable.numpy())  # float32: `_stand_ins`
            entries.append({"value": value, "file": name, "shape": list(variable.shape)})
        with open(os.path.join(directory, litert_files.STAND_INS), "w", encoding="utf-8") as f:
            json.dump(entries, f, indent=1)
    return list(signatures)


def _stand_ins(variables, least):
    """{index: (variable, stand-in value)} for `save_functions(stand_ins=...)`:
    the largest float32 Keras variables of `least` elements or more whose
    shape has no split into two equal products, up to 1,024 of them."""
    import keras

    def square(shape):
        return any(np.prod(shape[:k]) == np.prod(shape[k:]) for k in range(1, len(shape)))

    chosen = [
        i
        for i, v in enumerate(variables)
        if isinstance(v, keras.Variable)
        and v.dtype == "float32"
        and int(np.prod(v.shape)) >= least
        and not square(tuple(v.shape))
    ]
    chosen = sorted(chosen, key=lambda i: -int(np.prod(variables[i].shape)))[:1024]
    return {i: (variables[i], litert_files.stand_in_value(n)) for n, i in enumerate(sorted(chosen))}


def _traced_with_stand_ins(fn, standing):
    """`fn` (a `tf.function` with an `input_signature`) traced with each
    variable of `standing` read as its stand-in constant (a Keras
    `StatelessScope` inside the trace: the constants are the graph's)."""
    import keras

    def traced(*args):
        mapping = [
            (variable, tf.constant(value, dtype=variable.dtype, shape=variable.shape))
            for variable, value in standing.values()
        ]
        with keras.StatelessScope(state_mapping=mapping):
            return fn.python_function(*args)

    traced.__name__ = fn.name
    return tf.function(traced, autograph=False, input_signature=fn.input_signature)


# The conversion of `convert_in_new_process`: TensorFlow alone (no seqkeras,
# no Keras; litert_files.py loaded by its path for `_converted`'s options).
# It sets private converter attributes (tests/test_private_apis.py fails loudly
# if TensorFlow drops it): `_experimental_use_buffer_offset` writes the
# weights after the flatbuffer (a format LiteRT reads) and skips the
# converter's Python-side rebuild of the whole model to merge equal
# buffers, which held SmolLM2's weights once more (a fresh conversion
# peaked at 5.7 GB against 4.7 GB) and merged nothing: the converter
# already shares the signatures' weights. `_experimental_disable_fuse_mul_and_fc`
# keeps a norm's scale out of the next FULLY_CONNECTED's weights, where it
# would hide a stand-in (`save_functions(stand_ins=True)`), and
# `_experimental_unfold_large_splat_constant` writes a large stand-in as a
# FILL of its value instead of its full bytes (SmolLM2's conversion: 2.9 GB
# with the bytes): there is no public switch for either.
_CONVERT = r"""
import importlib.util, json, sys
import tensorflow as tf
here, saved, keys, quantize, path, stand_ins = json.loads(sys.argv[1])
spec = importlib.util.spec_from_file_location("seqkeras_export_litert_files", here)
files = importlib.util.module_from_spec(spec)
spec.loader.exec_module(files)
converter = tf.lite.TFLiteConverter.from_saved_model(saved, signature_keys=keys)
converter.exclude_conversion_metadata = True
converter._experimental_use_buffer_offset = True
if stand_ins:  # a norm's scale multiplied into a stand-in would hide it
    converter._experimental_disable_fuse_mul_and_fc = True
    converter._experimental_unfold_large_splat_constant = True  # FILL, not the splat's bytes
    quantize = "float16" if quantize == "float16" else None  # the others: from float32
flatbuffer = files._converted(converter, quantize)
with open(path, "wb") as f:
    f.write(flatbuffer)
"""

# What follows the converter (`litert_files.finish_file`) in a process of its
# own, after the conversion's has ended (its memory is not given back while
# the process lives: SmolLM2's int4 file, quantized in the converting
# process, raised the export's peak by 0.3 GB), and without TensorFlow:
# litert_files.py loaded by its path.
_FINISH = r"""
import importlib.util, json, sys
here, quantize, path, stand_ins = json.loads(sys.argv[1])
spec = importlib.util.spec_from_file_location("seqkeras_export_litert_files", here)
files = importlib.util.module_from_spec(spec)
spec.loader.exec_module(files)
files.finish_file(path, quantize, stand_ins)
"""


def convert_in_new_process(saved_model_dir, signature_keys, path, quantize=None):
    """Converts the signatures `signature_keys` of a `save_functions`
    SavedModel to a builtin-ops TFLite file at `path` in a new Python
    process that imports TensorFlow alone: the conversion's memory (about
    six copies of the weights at its peak) is not added to the caller's,
    and returns to the system when the process ends. What follows the
    converter (`_finish`: int8 files' shared tables, int4 quantization)
    runs in a second new process, without TensorFlow.

    A SavedModel saved with stand-ins (`save_functions(stand_ins=True)`)
    is converted to float32 (float16 for `"float16"`) with the stand-ins,
    which the converter holds as one number each; the second process then
    writes the real weights into the file (`litert_files.fill_stand_ins`)
    and quantizes it with `litert-quantizer` (`"dynamic_int8"`:
    `litert_files.quantize_int8`; `"int4"`, `"int4_q4_1"`: `quantize_int4`). Returns
    `path`."""
    if quantize not in QUANTIZATIONS:
        raise ValueError(
            "`convert_in_new_process` received an invalid value for `quantize`: "
            f"expected one of {QUANTIZATIONS}. Received: quantize={quantize!r}"
        )
    here = os.path.abspath(litert_files.__file__)
    listed = os.path.isfile(os.path.join(saved_model_dir, litert_files.STAND_INS))
    stand_ins = os.path.abspath(saved_model_dir) if listed else None
    job = [here, str(saved_model_dir), list(signature_keys), quantize, str(path), stand_ins]
    steps = [(_CONVERT, job)]
    if stand_ins or quantize in ("dynamic_int8", "int4", "int4_q4_1"):
        steps.append((_FINISH, [here, quantize, str(path), stand_ins]))
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
        quantize: None, `"dynamic_int8"`, `"float16"`, `"int4"` or
            `"int4_q4_1"` (see `convert_builtin`).
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
