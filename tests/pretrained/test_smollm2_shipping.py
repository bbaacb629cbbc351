"""The real SmolLM2-135M-Instruct served (slow): `apps/instruct.py serve
--init smollm2` writes the chat SavedModel, audits it for TF Serving and
checks its reply in a process without seqkeras against Keras' (in its own
process: a 135M-parameter model). Its phone bundle: `test_smollm2_phone.py`
(a module of its own, so that `tests/run.py --slow` can run the two
beside other modules)."""

import os
import subprocess
import sys


from tests.pretrained_checks import needs_smollm2

SLOW_SECONDS = 103  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 5089  # (2 cores; the summed memory of its processes)

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
