"""SavedModel export with named serving signatures (TF Serving layout).

The full export module (raw-string and generate signatures, ONNX, reports,
CLI) is a later issue; this writes the `serving_default` signature with the
model's own input and output names, traced in `export_mode()`, into a
temporary directory that is moved into place only when complete.
"""

import os
import shutil
import tempfile

import tensorflow as tf

from seqkeras.layers.export_mode import export_mode


def serving_function(model):
    """A `tf.function` taking a dict of the model's named inputs (dynamic
    batch and time) and returning a dict of its named outputs."""
    specs = {t.name: tf.TensorSpec(t.shape, t.dtype, name=t.name)
             for t in model.inputs}
    names = list(model.output_names)

    @tf.function(input_signature=[specs])
    def serve(inputs):
        outputs = model(inputs if len(inputs) > 1
                        else next(iter(inputs.values())), training=False)
        outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        return dict(zip(names, outputs))

    return serve


def saved_model(model, path, overwrite=False):
    """Writes `model` as a SavedModel at `path` (e.g.
    `saved_models/<name>/<version>`) with a `serving_default` signature whose
    inputs and outputs carry the model's names (`token_ids` -> `logits`).

    The graph is traced in `seqkeras.layers.export_mode()`. The files go to
    a temporary directory next to `path` first; `path` appears only when
    the write succeeded. An existing `path` raises unless `overwrite`.

    Returns:
        `path`.
    """
    path = os.path.abspath(str(path))
    if os.path.isfile(path):
        raise ValueError(f"`saved_model`: {path} exists and is a file")
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"`saved_model`: {path} exists; pass overwrite=True "
                         "to replace it")
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    try:
        module = tf.Module()
        module.model = model  # tracks the variables
        with export_mode():
            module.serve = serving_function(model)
            concrete = module.serve.get_concrete_function()
        tf.saved_model.save(module, tmp,
                            signatures={"serving_default": concrete})
        if os.path.exists(path):
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path
