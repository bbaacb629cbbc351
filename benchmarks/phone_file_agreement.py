"""How closely each phone file of a SmolLM2 bundle keeps the float32
file's answers, on the 16 chat prompts of `apps/instruct.py`'s check,
beside llama.cpp's Q4_1 (the GGUF as shipped) on the same prompts.

    python apps/instruct.py export --init smollm2 --litert-lm --out /tmp/phone
    python benchmarks/phone_file_agreement.py --bundle /tmp/phone

Two measures per file, each against the float32 file's greedy tokens
(`--reference`, default `model.tflite`):
- free-running: the file's own greedy tokens (`--tokens`, default 32, as
  the issue's target counts them); a prompt counts when all of them are
  equal, and the leading tokens equal are averaged;
- teacher-forced: the file is fed the float32 file's tokens and its
  argmax is compared at every position (16 x 32 = 512 next-token
  choices): one near tie flipped no longer counts as every token after
  it. Beside it, the float32 file's own margin (its top logit minus the
  second, in logits) at the positions where the file chose otherwise.

Files are run by the bundle's runner (`seqkeras.export.litert_runner`, 2
threads); a name is looked up in the bundle unless it is a path.
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "apps"))
sys.path.insert(0, HERE)


def _steps(prefill, decode, chat, ids, reference):
    """`(greedy tokens, argmax at each of reference's positions, logits'
    top-2 margins there)`: the free-running tokens (as many as
    `reference`'s budget) and the teacher-forced choices."""
    from seqkeras.export import litert_runner

    greedy, _, _ = litert_runner.generate(prefill, decode, chat, ids, reference["budget"])
    chosen, margins = [], []
    logits = prefill(ids)
    for token in reference["tokens"]:
        top = np.argsort(logits)[-2:]
        chosen.append(int(top[1]))
        margins.append(float(logits[top[1]] - logits[top[0]]))
        logits = decode(token)
    return greedy, chosen, margins


def run_file(bundle, name, prompts, references, threads=2):
    """Each prompt's `(greedy, chosen, margins)` through `name`."""
    from seqkeras.export import litert_runner

    prefill, decode, tokenizer, chat = litert_runner.load(bundle, name, threads)
    out = []
    for prompt, reference in zip(prompts, references):
        ids = litert_runner.prompt_ids(tokenizer, chat, prompt)
        out.append(_steps(prefill, decode, chat, ids, reference))
    return out


def run_llama_cpp(bundle, prompts, references):
    """The same, through llama.cpp on the shipped Q4_1 GGUF."""
    import llama_cpp
    import smollm2_peers
    from tokenizers import Tokenizer

    from seqkeras.export import litert_runner

    tokenizer = Tokenizer.from_file(os.path.join(bundle, "tokenizer.json"))
    with open(os.path.join(bundle, "chat.json"), encoding="utf-8") as f:
        chat = json.load(f)
    llm = llama_cpp.Llama(
        model_path=smollm2_peers.smollm2(),
        n_threads=2,
        n_threads_batch=2,
        n_ctx=chat["max_length"],
        n_batch=chat["max_length"],
        verbose=False,
    )
    vocab = llm.n_vocab()

    def logits():
        pointer = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        return np.ctypeslib.as_array(pointer, (vocab,)).copy()

    def prefill(ids):
        llm.reset()
        llm.eval(list(ids))
        return logits()

    def decode(token):
        llm.eval([int(token)])
        return logits()

    out = []
    for prompt, reference in zip(prompts, references):
        ids = litert_runner.prompt_ids(tokenizer, chat, prompt)
        out.append(_steps(prefill, decode, chat, ids, reference))
    return out


def _leading(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def summary(runs, references):
    """`(prompts equal, mean leading tokens equal, teacher-forced
    agreement, median reference margin where the file chose otherwise,
    positions)`."""
    equal = sum(g == r["tokens"] for (g, _, _), r in zip(runs, references))
    leading = np.mean([_leading(g, r["tokens"]) for (g, _, _), r in zip(runs, references)])
    agree, total, flipped = 0, 0, []
    for (_, chosen, _), r in zip(runs, references):
        for c, token, margin in zip(chosen, r["tokens"], r["margins"]):
            total += 1
            agree += c == token
            if c != token:
                flipped.append(margin)
    median = float(np.median(flipped)) if flipped else float("nan")
    return equal, float(leading), agree / max(total, 1), median, total


def main(argv=None):
    from instruct import CHECK_PROMPTS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", default="/tmp/phone")
    p.add_argument("--reference", default="model.tflite")
    p.add_argument(
        "--files",
        nargs="+",
        default=["model_int8.tflite", "litert_lm_int8.tflite", "litert_lm_int4.tflite"],
    )
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--no-llama-cpp", action="store_true")
    args = p.parse_args(argv)
    prompts = list(CHECK_PROMPTS)
    budget = [{"budget": args.tokens, "tokens": []} for _ in prompts]
    greedy = [g for g, _, _ in run_file(args.bundle, args.reference, prompts, budget)]
    references = [{"budget": args.tokens, "tokens": g} for g in greedy]
    forced = run_file(args.bundle, args.reference, prompts, references)
    for reference, (_, chosen, margins) in zip(references, forced):
        if chosen != reference["tokens"]:
            raise RuntimeError(f"{args.reference} does not repeat its own greedy tokens")
        reference["margins"] = margins
    rows = {name: run_file(args.bundle, name, prompts, references) for name in args.files}
    if not args.no_llama_cpp:
        rows["llama.cpp Q4_1"] = run_llama_cpp(args.bundle, prompts, references)
    margins = np.concatenate([r["margins"] for r in references])
    print(
        f"float32 reference ({args.reference}): {len(margins)} positions; its top-2 margin "
        f"is below 0.5 logits at {np.mean(margins < 0.5):.1%} of them, below 1 at "
        f"{np.mean(margins < 1.0):.1%}"
    )
    print(
        "| file | size | prompts equal (free-running) | leading tokens equal (mean) "
        "| next-token choices equal (teacher-forced) "
        "| float32's margin where they differ (median) |"
    )
    print("|---|---|---|---|---|---|")
    results = {}
    for name, runs in rows.items():
        equal, leading, agreement, median, total = summary(runs, references)
        path = name if os.path.isabs(name) else os.path.join(args.bundle, name)
        size = f"{os.path.getsize(path) / 1e6:.0f} MB" if os.path.exists(path) else "-"
        print(
            f"| {name} | {size} | {equal} / {len(prompts)} | {leading:.1f} of {args.tokens} "
            f"| {agreement:.1%} of {total} | {median:.2f} |"
        )
        results[name] = {"equal": equal, "leading": leading, "agreement": agreement}
    return results


if __name__ == "__main__":
    main()
