"""TFLite (LiteRT) latency of an LSTM sequence: seqkeras against a
hand-made builtin-only export of `keras.layers.LSTM` (issue 6).

Side by side in one process, batch 1, a `--steps`-step sequence of
`--inputs` features through one `--units`-unit LSTM, last state out:

- `keras_lstm`: `keras.layers.LSTM` converted through a hand-written
  batch-1 signature (`TensorSpec((1, steps, inputs))`), the only way its
  loop converts with builtin ops (Keras' own `model.export(format="litert")`
  emits Flex TensorList ops, and a dynamic batch fails to convert);
- `seqkeras`: `seqkeras.layers.Recurrent(LSTMCell)` through
  `seqkeras.export.tflite` (dynamic batch and time, builtin ops only),
  resized to the same shape;
- `fused_lstm`: the same weights lowered to TFLite's fused
  UNIDIRECTIONAL_SEQUENCE_LSTM op (a `tf.function` marked with the
  `api_implements="lstm_..."` attribute the converter fuses, batch fixed
  at 1, as Keras 2 LSTMs converted); the kernel runs the whole sequence;
- `seqkeras_step`: the streaming step model (`streaming_tflite`) called
  once per step from Python: per-token latency, for token-by-token use.

Each interpreter is made once; the timing is the median of `--repeats`
`invoke()` calls (rounds interleaved), for 1 and 2 threads. Both models
carry the same weights and their outputs are compared.

    python benchmarks/tflite_latency.py
    python benchmarks/tflite_latency.py --quick   # a smoke run
"""

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

import seqkeras  # noqa: E402
from seqkeras.export import op_names, tflite  # noqa: E402
from seqkeras.export.streaming import streaming_tflite  # noqa: E402


