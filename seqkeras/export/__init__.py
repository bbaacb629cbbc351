"""Export helpers (TensorFlow-specific code lives here, not in layers).

The full export module (TF Serving layout, ONNX, verification reports) is a
later issue; this package holds what the layers' exportability tests and the
main job need today.
"""

from seqkeras.export.onnx import onnx
from seqkeras.export.onnx import run_onnx
from seqkeras.export.saved_model import saved_model
from seqkeras.export.saved_model import serving_function
from seqkeras.export.tflite import convert_builtin
from seqkeras.export.tflite import op_names
from seqkeras.export.tflite import run_tflite
from seqkeras.export.tflite import run_tflite_signature
from seqkeras.export.verify import export_and_verify
from seqkeras.export.verify import next_version

__all__ = ["convert_builtin", "export_and_verify", "next_version", "onnx",
           "op_names", "run_onnx", "run_tflite",
           "run_tflite_signature", "saved_model", "serving_function"]
