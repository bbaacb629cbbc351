"""The real SmolLM2-135M-Instruct served (slow): `apps/instruct.py serve
--init smollm2` writes the chat SavedModel, audits it for TF Serving and
checks its reply in a process without seqkeras against Keras' (in its own
process: a 135M-parameter model). Its phone bundle (`export`) is checked
whole by the command itself (16 prompts token by token against Keras;
BENCHMARKS.md): converting the whole model peaks at 6.4 GB, over CI's 6 GB
budget, so here the bundle of SmolLM2's first 4 blocks (real weights,
tokenizer and template; 3.8 GB) is checked token by token."""

import os
import subprocess
import sys


from tests.pretrained_checks import needs_smollm2

SLOW_SECONDS = 108  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 5792  # (2 cores; the summed memory of its processes)

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


def test_phone_files_of_smollm2s_first_blocks_equal_keras_token_by_token(tmp_path):
    # SmolLM2's real weights, tokenizer and chat template, its first 4 of
    # 30 blocks (the whole model's conversion peaks at 6.4 GB, over CI's
    # budget): the phone bundle's float32 prefill/decode file gives Keras'
    # greedy tokens on 4 chat prompts, token by token, in LiteRT; its int8
    # file runs; the LiteRT-LM layout's file and metadata are written (its
    # logits are checked against Keras' in tests/models/test_instruction.py)
    import seqkeras.pretrained as sp
    from seqkeras.data import ByteLevelBPETokenizer
    from seqkeras.export import chat_bundle, litert_runner
    from seqkeras.models import instruction

    path = sp.smollm2_path()
    checkpoint = sp.read_checkpoint(path)
    model = sp.llama_language_model(dict(checkpoint.architecture, num_layers=4))
    unused = sp.load_pretrained(model, checkpoint)
    assert unused and all(name.startswith("layers.") for name in unused)  # blocks 4-29
    tokenizer = ByteLevelBPETokenizer.load(path)
    bundle = chat_bundle(model, tokenizer, str(tmp_path / "phone"), max_length=96, litert_lm=True)
    prompts = ["What is the capital of France?", "Name a colour.", "2 + 2 =", "Say hello."]
    float32 = litert_runner.load(bundle, "model.tflite")
    int8 = litert_runner.load(bundle, "model_int8.tflite")
    for text in prompts:
        ours = tokenizer.encode(instruction.render_prompts(tokenizer, [text])).to_list()[0]
        expected = instruction.answer_ids(model, tokenizer, [text], max_new_tokens=12)[0]
        prefill, decode, hf, chat = float32
        ids = litert_runner.prompt_ids(hf, chat, text)
        assert ids == ours
        new, _, _ = litert_runner.generate(prefill, decode, chat, ids, 12)
        assert new == expected, text
        new, _, _ = litert_runner.generate(*int8[:2], int8[3], ids, 12)
        assert 0 < len(new) <= 12
    assert os.path.getsize(os.path.join(bundle, "litert_lm_int8.tflite")) > 0
    assert "<|im_end|>" in open(os.path.join(bundle, "litert_lm.pbtxt")).read()