def keras_flatbuffer(layer, steps, inputs):
    """The hand-made batch-1 builtin-only conversion of a Keras LSTM."""
    fn = tf.function(
        lambda x: layer(x), input_signature=[tf.TensorSpec((1, steps, inputs), tf.float32)]
    )
    # Variables folded into constants first (LiteRT leaves variables read
    # inside a WHILE body uninitialised), as seqkeras' converter does.
    frozen = convert_variables_to_constants_v2(fn.get_concrete_function())
    converter = tf.lite.TFLiteConverter.from_concrete_functions([frozen])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def fused_flatbuffer(kernel, recurrent_kernel, bias, inputs, units, sequences=False):
    """The converter's Keras-LSTM fusion: a function with the attributes
    and argument order of Keras 2's `standard_lstm` (inputs, init_h,
    init_c, kernel, recurrent_kernel, bias -> last, sequence, h, c,
    runtime), batch 1. Its body (the reference LSTM, gates i, f, c, o)
    is replaced by one UNIDIRECTIONAL_SEQUENCE_LSTM op, which returns
    zeros for h and c, so only the outputs are used."""

    @tf.function(
        autograph=False,
        experimental_attributes={
            "api_implements": "lstm_seqkeras_benchmark",
            "api_preferred_device": "CPU",
            "time_major": False,
            "go_backwards": False,
        },
    )
    def lstm(x, init_h, init_c, kernel, recurrent_kernel, bias):
        def step(carry, x_t):
            h, c = carry
            z = x_t @ kernel + h @ recurrent_kernel + bias
            i, f, g, o = tf.split(z, 4, axis=-1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            return tf.sigmoid(o) * tf.tanh(c), c

        hs, cs = tf.scan(step, tf.transpose(x, (1, 0, 2)), (init_h, init_c))
        seq = tf.transpose(hs, (1, 0, 2))
        return seq[:, -1], seq, hs[-1], cs[-1], tf.constant(0.0)

    @tf.function(input_signature=[tf.TensorSpec((1, None, inputs))])
    def serve(x):
        zeros = tf.zeros((1, units))
        return lstm(
            x, zeros, zeros, tf.constant(kernel), tf.constant(recurrent_kernel), tf.constant(bias)
        )[1 if sequences else 0]

    with tempfile.TemporaryDirectory() as tmp:  # the fusion needs this path
        module = tf.Module()
        module.serve = serve
        tf.saved_model.save(
            module, tmp, signatures={"serving_default": serve.get_concrete_function()}
        )
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        return converter.convert()


def interpreter(flatbuffer, shape, threads):
    it = Interpreter(model_content=flatbuffer, num_threads=threads)
    detail = it.get_input_details()[0]
    it.resize_tensor_input(detail["index"], shape)
    it.allocate_tensors()
    return it, detail["index"], it.get_output_details()[0]["index"]


def time_invokes(runs, repeats, rounds=5):
    """`runs`: {name: callable}; median seconds per call, interleaved."""
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            for _ in range(repeats):
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--inputs", type=int, default=128)
    p.add_argument("--units", type=int, default=256)
    p.add_argument("--repeats", type=int, default=40)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument(
        "--sequences", action="store_true", help="return every step's output, not the last"
    )
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.inputs, args.units = 5, 4, 8
        args.repeats, args.threads = 2, [1]
    steps, n_in, units = args.steps, args.inputs, args.units
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, steps, n_in)).astype("float32")

    seq = args.sequences
    peer = keras.layers.LSTM(units, return_sequences=seq)
    peer(x)
    ours = seqkeras.layers.Recurrent(seqkeras.layers.LSTMCell(units), return_sequences=seq)
    ours(x)
    # Same weights: Keras' kernel, recurrent kernel and bias (gates i, f, c,
    # o) in seqkeras' order (the cells document the layout they take).
    ours.cell.set_weights(peer.cell.get_weights())
    inp = keras.Input((None, n_in), name="features")
    model = keras.Model(inp, ours(inp))
    with tempfile.TemporaryDirectory() as tmp:
        theirs_fb = keras_flatbuffer(peer, steps, n_in)
        ours_fb = open(tflite(model, os.path.join(tmp, "m.tflite")), "rb").read()
        # The step model: a forecaster's LSTM encoder, one step per call.
        step_model = seqkeras.models.forecaster(
            steps, 1, features=n_in, backbone="lstm", units=units
        )
        step_model.get_layer("encoder_0").cell.set_weights(peer.cell.get_weights())
        step_fb = open(
            streaming_tflite(step_model, os.path.join(tmp, "step.tflite"))[0], "rb"
        ).read()
    fused_fb = fused_flatbuffer(*peer.cell.get_weights(), n_in, units, seq)
    for name, fb in (
        ("keras_lstm", theirs_fb),
        ("seqkeras", ours_fb),
        ("fused_lstm", fused_fb),
        ("seqkeras_step", step_fb),
    ):
        bad = [op for op in op_names(fb) if not op.isupper()]
        assert not bad, f"{name} has non-builtin ops {bad}"
    print(
        f"batch 1, {steps} steps, {n_in} inputs, {units}-unit LSTM, "
        f"{'every step' if seq else 'the last step'} out; "
        f"LiteRT (ai_edge_litert), {os.cpu_count()} CPU cores"
    )
    print(f"ops keras_lstm: {', '.join(op_names(theirs_fb))}")
    print(f"ops seqkeras:   {', '.join(op_names(ours_fb))}")
    print(f"ops fused_lstm: {', '.join(op_names(fused_fb))}")
    header = (
        f"{'threads':>7}  {'keras_lstm ms':>13}{'seqkeras ms':>12}"
        f"{'ours/keras':>11}{'fused_lstm ms':>14}  "
        f"{'step model ms/token':>20}{'x steps':>9}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for threads in args.threads:
        runs, check = {}, {}
        for name, fb in (
            ("keras_lstm", theirs_fb),
            ("seqkeras", ours_fb),
            ("fused_lstm", fused_fb),
        ):
            it, i, o = interpreter(fb, x.shape, threads)
            it.set_tensor(i, x)

            def run(it=it, i=i, o=o):
                it.invoke()
                return it.get_tensor(o)

            runs[name] = run
            check[name] = run()
        diff = max(
            float(np.max(np.abs(check[k] - check["keras_lstm"])))
            for k in ("seqkeras", "fused_lstm")
        )
        step_it = Interpreter(model_content=step_fb, num_threads=threads)
        runner = step_it.get_signature_runner("serving_default")
        zeros = {
            k: np.zeros((1,) + tuple(v["shape"][1:]), "float32")
            for k, v in runner.get_input_details().items()
            if k.startswith("state_")
        }
        runs["seqkeras_step"] = lambda: runner(series=x[:, 0], **zeros)
        t = time_invokes(runs, args.repeats)
        a, b, f, s = (
            1000 * t[k] for k in ("keras_lstm", "seqkeras", "fused_lstm", "seqkeras_step")
        )
        print(
            f"{threads:>7}  {a:>13.3f}{b:>12.3f}{b / a:>10.2f}x{f:>14.3f}  "
            f"{s:>20.4f}{s * steps:>9.2f}"
        )
        rows.append(
            {
                "threads": threads,
                "keras_ms": a,
                "ours_ms": b,
                "fused_ms": f,
                "step_ms": s,
                "max_abs_diff": diff,
            }
        )
    print(
        f"max |seqkeras or fused_lstm - keras_lstm| on the outputs: "
        f"{max(r['max_abs_diff'] for r in rows):.2e}"
    )
    return rows


if __name__ == "__main__":
    main()
