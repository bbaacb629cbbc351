"""Fault injection for the atomic writes: `Faults` patches every call that
moves or deletes a path (os.replace, os.rename, os.remove, os.unlink,
os.rmdir, shutil.rmtree and the directory exchange) so that the k-th one
and every later one raise `Killed`, as if the process were killed there:
nothing after that point runs, no cleanup either. What is on disk then is
what a `kill -9` at that moment leaves."""

import hashlib
import os
import shutil

from seqkeras import _atomic


class Killed(BaseException):
    """The injected kill (a BaseException: `except Exception` cannot
    swallow it, as nothing can catch a SIGKILL)."""


OPERATIONS = [
    (os, "replace"),
    (os, "rename"),
    (os, "remove"),
    (os, "unlink"),
    (os, "rmdir"),
    (shutil, "rmtree"),
    (_atomic, "_exchange"),
]


class Faults:
    """`with Faults(monkeypatch, k) as faults:` kills at the k-th top-level
    operation (calls made inside another patched call, e.g. rmtree's own
    unlinks, are not counted separately); `k=None` never kills and only
    counts (`faults.count`). `faults.moved` maps each destination to the
    digest its source had when a move to it began (the new version)."""

    def __init__(self, monkeypatch, k=None):
        self.monkeypatch, self.k, self.count, self.depth = monkeypatch, k, 0, 0
        self.dead, self.moved = False, {}

    def __enter__(self):
        for module, name in OPERATIONS:
            self.monkeypatch.setattr(module, name, self._wrap(getattr(module, name)))
        return self

    def __exit__(self, *exc):
        self.monkeypatch.undo()
        return exc[0] is Killed  # the kill ends the call; the test goes on

    def _wrap(self, real):
        def patched(*args, **kwargs):
            if self.dead:
                raise Killed
            if self.depth == 0:
                if self.k is not None and self.count == self.k:
                    self.dead = True
                    raise Killed
                self.count += 1
                paths = (str, bytes, os.PathLike)
                if len(args) >= 2 and all(isinstance(a, paths) for a in args[:2]):
                    source, target = (os.fsdecode(a) for a in args[:2])
                    if os.path.exists(source):
                        self.moved.setdefault(os.path.abspath(target), digest(source))
            self.depth += 1
            try:
                return real(*args, **kwargs)
            finally:
                self.depth -= 1

        return patched


def digest(path):
    """A hash of a file's bytes, or of a directory's relative paths and
    file bytes; None when `path` does not exist."""
    if not os.path.exists(path):
        return None
    h = hashlib.sha256()
    if os.path.isfile(path):
        with open(path, "rb") as f:
            h.update(f.read())
        return h.hexdigest()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode())
            with open(full, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def leftovers(path):
    """The temporary and set-aside paths beside `path`."""
    parent, base = os.path.dirname(path), os.path.basename(path)
    return sorted(n for n in os.listdir(parent) if n.startswith((f".tmp-{base}-", f".old-{base}-")))


def _copy(source, target):
    """A copy of the file or directory `source` at `target`."""
    if os.path.isdir(source):
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)


def check_every_kill_point(monkeypatch, path, write_old, write_new, recover):
    """For each kill point of `write_new` (an overwrite of `path` that
    `write_old` wrote first): the target holds the old version or the new
    one, never neither nor a mix; after `recover()` (the next call's
    recovery) too, with no leftovers. Returns the number of kill points."""
    write_old()
    old = digest(path)
    # the old version, copied aside: each kill point starts from a copy of
    # it (what `write_old` wrote, byte for byte) instead of exporting it
    # again, which was half of the slow module's time
    saved = f"{os.path.dirname(path)}{os.sep}saved-old-{os.path.basename(path)}"
    _copy(path, saved)
    with Faults(monkeypatch) as clean:
        write_new()
    assert clean.moved.get(os.path.abspath(path)) not in (None, old), "no new version moved in"
    points = clean.count
    for k in range(points + 1):
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
        _copy(saved, path)
        assert digest(path) == old
        with Faults(monkeypatch, k) as faults:
            write_new()
        versions = (old, faults.moved.get(os.path.abspath(path)))  # the new one, if moved in
        assert digest(path) in versions, f"kill point {k}: neither version at {path}"
        assert faults.dead or k == points
        recover()
        assert digest(path) in versions, f"kill point {k}: recovery lost {path}"
        assert not leftovers(path), f"kill point {k}: {leftovers(path)} left"
    return points
