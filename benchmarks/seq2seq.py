"""Attention seq2seq training speed: seqkeras vs PyTorch, same shapes.

    python benchmarks/seq2seq.py [--quick] [--rounds N]

The model is the shape of bentrevett/pytorch-seq2seq's attention model
(notebook 3, Bahdanau et al.): embedding 256, bidirectional GRU encoder of
256 per direction, its final states through tanh(Linear) into a GRU
decoder of 512, additive attention (hidden 512) over the encoder outputs
at every step, logits from [decoder state; context]. Batch 128,
Multi30k-like lengths (10-30 tokens per side, right-padded to 30),
vocabularies 7,800 (source) and 5,900 (target), teacher forcing, Adam,
cross-entropy over the real target tokens.

Peers, each in the configurations a user would pick:
- seqkeras `models.recurrent_seq2seq(..., attention="additive")`: float32 and
  mixed_bfloat16, each with and without XLA (`compile_model`'s "auto"
  picks XLA for float32 and no XLA for mixed_bfloat16 on CPUs);
- torch float32 and `torch.autocast("cpu", torch.bfloat16)`, in its own
  process (TensorFlow's threads disturb it in one process).

Prints target tokens per second for each (and as a fraction of the
float32 XLA matmul peak) and ours-best / torch-best. The torch model lives
in `torch_peers.py`, run in its own process before and after ours.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_utils import (
    OURS_CONFIGS,
    best_of,
    config_name,  # noqa: E402
    matmul_peak,
    report,
    time_rounds,
    torch_times,
)

B, T, SRC_V, TGT_V = 128, 30, 7800, 5900
EMB, ENC, DEC = 256, 256, 512


def batch(seed=0, batch_size=B, steps=T):
    rng = np.random.default_rng(seed)
    src = rng.integers(4, SRC_V, (batch_size, steps)).astype("int32")
    tgt = rng.integers(4, TGT_V, (batch_size, steps + 1)).astype("int32")
    for rows, n in ((src, steps), (tgt, steps + 1)):
        lengths = rng.integers(10, n + 1, batch_size)
        rows[np.arange(n)[None] >= lengths[:, None]] = 0
    tgt[:, 0] = 1  # BOS
    return src, tgt[:, :-1], tgt[:, 1:]


def seqkeras_step(policy, jit, batch_size, steps):
    import keras

    import seqkeras

    keras.mixed_precision.set_global_policy(policy)
    model = seqkeras.models.recurrent_seq2seq(
        SRC_V,
        TGT_V,
        embedding_dim=EMB,
        units=DEC,
        encoder_units=ENC,
        cell="gru",
        attention="additive",
        attention_units=DEC,
        bidirectional=True,
    )
    seqkeras.training.compile_model(model, optimizer=keras.optimizers.Adam(1e-3), jit_compile=jit)
    src, tgt_in, tgt_out = batch(0, batch_size, steps)
    x = {"source_ids": src, "target_ids": tgt_in}
    model.train_on_batch(x, tgt_out)  # compile
    keras.mixed_precision.set_global_policy("float32")
    return lambda: model.train_on_batch(x, tgt_out)


def train_flops_per_token(steps=T):
    """Matmul FLOPs of forward + backward (3x forward) per target position
    in the computation ours runs (source and target lengths equal):
    encoder GRUs, attention keys once per source position, the query and
    the decoder GRU per step, logits from [state; context]. torch's model
    projects [state; encoder output] at every (step, source position)
    pair: its own count is higher; the ratio of tokens/s is what counts."""
    enc = 2 * 3 * ENC * (EMB + ENC) * 2  # bidirectional GRU, per source
    keys = 2 * ENC * DEC * 2
    query = DEC * DEC * 2
    attend = 2 * steps * 2 * ENC * 2  # additive scores and the context
    dec = 3 * DEC * (EMB + 2 * ENC + DEC) * 2
    logits = (DEC + 2 * ENC) * TGT_V * 2
    return 3 * (enc + keys + query + attend + dec + logits)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="batch 16, length 12, 1 round: checks that it runs"
    )
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--no-torch", action="store_true")
    args = p.parse_args(argv)
    batch_size, steps = (16, 12) if args.quick else (B, T)
    rounds, iters = (1, 1) if args.quick else (args.rounds, args.iters)
    n = 256 if args.quick else 2048
    peak = matmul_peak(n)
    print(
        f"attention seq2seq training, batch {batch_size}, length {steps}, "
        f"{len(os.sched_getaffinity(0))} threads; matmul peak, GFLOP/s "
        f"({n}^2): float32 XLA {peak:.0f}, bfloat16 oneDNN "
        f"{matmul_peak(n, dtype='bfloat16', jit_compile=False):.0f}"
    )
    spec = dict(
        model="seq2seq",
        rounds=rounds,
        iters=iters,
        shape=dict(
            batch=batch_size,
            steps=steps,
            dims=dict(src_vocab=SRC_V, tgt_vocab=TGT_V, emb=EMB, enc=ENC, dec=DEC),
        ),
    )
    before = {} if args.no_torch else torch_times(spec)
    ours = time_rounds(
        {
            config_name("ours", policy, jit): seqkeras_step(policy, jit, batch_size, steps)
            for policy, jit in OURS_CONFIGS
        },
        rounds,
        iters,
    )
    after = {} if args.no_torch else torch_times(spec)
    results = best_of(before, ours, after)
    report(
        "target tokens/s (median; % of the float32 XLA matmul peak, FLOPs of our computation)",
        batch_size * steps,
        results,
        ["torch"],
        train_flops_per_token(steps),
        peak,
    )
    return results


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"wall {time.perf_counter() - start:.0f} s")
