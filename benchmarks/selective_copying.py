"""Selective copying (Gu & Dao 2023, "Mamba", Table 1), scaled down: the
task that separates recurrences whose gates read the input (selective)
from time-invariant ones.

Each example is `--length` positions of a blank token with `--tokens`
data tokens (16 symbols) at random positions, then as many marker
tokens; at the i-th marker the model must output the i-th data token.
Models of about the same size, two residual blocks each over the same
embedding and output layer:

- `mamba` (`MambaBlock`), `mingru` (RMSNorm, `Recurrent(MinGRUCell)`),
  `hawk` (`GriffinBlock("recurrent")`), `lstm` (RMSNorm,
  `Recurrent(LSTMCell)`), `transformer` (`LlamaDecoderBlock`: causal
  attention with rotary positions);
- `lti`: the non-selective baseline, a diagonal linear time-invariant
  recurrence (`h_t = a * h_{t-1} + (1 - a) * x_t W`, `a` learned per
  channel but the same at every step: S4D-like, real).

Adam (1e-3), batch `--batch`, a fresh batch every step, XLA; the token
accuracy at the markers on 2,048 fresh examples. Prints one line per
model and writes `--out` (JSON).

    python benchmarks/selective_copying.py --steps 4000              # CPU: long
    KERAS_BACKEND=jax python benchmarks/selective_copying.py ...      # a GPU with JAX
    python benchmarks/selective_copying.py --quick                    # a smoke run

Only `seqkeras.layers` is needed (keras.ops only): on a machine without
TensorFlow (a GPU box with JAX) the layers are imported alone.
"""

import argparse
import json
import os
import sys
import time
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

BLANK, MARKER, FIRST = 1, 2, 3  # data tokens FIRST .. FIRST + 15
SYMBOLS = 16


def layers():
    """`seqkeras.layers`, without TensorFlow when it is absent (the layers
    use keras.ops only; the package's other namespaces need TensorFlow)."""
    try:
        import tensorflow  # noqa: F401

        import seqkeras.layers as L
    except ImportError:
        package = types.ModuleType("seqkeras")
        package.__path__ = [os.path.join(ROOT, "seqkeras")]
        sys.modules["seqkeras"] = package
        import seqkeras.layers as L
    return L


L = layers()


class LTICell(L.LinearRecurrentCell):
    """The non-selective baseline: `h_t = a h_{t-1} + (1 - a) x_t W`, `a =
    sigmoid(decay)` one number per channel, the same at every step."""

    projections = 1

    def build(self, input_shape):
        super().build(input_shape)
        self.decay = self.add_weight(
            shape=(self.units,),
            initializer=keras.initializers.RandomUniform(0.0, 4.0),
            name="decay",
        )

    def coefficients(self, projected):
        a = ops.sigmoid(ops.cast(self.decay, "float32")) + ops.zeros_like(projected)
        return a, (1.0 - a) * projected


def batch(rng, size, length, tokens):
    """`(inputs (size, length + tokens), targets (size, tokens))`."""
    x = np.full((size, length + tokens), BLANK, "int32")
    data = rng.integers(FIRST, FIRST + SYMBOLS, (size, tokens)).astype("int32")
    for row in range(size):
        where = np.sort(rng.choice(length, tokens, replace=False))
        x[row, where] = data[row]
    x[:, length:] = MARKER
    return x, data


def model(kind, width, tokens, length):
    """Embedding, two residual blocks of `kind`, RMSNorm, logits of the
    last `tokens` positions."""
    ids = keras.Input((length + tokens,), dtype="int32")
    x = keras.layers.Embedding(FIRST + SYMBOLS, width)(ids)
    for _ in range(2):
        if kind == "mamba":
            x = L.MambaBlock("mamba", state_size=16, expand=2)(x)
        elif kind == "hawk":
            x = L.GriffinBlock("recurrent", num_heads=4, intermediate_dim=2 * width)(x)
        elif kind == "transformer":
            x = L.LlamaDecoderBlock(4, 2 * width)(x)
        else:
            cell = {
                "mingru": lambda: L.MinGRUCell(width),
                "lstm": lambda: L.LSTMCell(width),
                "lti": lambda: LTICell(width),
            }[kind]()
            h = keras.layers.RMSNormalization()(x)
            x = x + L.Recurrent(cell, return_sequences=True)(h)
            x = x + keras.layers.Dense(width)(keras.layers.Dense(2 * width, activation="gelu")(x))
    x = keras.layers.RMSNormalization()(x[:, -tokens:])
    return keras.Model(ids, keras.layers.Dense(FIRST + SYMBOLS, dtype="float32")(x))


WIDTHS = {"mamba": 64, "mingru": 96, "hawk": 64, "lstm": 64, "transformer": 64, "lti": 96}


def run(kind, args):
    rng = np.random.default_rng(0)
    keras.utils.set_random_seed(0)
    net = model(kind, WIDTHS[kind] if not args.quick else 8, args.tokens, args.length)
    net.compile(
        optimizer=keras.optimizers.Adam(args.lr),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    start = time.perf_counter()
    for step in range(args.steps):
        loss = net.train_on_batch(*batch(rng, args.batch, args.length, args.tokens))
        if args.verbose and step % 500 == 0:
            print(f"  {kind} step {step} loss {float(loss):.4f}", flush=True)
    seconds = time.perf_counter() - start
    x, y = batch(np.random.default_rng(1), 2048 if not args.quick else 8, args.length, args.tokens)
    predicted = np.asarray(net.predict(x, batch_size=256, verbose=0)).argmax(-1)
    accuracy = float((predicted == y).mean())
    row = dict(
        model=kind,
        parameters=net.count_params(),
        steps=args.steps,
        seconds=round(seconds, 1),
        accuracy=accuracy,
    )
    print(
        f"{kind:<12}{row['parameters']:>9,} params {args.steps:>6} steps "
        f"{seconds:>8.1f} s  token accuracy {accuracy:.4f}",
        flush=True,
    )
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(WIDTHS), choices=list(WIDTHS))
    p.add_argument("--length", type=int, default=256)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--out", default=None)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--quick", action="store_true", help="tiny sizes, a few steps: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.length, args.tokens, args.batch, args.steps = 12, 3, 4, 2
    print(
        f"selective copying: length {args.length}, {args.tokens} data tokens; keras "
        f"{keras.__version__}, backend {keras.backend.backend()}",
        flush=True,
    )
    rows = []
    for kind in args.models:
        rows.append(run(kind, args))
        if args.out:  # after each model: a run cut short keeps what it did
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
