"""Helpers shared by the benchmark scripts."""

import statistics
import time


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


def keras_train_step(layer, x, y):
    """A compiled (jit) Keras train step of `layer` on fixed tensors made
    once (as the torch peers' are), MSE loss and SGD."""
    import keras
    import tensorflow as tf

    x, y = tf.constant(x), tf.constant(y)
    inp = keras.Input(x.shape[1:])
    model = keras.Model(inp, layer(inp))
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse",
                  jit_compile=True)
    model.train_on_batch(x, y)  # compile
    return lambda: model.train_on_batch(x, y)


def matmul_peak(n=2048, repeats=10):
    """fp32 GFLOP/s of one large XLA matmul on this machine."""
    import tensorflow as tf

    a = tf.random.normal((n, n))
    f = tf.function(lambda a: a @ a, jit_compile=True)
    f(a).numpy()
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            f(a).numpy()
        best = max(best, 2 * n ** 3 * repeats / (time.perf_counter() - start))
    return best / 1e9


def peak_rss_mb(code):
    """Peak resident memory (MB) of a fresh Python process running `code`
    with the benchmarks directory importable; includes the framework
    itself (TensorFlow alone is ~0.7 GB)."""
    import os
    import subprocess
    import sys

    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the (large)
    # parent through fork and exec.
    code += ("\nprint([int(l.split()[1]) for l in open('/proc/self/status')"
             " if l.startswith('VmHWM')][0])")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.abspath(__file__))] + sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, env=env, check=True).stdout
    return int(out.strip().splitlines()[-1]) / 1024
