"""Did a refactor change what the apps export? Dump every SavedModel under
a directory (its signatures, their input and output specs, and their
outputs on fixed inputs), then compare two dumps.

    python benchmarks/compare_exports.py dump EXPORTS_DIR OUT_DIR
    python benchmarks/compare_exports.py compare BEFORE_DIR AFTER_DIR

`dump` loads each SavedModel in this process with seqkeras unimportable
(as a model server would), and feeds each signature fixed inputs: two
sentences for a string input, ids 4..8 for an integer input, a sine wave
for a float input (batch 2, 5 steps for unknown dimensions). `compare`
prints, per SavedModel, whether the signature lists and specs are
identical and the largest output difference (0 means bit-identical).
Used for issue 25 (docs/benchmarks/history.md): the exports of every app's `--tiny`
run before and after the export/app redesign.
"""

import json
import os
import sys

import numpy as np

TEXTS = ["Ein Hund rennt im Schnee .", "ROMEO: the film is good ."]


def _feed(spec, tf):
    shape = [d if d is not None else (2 if i == 0 else 5) for i, d in enumerate(spec.shape)]
    n = int(np.prod(shape))
    if spec.dtype == tf.string:
        return tf.constant(TEXTS)
    if spec.dtype.is_integer:
        return tf.constant((np.arange(n).reshape(shape) % 5 + 4).astype(spec.dtype.as_numpy_dtype))
    wave = 100 + 10 * np.sin(np.arange(n)).reshape(shape)
    return tf.constant(wave.astype(spec.dtype.as_numpy_dtype))


def dump(root, out):
    sys.modules["seqkeras"] = None  # what a model server has
    import tensorflow as tf

    try:
        import tensorflow_text  # noqa: F401 (registers the TF Text ops)
    except ImportError:
        pass
    os.makedirs(out, exist_ok=True)
    summary = {}
    for directory, _, files in sorted(os.walk(root)):
        if "saved_model.pb" not in files:
            continue
        name = os.path.relpath(directory, root)
        loaded = tf.saved_model.load(directory)
        entry, arrays = {}, {}
        for key in sorted(loaded.signatures):
            fn = loaded.signatures[key]
            specs = fn.structured_input_signature[1]
            entry[key] = {
                "in": {k: [v.dtype.name, str(v.shape)] for k, v in sorted(specs.items())},
                "out": {
                    k: [v.dtype.name, str(v.shape)]
                    for k, v in sorted(fn.structured_outputs.items())
                },
            }
            try:
                outputs = fn(**{k: _feed(v, tf) for k, v in specs.items()})
                arrays.update({f"{key}/{k}": v.numpy() for k, v in outputs.items()})
            except Exception as error:  # recorded: a refusal must stay a refusal
                entry[key]["error"] = str(error).splitlines()[0][:200]
        summary[name] = entry
        np.savez(os.path.join(out, name.replace(os.sep, "_") + ".npz"), **arrays)
    with open(os.path.join(out, "signatures.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    print(f"dumped {len(summary)} SavedModels to {out}")


def compare(before, after):
    with open(os.path.join(before, "signatures.json")) as f:
        a = json.load(f)
    with open(os.path.join(after, "signatures.json")) as f:
        b = json.load(f)
    worst, same_all = 0.0, sorted(a) == sorted(b)
    for name in sorted(a):
        same = a[name] == b.get(name)
        same_all &= same
        print(f"{name:<40} signatures {'identical' if same else 'DIFFER'}: {sorted(a[name])}")
        file = name.replace(os.sep, "_") + ".npz"
        x_all = np.load(os.path.join(before, file), allow_pickle=True)
        y_all = np.load(os.path.join(after, file), allow_pickle=True)
        same_all &= sorted(x_all.files) == sorted(y_all.files)
        for key in x_all.files:
            x, y = x_all[key], y_all[key]
            if x.dtype.kind in "OSU" or x.shape != y.shape:
                diff = 0.0 if np.array_equal(x, y) else float("inf")
            else:
                diff = float(np.max(np.abs(x.astype("float64") - y.astype("float64")), initial=0))
            worst = max(worst, diff)
            if diff:
                print(f"    {key}: max |difference| {diff:.3g}")
    print(
        f"SavedModels {len(a)}; signatures identical: {same_all}; largest output difference: "
        f"{worst}"
    )
    return same_all and worst == 0.0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] not in ("dump", "compare"):
        raise SystemExit(__doc__)
    if argv[0] == "dump":
        return dump(argv[1], argv[2])
    return compare(argv[1], argv[2])


if __name__ == "__main__":
    main()
