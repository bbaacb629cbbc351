"""Streaming step models: one input step and the states in, the output and
the new states out, for step-by-step use on device.

A model streams when it implements the streaming contract of
`seqkeras.models.SequenceModel` (`streamable`, `stream_input`,
`stream_output`, `stream_start`, `stream_step`); the builders' classes do:

- `recurrent_language_model`, `transformer_language_model` (learned positions;
  `seqkeras.pretrained.gpt2_language_model`): `token_ids` (batch,) in,
  `logits` (batch, vocab) out: the next token;
- `tagger` (recurrent, one direction): `token_ids` (batch,) in, `logits`
  (batch, tags) out: this token's tag;
- `classifier` (recurrent, one direction): `token_ids` (batch,) in,
  `logits` (batch, classes) of the sequence so far out;
- `forecaster` (recurrent): `series` (batch, features) in, `forecast`
  (batch, horizon, targets) from the series so far out;
- `recurrent_seq2seq` (with or without attention), `conditioned_decoder`:
  `token_ids` (batch,), the decoder's input token, in; `logits` (batch,
  vocab), the next token, out.

States are `state_0`, `state_1`, ... in and `new_state_0`, ... out. They
start at zeros (pooling keeps running sums and counts, and attention pooling
an online softmax, so zeros are a valid start), except for models with a
`conditioning_input` (the decoders): there a second signature, `encode`,
runs the encoder once (`source_ids` or `features` in) and returns the first
states (the decoder states, and with attention the encoder outputs and the
source mask, passed through each step unchanged); feed BOS as the first
token. Each step is a real step: padding is not masked in a step model, so
do not feed it. Bidirectional and Transformer encoder backbones need the
whole sequence and cannot stream; a `transformer_language_model` (GPT-2
included) streams one token per call with each block's key/value cache as
states (state 0: the next token's position), and a `transformer_seq2seq`
decoder likewise after `encode` (states: the position, each block's
self-attention cache over `max_length` positions (an argument), each
block's cross-attention keys and values, the encoder outputs and the
source mask; the axes that follow the source length are dynamic).
"""

import os
import shutil

import keras
import tensorflow as tf
from keras import ops, tree

from seqkeras.export.files import check_target, place_file, temporary_dir
from seqkeras.export.saved_model import tracked_state
from seqkeras.export import standard_ops
from seqkeras.export.signatures import call_model
from seqkeras.export.tflite import convert_builtin, convert_functions, quantize_modes, tflite_runner
from seqkeras.layers import validation


def _check_streamable(model):
    if not isinstance(model, keras.Model) or not getattr(model, "streamable", False):
        raise ValueError(
            "`streaming_tflite` (`step_function`) exports one step of a "
            "model that implements the streaming contract of "
            "`seqkeras.models.SequenceModel`, as the recurrent builders' "
            "models do (recurrent_language_model, tagger, classifier, forecaster, "
            "recurrent_seq2seq, conditioned_decoder). Received: "
            f"{getattr(model, 'name', type(model).__name__)!r} "
            f"({type(model).__name__})"
        )


def _refusal(model, error):
    return ValueError(
        f"`streaming_tflite` (`step_function`) cannot stream `model` {model.name!r}: {error}"
    )


def _spec(x, name, conditioned=True):
    """A TensorSpec for state `x`: batch dynamic, and for a conditioned
    model the source time axis of encoder outputs (rank 3) and source
    masks (bool) too (a language model's states keep their shapes: a
    convolution's window (batch, K - 1, channels) is rank 3)."""
    shape = [None] + list(x.shape[1:])
    if conditioned and (len(shape) == 3 or x.dtype == "bool"):
        shape[1] = None
    return tf.TensorSpec(shape, x.dtype, name=name)


def _conditioning_spec(model):
    key = getattr(model, "conditioning_input", None)
    if key is None:
        return None
    inp = [t for t in model.inputs if t.name == key][0]
    return tf.TensorSpec(inp.shape, inp.dtype, name=key)


def _start(model, inputs, batch_size, max_length):
    """`model.stream_start`, with `max_length` when given (a key/value
    cache's positions; the model is never changed)."""
    if max_length is None:
        return model.stream_start(inputs, batch_size)
    return model.stream_start(inputs, batch_size, max_length=max_length)


