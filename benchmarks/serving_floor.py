"""The floor under a served decoding step: the step's matrix products alone.

    python benchmarks/serving_floor.py MODEL/export/translate/1

A beam step of the exported Transformer decoder runs 19 matrix products
(per block: the fused self-attention QKV, its output, the cross-attention
query and output, the two feed-forward layers; then the output
projection), which read every decoder weight once per step. This script
takes those weights from the SavedModel (in a process without seqkeras),
chains the 19 products as a step does (with their biases), and times
`--steps` of them inside one `tf.while_loop`, on one thread, for each
kernel TensorFlow 2.21 offers on CPU:

- float32: `MatMul` (oneDNN), as the default export runs them;
- bfloat16: the weights cast once, the rows cast per product (oneDNN
  bfloat16);
- int8: per-column int8 weights, the rows quantized per product, an
  int8 x int8 -> int32 `BatchMatMulV3`, then rescaled (TensorFlow has no
  faster servable int8 product on CPU: `QuantizedMatMul` has no quint8 x
  qint8 kernel);
- float32 under XLA (`jit_compile=True`), as the XLA export runs them.

Printed per row count (`--rows`; 4 is one sentence at beam 4, 128 a batch
of 32): milliseconds per step, and the sentences/s no graph built on those
products can pass, `1 / (steps per sentence x ms per step)`, everything
else in the step taken as free, and with the step's other ops (`--ops`,
329) at the least the executor charges for an element-wise op on a few
rows. `--steps-per-sentence` (default 13.77) is what the exported beam-4
loop runs per sentence at batch 1 on the first 256 Multi30k validation
sentences, the sentences `benchmarks/serving.py` times: one step per
token of the best output, EOS included (its `generate_beam` outputs).
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the TF Text ops the SavedModel uses)

#: the products of one step, in order, per block
BLOCK = ("self_qkv", "self_output", "cross_query", "cross_output", "ffn_inner", "ffn_outer")


def step_weights(path):
    """`[(kernel, bias)]` (NumPy float32) of one decoding step's products,
    in the order the step runs them, from the exported decoder."""
    loaded = tf.saved_model.load(path)
    found = {}
    for v in loaded.signatures["translate"].variables:
        found[v.name.split(":")[0]] = v.numpy()
    blocks = sorted({int(n.split("_")[2]) for n in found if n.startswith("self_qkv_")})
    if not blocks or "output_kernel" not in found:
        raise ValueError(
            f"serving_floor.py: {path!r} has no serving-decoder weights "
            "(export a Transformer with apps/translate.py export)"
        )
    pairs = []
    for i in blocks:
        for name in BLOCK:
            kernel = found[f"{name}_{i}_kernel"]
            pairs.append(
                (kernel, found.get(f"{name}_{i}_bias", np.zeros(kernel.shape[1], "float32")))
            )
    kernel = found["output_kernel"]
    pairs.append((kernel, found.get("output_bias", np.zeros(kernel.shape[1], "float32"))))
    return pairs


def chain(x, products):
    """The step's products in order on (rows, d) `x`, each on the previous
    one's output (after a ReLU), cut to its input width where that is
    narrower (the QKV product's output feeds a d-wide product)."""
    h, total = x, 0.0
    for product, width in products:
        y = product(h[:, :width])
        total += tf.reduce_sum(y[:, :1])
        h = tf.nn.relu(y)
    return total


def builders(pairs):
    """`({kind: [(product(h), input width)]}, d)`: the step's products per
    kernel, their weights made once."""
    d = pairs[0][0].shape[0]
    f32 = [(tf.constant(k), tf.constant(b)) for k, b in pairs]
    bf16 = [(tf.cast(k, tf.bfloat16), tf.cast(b, tf.bfloat16)) for k, b in f32]
    int8 = []
    for k, b in pairs:
        scale = np.maximum(np.abs(k).max(0), 1e-8) / 127.0
        q = np.clip(np.round(k / scale), -127, 127).astype("int8")
        int8.append((tf.constant(q), tf.constant(scale.astype("float32")), tf.constant(b)))

    def float32(h, i):
        k, b = f32[i]
        return tf.nn.bias_add(tf.matmul(h, k), b)

    def bfloat16(h, i):
        k, b = bf16[i]
        return tf.cast(tf.nn.bias_add(tf.matmul(tf.cast(h, tf.bfloat16), k), b), tf.float32)

    def int8_product(h, i):
        k, scale, b = int8[i]
        row = tf.maximum(tf.reduce_max(tf.abs(h), -1, keepdims=True), 1e-8) / 127.0
        q = tf.cast(tf.round(h / row), tf.int8)
        y = tf.raw_ops.BatchMatMulV3(x=q, y=k, Tout=tf.int32)
        return tf.cast(y, tf.float32) * row * scale + b

    kinds = {"float32": float32, "bfloat16": bfloat16, "int8": int8_product, "XLA float32": float32}
    widths = [k.shape[0] for k, _ in pairs]
    return {
        kind: [(lambda h, i=i, f=f: f(h, i), widths[i]) for i in range(len(pairs))]
        for kind, f in kinds.items()
    }, d


def overhead(x, ops):
    """`ops` dependent element-wise ops on a (rows, 8) slice: what the
    executor charges a step's other ops at the least."""
    h = x8 = x[:, :8]
    for i in range(ops):  # on a tensor, not a constant: grappler cannot fold them
        h = h - x8 if i % 2 else tf.maximum(h, x8)
    return tf.reduce_sum(h)


def time_kind(products, d, rows, steps, rounds, jit, ops=None):
    x = tf.constant(np.random.default_rng(0).normal(size=(rows, d)).astype("float32"))

    def body(i, acc):
        h = x + tf.cast(i, tf.float32) * 1e-6
        return i + 1, acc + (chain(h, products) if ops is None else overhead(h, ops))

    @tf.function(jit_compile=jit)
    def run():
        return tf.while_loop(lambda i, _: i < steps, body, (tf.constant(0), tf.constant(0.0)))[1]

    run()  # trace, compile
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        run().numpy()
        seconds.append((time.perf_counter() - start) / steps)
    return statistics.median(seconds)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("savedmodel", help="an exported translate SavedModel (version directory)")
    p.add_argument("--rows", type=int, nargs="+", default=[4, 128])
    p.add_argument("--steps", type=int, default=200, help="steps per timed call")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps-per-sentence", type=float, default=13.77)
    p.add_argument("--threads", type=int, default=1, help="TensorFlow's intra/inter-op threads")
    p.add_argument(
        "--ops",
        type=int,
        default=329,
        help="the step's other ops (348 at batch 1 under the profiler, 19 of them products)",
    )
    args = p.parse_args(argv)
    sys.modules["seqkeras"] = None  # a server has no seqkeras
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    pairs = step_weights(args.savedmodel)
    megabytes = sum(k.size for k, _ in pairs) * 4 / 1e6
    print(f"{len(pairs)} products per step, {megabytes:.1f} MB of float32 weights")
    kinds, d = builders(pairs)
    for rows in args.rows:
        rest = time_kind(None, d, rows, args.steps, args.rounds, False, args.ops)
        print(f"rows {rows:4d}  {args.ops} element-wise ops (no XLA): {rest * 1e3:.3f} ms per step")
        for kind, products in kinds.items():
            s = time_kind(products, d, rows, args.steps, args.rounds, kind.startswith("XLA"))
            line = f"rows {rows:4d}  {kind:12s} {s * 1e3:7.3f} ms per step"
            if rows == 4:  # one sentence at beam 4
                bound = 1.0 / (args.steps_per_sentence * s)
                line += f"  -> at most {bound:6.1f} sentences/s at batch 1"
                if not kind.startswith("XLA"):
                    both = 1.0 / (args.steps_per_sentence * (s + rest))
                    line += f" ({both:.1f} with the other ops)"
            print(line, flush=True)


if __name__ == "__main__":
    main()
