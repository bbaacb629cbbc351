"""Does query-chunked ("flash-style") attention help on this CPU? (issue 3)

An experiment, kept so its numbers in docs/benchmarks/history.md can be reproduced: the
encoder block with its self-attention computed one block of `--chunk`
queries at a time (each block's (B, H, chunk, T) logits, softmax and
weighted sum, then concatenated), optionally with `keras.remat` around each
block so the backward pass recomputes the block's weights instead of
keeping them. Against the library's one-shot block, side by side in one
process, and peak resident memory of each variant in a fresh process.

    python benchmarks/attention_chunking.py                    # T=2048, B=4
    python benchmarks/attention_chunking.py --chunks 256 512 --memory

The library keeps the one-shot path: see docs/benchmarks/history.md for the outcome.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import seqkeras  # noqa: E402
from seqkeras.layers import masking  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_utils import (
    keras_train_step,
    peak_rss_mb,  # noqa: E402
    time_rounds,
)


class ChunkedSelfAttention(seqkeras.layers.MultiHeadAttention):
    """Unmasked self-attention, queries in blocks of `chunk`."""

    def __init__(self, *args, chunk=256, remat=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.chunk, self.remat = chunk, remat

    def call(self, query, **kwargs):
        q, k, v = self._project_qkv(query, query, query)
        q = ops.transpose(q * (self.key_dim**-0.5), (0, 2, 1, 3))
        k = ops.transpose(k, (0, 2, 3, 1))
        v = ops.transpose(v, (0, 2, 1, 3))

        def block(qc, k, v):
            return ops.matmul(masking.masked_softmax(ops.matmul(qc, k)), v)

        f = keras.remat(block) if self.remat else block
        steps = q.shape[2]
        parts = [f(q[:, :, s : s + self.chunk], k, v) for s in range(0, steps, self.chunk)]
        context = ops.transpose(ops.concatenate(parts, 2), (0, 2, 1, 3))
        out = ops.einsum("bqhd,hdo->bqo", context, self.output_kernel)
        return out + self.output_bias


class ChunkedEncoderBlock(seqkeras.layers.TransformerEncoderBlock):
    def __init__(self, *args, chunk=256, remat=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.chunk, self.remat = chunk, remat

    def _attention(self, name, key_dim):
        return ChunkedSelfAttention(
            self.num_heads, key_dim, name=name, chunk=self.chunk, remat=self.remat
        )


def variants(chunks):
    out = {"one_shot": (None, False)}
    for c in chunks:
        out[f"chunk{c}"] = (c, False)
        out[f"chunk{c}_remat"] = (c, True)
    return out


def make_block(chunk, remat, heads, ffn):
    if chunk is None:
        return seqkeras.layers.TransformerEncoderBlock(heads, ffn)
    return ChunkedEncoderBlock(heads, ffn, chunk=chunk, remat=remat)


def peak_memory_mb(chunk, remat, batch, steps, d, heads, ffn):
    return peak_rss_mb(
        "import sys, numpy as np; sys.argv=['x']\n"
        "import attention_chunking as b, bench_utils as u\n"
        f"x=np.zeros(({batch},{steps},{d}),'float32')\n"
        f"s=u.keras_train_step(b.make_block({chunk},{remat},{heads},{ffn}),"
        "x,x)\n[s() for _ in range(3)]"
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=2048)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--chunks", type=int, nargs="+", default=[256, 512, 1024])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--memory", action="store_true")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.dim, args.heads, args.ffn = 2, 16, 16, 2, 32
        args.chunks, args.rounds, args.iters = [8], 1, 1
    print(
        f"B={args.batch} T={args.steps} d={args.dim} heads={args.heads} "
        f"ffn={args.ffn}; keras {keras.__version__}, jit_compile=True; "
        f"{os.cpu_count()} CPU cores"
    )
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch, args.steps, args.dim)).astype("float32")
    y = rng.normal(size=x.shape).astype("float32")
    kinds = variants(args.chunks)
    fns = {
        name: keras_train_step(make_block(c, r, args.heads, args.ffn), x, y)
        for name, (c, r) in kinds.items()
    }
    t = time_rounds(fns, args.rounds, args.iters)
    tokens = args.batch * args.steps
    print(
        f"{'variant':<20}{'tok/s':>9}{'vs one_shot':>13}"
        + (f"{'peak RSS':>11}" if args.memory else "")
    )
    results = {}
    for name, (c, r) in kinds.items():
        rate = tokens / t[name]
        line = f"{name:<20}{rate:>9.0f}{rate * t['one_shot'] / tokens:>12.2f}x"
        if args.memory:
            mb = peak_memory_mb(c, r, args.batch, args.steps, args.dim, args.heads, args.ffn)
            line += f"{mb:>8.0f} MB"
        print(line)
        results[name] = rate
    return results


if __name__ == "__main__":
    main()
