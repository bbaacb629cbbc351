"""The SavedModel writer: `saved_model(model, path, signatures=[...])`.

The signatures are objects from `seqkeras.export.signatures` (`Forward`,
`Generate`, `GenerateBeam`, `GenerateText`, `ServeText`, `Tag`,
`Translate`); `serving_default` (`Forward`) is always written. The
decoding signatures get the target's decoding runtime as an argument
(`seqkeras.export.loops.runtime_for`); for TF Serving the loops' slice
updates are rewritten into standard ops after saving
(`seqkeras.export.standard_ops`). The files go to a
temporary directory that is moved into place only when complete
(`seqkeras.export.files`).
"""

import shutil

import tensorflow as tf

from seqkeras.export import files
from seqkeras.export import request_checks as requests
from seqkeras.export.refusals import refuse_stateful, refuse_unbuilt
from seqkeras.layers import validation
from seqkeras.export.signatures import Forward, Signature
from seqkeras.export import standard_ops


def _signature_objects(signatures):
    signatures = list(signatures or [])
    for signature in signatures:
        if not isinstance(signature, Signature):
            raise TypeError(
                "`saved_model` expects `signatures` to be a list of "
                "`seqkeras.export.signatures` objects (e.g. `Forward()`, "
                "`Generate(max_length=20)`, `ServeText(tokenizer=...)`). "
                f"Received an item of type {type(signature).__name__}: "
                f"{signature!r}"
            )
    if not any("serving_default" in s.names for s in signatures):
        signatures.insert(0, Forward())
    return signatures


def saved_model(
    model,
    path,
    signatures=None,
    overwrite=False,
    target="serving",
    jit_compile=False,
    max_batch_size=None,
):
    """Writes `model` as a SavedModel at `path` (e.g.
    `saved_models/<name>/<version>`) with a `serving_default` signature
    whose inputs and outputs carry the model's names (`token_ids` ->
    `logits`) and the given `signatures`.

    Args:
        model: a Keras model (its stateful layers are refused: served, they
            would carry states from one request to the next).
        path: the version directory to write.
        signatures: a list of `seqkeras.export.signatures` objects, e.g.
            `signatures.generation(max_length=20)` (generate,
            generate_beam), `ServeText(tokenizer=tok)`,
            `Translate(src, tgt, max_length=64)`, `Tag(features, tags)`.
            `Forward()` (`serving_default`) is added when absent.
        overwrite: replace an existing `path`.
        target: `"serving"` (the default: standard TensorFlow ops only,
            which the TF Serving binary runs; no XLA-only op such as
            `XlaDynamicUpdateSlice`; token-id asserts in the graph) or
            `"tflite"` (a graph for the TFLite converter, whose loop-buffer
            writes become the fast DYNAMIC_UPDATE_SLICE builtin; Python
            TensorFlow runs it, TF Serving does not).
        jit_compile: decoding loops become one XLA cluster each.
        max_batch_size: None, or the most rows a request may have: every
            signature then refuses a larger batch (InvalidArgument naming
            the signature and the input), e.g. the `max_batch_size` of TF
            Serving's batching parameters. Needs `target="serving"`.

    Every `"serving"` signature refuses, with InvalidArgument naming the
    signature and the input, what the model cannot compute: token ids
    outside its vocabulary, inputs longer than its positions, empty texts
    (`seqkeras.export.request_checks`).

    Decoding signatures run `generate` with the target's runtime (TF
    Serving: growing caches, a loop whose state may change shape). For
    `"serving"` the slice updates with which full-sequence loops write
    their outputs (XLA-only `XlaDynamicUpdateSlice` on TensorFlow) are
    rewritten into standard ops once saved, outside XLA clusters
    (`seqkeras.export.standard_ops`). The files
    go to a temporary directory next to `path` first; `path` appears only
    when the write succeeded. An existing `path` raises unless `overwrite`;
    with `overwrite` the previous version is renamed aside, the new one
    moved in, and only then the previous one deleted.

    Returns:
        `path`.
    """
    if target not in ("serving", "tflite"):
        raise ValueError(
            "`saved_model` received an invalid value for `target`: expected "
            f"one of ('serving', 'tflite'). Received: target={target!r}"
        )
    if not isinstance(jit_compile, bool):
        raise ValueError(
            "`saved_model` received an invalid value for `jit_compile`: expected True or False. "
            f"Received: jit_compile={jit_compile!r}"
        )
    if max_batch_size is not None:
        validation.positive_int("saved_model", "max_batch_size", max_batch_size)
        if target != "serving":
            raise ValueError(
                "`saved_model`: `max_batch_size` is checked in the served graph, which a "
                f"TFLite-bound graph cannot hold (no Assert op); use target='serving'. "
                f"Received: target={target!r}, max_batch_size={max_batch_size!r}"
            )
    signatures = _signature_objects(signatures)
    refuse_unbuilt("saved_model", model)
    refuse_stateful("saved_model", model)
    path = files.check_target("saved_model", path, overwrite, want="dir")
    tmp = files.temporary_dir(path)
    try:
        module = tf.Module()
        module.state = tracked_state(model)
        check = target == "serving"  # TFLite has no Assert op
        functions, resources = {}, []
        for signature in signatures:
            built = signature(model, check=check, jit_compile=jit_compile, target=target)
            repeated = sorted(set(built) & set(functions))
            if repeated:
                raise ValueError(
                    f"`saved_model`: two signatures are named "
                    f"{repeated}; give each signature once. Received: "
                    f"{signatures}"
                )
            resources += built.resources
            if max_batch_size is not None:
                built = {
                    name: requests.bounded_batch(name, fn, max_batch_size)
                    for name, fn in built.items()
                }
            functions.update(built)
        # the functions reach the SavedModel as its signatures only
        # (attached to `module`, saving traced each a second time)
        module.resources = resources  # lookup tables, tokenizers
        concrete = {name: fn.get_concrete_function() for name, fn in functions.items()}
        standard_ops.save(module, tmp, concrete, lower_slice_updates=target == "serving")
        files.replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def tracked_state(model):
    """What a SavedModel of `model`'s functions must hold: its variables
    and its other TensorFlow resources (the lookup tables of text layers
    such as `keras.layers.TextVectorization`), found by TensorFlow's
    checkpoint traversal. Saved instead of the model itself: saving a
    Keras model traverses its layers and traces its own default
    signature, which no served signature needs (with the signature
    functions attached too, an export took 2.2x as long)."""
    resources = [
        obj
        for obj in tf.train.TrackableView(model).descendants()
        if isinstance(obj, tf.saved_model.experimental.TrackableResource)
    ]
    return list(model.variables) + resources


