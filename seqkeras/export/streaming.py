"""Streaming step models: one input step and the states in, the output and
the new states out, for step-by-step use on device.

| model | one step takes | and returns |
|---|---|---|
| `rnn_language_model` | `token_ids` (batch,) | `logits` (batch, vocab): the next token |
| `tagger` (recurrent, one direction) | `token_ids` (batch,) | `logits` (batch, tags): this token's tag |
| `classifier` (recurrent, one direction) | `token_ids` (batch,) | `logits` (batch, classes) of the sequence so far |
| `forecaster` (recurrent) | `series` (batch, features) | `forecast` (batch, horizon, targets) from the series so far |
| `seq2seq` (recurrent, with or without attention), `conditioned_decoder` | `token_ids` (batch,): the decoder's input token | `logits` (batch, vocab): the next token |

States are `state_0`, `state_1`, ... in and `new_state_0`, ... out. They
start at zeros (pooling keeps running sums and counts, and attention pooling
an online softmax, so zeros are a valid start), except for the decoders:
there a second signature, `encode`, runs the encoder once (`source_ids` or
`features` in) and returns the first states (the decoder states, and with
attention the encoder outputs and the source mask, passed through each
step unchanged); feed BOS as the first token. Each step is a real step:
padding is not masked in a step model, so do not feed it. Bidirectional and
Transformer backbones need the whole sequence and cannot stream.
"""

import os
import shutil
import tempfile

import keras
import tensorflow as tf
from keras import ops, tree

from seqkeras.export.saved_model import check_target
from seqkeras.export.tflite import convert_builtin, tflite_runner
from seqkeras.layers.export_mode import export_mode
from seqkeras.layers.pooling import SequencePooling
from seqkeras.layers.recurrent import Recurrent
from seqkeras.models.generation import decoder_step

DECODERS = {"seq2seq": "source_ids", "conditioned_decoder": "features"}
STREAMABLE = ("rnn_language_model", "tagger", "classifier",
              "forecaster") + tuple(DECODERS)


def _refuse(model, why):
    raise ValueError(f"`streaming_tflite` (`step_function`) cannot stream "
                     f"`model` {model.name!r}: {why}")


def _pooling_step(layer):
    """`(sizes, step(x, states) -> (pooled, states))`: the pooled value of
    the sequence so far, from running states that start at zeros."""
    mode = layer.mode
    d = layer.output.shape[-1]
    if mode == "last":
        return [], lambda x, states: (x, [])
    if mode == "mean":  # running sum, count
        def mean(x, states):
            total, count = states[0] + x, states[1] + 1.0
            return total / count, [total, count]
        return [d, 1], mean
    if mode == "max":  # running max, seen-anything flag
        def maximum(x, states):
            seen = states[1] > 0
            top = ops.where(seen, ops.maximum(states[0], x), x)
            return top, [top, ops.ones_like(states[1])]
        return [d, 1], maximum

    def attention(x, states):  # online softmax: running max score, sum, acc
        # With sum = acc = 0 (the start), the first step gives exactly x
        # whatever the running max holds.
        top, norm, acc = states
        score = ops.matmul(ops.tanh(ops.matmul(x, layer.kernel) + layer.bias),
                           layer.query)[:, None]  # (batch, 1)
        new_top = ops.maximum(top, score)
        old, new = ops.exp(top - new_top), ops.exp(score - new_top)
        norm = norm * old + new
        acc = acc * old + new * x
        return acc / norm, [new_top, norm, acc]
    return [1, 1, d], attention


def _layer_chain(model):
    """The model's layers in order, each a single-input, single-output
    step function plus its state sizes."""
    chain = []
    for layer in model.layers:
        if isinstance(layer, (keras.layers.InputLayer,
                              keras.layers.Dropout)):
            continue  # no step work at inference
        if isinstance(layer, Recurrent):
            if layer.go_backwards:
                _refuse(model, f"layer {layer.name!r} runs backwards")
            sizes = layer._state_sizes

            def run(x, states, layer=layer):
                h, new = layer.cell(x, list(states))
                return h, list(new) if isinstance(new, (list, tuple)) \
                    else [new]
            chain.append((sizes, run))
        elif isinstance(layer, SequencePooling):
            chain.append(_pooling_step(layer))
        elif isinstance(layer, (keras.layers.Embedding, keras.layers.Dense,
                                keras.layers.Activation,
                                keras.layers.Reshape)):
            chain.append(([], lambda x, states, layer=layer: (layer(x), [])))
        else:
            why = ("it needs the whole sequence (a bidirectional or "
                   "Transformer backbone); streaming works on one-direction "
                   "recurrent backbones")
            _refuse(model, f"layer {layer.name!r} ({type(layer).__name__}): "
                    + why)
    return chain


