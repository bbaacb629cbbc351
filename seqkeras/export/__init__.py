"""Export (TensorFlow-specific code lives here, not in layers).

- `saved_model(model, path, signatures=[...], jit_compile=False)` (TF
  Serving layout): the writer; the signatures are objects from
  `seqkeras.export.signatures` (`Forward`, `Generate`, `GenerateBeam`,
  `GenerateSample`, `GenerateText`, `ServeText`, `Tag`, `Translate`); decoding signatures
  run the model's own `call_with_cache` through `seqkeras.decoding`, in
  the serving loop of `loops` (growing caches, finished rows leave), or,
  with `jit_compile=True`, in one XLA cluster per signature.
  `batching_parameters(path)` writes TF Serving's batching file.
- `tflite(model, path)` (builtin ops only, optional quantization),
  `onnx(model, path)` (tf2onnx, opset 17), `streaming_tflite(model,
  path)` (one-step TFLite models for recurrent models).
- `files`: the atomic writes every exporter uses (a temporary path moved
  into place when complete); `refusals`: what the exporters refuse
  (stateful layers; layers that declare `uses_lookup_tables`, for TFLite
  and ONNX).
- `export_and_verify` writes all three formats and checks them in their
  runtimes; `assert_servable(path)` raises unless the TF Serving binary
  can load a SavedModel (`audit_serving` lists its ops);
  `fresh_signature(path, name, **inputs)` calls a signature in a process
  without seqkeras.
- `python -m seqkeras.export` is the command line.
"""

from seqkeras.export import signatures
from seqkeras.export.audit import NotServableError
from seqkeras.export.audit import assert_servable
from seqkeras.export.audit import audit_serving
from seqkeras.export.audit import fresh_signature
from seqkeras.export.on_device import chat_bundle, chat_bundle_source, convert_chat_bundle
from seqkeras.export.on_device import litert_lm_metadata, litert_lm_tflite
from seqkeras.export.onnx import onnx
from seqkeras.export.onnx import run_onnx
from seqkeras.export.files import next_version
from seqkeras.export.saved_model import batching_parameters
from seqkeras.export.saved_model import saved_model
from seqkeras.export.signatures import serving_function
from seqkeras.export.streaming import streaming_nll
from seqkeras.export.streaming import streaming_tflite
from seqkeras.export.streaming import streaming_variants
from seqkeras.export.tflite import convert_builtin
from seqkeras.export.tflite import op_names
from seqkeras.export.tflite import run_tflite
from seqkeras.export.tflite import run_tflite_signature
from seqkeras.export.tflite import tflite
from seqkeras.export.verify import export_and_verify

__all__ = [
    "NotServableError",
    "assert_servable",
    "batching_parameters",
    "chat_bundle",
    "chat_bundle_source",
    "convert_chat_bundle",
    "litert_lm_metadata",
    "litert_lm_tflite",
    "audit_serving",
    "convert_builtin",
    "export_and_verify",
    "fresh_signature",
    "next_version",
    "onnx",
    "op_names",
    "run_onnx",
    "run_tflite",
    "run_tflite_signature",
    "saved_model",
    "serving_function",
    "signatures",
    "streaming_nll",
    "streaming_tflite",
    "streaming_variants",
    "tflite",
]


_RENAMED = {"NotServable": "NotServableError"}


def __getattr__(name):  # renamed names: the old one warns and still works
    if name in _RENAMED:
        import warnings

        warnings.warn(
            f"`seqkeras.export.{name}` is now `{_RENAMED[name]}`", DeprecationWarning, stacklevel=2
        )
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