def _functions(model, prefill=False, max_length=None):
    """`(encode or None, step, state_shapes)` from the model's streaming
    contract; the states' structure comes from an eager `stream_start` on
    an example of batch 1. With `prefill`, `encode` is instead the
    `prefill` function: `token_ids` (batch, T) and the states in, the last
    token's output and the new states out (`stream_prefill`)."""
    _check_streamable(model)
    cond = _conditioning_spec(model)
    example = None
    if cond is not None:
        example = ops.zeros((1,) + tuple(3 if d is None else d for d in cond.shape[1:]), cond.dtype)
    try:
        init = _start(model, example, 1, max_length)
    except ValueError as error:  # e.g. a bidirectional backbone
        raise _refusal(model, error) from None
    specs = [_spec(x, f"state_{i}", cond is not None) for i, x in enumerate(tree.flatten(init))]
    if cond is not None and cond.shape[1] is None:
        # the axes that follow the source length (encoder outputs, the
        # cross-attention keys and values, the mask) are dynamic: those
        # that differ from a start on a source one token longer
        longer = ops.zeros((1, 4) + tuple(example.shape[2:]), cond.dtype)
        other = tree.flatten(_start(model, longer, 1, max_length))
        specs = [
            tf.TensorSpec(
                [None] + [None if a != b else a for a, b in zip(x.shape[1:], y.shape[1:])],
                x.dtype,
                name=f"state_{i}",
            )
            for i, (x, y) in enumerate(zip(tree.flatten(init), other))
        ]
    name, shape, dtype = model.stream_input
    input_spec = tf.TensorSpec((None,) + tuple(shape), dtype, name=name)
    output = model.stream_output
    inputs = {input_spec.name: input_spec}
    inputs.update({s.name: s for s in specs})

    @tf.function(autograph=False, input_signature=[inputs])
    def serve(inputs):
        states = tree.pack_sequence_as(init, [inputs[s.name] for s in specs])
        y, states = model.stream_step(inputs[input_spec.name], states)
        out = {output: y}
        out.update({f"new_state_{i}": s for i, s in enumerate(tree.flatten(states))})
        return out

    if prefill:
        several = tf.TensorSpec((None, None) + tuple(shape), dtype, name=name)

        @tf.function(
            autograph=False, input_signature=[{several.name: several, **{s.name: s for s in specs}}]
        )
        def prefill(inputs):
            states = tree.pack_sequence_as(init, [inputs[s.name] for s in specs])
            y, states = model.stream_prefill(inputs[several.name], states)
            out = {output: y}
            out.update({f"new_state_{i}": s for i, s in enumerate(tree.flatten(states))})
            return out

        return prefill, serve, [tuple(s.shape[1:]) for s in specs]
    if cond is None:
        return None, serve, [tuple(s.shape[1:]) for s in specs]

    @tf.function(autograph=False, input_signature=[{cond.name: cond}])
    def encode(inputs):
        x = inputs[cond.name]
        states = tree.flatten(_start(model, x, tf.shape(x)[0], max_length))
        return {f"state_{i}": s for i, s in enumerate(states)}

    return encode, serve, [tuple(s.shape[1:]) for s in specs]


def step_function(model):
    """A `tf.function` over named tensors for one step of `model` (see the
    module docstring for the models and names); returns
    `(function, state_shapes)`, the shapes without the batch axis (None:
    the source length). The decoders' `encode` signature comes with
    `streaming_tflite`.

    Examples:
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
    _, serve, shapes = _functions(model)
    return serve, shapes


def prefill_decode_functions(model, max_length=None):
    """`([prefill, decode], state_shapes)`: the `tf.function`s of
    `streaming_tflite(..., prefill=True)`'s two signatures (the signature
    keys are their names) and the states' shapes without the batch axis."""
    prefill_fn, serve, shapes = _functions(model, True, max_length)

    @tf.function(autograph=False, input_signature=serve.input_signature)
    def decode(inputs):  # the signature key is the function's name
        return serve.python_function(inputs)

    return [prefill_fn, decode], shapes