#: TF Serving's defaults for a 2-core CPU server of a decoding signature:
#: requests wait at most 5 ms to be batched up to 32 sentences, one batch
#: runs at a time (its ops use both cores), and a batch is padded up to the
#: next allowed size (the signature's input is a (batch,) string vector,
#: so no length padding is needed)
BATCHING_DEFAULTS = dict(
    max_batch_size=32,
    batch_timeout_micros=5000,
    max_enqueued_batches=64,
    num_batch_threads=1,
    allowed_batch_sizes=(1, 2, 4, 8, 16, 32),
)


def batching_parameters(path, **options):
    """Writes TF Serving's `--batching_parameters_file` (a text
    `BatchingParameters` proto) to `path` and returns its text: the server
    started with `--enable_batching --batching_parameters_file=PATH`
    merges concurrent requests into batches of the allowed sizes.

    Args:
        path: the file to write.
        **options: `max_batch_size`, `batch_timeout_micros`,
            `max_enqueued_batches`, `num_batch_threads`,
            `allowed_batch_sizes` (increasing, the last equal to
            `max_batch_size`); defaults `BATCHING_DEFAULTS`.

    Examples:
        >>> import tempfile, os
        >>> from seqkeras.export import batching_parameters
        >>> text = batching_parameters(os.path.join(tempfile.mkdtemp(), "b.txt"))
        >>> text.splitlines()[0]
        'max_batch_size { value: 32 }'
    """
    path = validation.path("batching_parameters", "path", path, "a file path")
    unknown = sorted(set(options) - set(BATCHING_DEFAULTS))
    if unknown:
        raise ValueError(
            f"`batching_parameters` received unknown `options` {unknown}: it takes "
            f"{sorted(BATCHING_DEFAULTS)}"
        )
    given = {**BATCHING_DEFAULTS, **options}
    allowed = given.pop("allowed_batch_sizes")
    allowed = validation.int_list("batching_parameters", "allowed_batch_sizes", allowed)
    for name, value in given.items():
        validation.positive_int("batching_parameters", name, value)
    if allowed != sorted(set(allowed)) or allowed[-1] != given["max_batch_size"]:
        raise ValueError(
            "`batching_parameters` expects `allowed_batch_sizes` increasing and ending at "
            f"max_batch_size={given['max_batch_size']}. Received: {allowed}"
        )
    lines = [f"{name} {{ value: {value} }}" for name, value in given.items()]
    lines += [f"allowed_batch_sizes: {b}" for b in allowed]
    text = "\n".join(lines) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return text


__all__ = ["BATCHING_DEFAULTS", "batching_parameters", "saved_model"]
