"""Training speed of seqkeras recurrent layers against each peer's best
configuration.

Trains `seqkeras.layers.Recurrent` (float32 and mixed_bfloat16, each with
and without XLA), `keras.layers.{LSTM,GRU,SimpleRNN}` in the configurations
a user picks (Keras' default compile, XLA on, mixed_bfloat16 with either)
and `torch.nn.{LSTM,GRU,RNN}` (float32 and bfloat16 autocast, in its own
process, before and after the Keras rounds: the faster of the two counts)
on the same shape; prints train tokens/s of each configuration and
ours-best / peer-best, and the matmul peaks this machine reaches.

    python benchmarks/recurrent.py            # B=64, T=100, 128 -> 256
    python benchmarks/recurrent.py --quick    # a smoke run (tests use it)

Each model does the same step: forward with `return_sequences=True`, mean
squared error against a fixed target, backward, SGD update. Keras models
train with `train_on_batch` on tensors made once (as torch's are), so no
per-step NumPy copy is timed. Timings interleave the configurations round
by round and report each one's median round.
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
from bench_utils import (
    KERAS_CONFIGS,
    OURS_CONFIGS,
    best_of,  # noqa: E402
    keras_steps,
    matmul_peak,
    report,
    time_rounds,
    torch_times,
)

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
        "gru": lambda: keras.layers.GRU(units, reset_after=reset_after, return_sequences=True),
        "rnn": lambda: keras.layers.SimpleRNN(units, return_sequences=True),
    }[kind]()


def train_flops_per_token(kind, features, units):
    """Matmul FLOPs of forward + backward (3x forward) per time step."""
    g = GATES[kind] * units
    return 3 * 2 * (features + units) * g


def breakdown(kind, batch, steps, features, units, repeats=5):
    """Microseconds per time step of each piece of our training step, each
    compiled with XLA on its own, through the time loop's public entry
    point (`seqkeras.layers.time_loop.run`): the backward loop is the
    forward-and-backward time less the forward that saves residuals."""
    import tensorflow as tf

    from seqkeras.layers import time_loop

    cell = ours(kind, units, reset_after=True).cell
    cell.build((batch, features))
    x = tf.random.normal((steps, batch, features))
    init = cell.get_initial_state(batch)
    proj = cell.project_inputs(x)

    def forward(save):  # training saves residuals, on the scan
        return lambda p: time_loop.run(cell, p, init, save_residuals=save)[0]

    def forward_backward(p):
        with tf.GradientTape() as tape:
            tape.watch(p)
            out = forward(True)(p)
        return tape.gradient(out, [p] + cell.trainable_weights)

    pieces = {
        "input projection (one GEMM)": cell.project_inputs,
        "forward loop, inference": forward(False),
        "forward loop, saving residuals": forward(True),
        "forward + backward loops, weight GEMM": forward_backward,
    }
    times = {}
    for name, fn in pieces.items():
        f = tf.function(fn, jit_compile=True)
        given = x if name.startswith("input") else proj
        tf.nest.flatten(f(given))[0].numpy()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(3):
                tf.nest.flatten(f(given))[0].numpy()
            best = min(best, (time.perf_counter() - start) / 3)
        times[name] = 1e6 * best / steps
        print(f"  {kind:<5}{name:<40}{times[name]:>8.0f} us/step")
    backward = (
        times["forward + backward loops, weight GEMM"] - times["forward loop, saving residuals"]
    )
    print(f"  {kind:<5}{'backward loop + weight GEMM (difference)':<40}{backward:>8.0f} us/step")


def peaks(quick):
    """GFLOP/s of one large matmul: float32 and bfloat16, XLA and
    TensorFlow's oneDNN kernels."""
    n = 256 if quick else 2048
    return {
        (dtype, jit): matmul_peak(n, dtype=dtype, jit_compile=jit)
        for dtype in ("float32", "bfloat16")
        for jit in (True, False)
    }


def print_peaks(peak):
    print(
        "matmul peak, GFLOP/s (2048^2): "
        + ", ".join(f"{d} {'XLA' if j else 'oneDNN'} {v:.0f}" for (d, j), v in peak.items())
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--units", type=int, default=256)
    p.add_argument("--cells", nargs="+", default=["lstm", "gru", "rnn"], choices=sorted(GATES))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument(
        "--inference",
        action="store_true",
        help="time forward passes (predict_on_batch) of ours "
        "and the Keras peers instead of training steps",
    )
    p.add_argument("--no-keras", action="store_true", help="time ours only (development)")
    p.add_argument(
        "--breakdown", action="store_true", help="also time the pieces of our training step"
    )
    p.add_argument("--quick", action="store_true", help="tiny shapes, one round: a smoke test")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.features, args.units = 4, 6, 8, 8
        args.rounds, args.iters = 1, 1
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch, args.steps, args.features))
    x = x.astype("float32")
    y = rng.normal(size=(args.batch, args.steps, args.units)).astype("float32")
    tokens = args.batch * args.steps
    print(
        f"shape: B={args.batch} T={args.steps} features={args.features} "
        f"units={args.units}; keras {keras.__version__}, backend "
        f"{keras.backend.backend()}; {len(os.sched_getaffinity(0))} CPU "
        "cores"
    )
    peak = peaks(args.quick)
    print_peaks(peak)
    results = {}
    for kind in args.cells:
        # GRU: reset_after=True, the variant torch and cuDNN implement.
        shape = dict(batch=args.batch, steps=args.steps, features=args.features, units=args.units)
        spec = dict(model=kind, shape=shape, rounds=args.rounds, iters=args.iters)
        no_torch = args.no_torch or args.no_keras or args.inference
        before = {} if no_torch else torch_times(spec)
        steps = keras_steps(
            "ours", lambda: ours(kind, args.units, True), x, y, OURS_CONFIGS, args.inference
        )
        if not args.no_keras:
            steps.update(
                keras_steps(
                    "keras",
                    lambda: keras_peer(kind, args.units, True),
                    x,
                    y,
                    KERAS_CONFIGS,
                    args.inference,
                )
            )
        t = time_rounds(steps, args.rounds, args.iters)
        after = {} if no_torch else torch_times(spec)
        t = best_of(t, before, after)
        flops = train_flops_per_token(kind, args.features, args.units)
        what = "inference" if args.inference else "train"
        flops = flops / 3 if args.inference else flops  # forward only
        results[kind] = (
            t,
            report(
                f"{kind}: {what} tokens/s (% of the float32 XLA matmul peak)",
                tokens,
                t,
                ["torch", "keras"],
                flops,
                peak["float32", True],
            ),
        )
    if args.breakdown:
        print("our training step, piece by piece (min of rounds):")
        for kind in args.cells:
            breakdown(kind, args.batch, args.steps, args.features, args.units)
    return results


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"wall {time.perf_counter() - start:.0f} s")
