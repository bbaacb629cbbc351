"""Export (TensorFlow-specific code lives here, not in layers).

`saved_model(model, path)` (TF Serving layout, named signatures, generate
and raw-string signatures), `tflite(model, path)` (builtin ops only,
optional quantization), `onnx(model, path)` (tf2onnx, opset 17), each
written to a temporary directory and moved into place;
`streaming_tflite(model, path)` (one-step TFLite models for recurrent
models);
`export_and_verify` writes all three and checks them in their runtimes;
`audit_serving(path)` lists the ops the TF Serving binary would refuse;
`python -m seqkeras.export` is the command line.
"""

from seqkeras.export.audit import audit_serving
from seqkeras.export.audit import fresh_signature
from seqkeras.export.audit import fresh_translate
from seqkeras.export.onnx import onnx
from seqkeras.export.onnx import run_onnx
from seqkeras.export.saved_model import saved_model
from seqkeras.export.saved_model import serving_function
from seqkeras.export.streaming import streaming_tflite
from seqkeras.export.tflite import convert_builtin
from seqkeras.export.tflite import op_names
from seqkeras.export.tflite import run_tflite
from seqkeras.export.tflite import run_tflite_signature
from seqkeras.export.tflite import tflite
from seqkeras.export.verify import export_and_verify
from seqkeras.export.verify import next_version

__all__ = ["audit_serving", "convert_builtin", "export_and_verify",
           "fresh_signature", "fresh_translate", "next_version", "onnx",
           "op_names",
           "run_onnx", "run_tflite", "run_tflite_signature", "saved_model",
           "serving_function", "streaming_tflite", "tflite"]
