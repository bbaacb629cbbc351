"""Helpers shared by the benchmark scripts."""

import contextlib
import os
import statistics
import time


def cpu_name():
    """The CPU's model name (ratios move between machines: name it)."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def time_rounds(steps, rounds, iters):
    """Runs each step function `iters` times per round, peers interleaved
    round by round (so machine drift hits all of them alike); returns each
    one's median seconds per call."""
    times = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(iters):
                step()
            times[name].append((time.perf_counter() - start) / iters)
    return {name: statistics.median(t) for name, t in times.items()}


def _float32_model(layer, x):
    """`layer` on an input shaped like `x`, with a float32 output layer (a
    layer made under a mixed policy, see `policy_scope`, as the Keras mixed
    precision guide advises)."""
    import keras

    inp = keras.Input(x.shape[1:])
    out = keras.layers.Activation("linear", dtype="float32")(layer(inp))
    return keras.Model(inp, out)


def keras_train_step(layer, x, y, jit_compile=True):
    """A compiled Keras train step of `layer` on fixed tensors made once
    (as the torch peers' are), MSE loss and SGD. `jit_compile`: True,
    False or "auto" (Keras' default)."""
    import keras
    import tensorflow as tf

    x, y = tf.constant(x), tf.constant(y)
    model = _float32_model(layer, x)
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse", jit_compile=jit_compile)
    model.train_on_batch(x, y)  # compile
    return lambda: model.train_on_batch(x, y)


def keras_infer_step(layer, x, jit_compile=True):
    """A compiled Keras forward pass of `layer` (`predict_on_batch`) on a
    fixed tensor."""
    import tensorflow as tf

    x = tf.constant(x)
    model = _float32_model(layer, x)
    model.compile(jit_compile=jit_compile)
    model.predict_on_batch(x)  # compile
    return lambda: model.predict_on_batch(x)


@contextlib.contextmanager
def policy_scope(policy):
    """Layers made inside take `policy` ("float32", "mixed_bfloat16")."""
    import keras

    old = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(old)


# What a user picks: Keras' default compile (jit_compile="auto"), XLA on,
# and mixed precision (with the default compile and with XLA).
KERAS_CONFIGS = (
    ("float32", "auto"),
    ("float32", True),
    ("mixed_bfloat16", "auto"),
    ("mixed_bfloat16", True),
)
# Ours: each policy with and without XLA (compile_model's choice is one).
OURS_CONFIGS = (
    ("float32", True),
    ("float32", False),
    ("mixed_bfloat16", True),
    ("mixed_bfloat16", False),
)


def config_name(who, policy, jit):
    mode = {True: "jit", False: "no jit", "auto": "default jit"}[jit]
    return f"{who}, {policy}, {mode}"


def keras_steps(who, make_layer, x, y, configs, inference=False):
    """{name: train step} of `make_layer()` in each (policy, jit) config;
    with `inference`, forward passes instead."""
    steps = {}
    for policy, jit in configs:
        with policy_scope(policy):
            layer = make_layer()
        steps[config_name(who, policy, jit)] = (
            keras_infer_step(layer, x, jit_compile=jit)
            if inference
            else keras_train_step(layer, x, y, jit_compile=jit)
        )
    return steps


def torch_times(spec):
    """Times the torch peer `spec` (see torch_peers.py) in its own process;
    {} when torch is not installed."""
    import importlib.util
    import json
    import subprocess
    import sys

    if importlib.util.find_spec("torch") is None:
        return {}
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, os.path.join(here, "torch_peers.py"), json.dumps(spec)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def best_of(*timings):
    """Merges {name: seconds} dicts keeping each name's fastest."""
    merged = {}
    for t in timings:
        for k, v in t.items():
            merged[k] = min(v, merged.get(k, v))
    return merged


def report(title, tokens, seconds, peers, flops_per_token=None, peak=None):
    """Prints tokens/s of every configuration, best first, and
    ours-best / peer-best for each peer (a name prefix such as "torch")."""
    print(title)
    rows = sorted(seconds.items(), key=lambda kv: kv[1])
    for name, s in rows:
        tps = tokens / s
        frac = "" if not flops_per_token else f"{tps * flops_per_token / peak / 1e9:>8.0%} of peak"
        print(f"  {name:<44}{tps:>10.0f} tok/s{frac}")
    ours = max(tokens / s for k, s in seconds.items() if k.startswith("ours"))
    ratios = {}
    for peer in peers:
        theirs = [tokens / s for k, s in seconds.items() if k.startswith(peer)]
        if theirs:
            ratios[peer] = ours / max(theirs)
            print(f"  ours-best / {peer}-best = {ratios[peer]:.2f}x")
    return ratios


def matmul_peak(n=2048, repeats=10, dtype="float32", jit_compile=True):
    """GFLOP/s of one large matmul on this machine (XLA or, with
    `jit_compile=False`, TensorFlow's oneDNN kernels)."""
    import tensorflow as tf

    a = tf.cast(tf.random.normal((n, n)), dtype)
    f = tf.function(lambda a: a @ a, jit_compile=jit_compile)
    f(a).numpy()
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            f(a).numpy()
        best = max(best, 2 * n**3 * repeats / (time.perf_counter() - start))
    return best / 1e9


def memory_bandwidth(mb=256, repeats=5):
    """GB/s of a large NumPy copy (bytes read plus bytes written): what a
    step that streams a matrix from memory can reach at best."""
    import numpy as np

    a = np.ones(mb * 2**20 // 4, np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - start)
    return 2 * a.nbytes / best / 1e9


def peak_rss_mb(code):
    """Peak resident memory (MB) of a fresh Python process running `code`
    with the benchmarks directory importable; includes the framework
    itself (TensorFlow alone is ~0.7 GB)."""
    import subprocess
    import sys

    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the (large)
    # parent through fork and exec.
    code += (
        "\nprint([int(l.split()[1]) for l in open('/proc/self/status')"
        " if l.startswith('VmHWM')][0])"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.abspath(__file__))] + sys.path),
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout
    return int(out.strip().splitlines()[-1]) / 1024
