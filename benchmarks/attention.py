"""Training speed of seqkeras attention layers against their peers.

Side by side in one process: `TransformerEncoderBlock` against
`keras_hub.layers.TransformerEncoder` and (when installed)
`torch.nn.TransformerEncoderLayer` (post-LN, relu, batch_first), and
`MultiHeadAttention` against `keras.layers.MultiHeadAttention`. Prints train
tokens/s and ratios ours/theirs; `--memory` also runs each model alone in a
subprocess and reports its peak resident memory.

    python benchmarks/attention.py                  # B=32, T=128, d=256
    python benchmarks/attention.py --steps 512 2048 --memory
    python benchmarks/attention.py --quick          # a smoke run

Each step: forward, mean squared error against a fixed target, backward,
SGD update; Keras models under `compile(jit_compile=True)` and
`train_on_batch` on tensors made once.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import seqkeras  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_utils import (keras_train_step, matmul_peak,  # noqa: E402
                         peak_rss_mb, time_rounds)


def make_keras(kind, d, heads, ffn):
    if kind == "ours_encoder":
        return seqkeras.layers.TransformerEncoderBlock(heads, ffn)
    if kind == "keras_hub_encoder":
        import keras_hub

        return keras_hub.layers.TransformerEncoder(ffn, heads)
    ours = kind == "ours_mha"
    layer = (seqkeras.layers.MultiHeadAttention if ours
             else keras.layers.MultiHeadAttention)(heads, d // heads)

    class SelfAttention(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.inner = layer

        def call(self, x):
            # seqkeras' self-attention form is `mha(x)` (one fused QKV GEMM).
            return self.inner(x) if ours else self.inner(x, x)

    return SelfAttention()




def torch_step(x, y, d, heads, ffn):
    import torch

    torch.set_num_threads(os.cpu_count())
    layer = torch.nn.TransformerEncoderLayer(
        d, heads, ffn, dropout=0.0, batch_first=True)
    opt = torch.optim.SGD(layer.parameters(), lr=1e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        torch.mean((layer(xt) - yt) ** 2).backward()
        opt.step()

    step()
    return step


def train_flops_per_token(kind, steps, d, ffn):
    """Matmul FLOPs of forward + backward (3x forward) per token: the
    Q/K/V/output projections (8 d^2), the two attention products (4 T d)
    and, for the encoder block, the FFN (4 d ffn)."""
    forward = 8 * d * d + 4 * steps * d
    if kind.endswith("encoder"):
        forward += 4 * d * ffn
    return 3 * forward


def make_step(kind, x, y, d, heads, ffn):
    if kind == "torch_encoder":
        return torch_step(x, y, d, heads, ffn)
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
        "[s() for _ in range(3)]")


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
    p.add_argument("--memory", action="store_true")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.dim, args.heads, args.ffn = 2, [8], 16, 2, 32  # noqa: E501
        args.rounds, args.iters = 1, 1
    try:
        import torch  # noqa: F401

        have_torch = not args.no_torch
    except ImportError:
        have_torch = False
    print(f"B={args.batch} d={args.dim} heads={args.heads} ffn={args.ffn}; "
          f"keras {keras.__version__}, jit_compile=True; "
          f"{os.cpu_count()} CPU cores")
    peak = matmul_peak(256 if args.quick else 2048)
    print(f"measured fp32 matmul peak: {peak:.0f} GFLOP/s; %peak counts "
          "matmul FLOPs of forward + backward (3x forward)")
    header = (f"{'T':>6}  {'ours':<14}{'peer':<22}{'ours tok/s':>11}"
              f"{'peer tok/s':>11}{'ours/peer':>10}{'%peak':>7}{'peer':>6}")
    print(header)
    print("-" * len(header))
    rows = []
    rng = np.random.default_rng(0)
    for steps in args.steps:
        x = rng.normal(size=(args.batch, steps, args.dim)).astype("float32")
        y = rng.normal(size=x.shape).astype("float32")
        kinds = ["ours_encoder", "keras_hub_encoder", "ours_mha", "keras_mha"]
        if have_torch:
            kinds.append("torch_encoder")
        fns = {k: make_step(k, x, y, args.dim, args.heads, args.ffn)
               for k in kinds}
        t = time_rounds(fns, args.rounds, args.iters)
        tokens = args.batch * steps
        pairs = [("ours_encoder", "keras_hub_encoder"),
                 ("ours_mha", "keras_mha")]
        if have_torch:
            pairs.append(("ours_encoder", "torch_encoder"))
        for ours, peer in pairs:
            a, b = tokens / t[ours], tokens / t[peer]
            flops = train_flops_per_token(ours, steps, args.dim, args.ffn)
            print(f"{steps:>6}  {ours:<14}{peer:<22}{a:>11.0f}{b:>11.0f}"
                  f"{a / b:>9.2f}x{a * flops / peak / 1e9:>7.0%}"
                  f"{b * flops / peak / 1e9:>6.0%}")
            rows.append((steps, ours, peer, a, b))
        if args.memory:
            for kind in kinds:
                mb = peak_memory_mb(kind, args.batch, steps, args.dim,
                                    args.heads, args.ffn)
                print(f"{steps:>6}  peak RSS {kind:<20}{mb:>8.0f} MB")
    return rows


if __name__ == "__main__":
    main()
