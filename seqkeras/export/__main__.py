"""Command line: export a saved Keras model and verify the exports.

    python -m seqkeras.export model.keras --name tagger \\
        [--formats savedmodel tflite onnx] [--out saved_models]

Writes `<out>/<name>/<version>/` (SavedModel, TF Serving layout),
`<out>/<name>-tflite/<version>/model.tflite` and
`<out>/<name>-onnx/<version>/model.onnx` (the next free version), checks
each in its runtime against Keras on random inputs of two sequence lengths
(integer inputs get ids in [1, 4), float inputs standard normal values),
and prints the report. Exit status 0 on success, 1 when a check fails, 2
on bad arguments.
"""

import argparse
import os
import sys

import numpy as np

from seqkeras.export.verify import FORMATS, export_and_verify


def sample_inputs(model, lengths=(7, 13), batch=2, seed=0):
    """Random inputs for each of the model's named inputs, one batch per
    sequence length (dimensions the model fixes are kept)."""
    rng = np.random.default_rng(seed)
    samples = []
    for length in lengths:
        sample = {}
        for t in model.inputs:
            shape = [batch] + [length if d is None else d for d in t.shape[1:]]
            if "int" in str(t.dtype):
                sample[t.name] = rng.integers(1, 4, size=shape).astype(str(t.dtype))
            else:
                sample[t.name] = rng.normal(size=shape).astype("float32")
        samples.append(sample)
    return samples


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m seqkeras.export", description=__doc__.splitlines()[0]
    )
    p.add_argument("model", help="a .keras file")
    p.add_argument("--name", required=True, help="the model name in the TF Serving layout")
    p.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    p.add_argument("--out", default="saved_models")
    args = p.parse_args(argv)
    if not os.path.isfile(args.model) or not args.model.endswith(".keras"):
        p.error(f"model: {args.model!r} is not a .keras file")
    if os.path.isfile(args.out):
        p.error(f"--out: {args.out!r} exists and is a file")

    import keras

    import seqkeras  # noqa: F401 (registers the layers)

    model = keras.saving.load_model(args.model)
    try:
        report = export_and_verify(
            model, args.name, sample_inputs(model), args.out, formats=args.formats
        )
    except RuntimeError as e:
        print(f"export failed: {e}", file=sys.stderr)
        return 1
    for key, value in report.items():
        print(f"{key}: {value:.3g}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
