"""The release artefact and the main job as a user runs it (slow):
`.ci/wheel_check` builds the wheel and the sdist, runs `twine check`,
installs the wheel in a fresh virtual environment (its dependencies
linked from this one's site-packages: those its `apps` extra names,
resolved against them with --no-index) and runs the README's main job
as shipped (apps/dates.py with its defaults) and the
getting-started page's code from other directories, where only the
installed wheel and the `apps` extra's dependencies can be imported; this
test checks what they printed: >= 99% exact match on held-out dates,
quiet, and exports equal to Keras; the page's model normalises dates and
its served strings and TFLite logits are right. (The README's
fine-tuning example: tests/test_readme_fine_tuning.py.)"""

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOW_SECONDS = 250  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 2246  # (2 cores; the summed memory of its processes)


def run_wheel_check(*part, **logs):
    """`.ci/wheel_check` with this Python (and `part`), each of `logs`
    (`WHEEL_CHECK_LOG=path`, ...) in its environment: its finished
    process. Skips where the checkout or the `release` extra is missing."""
    script = os.path.join(ROOT, ".ci", "wheel_check")
    if not os.path.exists(script):
        pytest.skip("the release check needs the checkout (.ci/wheel_check)")
    for module in ("build", "twine"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f'the release check needs `pip install ".[release]"` ({module})')
    env = {**os.environ, **{k: str(v) for k, v in logs.items()}}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [script, sys.executable, *part], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.mark.slow
def test_the_wheel_installs_and_runs_the_main_job_quietly(tmp_path):
    log, start, readme = tmp_path / "main.log", tmp_path / "start.log", tmp_path / "readme.log"
    result = run_wheel_check(
        WHEEL_CHECK_LOG=log, WHEEL_CHECK_START_LOG=start, WHEEL_CHECK_README_LOG=readme
    )
    assert "main job, getting-started page and README examples ran" in result.stdout
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
    # docs/getting-started.md, top to bottom in the same environment: the
    # model it trains normalises dates, the served strings are the right
    # ones, and the TFLite logits are Keras'
    page = start.read_text()
    line = [x for x in page.splitlines() if x.startswith("held-out exact match")][0]
    assert float(line.rsplit(" ", 1)[1].rstrip("%")) >= 90.0, page[-3000:]
    assert "['2021-03-03', '1999-03-09']" in page, page[-3000:]
    line = [x for x in page.splitlines() if x.startswith("largest difference from Keras")][0]
    assert float(line.rsplit(" ", 1)[1]) <= 1e-4, line
    # its docker + curl block: the curl's request, answered by the served
    # signature it names (in a new process: CI has no Docker)
    assert "(answered by generate_text of saved_models/dates/1) {'text': ['2021-03-03']}" in page
    # the README's examples after the main job's install (`.[apps]`), and
    # its TF Serving request: the reverser's `generate` answers it
    assert "(answered by generate of saved_models/reverser/1)" in readme.read_text()
