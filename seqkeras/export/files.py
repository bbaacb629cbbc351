"""Atomic writes for every exporter: an export goes to a temporary path
next to its target and is moved into place only once complete, so a
crash leaves the previous version or the new one, never a half-written
file or directory."""

import os
import shutil
import tempfile


def check_target(name, path, overwrite, want="file"):
    """The absolute `path` an export `name` may write (a `want` = "file" or
    "dir"); raises a clear ValueError when it exists as the other kind, or
    at all unless `overwrite`. Creates the parent directory."""
    path = os.path.abspath(str(path))
    other = os.path.isdir if want == "file" else os.path.isfile
    if other(path):
        raise ValueError(
            f"`{name}`: {path} exists and is a {'directory' if want == 'file' else 'file'}"
        )
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"`{name}`: {path} exists; pass overwrite=True to replace it")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def temporary_dir(path):
    """A new temporary directory beside `path` (same file system, so the
    final move is a rename)."""
    return tempfile.mkdtemp(prefix=".tmp-", dir=os.path.dirname(path))


def replace_dir(new, path):
    """Moves the directory `new` to `path`; an existing `path` is renamed
    aside first and deleted only once `new` is in place (a crash in
    between leaves the previous version or the new one, never neither)."""
    old = None
    if os.path.exists(path):
        old = tempfile.mkdtemp(prefix=".old-", dir=os.path.dirname(path))
        os.rmdir(old)
        os.replace(path, old)
    try:
        os.replace(new, path)
    except BaseException:
        if old is not None:
            os.replace(old, path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def next_version(base):
    """1 + the largest numeric version directory under `base` (TF
    Serving's layout: `base/1`, `base/2`, ...)."""
    versions = [int(d) for d in os.listdir(base) if d.isdigit()] if os.path.isdir(base) else []
    return max(versions, default=0) + 1
