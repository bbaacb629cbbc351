"""Export helpers (TensorFlow-specific code lives here, not in layers).

The full export module (TF Serving layout, ONNX, verification reports) is a
later issue; this package holds what the layers' exportability tests and the
main job need today.
"""

from seqkeras.export.tflite import convert_builtin
from seqkeras.export.tflite import op_names
from seqkeras.export.tflite import run_tflite

__all__ = ["convert_builtin", "op_names", "run_tflite"]
