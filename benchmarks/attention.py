"""Training speed of seqkeras attention layers against each peer's best
configuration.

`TransformerEncoderBlock` against `keras_hub.layers.TransformerEncoder`
and (when installed) `torch.nn.TransformerEncoderLayer` (post-LN, relu,
batch_first; its attention is `scaled_dot_product_attention`), and
`MultiHeadAttention` against `keras.layers.MultiHeadAttention`. Ours run in
float32 and mixed_bfloat16, each with and without XLA; the Keras peers in
what a user picks (Keras' default compile, XLA on, mixed_bfloat16 with
either); torch in float32 and bfloat16 autocast in its own process, before
and after the Keras rounds (the faster counts). Prints train tokens/s of
every configuration and ours-best / peer-best; `--memory` also runs the
float32 XLA models alone in a subprocess and reports peak resident memory.

    python benchmarks/attention.py                  # B=32, T=128, d=256
    python benchmarks/attention.py --steps 512 2048 --memory
    python benchmarks/attention.py --quick          # a smoke run

Each step: forward, mean squared error against a fixed target, backward,
SGD update; Keras models with `train_on_batch` on tensors made once.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import seqkeras  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_utils import (
    KERAS_CONFIGS,
    OURS_CONFIGS,
    best_of,  # noqa: E402
    keras_steps,
    keras_train_step,
    matmul_peak,
    peak_rss_mb,
    report,
    time_rounds,
    torch_times,
)


def make_keras(kind, d, heads, ffn):
    if kind == "ours_encoder":
        return seqkeras.layers.TransformerEncoderBlock(heads, ffn)
    if kind == "keras_hub_encoder":
        import keras_hub

        return keras_hub.layers.TransformerEncoder(ffn, heads)
    ours = kind == "ours_mha"
    layer = (seqkeras.layers.MultiHeadAttention if ours else keras.layers.MultiHeadAttention)(
        heads, d // heads
    )

    class SelfAttention(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.inner = layer

        def call(self, x):
            # seqkeras' self-attention form is `mha(x)`.
            return self.inner(x) if ours else self.inner(x, x)

    return SelfAttention()


def train_flops_per_token(kind, steps, d, ffn):
    """Matmul FLOPs of forward + backward (3x forward) per token: the
    Q/K/V/output projections (8 d^2), the two attention products (4 T d)
    and, for the encoder block, the FFN (4 d ffn)."""
    forward = 8 * d * d + 4 * steps * d
    if kind.endswith("encoder"):
        forward += 4 * d * ffn
    return 3 * forward


def make_step(kind, x, y, d, heads, ffn):
    """A float32 XLA train step of `kind` (for --memory)."""
    return keras_train_step(make_keras(kind, d, heads, ffn), x, y)


def peak_memory_mb(kind, batch, steps, d, heads, ffn):
    """Peak RSS (MB) of a fresh process that builds and trains `kind` for a
    few steps; includes the framework itself (TensorFlow alone is ~0.7 GB,
    torch adds ~0.1 GB)."""
    return peak_rss_mb(
        "import sys; sys.argv=['x']\n"
        "import attention as b, numpy as np\n"
        f"x=np.zeros(({batch},{steps},{d}),'float32')\n"
        f"s=b.make_step({kind!r},x,x,{d},{heads},{ffn})\n"
        "[s() for _ in range(3)]"
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, nargs="+", default=[128])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument(
        "--inference",
        action="store_true",
        help="time forward passes (predict_on_batch) of ours "
        "and the Keras peers instead of training steps",
    )
    p.add_argument("--no-mha", action="store_true", help="the encoder block only")
    p.add_argument("--memory", action="store_true")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.dim, args.heads, args.ffn = 2, [8], 16, 2, 32
        args.rounds, args.iters = 1, 1
    print(
        f"B={args.batch} d={args.dim} heads={args.heads} ffn={args.ffn}; "
        f"keras {keras.__version__}; {len(os.sched_getaffinity(0))} CPU "
        "cores"
    )
    peak = matmul_peak(256 if args.quick else 2048)
    print(
        f"float32 XLA matmul peak: {peak:.0f} GFLOP/s; % of peak counts "
        "matmul FLOPs of forward + backward (3x forward)"
    )
    results = {}
    rng = np.random.default_rng(0)
    for steps in args.steps:
        x = rng.normal(size=(args.batch, steps, args.dim)).astype("float32")
        y = rng.normal(size=x.shape).astype("float32")
        tokens = args.batch * steps
        groups = [("encoder", "ours_encoder", "keras_hub_encoder", "keras-hub")]
        if not args.no_mha:
            groups.append(("mha", "ours_mha", "keras_mha", "keras"))
        for group, ours, peer, peer_name in groups:
            spec = dict(
                model="encoder",
                rounds=args.rounds,
                iters=args.iters,
                shape=dict(
                    batch=args.batch, steps=steps, dim=args.dim, heads=args.heads, ffn=args.ffn
                ),
            )
            use_torch = group == "encoder" and not args.no_torch and not args.inference
            before = torch_times(spec) if use_torch else {}
            fns = keras_steps(
                "ours",
                lambda: make_keras(ours, args.dim, args.heads, args.ffn),
                x,
                y,
                OURS_CONFIGS,
                args.inference,
            )
            fns.update(
                keras_steps(
                    peer_name,
                    lambda: make_keras(peer, args.dim, args.heads, args.ffn),
                    x,
                    y,
                    KERAS_CONFIGS,
                    args.inference,
                )
            )
            t = time_rounds(fns, args.rounds, args.iters)
            after = torch_times(spec) if use_torch else {}
            t = best_of(t, before, after)
            flops = train_flops_per_token(ours, steps, args.dim, args.ffn)
            peers = [peer_name] + (["torch"] if use_torch else [])
            what = "inference" if args.inference else "train"
            if args.inference:
                flops /= 3  # forward only
            results[group, steps] = (
                t,
                report(f"{group}, T={steps}: {what} tokens/s", tokens, t, peers, flops, peak),
            )
            if args.memory:
                for kind in (ours, peer):
                    mb = peak_memory_mb(kind, args.batch, steps, args.dim, args.heads, args.ffn)
                    print(f"  peak RSS {kind:<20}{mb:>8.0f} MB")
    return results


if __name__ == "__main__":
    main()
