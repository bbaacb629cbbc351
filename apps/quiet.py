"""Imported by every app before anything that imports TensorFlow: imports
it with the lines its C++ start-up writes to stderr that a user cannot act
on (absl's "All log messages before absl::InitializeLog() is called ...",
oneDNN's "custom operations are on", "Could not find cuda drivers" on a
CPU machine, the CPU-feature note) left out; any other line passes.

TensorFlow 2.19+ writes them even with TF_CPP_MIN_LOG_LEVEL=3
(tensorflow/tensorflow#100442, open): they are filtered here, where the
import happens, and the variable is still set for the rest."""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

START_UP_LINES = (
    "All log messages before absl::InitializeLog() is called",
    "oneDNN custom operations are on",
    "Could not find cuda drivers on your machine",
    "This TensorFlow binary is optimized to use available CPU instructions",
    "To enable the following instructions:",
)


def _import_tensorflow():
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (e.g. captured)
        import tensorflow  # noqa: F401

        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), fd)
        try:
            import tensorflow  # noqa: F401
        finally:
            os.dup2(saved, fd)
            os.close(saved)
        captured.seek(0)
        for line in captured.read().decode("utf-8", "replace").splitlines():
            if not any(known in line for known in START_UP_LINES):
                print(line, file=sys.stderr)


_import_tensorflow()
