"""Writes that a crash cannot half-do: every exporter (and the LoRA
adapters) writes to a temporary path beside its target and moves the
result into place in one rename, so a `kill -9` at any moment leaves the
previous version or the new one at the target, never neither and never a
half-written file.

- A file: `os.replace` of a complete temporary file (atomic on POSIX).
- A directory over an existing one: Linux's `renameat2(RENAME_EXCHANGE)`
  swaps the two in one step, then the old version (now at the temporary
  path) is deleted. Where the exchange is not available (another OS or
  file system), the old version is renamed aside to `.old-<name>-*`, the
  new one moved in, the old one deleted; a kill between the two renames
  leaves the old version aside, and `recover` (run by every exporter
  before it writes) puts it back.

Temporary and set-aside paths are named `.tmp-<name>-*` and
`.old-<name>-*` beside the target, so `recover` finds what a killed call
left behind. Standard library only (no TensorFlow): the models' adapters
use it too.
"""

import ctypes
import errno
import glob
import os
import shutil
import tempfile

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _prefix(kind, path):
    return f".{kind}-{os.path.basename(os.path.normpath(path))}-"


def _umask():
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temporary_dir(path):
    """A new temporary directory beside `path` (same file system, so the
    final move is a rename), named for `recover`, with the mode a plain
    `os.mkdir` would give it (mkdtemp's is 0o700, which the rename would
    carry to the target: a model server under another account could not
    read the export)."""
    tmp = tempfile.mkdtemp(prefix=_prefix("tmp", path), dir=os.path.dirname(path))
    os.chmod(tmp, 0o777 & ~_umask())
    return tmp


def temporary_file(path):
    """A new temporary file path beside `path` (created empty), with the
    mode `open(path, "w")` would give it (mkstemp's is 0o600)."""
    fd, tmp = tempfile.mkstemp(prefix=_prefix("tmp", path), dir=os.path.dirname(path))
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())
    return tmp


def place_file(source, path):
    """Moves the complete file `source` to `path` in one rename."""
    os.replace(source, path)


def write_bytes(path, data):
    """Writes `data` to `path` through a temporary file and one rename."""
    tmp = temporary_file(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        place_file(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    return path


def _exchange(a, b):
    """Swaps the paths `a` and `b` atomically (Linux renameat2
    RENAME_EXCHANGE); False where the system or file system lacks it."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(code, os.strerror(code), b)


def replace_dir(new, path, exchange=True):
    """Moves the complete directory `new` to `path`. Over an existing
    `path`: swapped in one step where the system can (`exchange`), else
    the old version renamed aside first and deleted once the new one is
    in place (`recover` restores it if a kill comes in between)."""
    if not os.path.exists(path):
        os.replace(new, path)
        return
    if exchange and _exchange(new, path):
        shutil.rmtree(new, ignore_errors=True)  # the old version, now at `new`
        return
    old = tempfile.mkdtemp(prefix=_prefix("old", path), dir=os.path.dirname(path))
    os.rmdir(old)
    os.replace(path, old)
    try:
        os.replace(new, path)
    except BaseException:  # a failure that lets this run (not a kill): the old one back now
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def recover(path):
    """Undoes what a killed write to `path` left behind: a missing `path`
    whose previous version was set aside gets it back, and the temporary
    and set-aside leftovers beside `path` are deleted. Returns True when
    it restored the previous version."""
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        return False

    def leftovers(kind):
        return glob.glob(os.path.join(glob.escape(parent), glob.escape(_prefix(kind, path)) + "*"))

    old = sorted(leftovers("old"), key=os.path.getmtime)
    restored = False
    if old and not os.path.lexists(path):
        os.replace(old.pop(), path)
        restored = True
    for leftover in old + leftovers("tmp"):
        _remove(leftover)
    return restored


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try:
            os.remove(path)
        except OSError:
            pass