def _spec(x, name):
    """A TensorSpec for state `x`: batch dynamic, and the source time axis
    of encoder outputs (rank 3) and source masks (bool) too."""
    shape = [None] + list(x.shape[1:])
    if len(shape) == 3 or x.dtype == "bool":
        shape[1] = None
    return tf.TensorSpec(shape, x.dtype, name=name)


def _cached_step(model, example):
    """`(start, init, run)` over `decoder_step(model)`: `run(x, flat)` is
    one step on the flattened cache, `init` the cache `start` gives for
    `example` (batch 1)."""
    start, step = decoder_step(model)
    init = start(example, 1, 1)

    def run(x, flat):
        logits, cache = step(x, tree.pack_sequence_as(init, flat), 0)
        return logits, tree.flatten(cache)

    return start, init, run


def _step_signature(input_spec, state_specs, output, run):
    """The step `tf.function`: `input_spec`'s tensor and `state_0`, ... in;
    `output` and `new_state_0`, ... out, from `run(x, states)`."""
    specs = {input_spec.name: input_spec}
    specs.update({s.name: s for s in state_specs})

    @tf.function(input_signature=[specs])
    def serve(inputs):
        y, flat = run(inputs[input_spec.name],
                      [inputs[s.name] for s in state_specs])
        out = {output: y}
        out.update({f"new_state_{i}": s for i, s in enumerate(flat)})
        return out

    return serve


_TOKEN = tf.TensorSpec((None,), tf.int32, name="token_ids")


def _decoder_functions(model):
    """`(encode, step, state_shapes)` for a seq2seq or conditioned decoder."""
    key = DECODERS[model.name]
    inp = [t for t in model.inputs if t.name == key][0]
    example = ops.zeros((1,) + tuple(
        3 if d is None else d for d in inp.shape[1:]), inp.dtype)
    start, init, run = _cached_step(model, example)
    specs = [_spec(x, f"state_{i}") for i, x in enumerate(tree.flatten(init))]

    @tf.function(input_signature=[{key: tf.TensorSpec(
        inp.shape, inp.dtype, name=key)}])
    def encode(inputs):
        states = tree.flatten(start(inputs[key], tf.shape(inputs[key])[0], 1))
        return {f"state_{i}": s for i, s in enumerate(states)}

    serve = _step_signature(_TOKEN, specs, "logits", run)
    return encode, serve, [tuple(s.shape[1:]) for s in specs]


def step_function(model):
    """A `tf.function` over named tensors for one step of `model` (see the
    module docstring for the models and names); returns
    `(function, state_shapes)`, the shapes without the batch axis (None:
    the source length). The decoders' `encode` signature comes with
    `streaming_tflite`.

    Example:

    >>> import numpy as np, seqkeras
    >>> from seqkeras.export.streaming import step_function
    >>> model = seqkeras.models.tagger(20, 3, units=4, embedding_dim=4,
    ...                                bidirectional=False)
    >>> step, shapes = step_function(model)
    >>> out = step({"token_ids": np.array([5], "int32"),
    ...             "state_0": np.zeros((1, 4), "float32"),
    ...             "state_1": np.zeros((1, 4), "float32")})
    >>> shapes, tuple(out["logits"].shape), sorted(out)
    ([(4,), (4,)], (1, 3), ['logits', 'new_state_0', 'new_state_1'])
    """
    if model.name not in STREAMABLE:
        raise ValueError(
            f"`step_function` exports one step of a {', '.join(STREAMABLE)}"
            f" model. Received: {model.name!r}")
    if model.name in DECODERS:
        _, serve, shapes = _decoder_functions(model)
        return serve, shapes
    if model.name == "rnn_language_model":
        _, init, run = _cached_step(model, None)
        state_specs = [_spec(x, f"state_{i}")
                       for i, x in enumerate(tree.flatten(init))]
        input_spec = _TOKEN
    else:
        chain = _layer_chain(model)
        dtype = keras.backend.standardize_dtype(model.compute_dtype)
        state_specs = [tf.TensorSpec((None, size), dtype, name=f"state_{i}")
                       for i, size in enumerate(
                           s for sizes, _ in chain for s in sizes)]

        def run(x, flat):
            new, i = [], 0
            for sizes, fn in chain:
                x, states = fn(x, flat[i:i + len(sizes)])
                new += states
                i += len(sizes)
            return x, new
        inp = model.inputs[0]
        input_spec = tf.TensorSpec((None,) + tuple(inp.shape[2:]), inp.dtype,
                                   name=inp.name)
    serve = _step_signature(input_spec, state_specs, model.output_names[0],
                            run)
    return serve, [tuple(s.shape[1:]) for s in state_specs]


