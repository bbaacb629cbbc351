"""Training speed of seqkeras recurrent layers against their peers.

Trains `seqkeras.layers.Recurrent`, `keras.layers.{LSTM,GRU,SimpleRNN}` and
(when installed) `torch.nn.{LSTM,GRU,RNN}` side by side in one process on
the same shape, and prints train tokens/s, the ratios ours/theirs and the
fraction of the fp32 matmul peak this script measures itself.

    python benchmarks/recurrent.py            # B=64, T=100, 128 -> 256
    python benchmarks/recurrent.py --quick    # a smoke run (tests use it)

Each model does the same step: forward with `return_sequences=True`, mean
squared error against a fixed target, backward, SGD update. Keras models
train with `train_on_batch` after `compile(jit_compile=True)`, on tensors
made once (as torch's are), so no per-step NumPy copy is timed. Timings
interleave the peers round by round and report each one's median round.
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import seqkeras  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_utils import (keras_train_step, matmul_peak,  # noqa: E402
                         time_rounds)

L = seqkeras.layers
GATES = {"lstm": 4, "gru": 3, "rnn": 1}


def ours(kind, units, reset_after):
    cell = {
        "lstm": lambda: L.LSTMCell(units),
        "gru": lambda: L.GRUCell(units, reset_after=reset_after),
        "rnn": lambda: L.SimpleRNNCell(units),
    }[kind]()
    return L.Recurrent(cell, return_sequences=True)


def keras_peer(kind, units, reset_after):
    return {
        "lstm": lambda: keras.layers.LSTM(units, return_sequences=True),
        "gru": lambda: keras.layers.GRU(
            units, reset_after=reset_after, return_sequences=True),
        "rnn": lambda: keras.layers.SimpleRNN(units, return_sequences=True),
    }[kind]()




def torch_step(kind, x, y, units):
    import torch

    torch.set_num_threads(os.cpu_count())
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}
    net = cls[kind](x.shape[-1], units, batch_first=True)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        out, _ = net(xt)
        torch.mean((out - yt) ** 2).backward()
        opt.step()

    step()
    return step


def train_flops_per_token(kind, features, units):
    """Matmul FLOPs of forward + backward (3x forward) per time step."""
    g = GATES[kind] * units
    return 3 * 2 * (features + units) * g


def breakdown(kind, batch, steps, features, units, repeats=5):
    """Microseconds per time step of each piece of our training step, each
    compiled with XLA on its own."""
    import tensorflow as tf

    from seqkeras.layers import time_loop

    cell = ours(kind, units, reset_after=True).cell
    cell.build((batch, features))
    x = tf.random.normal((steps, batch, features))
    bias = cell.loop_input_bias()
    consts = cell.loop_constants(cell.recurrent_weights())
    init = cell.get_initial_state(batch)

    def forward(save):
        return lambda p: time_loop._forward(
            cell, p, bias, init, consts, None, None, True, save)

    proj = cell.project_inputs(x)
    _, final, residuals = tf.function(forward(True), jit_compile=True)(proj)
    d_out = tf.random.normal((steps, batch, units))
    pieces = {
        "input projection (one GEMM)": (cell.project_inputs, (x,)),
        "forward loop, inference": (forward(False), (proj,)),
        "forward loop, saving residuals": (forward(True), (proj,)),
        "backward loop + weight GEMM": (
            lambda r, d: time_loop._backward(
                cell, r, consts, None, None, d, [tf.zeros_like(s) for s in init]),  # noqa: E501
            (residuals, d_out)),
    }
    for name, (fn, args) in pieces.items():
        f = tf.function(fn, jit_compile=True)
        tf.nest.flatten(f(*args))[0].numpy()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(3):
                tf.nest.flatten(f(*args))[0].numpy()
            best = min(best, (time.perf_counter() - start) / 3)
        print(f"  {kind:<5}{name:<34}{1e6 * best / steps:>8.0f} us/step")



def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--units", type=int, default=256)
    p.add_argument("--cells", nargs="+", default=["lstm", "gru", "rnn"],
                   choices=sorted(GATES))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--breakdown", action="store_true",
                   help="also time the pieces of our training step")
    p.add_argument("--quick", action="store_true",
                   help="tiny shapes, one round: a smoke test")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.features, args.units = 4, 6, 8, 8
        args.rounds, args.iters = 1, 1
    try:
        import torch  # noqa: F401

        have_torch = not args.no_torch
    except ImportError:
        have_torch = False

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch, args.steps, args.features))
    x = x.astype("float32")
    y = rng.normal(size=(args.batch, args.steps, args.units)).astype("float32")
    peak = matmul_peak(256 if args.quick else 2048)
    tokens = args.batch * args.steps
    print(f"shape: B={args.batch} T={args.steps} features={args.features} "
          f"units={args.units}; keras {keras.__version__}, "
          f"backend {keras.backend.backend()}, jit_compile=True; "
          f"{os.cpu_count()} CPU cores")
    print(f"measured fp32 matmul peak: {peak:.0f} GFLOP/s")
    header = (f"{'cell':<22}{'peer':<22}{'ours tok/s':>12}{'peer tok/s':>12}"
              f"{'ours/peer':>11}{'ours %peak':>11}")
    print(header)
    print("-" * len(header))
    rows = []
    for kind in args.cells:
        variants = [False, True] if kind == "gru" else [False]
        for reset_after in variants:
            steps = {"ours": keras_train_step(ours(kind, args.units, reset_after),  # noqa: E501
                                        x, y)}
            steps["keras"] = keras_train_step(
                keras_peer(kind, args.units, reset_after), x, y)
            if have_torch and (kind != "gru" or reset_after):
                steps["torch"] = torch_step(kind, x, y, args.units)
            t = time_rounds(steps, args.rounds, args.iters)
            flops = train_flops_per_token(kind, args.features, args.units)
            label = kind + (" reset_after" if reset_after else "")
            ours_tps = tokens / t["ours"]
            for peer in [p for p in steps if p != "ours"]:
                peer_tps = tokens / t[peer]
                name = {"keras": "keras.layers", "torch": "torch.nn"}[peer]
                ratio = ours_tps / peer_tps
                frac = ours_tps * flops / (peak * 1e9)
                print(f"{label:<22}{name:<22}{ours_tps:>12.0f}"
                      f"{peer_tps:>12.0f}{ratio:>10.2f}x{frac:>10.0%}")
                rows.append((label, name, ours_tps, peer_tps, ratio))
    if args.breakdown:
        print("our training step, piece by piece (min of rounds):")
        for kind in args.cells:
            breakdown(kind, args.batch, args.steps, args.features, args.units)
    return rows


if __name__ == "__main__":
    main()
