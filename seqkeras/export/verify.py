"""Export a model as SavedModel and TFLite, check both against Keras in
their own runtimes, and report."""

import os
import time

import numpy as np
import tensorflow as tf

from seqkeras.export.saved_model import saved_model
from seqkeras.export.tflite import (convert_builtin, op_names,
                                    run_tflite_signature)


def next_version(base):
    """1 + the largest numeric version directory under `base`."""
    versions = ([int(d) for d in os.listdir(base) if d.isdigit()]
                if os.path.isdir(base) else [])
    return max(versions, default=0) + 1


def _as_dict(model, inputs):
    if isinstance(inputs, dict):
        return inputs
    return {model.inputs[0].name: inputs}


def export_and_verify(model, name, samples, out_dir="saved_models",
                      tolerance=1e-5):
    """Writes `out_dir/<name>/<version>/` (SavedModel, TF Serving layout)
    and `out_dir/<name>-tflite/<version>/model.tflite` (builtin ops only),
    runs both on each sample batch and compares with Keras.

    Args:
        model: a Keras model with named inputs.
        name: the model name in the TF Serving layout.
        samples: list of input batches (arrays or dicts of named arrays),
            e.g. two different sequence lengths.
        tolerance: the largest accepted difference, absolute for outputs
            within [-1, 1] and relative to the largest |output| beyond
            (a trained model's logits reach tens, where 1e-5 absolute is
            below float32 rounding of the two runtimes' different op
            orders).

    Returns:
        A report dict (paths, max abs differences, TFLite size, ops and
        milliseconds per batch in LiteRT). Raises RuntimeError when a check
        fails.
    """
    version = next_version(os.path.join(out_dir, name))
    path = saved_model(model, os.path.join(out_dir, name, str(version)))
    reloaded = tf.saved_model.load(path)
    serve = reloaded.signatures["serving_default"]
    output = model.output_names[0]
    flatbuffer = convert_builtin(path)
    ops = op_names(flatbuffer)
    bad = [op for op in ops if not op.isupper()]
    if bad:
        raise RuntimeError(f"TFLite model has non-builtin ops: {bad}")
    tflite_dir = os.path.join(out_dir, name + "-tflite", str(version))
    os.makedirs(tflite_dir, exist_ok=True)
    tflite_path = os.path.join(tflite_dir, "model.tflite")
    with open(tflite_path, "wb") as f:
        f.write(flatbuffer)
    saved_diff, tflite_diff, scale, seconds = 0.0, 0.0, 1.0, []
    for sample in samples:
        sample = _as_dict(model, sample)
        expected = np.asarray(model(sample if len(sample) > 1 else
                                    next(iter(sample.values()))))
        scale = max(scale, float(np.max(np.abs(expected))))
        got = serve(**{k: tf.constant(v) for k, v in sample.items()})
        saved_diff = max(saved_diff, float(np.max(np.abs(
            got[output].numpy() - expected))))
        start = time.perf_counter()
        lite = run_tflite_signature(flatbuffer, **sample)[output]
        seconds.append(time.perf_counter() - start)
        tflite_diff = max(tflite_diff, float(np.max(np.abs(lite - expected))))
    report = {
        "savedmodel": path,
        "savedmodel_max_abs_diff": saved_diff,
        "tflite": tflite_path,
        "tflite_bytes": len(flatbuffer),
        "tflite_ops": ", ".join(ops),
        "tflite_max_abs_diff": tflite_diff,
        "tflite_ms_per_batch_incl_load": 1000 * float(np.median(seconds)),
        "max_abs_output": scale,
    }
    for key in ("savedmodel_max_abs_diff", "tflite_max_abs_diff"):
        if report[key] > tolerance * scale:
            raise RuntimeError(
                f"export verification failed: {key}={report[key]:.2e} > "
                f"{tolerance} x max(1, max |output|) = {tolerance * scale:.2e}")
    return report
