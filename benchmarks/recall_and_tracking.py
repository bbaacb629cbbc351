"""The synthetic tasks that tell the recurrent families apart: state
tracking (parity, with length generalisation) and associative recall
(Zoology's multi-query associative recall, MQAR).

- `parity`: a sequence of bits; at every position the model outputs the
  parity of the bits so far. Trained on length `--train-length` (40: every
  prefix of 1..40), tested at positions 40..`--test-length` (256) of
  longer sequences. A recurrence whose transition is a positive diagonal
  (minGRU, Mamba, RG-LRU, gated linear attention) cannot flip a sign per
  bit; LSTM and sLSTM (non-linear in their state) can; the delta rule's
  I - beta k k^T has a negative eigenvalue only when beta > 1 (not with
  a sigmoid beta).
- `mqar`: `--pairs` key-value pairs (keys from the first half of a
  `--vocab`-token vocabulary, values from the second), then the keys
  again in a random order at random later positions of a
  `--length`-token sequence (zeros elsewhere); at each query the model
  outputs the key's value. Accuracy over the queries. `--curriculum`
  trains the first third of the steps on a quarter of the pairs and the
  length, the second third on half (Zoology trains on a mixture of
  sizes), the last third on the full task.

Models of about the same width, two residual blocks each over the same
embedding and output layer: `lstm`, `transformer` (`LlamaDecoderBlock`),
`mingru`, `mamba`, `hawk` (`GriffinBlock("recurrent")`), `deltanet`,
`mlstm`, `slstm` (`MixerBlock`), `rwkv7` (`RWKV7Blocks`). Adam, a fresh
batch every step, XLA. Prints one line per model and task and writes
`--out` (JSON).

    python benchmarks/recall_and_tracking.py --task parity --steps 3000
    python benchmarks/recall_and_tracking.py --task mqar --pairs 16 --length 256
    python benchmarks/recall_and_tracking.py --quick      # a smoke run
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from selective_copying import layers  # noqa: E402

L = layers()
MODELS = ("lstm", "transformer", "mingru", "mamba", "hawk", "deltanet", "mlstm", "slstm", "rwkv7")


def parity_batch(rng, size, length):
    """Bits as tokens 1, 2; targets the running parity (0, 1)."""
    bits = rng.integers(0, 2, (size, length))
    return (bits + 1).astype("int32"), (np.cumsum(bits, axis=1) % 2).astype("int32")


def mqar_batch(rng, size, length, pairs, vocab):
    """`(inputs, targets, weights)`: the pairs, then each key once more at
    a random later position; targets the values there (weight 1)."""
    x = np.zeros((size, length), "int32")
    y = np.zeros((size, length), "int32")
    w = np.zeros((size, length), "float32")
    half = vocab // 2
    for row in range(size):
        keys = rng.choice(np.arange(1, half), pairs, replace=False)
        values = rng.integers(half, vocab, pairs)
        x[row, 0 : 2 * pairs : 2], x[row, 1 : 2 * pairs : 2] = keys, values
        where = np.sort(rng.choice(np.arange(2 * pairs, length), pairs, replace=False))
        order = rng.permutation(pairs)
        x[row, where], y[row, where], w[row, where] = keys[order], values[order], 1.0
    return x, y, w


def model(kind, width, vocab, classes, heads=4, state_width=None):
    """Embedding, two residual blocks of `kind`, a norm, logits at every
    position (any length). `state_width`: the recurrent width of minGRU
    (then projected back to `width`) and of Hawk's RG-LRU, to give the
    vector-state families a state as large as the matrix memories'."""
    ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(vocab, width)(ids)
    if kind == "rwkv7":
        x = L.RWKV7Blocks(
            2,
            2 * width,
            head_size=width // heads,
            decay_lora=16,
            aaa_lora=16,
            mv_lora=16,
            gate_lora=16,
        )(x)
    for _ in range(0 if kind == "rwkv7" else 2):
        if kind == "mamba":
            x = L.MambaBlock("mamba", state_size=16, expand=2)(x)
        elif kind == "hawk":
            x = L.GriffinBlock(
                "recurrent", num_heads=heads, intermediate_dim=2 * width, width=state_width
            )(x)
        elif kind == "transformer":
            x = L.LlamaDecoderBlock(heads, 2 * width)(x)
        elif kind == "deltanet":
            x = L.MixerBlock(
                "deltanet",
                intermediate_dim=2 * width,
                num_key_heads=heads,
                key_head_dim=width // heads,
            )(x)
        elif kind in ("mlstm", "slstm"):
            x = L.MixerBlock(kind, intermediate_dim=2 * width, num_heads=heads)(x)
        else:
            units = (state_width or width) if kind == "mingru" else width
            cell = L.MinGRUCell(units) if kind == "mingru" else L.LSTMCell(width)
            h = L.Recurrent(cell, return_sequences=True)(keras.layers.RMSNormalization()(x))
            x = x + (h if units == width else keras.layers.Dense(width)(h))
            x = x + keras.layers.Dense(width)(keras.layers.Dense(2 * width, activation="gelu")(x))
    x = keras.layers.RMSNormalization()(x)
    return keras.Model(ids, keras.layers.Dense(classes, dtype="float32")(x))


