"""Streaming step models: one token and the recurrent states in, the
logits and the new states out, for token-by-token use on device."""

import os
import shutil
import tempfile

import tensorflow as tf
from keras import tree

from seqkeras.export.saved_model import check_target
from seqkeras.export.tflite import convert_builtin
from seqkeras.models.generation import decoder_step


def step_function(model):
    """A `tf.function` over named tensors: `token_ids` (batch,) and
    `state_0`, `state_1`, ... (batch, size) -> `logits` (batch, vocab) and
    `new_state_0`, ...; for `rnn_language_model` models."""
    if model.name != "rnn_language_model":
        raise ValueError(
            "`step_function` exports the step of an `rnn_language_model`. "
            f"Received: {model.name!r}")
    start, step = decoder_step(model)
    init = start(None, 1, 1)
    flat = tree.flatten(init)
    specs = {"token_ids": tf.TensorSpec((None,), tf.int32, name="token_ids")}
    specs.update({f"state_{i}": tf.TensorSpec((None, s.shape[-1]),
                                              s.dtype, name=f"state_{i}")
                  for i, s in enumerate(flat)})

    @tf.function(input_signature=[specs])
    def serve(inputs):
        cache = tree.pack_sequence_as(
            init, [inputs[f"state_{i}"] for i in range(len(flat))])
        logits, cache = step(inputs["token_ids"], cache, 0)
        out = {"logits": logits}
        out.update({f"new_state_{i}": s
                    for i, s in enumerate(tree.flatten(cache))})
        return out

    return serve, [tuple(s.shape[1:]) for s in flat]


def streaming_tflite(model, path, overwrite=False):
    """Writes the step model as a builtin-ops TFLite file at `path`
    (signature `serving_default`); returns `(path, state_shapes)`."""
    path = check_target("streaming_tflite", path, overwrite)
    serve, shapes = step_function(model)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as tmp:
        module = tf.Module()
        module.model = model
        tf.saved_model.save(module, os.path.join(tmp, "saved"),
                            signatures={"serving_default":
                                        serve.get_concrete_function()})
        flatbuffer = convert_builtin(os.path.join(tmp, "saved"))
        with open(os.path.join(tmp, "model.tflite"), "wb") as f:
            f.write(flatbuffer)
        shutil.move(os.path.join(tmp, "model.tflite"), path)
    return path, shapes