def streaming_tflite(model, path, overwrite=False, quantize=None):
    """Writes the step model as a builtin-ops TFLite file at `path`
    (signature `serving_default`; decoders also `encode`); returns
    `(path, state_shapes)`."""
    path = check_target("streaming_tflite", path, overwrite)
    with export_mode("tflite"):
        if model.name in DECODERS:
            encode, serve, shapes = _decoder_functions(model)
            signatures = {"encode": encode.get_concrete_function()}
        else:
            serve, shapes = step_function(model)
            signatures = {}
        signatures["serving_default"] = serve.get_concrete_function()
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as tmp:
        module = tf.Module()
        module.model = model
        with export_mode("tflite"):  # saving traces the model's functions
            tf.saved_model.save(module, os.path.join(tmp, "saved"),
                                signatures=signatures)
        flatbuffer = convert_builtin(os.path.join(tmp, "saved"),
                                     signature_key=list(signatures),
                                     quantize=quantize)
        with open(os.path.join(tmp, "model.tflite"), "wb") as f:
            f.write(flatbuffer)
        shutil.move(os.path.join(tmp, "model.tflite"), path)
    return path, shapes


def verify_streaming(model, flatbuffer, sample):
    """Runs the step model in LiteRT over the first row of `sample` (a dict
    of the model's named inputs; token rows are cut at their first PAD) and
    compares with the full Keras pass: every step's output for the models
    with an output per step, the last one for classifiers and forecasters.

    Returns:
        `(max_abs_diff, ms_per_step, steps)`; the time is the median
        `invoke` of a signature runner kept across steps (LiteRT, batch 1).
    """
    import time

    import numpy as np

    from seqkeras.export.saved_model import call_model

    row = {k: np.asarray(v)[:1] for k, v in sample.items()}
    for key in ("token_ids", "target_ids"):
        if key in row:
            ids = row[key][0]
            stop = int(np.argmax(ids == 0)) if (ids == 0).any() else len(ids)
            row[key] = row[key][:, :max(stop, 1)]
    expected = np.asarray(call_model(model, row))
    step = tflite_runner(flatbuffer)
    if model.name in DECODERS:
        key = DECODERS[model.name]
        states = tflite_runner(flatbuffer, "encode")(**{key: row[key]})
        name, inputs = "token_ids", row["target_ids"]
    else:
        states = {k: np.zeros((1,) + tuple(v["shape"][1:]), v["dtype"])
                  for k, v in step.input_details.items()
                  if k.startswith("state_")}
        name = model.inputs[0].name
        inputs = row[name]
    output = model.output_names[0]
    per_step = expected.ndim == 3 and model.name not in ("forecaster",)
    diff, seconds = 0.0, []
    for t in range(inputs.shape[1]):
        feed = dict(states, **{name: inputs[:, t]})
        start = time.perf_counter()
        out = step(**feed)
        seconds.append(time.perf_counter() - start)
        states = {k.replace("new_", ""): v for k, v in out.items()
                  if k.startswith("new_state_")}
        if per_step:
            diff = max(diff, float(np.max(np.abs(out[output]
                                                 - expected[:, t]))))
    if not per_step:
        diff = float(np.max(np.abs(out[output] - expected)))
    return diff, 1000 * float(np.median(seconds)), inputs.shape[1]