def streaming_tflite(model, path, overwrite=False, quantize=None, max_length=None, prefill=False):
    """Writes the step model as a builtin-ops TFLite file at `path`
    (signature `serving_default`; decoders also `encode`); returns
    `(path, state_shapes)`. `max_length`: a Transformer decoder's cache
    length (an argument of the export: the model is not changed; default
    the model's own).

    `prefill=True` (a model whose step takes several tokens:
    `decoder_language_model`, `llama_language_model`): two signatures,
    `prefill` (`token_ids` (batch, T), a prompt, and the states in; the
    last token's `logits` and the new states out: the whole prompt in
    one pass) and `decode` (one token, as `serving_default`), the
    grouped key/value caches as states over `max_length` positions
    (default: the model's context length).

    Args:
        model: a generative model of `seqkeras.models` with a step model
            (recurrent, Transformer and state-space language models,
            recurrent decoders).
        path: the `.tflite` file to write.
        overwrite: replace an existing file.
        quantize: None, `"dynamic_int8"`, `"float16"`, `"int4"` or
            `"int4_q4_1"` (see `convert_builtin`).
        max_length: a Transformer decoder's cache length (see above).
        prefill: add the `prefill` and `decode` signatures (see above).

    Returns:
        `(path, state_shapes)`: the states' shapes without the batch axis,
        in the signatures' `state_<i>` order.

    Examples:
        >>> import os, tempfile, numpy as np, seqkeras
        >>> from seqkeras.export.streaming import streaming_tflite
        >>> from seqkeras.export.tflite import tflite_runner
        >>> lm = seqkeras.models.decoder_language_model(
        ...     vocab_size=30, hidden_dim=8, num_layers=1, num_heads=2,
        ...     intermediate_dim=16, max_length=8)
        >>> path, shapes = streaming_tflite(
        ...     lm, os.path.join(tempfile.mkdtemp(), "lm.tflite"), prefill=True)
        >>> prefill = tflite_runner(open(path, "rb").read(), "prefill")
        >>> states = {f"state_{i}": np.zeros((1,) + s, "float32") for i, s in enumerate(shapes)}
        >>> out = prefill(token_ids=np.array([[3, 4, 5]], "int32"), **states)
        >>> float(out["new_state_0"][0, 0])  # the next token's position
        3.0
    """
    path = check_target("streaming_tflite", path, overwrite)
    quantize_modes("streaming_tflite", quantize)
    if prefill and not getattr(model, "prefills", False):
        raise ValueError(
            "`streaming_tflite` with `prefill=True` needs a model whose step takes several "
            "tokens at once (decoder_language_model, llama_language_model). Received: "
            f"{getattr(model, 'name', model)!r} ({type(model).__name__})"
        )
    if max_length is not None:
        validation.positive_int("streaming_tflite", "max_length", max_length)
        if not hasattr(model, "stream_max_length"):
            raise ValueError(
                f"`streaming_tflite`: `max_length` sets a Transformer decoder's cache length; "
                f"model {getattr(model, 'name', model)!r} has none"
            )
    tmp = temporary_dir(path)  # beside `path`: the file moves into place in one rename
    try:
        if prefill:  # a loop-free step: the converter folds the weights (less memory)
            functions, shapes = prefill_decode_functions(model, max_length)
            flatbuffer = convert_functions(functions, model.weights, quantize)
        else:
            encode, serve, shapes = _functions(model, max_length=max_length)
            signatures = {}
            if encode is not None:
                signatures["encode"] = encode.get_concrete_function()
            signatures["serving_default"] = serve.get_concrete_function()
            module = tf.Module()
            module.state = tracked_state(model)  # not the model
            standard_ops.save(
                module, os.path.join(tmp, "saved"), signatures, lower_slice_updates=False
            )
            flatbuffer = convert_builtin(
                os.path.join(tmp, "saved"), signature_key=list(signatures), quantize=quantize
            )
        with open(os.path.join(tmp, "model.tflite"), "wb") as f:
            f.write(flatbuffer)
        place_file(os.path.join(tmp, "model.tflite"), path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
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

    row = {k: np.asarray(v)[:1] for k, v in sample.items()}
    embedding = model.part("embedding") if hasattr(model, "part") else None
    pads = getattr(embedding, "mask_zero", True)  # GPT-2: id 0 is a token
    for key in ("token_ids", "target_ids"):
        if key in row and pads:
            ids = row[key][0]
            stop = int(np.argmax(ids == 0)) if (ids == 0).any() else len(ids)
            row[key] = row[key][:, : max(stop, 1)]
    expected = np.asarray(call_model(model, row))
    step = tflite_runner(flatbuffer)
    key = getattr(model, "conditioning_input", None)
    name = model.stream_input[0]
    if key is not None:
        states = tflite_runner(flatbuffer, "encode")(**{key: row[key]})
        inputs = row[model.prompt_input]
    else:
        states = {
            k: np.zeros((1,) + tuple(v["shape"][1:]), v["dtype"])
            for k, v in step.input_details.items()
            if k.startswith("state_")
        }
        inputs = row[model.inputs[0].name]
    output = model.stream_output
    per_step = model.stream_per_step
    diff, seconds = 0.0, []
    for t in range(inputs.shape[1]):
        feed = dict(states, **{name: inputs[:, t]})
        start = time.perf_counter()
        out = step(**feed)
        seconds.append(time.perf_counter() - start)
        states = {k.replace("new_", ""): v for k, v in out.items() if k.startswith("new_state_")}
        if per_step:
            diff = max(diff, float(np.max(np.abs(out[output] - expected[:, t]))))
    if not per_step:
        diff = float(np.max(np.abs(out[output] - expected)))
    return diff, 1000 * float(np.median(seconds)), inputs.shape[1]


def _check_ids(name, ids):
    """`ids` as an array when it is one sequence of at least 2 ids >= 0."""
    import numpy as np

    try:
        array = np.asarray(ids)
    except ValueError:  # ragged
        array = np.asarray(ids, dtype=object)
    if (
        array.ndim != 1
        or len(array) < 2
        or not np.issubdtype(array.dtype, np.integer)
        or array.min() < 0
    ):
        raise ValueError(
            f"`{name}` expects `ids` to be one sequence of at least 2 integer ids >= 0. "
            f"Received: shape {array.shape}, dtype {array.dtype}"
            + (f", min {array.min()}" if array.size and array.dtype.kind in "iu" else "")
        )
    return array


def streaming_nll(flatbuffer, ids):
    """Nats per token of a language model's streaming step model (a
    `streaming_tflite` file) over one sequence, fed one token per
    `invoke` with its states carried from zeros: what a phone that runs
    the file scores.

    Args:
        flatbuffer: the step model's bytes.
        ids: int ids (time,), at least 2.

    Returns:
        The mean negative log-likelihood of `ids[1:]` (float).
    """
    import numpy as np

    from seqkeras.metrics import token_nll

    ids = _check_ids("streaming_nll", ids)
    step = tflite_runner(flatbuffer, name="streaming_nll")
    details = step.input_details.items()
    states = {k: np.zeros((1, *v["shape"][1:]), v["dtype"]) for k, v in details if "state_" in k}
    logits = []
    for t in range(len(ids) - 1):
        out = step(token_ids=ids[t : t + 1].astype("int32"), **states)
        states = {k[4:]: v for k, v in out.items() if k.startswith("new_state_")}
        logits.append(out["logits"][0])
        if t == 0 and ids.max() >= out["logits"].shape[-1]:
            raise ValueError(
                f"`streaming_nll` expects `ids` below the model's vocabulary size "
                f"{out['logits'].shape[-1]}. Received: max id {ids.max()}"
            )
    total, count = token_nll(np.stack(logits), ids[1:])
    return total / count


def streaming_variants(model, directory, sample, ids, variants=("float32", "dynamic_int8")):
    """The streaming step model of a recurrent language model written once
    per variant (`step-<variant>.tflite` in `directory`: float32, or a
    `quantize` mode of `streaming_tflite`) and measured: size, LiteRT
    latency per token and largest difference from Keras
    (`verify_streaming` on `sample`), and nats per token over `ids`
    (`streaming_nll`).

    Args:
        model: a recurrent language model.
        directory: where the files go (made if missing; files replaced).
        sample: `{"token_ids": ids (1, time)}` to compare with Keras.
        ids: int ids (time,) to score.
        variants: "float32", "dynamic_int8", "float16", "int4", "int4_q4_1"
            (int4 needs weights whose rows are whole blocks of 32:
            `quantize_int4`).

    Returns:
        `{variant: {"path", "mb", "ms", "diff", "loss"}}`.
    """
    import numpy as np

    name = "streaming_variants"
    known = ("float32", "dynamic_int8", "float16", "int4", "int4_q4_1")
    if isinstance(variants, str) or not all(v in known for v in variants) or not variants:
        raise ValueError(
            f"`{name}` expects `variants` to be a non-empty list among {known}. "
            f"Received: variants={variants!r}"
        )
    if not isinstance(model, keras.Model) or not getattr(model, "streamable", False):
        raise ValueError(
            f"`{name}` needs a `model` that streams (a recurrent language model: see "
            f"`streaming_tflite`). Received: {getattr(model, 'name', model)!r} "
            f"({type(model).__name__})"
        )
    _check_ids(name, ids)
    stream = model.stream_input[0]
    if not isinstance(sample, dict) or stream not in sample or np.ndim(sample[stream]) != 2:
        raise ValueError(
            f"`{name}` expects `sample` to be a dict with {stream!r}: ids (1, time). Received: "
            + (f"keys {sorted(sample)}" if isinstance(sample, dict) else type(sample).__name__)
        )
    directory = validation.path(name, "directory", directory, "a directory")
    os.makedirs(directory, exist_ok=True)
    found = {}
    for variant in variants:
        path = os.path.join(directory, f"step-{variant}.tflite")
        quantize = None if variant == "float32" else variant
        streaming_tflite(model, path, overwrite=True, quantize=quantize)
        with open(path, "rb") as f:
            flatbuffer = f.read()
        diff, ms, _ = verify_streaming(model, flatbuffer, sample)
        found[variant] = {
            "path": path,
            "mb": len(flatbuffer) / 1e6,
            "ms": ms,
            "diff": diff,
            "loss": streaming_nll(flatbuffer, ids),
        }
    return found
