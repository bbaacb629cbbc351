"""Training speed of the linear recurrences against their peers.

One training step (forward over the whole sequence, MSE against a fixed
target, backward, SGD update) at batch 8, T = 1,024, width 256:

- minGRU (`Recurrent(MinGRUCell)`, one parallel scan) against
  `keras.layers.GRU` in the configurations a user picks (Keras' default
  compile, XLA, mixed_bfloat16), our own `GRUCell` (its fastest
  configuration), `mingru-keras` 0.1.3 (a Keras 3 minGRU on
  `ops.associative_scan`; `pip install --no-deps mingru-keras`) and
  mingru-pytorch (float32 and bfloat16 autocast);
- the Mamba block (`MambaBlock("mamba")`: RMSNorm, the S6 mixer, the
  residual) against `transformers`' torch `MambaBlock` and mambapy's
  one-layer `Mamba` (its parallel scan), each in float32 and bfloat16
  autocast, in their own process.

Prints each configuration's tokens/s and ours-best / peer-best.

    python benchmarks/linear_recurrences.py            # the shapes above
    python benchmarks/linear_recurrences.py --quick    # a smoke run (tests use it)
"""

import argparse
import importlib.util
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import seqkeras  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_utils import KERAS_CONFIGS, OURS_CONFIGS, best_of  # noqa: E402
from bench_utils import config_name, cpu_name, keras_steps, policy_scope, report  # noqa: E402
from bench_utils import time_rounds, torch_times  # noqa: E402

L = seqkeras.layers


def min_gru_steps(x, y, units, quick):
    """{configuration: train step} of minGRU and its peers."""
    steps = keras_steps(
        "ours minGRU",
        lambda: L.Recurrent(L.MinGRUCell(units), return_sequences=True),
        x,
        y,
        OURS_CONFIGS,
    )
    # our GRUCell: its fastest configuration in recurrent.py (float32, XLA)
    steps.update(
        keras_steps(
            "seqkeras GRUCell",
            lambda: L.Recurrent(L.GRUCell(units, reset_after=True), return_sequences=True),
            x,
            y,
            (("float32", True),),
        )
    )
    steps.update(
        keras_steps(
            "keras GRU",
            lambda: keras.layers.GRU(units, return_sequences=True),
            x,
            y,
            KERAS_CONFIGS[:2] if quick else KERAS_CONFIGS,
        )
    )
    if importlib.util.find_spec("mingru_keras") is not None:
        from mingru_keras import MinGRU

        # its layer gives no symbolic output shape (a functional model
        # fails): trained inside a subclassed model, as its README does
        for policy, jit in KERAS_CONFIGS:
            with policy_scope(policy):
                layer = MinGRU(units)
            name = config_name("mingru-keras", policy, jit)
            try:
                steps[name] = subclassed_train_step(layer, x, y, jit)
            except Exception as error:  # noqa: BLE001 (a peer's failure is a result)
                print(f"  {name}: fails ({type(error).__name__}: {str(error)[:80]!r})")
    return steps


def subclassed_train_step(layer, x, y, jit_compile):
    """`bench_utils.keras_train_step` for a layer without a symbolic output
    shape: the same step (MSE, SGD, float32 output, tensors made once)
    in a subclassed model."""
    import tensorflow as tf

    class Wrapped(keras.Model):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def call(self, inputs):  # its output's rank is unknown in TF graphs
            out = keras.ops.reshape(self.layer(inputs), keras.ops.shape(inputs))
            return keras.ops.cast(out, "float32")

    x, y = tf.constant(x), tf.constant(y)
    model = Wrapped()
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse", jit_compile=jit_compile)
    model.train_on_batch(x, y)  # compile
    return lambda: model.train_on_batch(x, y)


def mamba_steps(x, y):
    return keras_steps(
        "ours Mamba",
        lambda: L.MambaBlock("mamba", state_size=16, expand=2, conv_kernel=4),
        x,
        y,
        OURS_CONFIGS,
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=1024)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--only", choices=["mingru", "mamba"], default=None)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument(
        "--skip-transformers-mamba",
        action="store_true",
        help="leave out transformers' torch Mamba (its Python loop over time takes minutes "
        "a step at T = 1,024 on 2 cores)",
    )
    p.add_argument("--quick", action="store_true", help="tiny shapes, one round: a smoke test")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.width, args.rounds, args.iters = 2, 16, 8, 1, 1
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch, args.steps, args.width)).astype("float32")
    y = rng.normal(size=(args.batch, args.steps, args.width)).astype("float32")
    tokens = args.batch * args.steps
    print(
        f"{cpu_name()}, {len(os.sched_getaffinity(0))} cores; B={args.batch} T={args.steps} "
        f"width={args.width}; keras {keras.__version__}, backend {keras.backend.backend()}"
    )
    shape = dict(batch=args.batch, steps=args.steps, dim=args.width)
    torch_ok = not args.no_torch and importlib.util.find_spec("torch") is not None
    ratios = {}

    modules = {
        "mamba_transformers": "transformers",
        "mamba_mambapy": "mambapy",
        "mingru_pytorch": "minGRU_pytorch",
    }

    def peer(model, prefix, rounds=args.rounds, iters=args.iters):
        if not torch_ok or importlib.util.find_spec(modules[model]) is None:
            return {}
        spec = dict(model=model, shape=shape, rounds=rounds, iters=iters)
        return {f"{prefix} {k[len('torch ') :]}": v for k, v in torch_times(spec).items()}

    if args.only in (None, "mingru"):
        times = time_rounds(min_gru_steps(x, y, args.width, args.quick), args.rounds, args.iters)
        times.update(peer("mingru_pytorch", "mingru-pytorch"))
        ratios.update(
            report(
                "minGRU training step",
                tokens,
                {k.replace("ours minGRU", "ours"): v for k, v in times.items()},
                ["keras GRU", "seqkeras GRUCell", "mingru-keras", "mingru-pytorch"],
            )
        )
    if args.only in (None, "mamba"):
        # transformers' torch path loops over time in Python (tens of
        # seconds a step here): one round, one step, once
        slow = {}
        if not args.skip_transformers_mamba:
            slow = peer("mamba_transformers", "transformers Mamba", 1, 1)
        before = peer("mamba_mambapy", "mambapy")
        times = time_rounds(mamba_steps(x, y), args.rounds, args.iters)
        after = peer("mamba_mambapy", "mambapy")
        times.update(best_of(before, after))
        times.update(slow)
        ratios.update(
            report(
                "Mamba block training step",
                tokens,
                {k.replace("ours Mamba", "ours"): v for k, v in times.items()},
                ["transformers Mamba", "mambapy"],
            )
        )
    return ratios


if __name__ == "__main__":
    main()
