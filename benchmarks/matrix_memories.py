"""Training speed of the matrix-memory layers against keras-hub's.

One training step (forward over the whole sequence, MSE against a fixed
target, backward, SGD update; `train_on_batch` on fixed arrays) at batch
2, T = 1,024, width 256:

- our `GatedDeltaNet` (chunked, 64) against keras-hub 0.32's
  `Qwen3_5GatedDeltaNet` (its own chunked port: 63 unrolled row updates per
  chunk), 2 key heads and 4 value heads of 64;
- our `RWKV7TimeMixing` (chunked generalized delta rule, 64) against
  keras-hub's `RWKV7TimeMix` (a step per token), heads of 64;

each in the configurations a user picks: XLA (`jit_compile=True`) and
Keras' default (`"auto"`), float32 and mixed_bfloat16, on the backend of
this process (`KERAS_BACKEND`); `--backends tensorflow,jax` runs each
backend in its own process and prints both. keras-hub's RWKV-7 on
TensorFlow unrolls its loop over time into the graph (T copies of the
step): at T = 1,024 XLA took 18 minutes to compile it, so it is timed
without XLA there unless `--rwkv-xla`.

    python benchmarks/matrix_memories.py --backends tensorflow,jax
    python benchmarks/matrix_memories.py --quick    # a smoke run (tests use it)
"""

import argparse
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _train_step(make_layer, x, y, jit_compile, policy):
    """A compiled train step of `make_layer()` (its first output) made
    under `policy`, on fixed arrays."""
    import keras

    from bench_utils import policy_scope

    with policy_scope(policy):
        layer = make_layer()
        inp = keras.Input(x.shape[1:])
        out = layer(inp)
        out = out[0] if isinstance(out, (tuple, list)) else out
        out = keras.layers.Activation("linear", dtype="float32")(out)
    model = keras.Model(inp, out)
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse", jit_compile=jit_compile)
    start = time.perf_counter()
    model.train_on_batch(x, y)  # compile
    compile_s = time.perf_counter() - start
    return (lambda: model.train_on_batch(x, y)), compile_s


def _layers(width, quick):
    import seqkeras
    from keras_hub.src.models.qwen3_5.qwen3_5_gated_delta_net import Qwen3_5GatedDeltaNet
    from keras_hub.src.models.rwkv7.rwkv7_layer import RWKV7TimeMix

    head = 4 if quick else 64
    lora = dict(decay_lora=4, aaa_lora=4, mv_lora=4, gate_lora=4) if quick else {}
    return {
        "deltanet": {
            "ours": lambda: seqkeras.layers.GatedDeltaNet(2, head, num_value_heads=4),
            "keras-hub": lambda: Qwen3_5GatedDeltaNet(
                hidden_size=width,
                linear_num_key_heads=2,
                linear_num_value_heads=4,
                linear_key_head_dim=head,
                linear_value_head_dim=head,
                linear_conv_kernel_dim=4,
            ),
        },
        "rwkv7": {
            "ours": lambda: seqkeras.layers.RWKV7TimeMixing(
                head_size=head, value_residual=False, **lora
            ),
            "keras-hub": lambda: RWKV7TimeMix(
                hidden_size=width, head_size=head, add_v_first=False, **lora
            ),
        },
    }


def run_backend(args):
    """This process's backend: every configuration of every layer, timed
    in interleaved rounds; prints one line per configuration."""
    import keras

    from bench_utils import cpu_name, time_rounds

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch, args.steps, args.width)).astype("float32")
    y = rng.normal(size=(args.batch, args.steps, args.width)).astype("float32")
    backend = keras.backend.backend()
    print(
        f"{cpu_name()}, {len(os.sched_getaffinity(0))} cores; B={args.batch} T={args.steps} "
        f"width={args.width}; keras {keras.__version__}, backend {backend}",
        flush=True,
    )
    tokens = args.batch * args.steps
    for kind, peers in _layers(args.width, args.quick).items():
        if args.only and kind != args.only:
            continue
        steps = {}
        for who, make in peers.items():
            # a smoke run (--quick) compiles one jit choice and one policy:
            # the others run the same layers, and each compile took about
            # 13 s on 2 cores
            for jit in (True,) if args.quick else (True, "auto"):
                if (
                    kind == "rwkv7"
                    and who == "keras-hub"
                    and backend == "tensorflow"
                    and jit is True
                    and not (args.rwkv_xla or args.quick)
                ):
                    continue
                for policy in ("float32",) if args.quick else ("float32", "mixed_bfloat16"):
                    name = f"{who} {backend} jit={jit} {policy}"
                    step, compile_s = _train_step(make, x, y, jit, policy)
                    print(f"  compiled {name} in {compile_s:.1f} s", flush=True)
                    steps[name] = step
        times = time_rounds(steps, args.rounds, args.iters)
        print(f"{kind} training step, {backend}")
        for name, s in sorted(times.items(), key=lambda kv: kv[1]):
            print(f"  RESULT {kind} | {name:<44} | {tokens / s:>10.0f} tok/s", flush=True)
        best = {
            who: max(tokens / s for n, s in times.items() if n.startswith(who))
            for who in ("ours", "keras-hub")
        }
        print(
            f"  RATIO {kind} {backend}: ours-best / keras-hub-best = "
            f"{best['ours'] / best['keras-hub']:.2f}x",
            flush=True,
        )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--steps", type=int, default=1024)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--only", choices=["deltanet", "rwkv7"], default=None)
    p.add_argument("--rwkv-xla", action="store_true", help="also keras-hub RWKV-7 under XLA (TF)")
    p.add_argument("--backends", default=None, help="e.g. tensorflow,jax: one process each")
    p.add_argument("--quick", action="store_true", help="tiny shapes, one round: a smoke test")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.width, args.rounds, args.iters = 2, 16, 8, 1, 1
    if not args.backends:
        run_backend(args)
        return
    forwarded = [a for a in (argv if argv is not None else sys.argv[1:])]
    i = forwarded.index("--backends")
    forwarded = forwarded[:i] + forwarded[i + 2 :]
    for backend in args.backends.split(","):
        env = dict(os.environ, KERAS_BACKEND=backend)
        subprocess.run([sys.executable, __file__] + forwarded, env=env, check=True)


if __name__ == "__main__":
    main()
