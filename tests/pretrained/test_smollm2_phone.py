"""The real SmolLM2-135M-Instruct's phone bundle (slow), as
`apps/instruct.py export --init smollm2 --litert-lm` makes it: a new
process loads the model and writes the bundle's source, then each LiteRT
file is converted in a process of its own with the model's memory gone
(the whole command peaked at 5.3 GB summed over its processes, against
7.2 GB converting in one process: BENCHMARKS.md). The float32 file gives
Keras' greedy tokens on every checked prompt, token by token, in LiteRT;
the int8 files run; `runner.py` answers in a process without seqkeras."""

import os
import re
import subprocess
import sys

from tests.pretrained_checks import needs_smollm2

SLOW_SECONDS = 240  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 5300  # (2 cores; the summed memory of its processes)

pytestmark = needs_smollm2()

APP = os.path.join(os.path.dirname(__file__), "..", "..", "apps", "instruct.py")


def test_the_whole_models_phone_files_equal_keras_token_by_token(tmp_path):
    out = tmp_path / "phone"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    args = ["export", "--init", "smollm2", "--out", str(out), "--litert-lm"]
    args += ["--check", "4", "--tokens", "12", "--max-length", "128"]
    result = subprocess.run([sys.executable, APP, *args], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    equal = dict(re.findall(r"(\S+\.tflite): .* on (\d+)/4 prompts", result.stdout))
    assert set(equal) == {"model.tflite", "model_int8.tflite", "litert_lm_int8.tflite"}, result
    assert equal["model.tflite"] == "4", result.stdout  # float32: Keras' tokens, every prompt
    assert sorted(os.listdir(out)) == [
        "chat.json",
        "litert_lm.pbtxt",
        "litert_lm_int8.tflite",
        "model.tflite",
        "model_int8.tflite",
        "runner.py",
        "tokenizer.json",
    ]
    assert not [p for p in os.listdir(tmp_path) if p != "phone"]  # no source left behind
    code = (
        "import sys, runpy; sys.modules['seqkeras'] = None; "
        "sys.argv = ['runner.py', 'What is the capital of France?', '--max-new-tokens', '8']; "
        f"runpy.run_path({str(out / 'runner.py')!r}, run_name='__main__')"
    )
    reply = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert reply.returncode == 0, reply.stderr[-2000:]
    assert "Paris" in reply.stdout, reply.stdout
