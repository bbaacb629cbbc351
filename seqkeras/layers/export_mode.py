"""The one switch for export-only graph choices (DESIGN.md, Style 10).

Inside `export_mode()`, layers that have two ways to build a graph pick the
one every target runtime runs with builtin ops, at the cost of training:
`AttentionDecoder` writes its outputs into a preallocated buffer
(`slice_update`, a TFLite builtin, but with no TensorFlow gradient) instead
of Keras' TensorArray loop (TensorList ops need TFLite's Flex delegate).
`seqkeras.export` traces models inside it; training code never should.
"""

import contextlib
import threading

_STATE = threading.local()


def active():
    """True while tracing for export."""
    return getattr(_STATE, "active", False)


@contextlib.contextmanager
def export_mode():
    """Context manager: build export-friendly (inference-only) graphs."""
    previous = active()
    _STATE.active = True
    try:
        yield
    finally:
        _STATE.active = previous
