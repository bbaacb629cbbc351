"""The one switch for export-only graph choices (docs/design.md, Style 10).

Inside `export_mode()`, layers that have two ways to build a graph pick the
one the target runtime runs, at the cost of training:

- loops write their outputs into a preallocated buffer instead of Keras'
  TensorArray loop (TensorList ops need TFLite's Flex delegate);
- buffer and cache writes (`slice_update`, `write_step`) become
  `keras.ops.slice_update` for `target="tflite"` (TensorFlow's
  `XlaDynamicUpdateSlice`, which the TFLite converter turns into the
  fast DYNAMIC_UPDATE_SLICE builtin) and `keras.ops.scatter_update` for
  `target="serving"` (`TensorScatterUpdate`, a standard op with a CPU
  kernel: the TF Serving binary does not run XLA-only ops such as
  `XlaDynamicUpdateSlice` without experimental flags, and tf2onnx maps
  it to ONNX `ScatterND`), and `keras.ops.slice_update` again for
  `target="xla"` (a function compiled whole by XLA, where the XLA-only op
  is allowed and a scatter would run element by element).

Decoding state for `target="serving"`: attention caches grow by one
position per step (`growing_caches()`), and decoding loops run through
`while_loop`, which the export code gives loop-state shapes that may
change (the cache's length; the batch, as finished rows leave the loop).

`seqkeras.export` traces models inside it; training code never should.
"""

import contextlib
import threading

from keras import ops

_STATE = threading.local()
TARGETS = ("serving", "tflite", "xla")


def active():
    """True while tracing for export."""
    return getattr(_STATE, "active", False)


def target():
    """The export target being traced for (`"serving"` or `"tflite"`), or
    None outside `export_mode`."""
    return getattr(_STATE, "target", None) if active() else None


@contextlib.contextmanager
def export_mode(target="serving"):
    """Context manager: build export-friendly (inference-only) graphs.

    Args:
        target: `"serving"` (SavedModels for TF Serving and ONNX: standard
            ops only), `"tflite"` (graphs for the TFLite converter) or
            `"xla"` (a function XLA compiles whole inside a serving
            SavedModel: its buffer writes are dynamic-update-slices, which
            XLA does in place; a scatter it runs element by element).
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


def growing_caches():
    """Whether key/value caches grow by the new positions at each decoding
    step (traced for TF Serving) instead of being a `max_length` buffer
    written in place (training graphs, XLA, TFLite)."""
    return target() == "serving"


_LOOPS = {}


def register_loop(target, loop):
    """Sets the while loop decoding runs under `target`:
    `loop(cond, body, loop_vars)`, whose loop state may change shape
    between iterations (`seqkeras.export` registers TensorFlow's with
    relaxed shape invariants for `"serving"`)."""
    _LOOPS[target] = loop


def dynamic_shapes():
    """Whether a decoding loop's state may change shape here (the serving
    loop is registered and active)."""
    return target() in _LOOPS


def while_loop(cond, body, loop_vars):
    """`keras.ops.while_loop(cond, body, loop_vars)`, or the loop
    registered for the active target (see `register_loop`)."""
    loop = _LOOPS.get(target())
    if loop is None:
        return ops.while_loop(cond, body, loop_vars)
    return loop(cond, body, loop_vars)


def slice_update(x, start, update, depth=None):
    """`keras.ops.slice_update(x, start, update)`, but in serving export
    mode a scatter of standard ops.

    Args:
        start: one start index per axis of `x`.
        depth: the number of leading axes that the scatter indexes (default
            all); the axes after them must be covered whole by `update`
            (their starts 0 and their sizes those of `x`): fewer indices.
    """
    if target() != "serving":
        return ops.slice_update(x, start, update)
    depth = len(start) if depth is None else depth
    shape = ops.shape(update)
    ranges = [
        ops.arange(shape[axis], dtype="int32") + ops.cast(start[axis], "int32")
        for axis in range(depth)
    ]
    if depth == 1:
        indices = ops.expand_dims(ranges[0], -1)
    else:
        indices = ops.stack(ops.meshgrid(*ranges, indexing="ij"), axis=-1)
    return ops.scatter_update(x, indices, update)


def write_step(buffer, t, value):
    """`buffer[t] = value` for a (time, ...) loop buffer: one
    DynamicUpdateSlice for TFLite and training, one `TensorScatterUpdate`
    row for serving."""
    value = ops.expand_dims(value, 0)
    if target() != "serving":
        start = (t,) + (0,) * (len(buffer.shape) - 1)
        return ops.slice_update(buffer, start, value)
    return ops.scatter_update(buffer, ops.reshape(ops.cast(t, "int32"), (1, 1)), value)
