"""The release artefact and the main job as a user runs it (slow):
`.ci/wheel_check` builds the wheel and the sdist, runs `twine check`,
installs the wheel in a fresh virtual environment and runs the README's
main job as shipped (apps/dates.py with its defaults) from another
directory, where only the installed wheel can be imported; this test
checks what it printed: >= 99% exact match on held-out dates, quiet, and
exports equal to Keras. (The main job ran twice in CI before: here as a
small run and from the checkout as shipped.)"""

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOW_SECONDS = 221  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 2246  # (2 cores; the summed memory of its processes)


@pytest.mark.slow
def test_the_wheel_installs_and_runs_the_main_job_quietly(tmp_path):
    script = os.path.join(ROOT, ".ci", "wheel_check")
    if not os.path.exists(script):
        pytest.skip("the release check needs the checkout (.ci/wheel_check)")
    for module in ("build", "twine"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f'the release check needs `pip install ".[release]"` ({module})')
    log = tmp_path / "main.log"
    env = {**os.environ, "WHEEL_CHECK_LOG": str(log)}
    env.pop("PYTHONPATH", None)
    result = subprocess.run([script, sys.executable], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "main job ran" in result.stdout
    out = log.read_text()
    line = [x for x in out.splitlines() if "held-out exact match" in x][0]
    assert float(line.rsplit(" ", 1)[1].rstrip("%")) >= 99.0, line
    # quiet: no warning lines (TensorFlow's start-up lines, its
    # table_initializer serialization warning, tf.function retracing)
    noisy = [
        line
        for line in out.splitlines()
        if "warn" in line.lower() or line.startswith(("W0000", "E0000", "I0000"))
    ]
    assert not noisy, noisy
    report = dict(
        line.strip().split(": ", 1)
        for line in out.splitlines()
        if line.startswith("  ") and ": " in line
    )
    scale = max(1.0, float(report["max_abs_output"]))  # the app's rule
    assert float(report["savedmodel_max_abs_diff"]) <= 1e-5 * scale
    assert float(report["tflite_max_abs_diff"]) <= 1e-5 * scale
    assert "Flex" not in report["tflite_ops"]