def state_floats(net, length):
    """Numbers a decoding step carries per sequence (batch 1), summed over
    the blocks: the recurrent states (matrix memories, vector states,
    convolution windows) or, for attention, the key/value cache of
    `length` positions."""
    total = 0
    for layer in net.layers:
        if hasattr(layer, "init_cache"):
            parts = keras.tree.flatten(layer.init_cache(1, length))
            total += sum(int(np.prod(keras.ops.shape(p))) for p in parts)
        elif hasattr(layer, "cell"):
            total += int(np.sum(layer.cell.state_size))  # an int or one per state
    return total


def run(kind, args):
    rng = np.random.default_rng(0)
    keras.utils.set_random_seed(0)
    vocab, classes = (3, 2) if args.task == "parity" else (args.vocab, args.vocab)
    net = model(kind, args.width, vocab, classes, args.heads, args.state_width)
    net.compile(
        optimizer=keras.optimizers.Adam(args.lr),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    start = time.perf_counter()
    for step in range(args.steps):
        if args.task == "parity":
            x, y = parity_batch(rng, args.batch, args.train_length)
            loss = net.train_on_batch(x, y)
        else:
            pairs, length = args.pairs, args.length
            if args.curriculum and step < 2 * args.steps // 3:
                part = 4 if step < args.steps // 3 else 2
                pairs, length = max(1, pairs // part), max(2 * pairs // part + 1, length // part)
            x, y, w = mqar_batch(rng, args.batch, length, pairs, args.vocab)
            loss = net.train_on_batch(x, y, sample_weight=w)
        if args.verbose and step % 250 == 0:
            print(f"  {kind} step {step} loss {float(loss):.4f}", flush=True)
    seconds = time.perf_counter() - start
    test = np.random.default_rng(1)
    if args.task == "parity":
        x, y = parity_batch(test, args.eval_size, args.test_length)
        predicted = np.asarray(net.predict(x, batch_size=64, verbose=0)).argmax(-1)
        accuracy = float((predicted == y)[:, args.train_length :].mean())
    else:
        x, y, w = mqar_batch(test, args.eval_size, args.length, args.pairs, args.vocab)
        predicted = np.asarray(net.predict(x, batch_size=64, verbose=0)).argmax(-1)
        accuracy = float(((predicted == y) * w).sum() / w.sum())
    row = dict(
        task=args.task,
        model=kind,
        parameters=net.count_params(),
        state=state_floats(net, args.length if args.task == "mqar" else args.test_length),
        steps=args.steps,
        seconds=round(seconds, 1),
        accuracy=accuracy,
    )
    print(
        f"{args.task:<7}{kind:<12}{row['parameters']:>9,} params {row['state']:>8,} state "
        f"{args.steps:>6} steps "
        f"{seconds:>8.1f} s  accuracy {accuracy:.4f}",
        flush=True,
    )
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=["parity", "mqar"], default="parity")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--width", type=int, default=64)
    p.add_argument(
        "--heads", type=int, default=4, help="heads of the matrix memories and attention"
    )
    p.add_argument(
        "--state-width", type=int, default=None, help="minGRU's and Hawk's recurrent width"
    )
    p.add_argument("--train-length", type=int, default=40)
    p.add_argument("--test-length", type=int, default=256)
    p.add_argument("--length", type=int, default=256, help="MQAR's sequence length")
    p.add_argument("--pairs", type=int, default=16)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--eval-size", type=int, default=512)
    p.add_argument(
        "--curriculum", action="store_true", help="MQAR: a quarter, then half the size first"
    )
    p.add_argument("--out", default=None)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--quick", action="store_true", help="tiny sizes, a few steps: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.width, args.train_length, args.test_length, args.length = 8, 6, 10, 16
        args.pairs, args.vocab, args.batch, args.steps, args.eval_size = 3, 16, 4, 2, 4
    print(f"{args.task}: keras {keras.__version__}, backend {keras.backend.backend()}", flush=True)
    rows = []
    for kind in args.models:
        rows.append(run(kind, args))
        if args.out:  # after each model: a run cut short keeps what it did
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
