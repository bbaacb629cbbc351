"""Atomic writes for every exporter (`seqkeras._atomic`): an export goes
to a temporary path next to its target and is moved into place only once
complete, so a crash leaves the previous version or the new one, never a
half-written file or directory, and the next export to the same target
first recovers whatever a killed one left behind."""

import os

from seqkeras._atomic import place_file  # noqa: F401  (the exporters' imports)
from seqkeras._atomic import recover
from seqkeras.layers import validation
from seqkeras._atomic import replace_dir  # noqa: F401
from seqkeras._atomic import temporary_dir  # noqa: F401
from seqkeras._atomic import write_bytes  # noqa: F401


def check_target(name, path, overwrite, want="file", argument="path"):
    """The absolute `path` an export `name` may write (a `want` = "file" or
    "dir"), after `recover`ing what a killed write to it left; raises a
    clear ValueError when it exists as the other kind, or at all unless
    `overwrite` (the messages name the export's `argument`). Creates the
    parent directory."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"`{name}` expects `{argument}` to be a str or os.PathLike. "
            f"Received: {argument}={path!r} ({type(path).__name__})"
        )
    path = os.path.abspath(os.fspath(path))
    recover(path)  # a killed earlier write: its previous version back, its leftovers gone
    other = os.path.isdir if want == "file" else os.path.isfile
    if other(path):
        raise ValueError(
            f"`{name}`: `{argument}` {path} exists and is a "
            f"{'directory' if want == 'file' else 'file'}"
        )
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"`{name}`: `{argument}` {path} exists; pass overwrite=True to replace it")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def next_version(base):
    """1 + the largest numeric version directory under `base` (TF
    Serving's layout: `base/1`, `base/2`, ...; 1 when `base` does not
    exist yet).

    Args:
        base: the model's directory (a str or os.PathLike).

    Returns:
        An int.

    Raises:
        TypeError: a `base` that is not a path.
        ValueError: an empty `base`, or one that is a file.
    """
    base = validation.path("next_version", "base", base, "a directory path")
    if os.path.exists(base) and not os.path.isdir(base):
        raise ValueError(
            f"`next_version` expects `base` to be a directory of versions. Received: "
            f"base={base!r}, which is a file"
        )
    versions = [int(d) for d in os.listdir(base) if d.isdigit()] if os.path.isdir(base) else []
    return max(versions, default=0) + 1
