"""SimpleRNN vs GRU vs LSTM on the adding problem; export the best model.

The seed notes' claim: gated cells keep information over long spans where
the vanilla RNN's gradient vanishes. This trains one model per cell on the
built-in adding problem (`seqkeras.data.adding_problem`) with the same
budget, prints a table, exports the best model as a SavedModel (TF Serving
layout) and as a builtin-ops-only TFLite flatbuffer, and verifies both
against Keras.

    python apps/long_range.py                 # T=50, a few minutes on 2 cores
    python apps/long_range.py --steps 100 --epochs 20
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # when loaded by path

import quiet  # noqa: F401  (first: TensorFlow without its start-up lines)

import keras
import numpy as np

import seqkeras
from seqkeras.data import adding_problem
from seqkeras.export import export_and_verify
from seqkeras.training import compile_model

from cli import write_report

L = seqkeras.layers
CELLS = {
    "SimpleRNN": lambda units: L.SimpleRNNCell(units),
    "GRU": lambda units: L.GRUCell(units),
    "LSTM": lambda units: L.LSTMCell(units),
}
TOLERANCE = 0.04  # a prediction within 0.04 of the sum counts as correct


def build(kind, units):
    inp = keras.Input((None, 2), name="sequence")
    h = L.Recurrent(CELLS[kind](units), name=kind.lower())(inp)
    out = keras.layers.Dense(1, name="sum")(h)
    # a SequenceModel: its fit builds the optimizer before the first trace
    return seqkeras.models.SequenceModel(inp, out, name=f"adding_{kind.lower()}")


def train(kind, args, data):
    (x, y), (xv, yv) = data
    keras.utils.set_random_seed(args.seed)
    model = build(kind, args.units)
    # the apps' training conventions: MSE (and MAE) for a regression, clipped gradients, XLA
    compile_model(model, task="regression", learning_rate=args.lr, jit_compile=True)
    model.fit(x[: args.batch], y[: args.batch], verbose=0)  # compile
    start = time.perf_counter()
    model.fit(x, y, batch_size=args.batch, epochs=args.epochs, verbose=0)
    seconds = time.perf_counter() - start
    pred = model.predict(xv, batch_size=512, verbose=0)
    return model, {
        "params": model.count_params(),
        "tokens_per_s": args.epochs * x.shape[0] * x.shape[1] / seconds,
        "val_mse": float(np.mean((pred - yv) ** 2)),
        "val_acc": float(np.mean(np.abs(pred - yv) < TOLERANCE)),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50, help="sequence length T")
    p.add_argument("--train", type=int, default=10000)
    p.add_argument("--val", type=int, default=2000)
    p.add_argument("--units", type=int, default=64)
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    p.add_argument("--out", default="saved_models")
    args = p.parse_args(argv)

    data = (
        adding_problem(args.train, args.steps, seed=args.seed),
        adding_problem(args.val, args.steps, seed=args.seed + 1),
    )
    yv = data[1][1]
    baseline = float(np.mean((yv - data[0][1].mean()) ** 2))
    print(
        f"adding problem, T={args.steps}: {args.train} train / {args.val} "
        f"validation sequences, {args.epochs} epochs, {args.units} units; "
        f"baseline MSE (predict the mean) {baseline:.4f}"
    )
    header = f"{'cell':<10}{'params':>8}{'train tok/s':>13}{'val MSE':>10}{'val acc':>9}"
    print(header)
    print("-" * len(header))
    results = {}
    for kind in args.cells:
        model, r = train(kind, args, data)
        results[kind] = (model, r)
        print(
            f"{kind:<10}{r['params']:>8}{r['tokens_per_s']:>13.0f}"
            f"{r['val_mse']:>10.4f}{r['val_acc']:>8.1%}"
        )
    best = min(results, key=lambda k: results[k][1]["val_mse"])
    print(
        f"best: {best} (validation accuracy = share of predictions within "
        f"{TOLERANCE} of the target)"
    )
    xv = data[1][0]
    samples = [
        np.concatenate([xv[:n]] * reps, axis=1)  # also 2x longer
        for n in (1, 4)
        for reps in (1, 2)
    ]
    report = export_and_verify(results[best][0], "long_range", samples, args.out)
    write_report(report, args.out)
    return results, report


if __name__ == "__main__":
    main()
