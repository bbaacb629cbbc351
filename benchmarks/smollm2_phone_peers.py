"""SmolLM2-135M on a phone runtime against llama.cpp, each engine in its own
process on the same GGUF weights: a 128-token prompt (the start of
tiny-shakespeare's validation text), then 128 greedy tokens, batch 1, 2
threads. Prints prefill and decode tokens/s and the file sizes.

    python apps/instruct.py export --init smollm2 --out /tmp/phone   # or a fine-tuned model
    python benchmarks/smollm2_phone_peers.py --bundle /tmp/phone

Engines: `llama.cpp` (`llama-cpp-python`, the `bench` extra; the GGUF as
shipped, Q4_1) and our LiteRT files (`model.tflite`, `model_int8.tflite`;
XNNPACK) run by `runner.py`'s functions (no seqkeras in that process).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

PROMPT_TOKENS = 128
NEW_TOKENS = 128


def prompt_ids(path):
    """The first 128 ids of tiny-shakespeare's last tenth (SmolLM2's
    tokenizer, as ours and llama.cpp read it)."""
    from seqkeras.data import ByteLevelBPETokenizer
    from seqkeras.data import shared_data_dir

    root = shared_data_dir()
    with open(os.path.join(root, "tinyshakespeare", "input.txt"), encoding="utf-8") as f:
        text = f.read()
    text = text[int(0.9 * len(text)) :][:4000]  # the validation tenth, as the apps split it
    ids = ByteLevelBPETokenizer.load(path).encode([text]).to_list()[0]
    return ids[:PROMPT_TOKENS]


def run_llama(gguf, ids):
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(
        model_path=gguf, n_threads=2, n_threads_batch=2, n_ctx=512, n_batch=512, verbose=False
    )
    llm.eval(ids[:8])  # warm-up
    llm.reset()
    start = time.perf_counter()
    llm.eval(ids)
    prefill = time.perf_counter() - start
    new = []
    start = time.perf_counter()
    vocab = llm.n_vocab()
    for _ in range(NEW_TOKENS):
        # the last position's logits (`llm.scores` stays zeros without
        # logits_all, which would compute every prompt position's)
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), (vocab,))
        token = int(np.argmax(logits))
        new.append(token)
        llm.eval([token])
    return prefill, time.perf_counter() - start, new


def run_tflite(bundle, name, ids):
    sys.modules["seqkeras"] = None  # the runner needs only ai_edge_litert and tokenizers
    sys.path.insert(0, bundle)
    import runner

    prefill, decode, _, chat = runner.load(bundle, name)
    chat = dict(chat, end_ids=[])  # every new token, as llama.cpp's loop
    runner.generate(prefill, decode, chat, ids[:8], 2)  # warm-up
    new, first, rest = runner.generate(prefill, decode, chat, ids, NEW_TOKENS)
    return first, rest, new


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True, help="apps/instruct.py export's directory")
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--ids", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.engine:  # one engine, in this process
        ids = json.loads(args.ids)
        if args.engine == "llama.cpp":
            import seqkeras.pretrained as sp

            found = run_llama(sp.smollm2_path(), ids)
        else:
            found = run_tflite(args.bundle, args.engine, ids)
        print(json.dumps(found))
        return
    import seqkeras.pretrained as sp

    gguf = sp.smollm2_path()
    ids = prompt_ids(gguf)
    sizes = {"llama.cpp": os.path.getsize(gguf)}
    rows = {}
    for engine in ("llama.cpp", "model.tflite", "model_int8.tflite"):
        if engine != "llama.cpp":
            sizes[engine] = os.path.getsize(os.path.join(args.bundle, engine))
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--bundle",
                args.bundle,
                "--engine",
                engine,
                "--ids",
                json.dumps(ids),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        if out.returncode:
            print(f"{engine}: failed\n{out.stderr[-2000:]}")
            continue
        rows[engine] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{len(ids)}-token prompt, {NEW_TOKENS} greedy tokens, batch 1, 2 threads")
    for engine, (first, rest, new) in rows.items():
        same = ""
        if "llama.cpp" in rows and engine != "llama.cpp":
            ref = rows["llama.cpp"][2]
            agree = next((i for i, (a, b) in enumerate(zip(new, ref)) if a != b), len(new))
            same = f"; first {agree} tokens equal to llama.cpp's"
        print(
            f"  {engine:18s} {sizes[engine] / 1e6:6.0f} MB  prefill {len(ids) / first:7.1f} "
            f"tokens/s  decode {len(new) / rest:6.1f} tokens/s{same}"
        )


if __name__ == "__main__":
    main()
