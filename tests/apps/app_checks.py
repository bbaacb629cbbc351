"""Helpers the app tests share: load an app module from `apps/`, run its
`main` and capture what it printed, check a one-line error, and the
kill-and-resume check of a training command."""

import importlib.util
import io
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def app_path(name):
    return os.path.join(ROOT, "apps", f"{name}.py")


def load_app(name):
    """The module `apps/<name>.py` (as the tests call it, not a script)."""
    spec = importlib.util.spec_from_file_location(f"{name}_app", app_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_app(app, argv, capsys, stdin=None, monkeypatch=None):
    """`app.main(argv)` -> (exit code, stdout, stderr); `stdin` bytes."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = 0
    try:
        app.main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, prog, *needles):
    """Exit status 2 and one stderr line `<prog>: error: ...` holding
    each of `needles`."""
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, err)
    assert lines[0].startswith(f"{prog}: error:"), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def assert_process_error(name, argv):
    """The app run as a process: exit status 2, no traceback, the last
    stderr line its one-line error."""
    result = subprocess.run([sys.executable, app_path(name), *argv], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"{name}.py: error:")


def assert_resumes(name, argv, kill_env, out, epochs):
    """BackupAndRestore: the training command SIGKILLed after epoch 1 and
    run again does epochs 2..`epochs` only; history.csv has every epoch
    once."""
    command = [sys.executable, app_path(name), *argv]
    killed = subprocess.run(
        command, env=dict(os.environ, **{kill_env: "1"}), capture_output=True, text=True
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert f"Epoch 1/{epochs}" in killed.stdout
    assert f"Epoch 2/{epochs}" not in killed.stdout
    resumed = subprocess.run(command, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"Epoch 1/{epochs}" not in resumed.stdout
    for epoch in range(2, epochs + 1):
        assert f"Epoch {epoch}/{epochs}" in resumed.stdout
    with open(os.path.join(out, "history.csv")) as f:
        rows = [line.split(",")[0] for line in f.read().splitlines()[1:]]
    assert rows == [str(e) for e in range(epochs)]
