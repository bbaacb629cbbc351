"""The real SmolLM2-135M-Instruct's phone bundle (slow). The app's
`export` checks the whole model's bundle itself (16 prompts token by
token against Keras; BENCHMARKS.md): converting the whole model peaks at
6.4 GB, over CI's 6 GB budget, so here the bundle of SmolLM2's first 4
blocks (real weights, tokenizer and template) is checked token by
token."""

import os

from tests.pretrained_checks import needs_smollm2

SLOW_SECONDS = 52  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 3445  # (2 cores; the summed memory of its processes)

pytestmark = needs_smollm2()


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
