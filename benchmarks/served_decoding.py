"""Served decoding before and after issue 37: the same trained
`transformer_seq2seq` exported by two versions of seqkeras, timed in
processes without seqkeras (as TF Serving runs a SavedModel).

    # 1. the model (Multi30k's Transformer shape: 3+3 pre-LN blocks, d 256,
    #    8 heads, FFN 1024, vocabularies 3,976 / 3,504), trained a little on
    #    a reversal task so that outputs end at different lengths
    python benchmarks/served_decoding.py model --out /tmp/sd/model.weights.h5
    # 2. each version exports it (PYTHONPATH picks the version)
    PYTHONPATH=/tmp/old python benchmarks/served_decoding.py export \
        --weights /tmp/sd/model.weights.h5 --out /tmp/sd/old/1
    python benchmarks/served_decoding.py export --weights /tmp/sd/model.weights.h5 \
        --out /tmp/sd/new/1
    # 3. both timed in one run, each in its own process without seqkeras
    python benchmarks/served_decoding.py time /tmp/sd/old/1 /tmp/sd/new/1 --names old new

`--family rnn-attention` (on `model` and `export`) does the same for
apps/translate.py's `rnn-attention` preset (a bidirectional GRU encoder
and a GRU decoder with additive attention), which issue 27's exports
served through the generic loop.

`time` runs `generate_beam` (beam 4) and `generate` (greedy) on
source-id batches of 1 and 32 sentences (the same 128 sources for every
export; one thread, as `benchmarks/serving.py`), checks that every export
gives the same ids, and prints sentences/s and new / old.
"""

import argparse
import json
import os
import subprocess
import sys

SHAPE = dict(num_layers=3, num_heads=8, hidden_dim=256, intermediate_dim=1024, norm_first=True)
# apps/translate.py's `rnn-attention` preset: a bidirectional GRU encoder,
# a GRU decoder with additive (Bahdanau) attention
RNN_SHAPE = dict(
    embedding_dim=256,
    units=384,
    cell="gru",
    attention="additive",
    attention_units=256,
    bidirectional=True,
    encoder_units=256,
)
VOCAB = (3976, 3504)
MAX_LENGTH = 64


def build(family="transformer"):
    import seqkeras

    if family == "rnn-attention":
        return seqkeras.models.recurrent_seq2seq(*VOCAB, **RNN_SHAPE)
    return seqkeras.models.transformer_seq2seq(*VOCAB, max_length=MAX_LENGTH, **SHAPE)


def sources(n=128, seed=1):
    from seqkeras.data import copy_task

    return copy_task(n, 4, 24, num_symbols=60, reverse=True, seed=seed)


def make_model(args):
    import keras

    from seqkeras.data import teacher_forcing
    from seqkeras.training import compile_model

    keras.utils.set_random_seed(0)
    model = build(args.family)
    src, tgt = sources(4096, seed=0)
    compile_model(model, learning_rate=1e-3)
    model.fit(
        {"source_ids": src, "target_ids": teacher_forcing(tgt)},
        tgt,
        epochs=args.epochs,
        batch_size=64,
        verbose=2,
    )
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    model.save_weights(args.out)
    print(args.out)


def export(args):
    from seqkeras.export import saved_model
    from seqkeras.export.signatures import generation

    model = build(args.family)
    model.load_weights(args.weights)
    signatures = generation(args.max_length, beam_width=4)
    path = saved_model(model, args.out, signatures, overwrite=True)
    print(path)


_TIMER = r"""
import json, sys, time
sys.modules["seqkeras"] = None
import numpy as np, tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
path, batches, src = sys.argv[1], json.loads(sys.argv[2]), np.load(sys.argv[3])
loaded = tf.saved_model.load(path)
result = {"ids": {}, "speed": {}}
for name in ("generate_beam", "generate"):
    fn = loaded.signatures[name]
    def call(x):
        return fn(source_ids=tf.constant(x))["ids"].numpy()
    chunks = [call(src[i:i + 32]) for i in range(0, len(src), 32)]
    result["ids"][name] = np.concatenate(chunks).tolist()
    for batch in batches:
        call(src[:batch])  # warm-up
        start = time.perf_counter()
        for i in range(0, len(src), batch):
            call(src[i:i + batch])
        result["speed"][f"{name}, batch {batch}"] = len(src) / (time.perf_counter() - start)
print(json.dumps(result))
"""


def time_exports(args):
    import tempfile

    import numpy as np

    names = args.names or [os.path.basename(os.path.dirname(p)) for p in args.paths]
    src, _ = sources()
    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, "src.npy")
        np.save(file, src)
        results = {}
        for name, path in zip(names, args.paths):
            out = subprocess.run(
                [sys.executable, "-c", _TIMER, path, json.dumps(args.batches), file],
                capture_output=True,
                text=True,
                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
            )
            if out.returncode:
                raise SystemExit(out.stderr[-3000:])
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    first = results[names[0]]
    for name in names[1:]:
        for signature, ids in results[name]["ids"].items():
            same = sum(a == b for a, b in zip(ids, first["ids"][signature]))
            print(f"{name} {signature}: {same}/{len(ids)} sources give {names[0]}'s ids")
    for key in first["speed"]:
        row = "  ".join(f"{n} {results[n]['speed'][key]:7.1f}" for n in names)
        ratio = results[names[-1]]["speed"][key] / first["speed"][key]
        print(f"{key:24s} sentences/s: {row}   {names[-1]}/{names[0]} {ratio:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({n: r["speed"] for n, r in results.items()}, f, indent=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("model")
    m.add_argument("--out", required=True)
    m.add_argument("--epochs", type=int, default=2)
    m.add_argument("--family", choices=["transformer", "rnn-attention"], default="transformer")
    e = sub.add_parser("export")
    e.add_argument("--weights", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--max-length", type=int, default=32, help="tokens out, BOS included")
    e.add_argument("--family", choices=["transformer", "rnn-attention"], default="transformer")
    t = sub.add_parser("time")
    t.add_argument("paths", nargs="+")
    t.add_argument("--names", nargs="+")
    t.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    t.add_argument("--json")
    args = p.parse_args(argv)
    {"model": make_model, "export": export, "time": time_exports}[args.command](args)


if __name__ == "__main__":
    main()
