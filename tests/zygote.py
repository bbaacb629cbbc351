"""A process that imports TensorFlow (or JAX), Keras, seqkeras and pytest
once, then forks one child per pytest run that `tests/run.py` asks for.

Why: each test group paid a process start of 6 to 10 s on the 2-core
machine (Python, TensorFlow, Keras, seqkeras, pytest), about 50 times in
`.ci/run`. A forked child starts with those modules loaded. Forking is
safe here because nothing has run yet: no TensorFlow op, no XLA client,
no thread (the loop below is single-threaded), so a child starts as a
fresh process would, with the same environment; each child then builds
its own eager context and compiles on its own.

The zygote runs with the environment its children need (backend and
XLA flags, which TensorFlow may read at import): `tests/run.py` starts
one, for the TensorFlow groups with the test XLA flags, and starts the
other groups as processes of their own. Protocol (one JSON object per line): requests on stdin,
`{"id": N, "argv": [...], "out": PATH}` (pytest's arguments, the file
for the child's stdout and stderr); replies on stdout, `{"ready": PID}`
once imported, `{"id": N, "pid": PID}` when a child is forked and
`{"pid": PID, "status": CODE}` when it exits. The zygote exits when stdin
closes, after its children.

    python tests/zygote.py
"""

import json
import os
import select
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _preload():
    """The imports every test process makes, seqkeras from the installed
    package (as tests/conftest.py imports it), then `sys.path` as `python
    -m pytest` run from the checkout's root has it. (This script's own
    directory, `tests/`, is never on the path: `tests/jax` would shadow
    JAX.)"""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") not in (ROOT, here)]
    import keras  # noqa: F401  (the backend's modules with it)
    import numpy  # noqa: F401
    import pytest  # noqa: F401

    import seqkeras  # noqa: F401  (the installed package: tests/ is sys.path[0])

    if keras.backend.backend() == "tensorflow":
        import seqkeras.export  # noqa: F401
    sys.path.insert(0, ROOT)


def _child(request):
    """Runs pytest in the forked child; never returns."""
    code = 1
    try:
        fd = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)  # the requests are the zygote's
        os.dup2(null, 0)
        os.close(null)
        import pytest

        code = int(pytest.main(request["argv"]))
    except BaseException as error:  # noqa: BLE001  (reported in the child's output)
        print(f"zygote child: {type(error).__name__}: {error}", file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reply(message):
    os.write(1, (json.dumps(message) + "\n").encode())


def main():
    _preload()
    _reply({"ready": os.getpid()})
    pending, children, open_ = b"", set(), True
    while open_ or children:
        if open_:
            readable, _, _ = select.select([0], [], [], 0.2)
            if readable:
                data = os.read(0, 65536)
                open_ = bool(data)
                pending += data
        else:
            select.select([], [], [], 0.2)
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if not line.strip():
                continue
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(request)
            children.add(pid)
            _reply({"id": request["id"], "pid": pid})
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            _reply({"pid": pid, "status": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    main()
