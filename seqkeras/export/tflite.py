"""TFLite conversion with builtin ops only, and running in LiteRT."""

import numpy as np
import tensorflow as tf
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

_BUILTIN_NAMES = {
    value: name
    for name, value in vars(schema.BuiltinOperator).items()
    if not name.startswith("_")
}


def convert_builtin(saved_model_dir, signature_key=None):
    """Converts a SavedModel to a TFLite flatbuffer with builtin ops only.

    Export the Keras model first (`model.export(path)`, optionally with
    `input_signature=[keras.InputSpec(...)]` or a `tf.TensorSpec` for a
    batch-1 signature); variables are frozen into constants there. Raises
    the converter's error if any op would need the Flex delegate.
    """
    keys = None if signature_key is None else [signature_key]
    converter = tf.lite.TFLiteConverter.from_saved_model(
        str(saved_model_dir), signature_keys=keys
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def op_names(flatbuffer):
    """Names of every operator code in the model, all subgraphs included.

    Builtin ops give their builtin name (e.g. "WHILE"); custom and Flex ops
    give their custom code (e.g. "FlexTensorListReserve").
    """
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
    dynamic dimensions) and returns the list of outputs as NumPy arrays."""
    interpreter = Interpreter(model_content=flatbuffer)
    details = interpreter.get_input_details()
    if len(details) != len(inputs):
        raise ValueError(
            f"`run_tflite` got {len(inputs)} inputs; the model takes "
            f"{len(details)}."
        )
    for detail, value in zip(details, inputs):
        interpreter.resize_tensor_input(detail["index"], np.shape(value))
    interpreter.allocate_tensors()
    for detail, value in zip(details, inputs):
        interpreter.set_tensor(detail["index"], np.asarray(value, detail["dtype"]))
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"])
            for d in interpreter.get_output_details()]
