"""The real SmolLM2-135M-Instruct served (slow): `apps/instruct.py serve
--init smollm2` writes the chat SavedModel, audits it for TF Serving and
checks its reply in a process without seqkeras against Keras' (in its own
process: a 135M-parameter model). Its phone bundle (`export`) is checked by
the command itself (16 prompts token by token against Keras; BENCHMARKS.md)
and not here: converting and checking the whole model peaks at 6.4 GB,
over CI's 6 GB budget."""

import os
import subprocess
import sys


from tests.pretrained_checks import needs_smollm2

pytestmark = needs_smollm2()

APP = os.path.join(os.path.dirname(__file__), "..", "..", "apps", "instruct.py")


def run(*args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([sys.executable, APP, *args], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_served_chat_equals_keras_in_a_process_without_seqkeras(tmp_path):
    out = run("serve", "--init", "smollm2", "--out", str(tmp_path / "chat"), "--max-length", "96")
    assert "(servable)" in out and "equal to Keras: True" in out, out
