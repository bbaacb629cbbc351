"""Per-token latency of the TFLite step model against the position: the
language models with a fixed-size state (Mamba, Mamba-2, Hawk, minGRU,
gated DeltaNet, mLSTM, RWKV-7)
beside a Transformer language model of about the same size.

Each model (character-LM sizes, ~1.4 M parameters, 69 symbols) is
exported with `seqkeras.export.streaming_tflite` (builtin ops only; the
Transformer's key/value caches hold `--positions` positions), then one
LiteRT interpreter (XNNPACK, `--threads` threads, batch 1) steps through
`--positions` tokens, its states fed back; the latency at a position is
the step from the states reached there, timed in 15 rounds of 40
invokes, the positions interleaved round by round (this shared 2-core
machine's drift hits them alike), the median round. Prints the latency at
positions 128 and 4,096, their ratio, and the state each layer carries
(bytes, float32).

    python benchmarks/state_space_latency.py
    python benchmarks/state_space_latency.py --quick   # a smoke run
"""

import argparse
import os
import sys
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402

import seqkeras  # noqa: E402
from seqkeras.export.streaming import streaming_tflite  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_utils import cpu_name  # noqa: E402

M = seqkeras.models
V = 69


def builders(positions, quick):
    d = 8 if quick else None
    return {
        "mamba": lambda: M.mamba_language_model(V, d or 192, 1 if quick else 6),
        "mamba2": lambda: M.mamba_language_model(
            V,
            d or 192,
            1 if quick else 6,
            version="mamba2",
            head_dim=8 if quick else 32,
            state_size=8 if quick else 32,
        ),
        "hawk": lambda: M.griffin_language_model(
            V, d or 168, 1 if quick else 4, num_heads=4, block_types=["recurrent"]
        ),
        "mingru": lambda: M.recurrent_language_model(
            V, d or 512, units=d or 1024, cell="mingru", num_layers=1 if quick else 2
        ),
        "deltanet": lambda: M.hybrid_language_model(
            V,
            d or 192,
            1 if quick else 4,
            num_heads=4 if not quick else 2,
            block_types=["deltanet"],
            intermediate_dim=16 if quick else 256,
        ),
        "mlstm": lambda: M.hybrid_language_model(
            V,
            d or 192,
            1 if quick else 4,
            num_heads=4 if not quick else 2,
            block_types=["mlstm"],
            intermediate_dim=16 if quick else 384,
        ),
        "rwkv7": lambda: M.rwkv7_language_model(
            V,
            d or 192,
            1 if quick else 4,
            intermediate_dim=16 if quick else 384,
            head_size=4 if quick else 48,
            decay_lora=4 if quick else 32,
            aaa_lora=4 if quick else 32,
            mv_lora=4 if quick else 16,
            gate_lora=4 if quick else 64,
        ),
        "transformer": lambda: M.transformer_language_model(
            V, positions, num_layers=1 if quick else 4, num_heads=4, hidden_dim=d or 168
        ),
    }


def step_latencies(model, positions, threads, marks, rounds=15, invokes=40):
    """{position: median ms} of the step model over `positions` tokens,
    and the state's bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        length = positions if hasattr(model, "stream_max_length") else None
        path, shapes = streaming_tflite(model, os.path.join(tmp, "step.tflite"), max_length=length)
        flatbuffer = open(path, "rb").read()
    it = Interpreter(model_content=flatbuffer, num_threads=threads)
    runner = it.get_signature_runner("serving_default")
    details = runner.get_input_details()
    states = {
        k: np.zeros((1,) + tuple(v["shape"][1:]), v["dtype"])
        for k, v in details.items()
        if k.startswith("state_")
    }
    state_bytes = sum(s.nbytes for k, s in states.items() if k != "state_0" or s.size > 1)
    ids = np.random.default_rng(0).integers(4, V, positions).astype("int32")
    kept = {}
    for t in range(positions):  # the states at each mark, reached token by token
        if t in marks:
            kept[t] = states
        out = runner(token_ids=ids[t : t + 1], **states)
        states = {k.replace("new_", ""): v for k, v in out.items() if k.startswith("new_state_")}
    # then each mark's step timed from its own states, the marks
    # interleaved round by round (the machine's drift hits them alike)
    seconds = {p: [] for p in marks}
    for _ in range(rounds):
        for p in marks:
            feed = dict(kept[p], token_ids=ids[p : p + 1])
            start = time.perf_counter()
            for _ in range(invokes):
                runner(**feed)
            seconds[p].append((time.perf_counter() - start) / invokes)
    around = {p: 1000 * statistics.median(seconds[p]) for p in marks}
    return around, state_bytes


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--positions", type=int, default=4200)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--models", nargs="+", default=None)
    p.add_argument("--quick", action="store_true", help="tiny models, 40 positions: a smoke run")
    args = p.parse_args(argv)
    early, late = (10, 30) if args.quick else (128, 4096)
    if args.quick:
        args.positions = 40
    print(f"{cpu_name()}, {args.threads} threads (XNNPACK), batch 1, {args.positions} positions")
    rows = []
    for name, build in builders(args.positions, args.quick).items():
        if args.models and name not in args.models:
            continue
        model = build()
        layers = len(model.part("blocks") or []) or len(model.part("recurrent") or [])
        around, state_bytes = step_latencies(model, args.positions, args.threads, (early, late))
        row = dict(
            model=name,
            parameters=model.count_params(),
            early_ms=around[early],
            late_ms=around[late],
            ratio=around[late] / around[early],
            state_bytes_per_layer=state_bytes // max(layers, 1),
        )
        rows.append(row)
        print(
            f"  {name:<12}{row['parameters']:>10,} params  position {early}: "
            f"{row['early_ms']:.3f} ms  position {late}: {row['late_ms']:.3f} ms  "
            f"ratio {row['ratio']:.2f}  state {row['state_bytes_per_layer']:,} bytes/layer",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    main()
