"""How full-sequence loops are lowered for an export target.

Decoding state does not read this module: caches and their layouts are
values the caller passes (`seqkeras.layers.state`), and the decoding loop
is an argument of `seqkeras.decoding` (`Runtime`). What is left here is
the one choice a traced full-sequence call (a functional model's `call`,
which takes no extra arguments) cannot be given: which ops the time loop
of `Recurrent` and `time_loop.scan` (the CRF's Viterbi) writes its
outputs with. The numbers are the same in every case; only the graph
differs:

- outside `export_mode`: training's loops (a custom-gradient loop,
  `keras.ops.scan`), inference writing a preallocated buffer with
  `keras.ops.slice_update`;
- `target="tflite"` and `"xla"`: the plain inference loop writing with
  `slice_update` (XLA's DynamicUpdateSlice, which the TFLite converter
  makes the DYNAMIC_UPDATE_SLICE builtin; a TensorArray would need Flex);
- `target="serving"`: the same loop writing with `scatter_update`
  (`TensorScatterUpdate`, a standard op with a CPU kernel: TF Serving
  refuses XLA-only ops, tf2onnx maps it to ONNX `ScatterND`).

`seqkeras.export` traces models inside it; training code never should.
"""

import contextlib
import threading

from seqkeras.layers import state

_STATE = threading.local()
TARGETS = ("serving", "tflite", "xla")


def active():
    """True while tracing for export."""
    return getattr(_STATE, "active", False)


def target():
    """The export target being traced for, or None outside `export_mode`."""
    return getattr(_STATE, "target", None) if active() else None


@contextlib.contextmanager
def export_mode(target="serving"):
    """Context manager: full-sequence loops lowered for `target`.

    Args:
        target: `"serving"` (SavedModels for TF Serving and ONNX: standard
            ops only), `"tflite"` (graphs for the TFLite converter) or
            `"xla"` (a function XLA compiles whole).
    """
    if target not in TARGETS:
        raise ValueError(
            "`export_mode` received an invalid value for `target`: expected "
            f"one of {TARGETS}. Received: target={target!r}"
        )
    previous = active(), getattr(_STATE, "target", None)
    _STATE.active, _STATE.target = True, target
    try:
        yield
    finally:
        _STATE.active, _STATE.target = previous


def write_step(buffer, t, value):
    """`buffer[t] = value` for a full-sequence loop's (time, ...) output
    buffer, with the writes of the active target."""
    return state.write_step(buffer, t, value, "scatter" if target() == "serving" else "fixed")
