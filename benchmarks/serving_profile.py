"""Where a served decoding step goes: the TensorFlow profiler over a
SavedModel's `translate` signature, per op type, in a process without
seqkeras.

    python benchmarks/serving_profile.py MODEL/export/translate/1 \\
        --sentences ../shared/data/multi30k/val.de --batch 1 --count 32

The signature runs once untimed, then `--count` sentences at `--batch`
per call under `tf.profiler`. The trace (an XSpace protobuf, read with the
`xplane_pb2` message TensorFlow ships; TensorFlow has no public reader) is
summed per op type over the executor's compute threads: calls, time, and
the share of all op time, sorted by time; then grouped into what a
decoding step does (projections, the output projection, attention, cache
writes and reorders, beam bookkeeping, layer norms, the rest). "Calls per
step" divides by the decoding steps the loop ran: the `TopKV2` calls
(`ArgMax` for greedy graphs) over the number of such nodes in one loop
body of the SavedModel's graph. The profiler's own cost inflates short ops;
compare op types and graphs with each other, not with wall times.
"""

import argparse
import collections
import glob
import os
import sys
import tempfile

sys.modules["seqkeras"] = None  # a server has no seqkeras
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the TF Text ops)

#: what each op type does in a decoding step (the rest: "other")
GROUPS = {
    "projections (MatMul)": ("MatMul", "FusedMatMul", "Einsum", "BiasAdd"),
    "attention (BatchMatMul, softmax)": ("BatchMatMul", "Softmax"),
    "cache copies (writes, reorders, slices, transposes)": (
        "TensorScatterUpdate",
        "ConcatV2",
        "GatherV2",
        "StridedSlice",
        "Transpose",
    ),
    "beam bookkeeping": ("TopKV2", "LogSoftmax", "SelectV2", "ArgMax", "FloorDiv", "FloorMod"),
    "layer norms": ("SquaredDifference", "Mean", "Rsqrt"),
}


def group(op):
    bare = op.replace("_Mkl", "").replace("Native", "").lstrip("_")
    for name, ops in GROUPS.items():
        if any(bare == o or bare.startswith(o) for o in ops):
            return name
    return "other"


def profile(path, sentences, batch, count):
    """`(per op type {op: [calls, microseconds]}, steps)` over `count`
    sentences at `batch` per call."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    fn = tf.saved_model.load(path).signatures["translate"]
    texts = sentences[:count]
    fn(text=tf.constant(texts[:batch]))  # warm-up
    logdir = tempfile.mkdtemp(prefix="profile-")
    tf.profiler.experimental.start(logdir)
    for i in range(0, len(texts), batch):
        fn(text=tf.constant(texts[i : i + batch]))
    tf.profiler.experimental.stop()
    (trace,) = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    space = xplane_pb2.XSpace()
    with open(trace, "rb") as f:
        space.ParseFromString(f.read())
    ops = collections.defaultdict(lambda: [0, 0.0])
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name.split(":")[-1]
                if name in ("Process", "ParallelFor"):  # the executor's wrappers
                    continue
                ops[name][0] += 1
                ops[name][1] += event.duration_ps / 1e6
    op = "TopKV2" if ops.get("TopKV2") else "ArgMax"
    steps = max(ops.get(op, [0])[0] // per_step(path, op), 1)
    return dict(ops), steps


def per_step(path, op):
    """How many `op` nodes one decoding-loop body holds (the most in any
    `while_body` function of the SavedModel's graph)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    counts = [
        sum(node.op == op for node in function.node_def)
        for graph in saved.meta_graphs
        for function in graph.graph_def.library.function
        if "while_body" in function.signature.name
    ]
    return max(counts + [1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("savedmodel")
    p.add_argument("--sentences", required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--count", type=int, default=32)
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    with open(args.sentences, encoding="utf-8") as f:
        sentences = [s.rstrip("\r\n") for s in f if s.strip()]
    ops, steps = profile(args.savedmodel, sentences, args.batch, args.count)
    total = sum(us for _, us in ops.values())
    print(f"{args.savedmodel}: batch {args.batch}, {args.count} sentences, {steps} decoding steps")
    print(f"op time {total / 1000:.1f} ms ({total / steps:.0f} us per step), by op type:")
    print(f"{'op':32s} {'calls/step':>10s} {'us/step':>9s} {'us/call':>8s} {'share':>6s}")
    for name, (calls, us) in sorted(ops.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(
            f"{name:32s} {calls / steps:10.1f} {us / steps:9.0f} {us / calls:8.1f} "
            f"{100 * us / total:5.1f}%"
        )
    groups = collections.defaultdict(lambda: [0, 0.0])
    for name, (calls, us) in ops.items():
        groups[group(name)][0] += calls
        groups[group(name)][1] += us
    print("by what the step does:")
    for name, (calls, us) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(
            f"  {name:36s} {calls / steps:6.1f} ops/step {us / steps:7.0f} us/step "
            f"{100 * us / total:5.1f}%"
        )
    return {"ops": ops, "steps": steps, "total_us": total, "groups": dict(groups)}


if __name__ == "__main__":
    main()
