"""Generation speed: our Transformer LM against
`keras_hub.models.GPT2CausalLM.generate`, with and without the KV cache,
and beam search's cost per beam.

The anchor configuration (issue 5): a 4-layer, 128-dim, 4-head GPT-2
backbone (FFN 512, GPT-2's 50,257-token vocabulary, 256 positions), batch
8, prompt 16 tokens, 240 new tokens, greedy, XLA. Both models have the
same shapes (our `transformer_language_model` is GPT-2's pre-LN, GELU,
tied-embedding architecture), random weights, no end token (every row
runs the full 240 tokens).

    python benchmarks/decoding.py
    python benchmarks/decoding.py --quick      # a smoke run

Prints tokens/s (new tokens, whole batch, per second; compilation
excluded: each function runs once before timing), ratios ours / keras-hub,
the cache speedup at three lengths, and beam search's time per token and
beam.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

import seqkeras  # noqa: E402
from seqkeras import decoding  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_utils import (
    config_name,
    matmul_peak,  # noqa: E402
    memory_bandwidth,
    policy_scope,
    time_rounds,
)


def ours_model(args):
    return seqkeras.models.transformer_language_model(
        args.vocab,
        args.length,
        num_layers=args.layers,
        num_heads=args.heads,
        hidden_dim=args.dim,
        intermediate_dim=4 * args.dim,
    )


def keras_hub_generate(args, prompt, policy="float32", jit="auto"):
    import keras_hub

    with policy_scope(policy):
        return _keras_hub_generate(args, prompt, jit, keras_hub)


def _keras_hub_generate(args, prompt, jit, keras_hub):
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=args.vocab,
        num_layers=args.layers,
        num_heads=args.heads,
        hidden_dim=args.dim,
        intermediate_dim=4 * args.dim,
        max_sequence_length=args.length,
    )
    lm = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
    lm.compile(sampler="greedy", jit_compile=jit)
    batch, plen = prompt.shape
    ids = np.zeros((batch, args.length), "int32")
    ids[:, :plen] = prompt
    mask = np.zeros((batch, args.length), bool)
    mask[:, :plen] = True
    inputs = {"token_ids": ids, "padding_mask": mask}
    return lambda: lm.generate(inputs, stop_token_ids=None)


def uncached(model, prompt, max_length, strategy_kwargs):
    """Decoding without a cache: every step reruns the whole model on the
    (fixed-shape) token buffer and reads the logits at `index`."""

    @tf.function(jit_compile=True)
    def run(prompt):
        batch = ops.shape(prompt)[0]
        buffer = ops.zeros((batch, max_length), "int32")

        def step(tokens, buffer, index):
            buffer = ops.slice_update(buffer, (0, index), ops.expand_dims(tokens, 1))
            logits = model(buffer, training=False)
            return ops.take(logits, index, axis=1), buffer

        return decoding.greedy(step, prompt, buffer, max_length, **strategy_kwargs)

    return lambda: run(tf.constant(prompt)).numpy()


def flops_per_token(args):
    """Matmul FLOPs per generated token: each layer's projections and FFN,
    attention over the cache (its mean length while generating), the
    output projection."""
    d, mean_len = args.dim, (args.prompt + args.length) / 2
    layer = 2 * (4 * d * d + 2 * d * 4 * d) + 2 * 2 * mean_len * d
    return args.layers * layer + 2 * d * args.vocab


def ceiling(args, step_seconds, quick):
    """Where ours-best's decoding step stands against this machine's
    float32 matmul peak and the memory floor of the output projection."""
    n = 256 if quick else 2048
    peak = matmul_peak(n)
    bandwidth = memory_bandwidth(16 if quick else 256)
    flops = flops_per_token(args) * args.batch / step_seconds / 1e9
    matrix = args.vocab * args.dim * 4 / 1e6  # MB, float32
    print(
        f"ceiling: ours-best {step_seconds * 1e3:.2f} ms per step, "
        f"{flops:.1f} GFLOP/s = {flops / peak:.0%} of the float32 XLA "
        f"matmul peak ({peak:.0f}); the output matrix ({matrix:.1f} MB "
        f"float32, {matrix / 2:.1f} MB bfloat16) read at this machine's "
        f"{bandwidth:.0f} GB/s (NumPy copy) takes "
        f"{matrix / bandwidth:.2f} / {matrix / 2 / bandwidth:.2f} ms"
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--length", type=int, default=256)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--beams", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--no-keras-hub", action="store_true")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.prompt, args.length, args.vocab = 2, 4, 16, 50
        args.layers, args.dim, args.rounds, args.beams = 1, 16, 1, [1, 2]
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    prompt = rng.integers(1, args.vocab, size=(args.batch, args.prompt))
    prompt = prompt.astype("int32")
    new = args.length - args.prompt
    tokens = args.batch * new
    model = ours_model(args)
    gen = seqkeras.models.generate

    def ours(**kw):
        def run():
            out = gen(model, prompt=prompt, max_length=args.length, eos_id=None, **kw)
            return np.asarray(out[0] if isinstance(out, tuple) else out)

        return run

    with policy_scope("mixed_bfloat16"):
        keras.utils.set_random_seed(0)
        mixed = ours_model(args)

    def ours_mixed(jit="auto"):  # "auto": XLA (choose_jit_compile(model, "generate"))
        def run():
            out = gen(mixed, prompt=prompt, max_length=args.length, eos_id=None, jit_compile=jit)
            return np.asarray(out)

        return run

    steps = {
        "ours greedy": ours(),
        "ours greedy, bfloat16 projection": ours(projection_dtype="bfloat16"),
        "ours greedy, mixed_bfloat16": ours_mixed(),
        # why "auto" generates with XLA in bfloat16 too (training does not)
        "ours greedy, mixed_bfloat16, no XLA": ours_mixed(False),
        "ours top-k": ours(strategy="sample", top_k=10, seed=1),
        "ours greedy, no cache": uncached(model, prompt, args.length, {"eos_id": None}),
    }
    if not args.no_keras_hub:
        # keras-hub in what a user picks: its default compile ("auto": no
        # XLA on CPUs), XLA on, and mixed_bfloat16 with either
        for policy in ("float32", "mixed_bfloat16"):
            for jit in ("auto", True):
                steps[config_name("keras-hub greedy", policy, jit)] = keras_hub_generate(
                    args, prompt, policy, jit
                )
    for fn in steps.values():
        fn()  # compile
    t = time_rounds(steps, args.rounds, 1)
    print(
        f"B={args.batch} prompt={args.prompt} new tokens={new} "
        f"vocab={args.vocab} layers={args.layers} dim={args.dim} "
        f"heads={args.heads}; keras {keras.__version__}; "
        f"{os.cpu_count()} CPU cores"
    )
    header = f"{'generator':<44}{'tokens/s':>10}{'vs keras-hub best':>19}"
    print(header)
    print("-" * len(header))
    rows = {}
    hubs = [s for k, s in t.items() if k.startswith("keras-hub")]
    hub = min(hubs) if hubs else None
    for name, seconds in sorted(t.items(), key=lambda kv: kv[1]):
        ratio = f"{hub / seconds:>18.2f}x" if hub else ""
        print(f"{name:<44}{tokens / seconds:>10.0f}{ratio}")
        rows[name] = tokens / seconds
    best = min(s for k, s in t.items() if k.startswith("ours greedy") and "no cache" not in k)
    if hub:
        print(f"ours-best greedy / keras-hub-best = {hub / best:.2f}x")
    ceiling(args, best / new, args.quick)

    # The cache's speedup against length.
    print("cache speedup (greedy, same model):")
    lengths = sorted(
        {
            max(args.prompt + 2, args.length // 4),
            max(args.prompt + 2, args.length // 2),
            args.length,
        }
    )
    for length in lengths:
        pair = {
            "cached": lambda length=length: np.asarray(
                gen(model, prompt=prompt, max_length=length, eos_id=None)
            ),
            "uncached": uncached(model, prompt, length, {"eos_id": None}),
        }
        for fn in pair.values():
            fn()
        tt = time_rounds(pair, args.rounds, 1)
        print(
            f"  max_length {length:>4}: cached {tt['cached'] * 1e3:8.1f} "
            f"ms, uncached {tt['uncached'] * 1e3:8.1f} ms, speedup "
            f"{tt['uncached'] / tt['cached']:.1f}x"
        )
        rows[f"speedup {length}"] = tt["uncached"] / tt["cached"]

    print("beam search (cached):")
    base = None
    for width in args.beams:
        fn = ours(strategy="beam", beam_width=width)
        fn()
        seconds = time_rounds({"b": fn}, args.rounds, 1)["b"]
        per = seconds / (new * width) * 1e3
        base = base or seconds
        print(
            f"  beam {width:>2}: {seconds * 1e3:8.1f} ms per batch, "
            f"{per:.3f} ms per step and beam, {seconds / base:.2f}x "
            "beam 1's time"
        )
        rows[f"beam {width}"] = seconds
    return rows


if __name__ == "__main__":
    main()
