"""Export a model as SavedModel and TFLite, check both against Keras in
their own runtimes, and report."""

import os
import tempfile
import time

import numpy as np
import tensorflow as tf

from seqkeras.export.onnx import onnx, onnx_runner
from seqkeras.export import signatures as S
from seqkeras.export.files import next_version
from seqkeras.export.saved_model import saved_model
from seqkeras.export.signatures import call_model
from seqkeras.export.streaming import streaming_tflite, verify_streaming
from seqkeras.export.tflite import QUANTIZATIONS, convert_builtin, op_names, run_tflite_signature
from seqkeras.export.tflite import tflite_runner
from seqkeras.export.refusals import refuse_unbuilt
from seqkeras.layers import validation

FORMATS = ("savedmodel", "tflite", "onnx")


def _signatures(model, generate, vocabulary):
    """The signatures `export_and_verify` writes beside `serving_default`:
    `serve_text` (with `vocabulary`, for a model over `token_ids`), the
    generate signatures (with `generate` options; `generate_text` too with
    `vocabulary`)."""
    found = []
    if vocabulary is not None and S.TEXT_INPUT in [t.name for t in model.inputs]:
        found.append(S.ServeText(vocabulary=vocabulary))
    if generate is not None:
        text = vocabulary if S.GenerateText.applies(model) else None
        found += S.generation(vocabulary=text, **generate)
    return found


def _as_dict(model, inputs):
    if isinstance(inputs, dict):
        return inputs
    return {model.inputs[0].name: inputs}


def _check_generate(model, reloaded, samples, options, vocabulary, texts):
    from seqkeras.data.tokens import EOS
    from seqkeras.models.generation import generate

    key = getattr(model, "conditioning_input", None) or "prompt_ids"
    # as `generate_functions`: no eos_id means EOS
    eos = EOS if options.get("eos_id") is None else options["eos_id"]
    max_length = options["max_length"]
    beam = {k: options[k] for k in ("beam_width", "length_penalty_alpha") if k in options}
    for sample in samples:
        sample = _as_dict(model, sample)
        inputs = sample.get(key, sample.get(model.prompt_input))
        given = {"prompt": inputs} if key == "prompt_ids" else {"inputs": inputs}
        served = reloaded.signatures["generate"](**{key: tf.constant(inputs)})["ids"].numpy()
        expected = generate(model, max_length=max_length, eos_id=eos, **given)
        beamed = generate(
            model, max_length=max_length, eos_id=eos, strategy="beam", **given, **beam
        )[0]
        served_beam = reloaded.signatures["generate_beam"](**{key: tf.constant(inputs)})[
            "ids"
        ].numpy()
        if not (
            np.array_equal(served, np.asarray(expected))
            and np.array_equal(served_beam, np.asarray(beamed))
        ):
            raise RuntimeError(
                "export verification failed: the generate signatures' ids differ from Keras'"
            )
    report = {"generate_signatures": "generate, generate_beam: ids identical to Keras"}
    if vocabulary is not None and texts is not None:
        served = [
            t.decode()
            for t in reloaded.signatures["generate_text"](text=tf.constant(list(texts)))[
                "text"
            ].numpy()
        ]
        encoded = vocabulary.encode(list(texts))
        if key == "prompt_ids":  # the continuation of each prompt
            lengths = [len(t) for t in texts]
            ids = np.asarray(
                generate(
                    model,
                    prompt=encoded,
                    max_length=max_length,
                    eos_id=eos,
                    prompt_lengths=np.array(lengths),
                )
            )
            expected = [vocabulary.decode(row[n:][None])[0] for row, n in zip(ids, lengths)]
        else:
            ids = generate(model, encoded, max_length=max_length, eos_id=eos)
            expected = vocabulary.decode(np.asarray(ids)[:, 1:])
        if served != expected:
            raise RuntimeError(
                "export verification failed: generate_text returned "
                f"{served[:3]}..., Keras {expected[:3]}..."
            )
        report["generate_text"] = (
            f"{texts[0]!r} -> {served[0]!r} (same strings as Keras for {len(texts)})"
        )
    return report


def _main_output(model, outputs):
    """The first output (`model.output_names[0]`), whether the model
    returns one tensor, a list or a dict of named outputs."""
    if isinstance(outputs, dict):
        return outputs[model.output_names[0]]
    return outputs[0] if isinstance(outputs, (list, tuple)) else outputs


def _shown(path):
    """`path` relative to the working directory when it lies below it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _first(run, output):
    """`sample -> output array` from a runner of named inputs."""
    return lambda sample: run(**sample)[output]


def _median_ms(run, repeats=20):
    run()  # warm up
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return 1000 * float(np.median(seconds))


def _check_streaming(model, sample, tflite_path, max_length=None):
    """The streaming step model next to the TFLite file (its caches over
    `max_length` positions), verified; or why the model has none."""
    try:
        step_path = os.path.join(os.path.dirname(tflite_path), "step.tflite")
        path, _ = streaming_tflite(model, step_path, max_length=max_length)
    except ValueError as error:  # e.g. a bidirectional backbone
        return {"tflite_step": f"none: {error}"}
    with open(path, "rb") as f:
        flatbuffer = f.read()
    diff, ms, steps = verify_streaming(model, flatbuffer, sample)
    return {
        "tflite_step": _shown(path),
        "tflite_step_bytes": len(flatbuffer),
        "tflite_step_max_abs_diff": diff,
        "tflite_step_ms_per_token": ms,
        "tflite_step_tokens_checked": steps,
    }


def export_and_verify(
    model,
    name,
    samples,
    out_dir="saved_models",
    tolerance=1e-5,
    formats=FORMATS,
    generate=None,
    vocabulary=None,
    texts=None,
    quantize=(),
    metric=None,
    stream_max_length=None,
):
    """Writes `out_dir/<name>/<version>/` (SavedModel, TF Serving layout),
    `out_dir/<name>-tflite/<version>/model.tflite` (builtin ops only) and
    `out_dir/<name>-onnx/<version>/model.onnx`, runs each in its own
    runtime (TensorFlow, LiteRT, onnxruntime) on every sample batch and
    compares with Keras.

    Args:
        model: a Keras model with named inputs.
        name: the model name in the TF Serving layout.
        out_dir: the directory the exports go to (default
            `saved_models`).
        samples: list of input batches (arrays or dicts of named arrays),
            e.g. two different sequence lengths.
        formats: a subset of `("savedmodel", "tflite", "onnx")`; the
            SavedModel is always written (the others are made from it).
        generate: for generative models, `saved_model`'s generate options
            (e.g. `{"max_length": 12}`): the `generate` and
            `generate_beam` signatures are checked to return the same ids
            as `seqkeras.models.generate` on each sample.
        vocabulary, texts: a `CharVocabulary` and raw strings: the
            `generate_text` signature must return the strings that Keras
            greedy decoding gives.
        quantize: TFLite quantizations to write too (`"dynamic_int8"`,
            `"float16"`), as `model-<mode>.tflite` next to the float file.
        metric: `metric(predict) -> float`, where `predict(inputs)` returns
            the model's first output: evaluated with Keras and with each
            quantized file, to report the task metric change.
        tolerance: the largest accepted difference, absolute for outputs
            within [-1, 1] and relative to the largest |output| beyond
            (a trained model's logits reach tens, where 1e-5 absolute is
            below float32 rounding of the two runtimes' different op
            orders).
        stream_max_length: the key/value caches' positions in the step
            model of a Transformer decoder (`streaming_tflite`'s
            `max_length`; default the model's own).

    Returns:
        A report dict (paths, max abs differences, file sizes, TFLite ops,
        milliseconds per sequence (the first sample's first row, batch 1)
        in LiteRT and onnxruntime, interpreter and session made once). For
        recurrent models that can stream (see `seqkeras.export.streaming`)
        also the step model `<name>-tflite/<version>/step.tflite`, checked
        step by step against Keras on the first sample's first row, and its
        LiteRT milliseconds per token. With `vocabulary` and `texts`, the
        `serve_text` signature is checked against Keras on the encoded
        texts. Raises RuntimeError when a check fails, ValueError for an
        unknown format.
    """
    refuse_unbuilt("export_and_verify", model)
    out_dir = validation.path("export_and_verify", "out_dir", out_dir, "a directory")
    validation.finite_number("export_and_verify", "tolerance", tolerance, low=0.0)
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(
            "`export_and_verify` received an invalid value for `formats`: "
            f"expected a subset of {FORMATS}. Received: {sorted(unknown)}"
        )
    if not isinstance(quantize, (list, tuple)) or not all(q in QUANTIZATIONS[1:] for q in quantize):
        raise ValueError(
            "`export_and_verify` received an invalid value for `quantize`: expected a list of "
            f"{QUANTIZATIONS[1:]}. Received: quantize={quantize!r}"
        )
    if not isinstance(samples, (list, tuple)) or not samples:
        raise ValueError(
            "`export_and_verify` expects `samples` to be a non-empty list of "
            "input batches (arrays or dicts of named arrays). Received: "
            f"samples={samples!r:.80}"
        )
    with tempfile.TemporaryDirectory() as scratch:
        return _export_and_verify(
            scratch,
            model,
            name,
            samples,
            out_dir,
            tolerance,
            formats,
            generate,
            vocabulary,
            texts,
            quantize,
            metric,
            stream_max_length,
        )


def _export_and_verify(
    scratch,
    model,
    name,
    samples,
    out_dir,
    tolerance,
    formats,
    generate,
    vocabulary,
    texts,
    quantize,
    metric,
    stream_max_length=None,
):
    if vocabulary is not None:
        vocabulary = S.as_char_vocabulary("export_and_verify", vocabulary)
    version = next_version(os.path.join(out_dir, name))
    path = saved_model(
        model,
        os.path.join(out_dir, name, str(version)),
        signatures=_signatures(model, generate, vocabulary),
    )
    reloaded = tf.saved_model.load(path)
    serve = reloaded.signatures["serving_default"]
    output = model.output_names[0]
    report = {"savedmodel": _shown(path)}
    runners = {
        "savedmodel": lambda sample: serve(**{k: tf.constant(v) for k, v in sample.items()})[
            output
        ].numpy()
    }
    if "tflite" in formats:
        # the TFLite converter's graph (loop writes as DynamicUpdateSlice)
        tflite_graph = saved_model(model, os.path.join(scratch, "tflite"), target="tflite")
        # the float file and the quantized ones from one frozen graph
        modes = [None, *quantize]
        flatbuffers = dict(zip(modes, convert_builtin(tflite_graph, quantize=modes)))
        flatbuffer = flatbuffers[None]
        ops = op_names(flatbuffer)
        bad = [op for op in ops if not op.isupper()]
        if bad:
            raise RuntimeError(f"TFLite model has non-builtin ops: {bad}")
        tflite_dir = os.path.join(out_dir, name + "-tflite", str(version))
        os.makedirs(tflite_dir, exist_ok=True)
        tflite_path = os.path.join(tflite_dir, "model.tflite")
        with open(tflite_path, "wb") as f:
            f.write(flatbuffer)
        report.update(
            {"tflite": tflite_path, "tflite_bytes": len(flatbuffer), "tflite_ops": ", ".join(ops)}
        )
        runners["tflite"] = _first(tflite_runner(flatbuffer), output)
    if "onnx" in formats:
        onnx_path = onnx(model, os.path.join(out_dir, name + "-onnx", str(version), "model.onnx"))
        report.update({"onnx": _shown(onnx_path), "onnx_bytes": os.path.getsize(onnx_path)})
        runners["onnx"] = _first(onnx_runner(onnx_path), output)
    diffs = {k: 0.0 for k in runners}
    scale = 1.0
    for sample in samples:
        sample = _as_dict(model, sample)
        expected = np.asarray(_main_output(model, call_model(model, sample)))
        scale = max(scale, float(np.max(np.abs(expected))))
        for kind, run in runners.items():
            diffs[kind] = max(diffs[kind], float(np.max(np.abs(run(sample) - expected))))
    for kind in runners:
        report[f"{kind}_max_abs_diff"] = diffs[kind]
    report["max_abs_output"] = scale
    one = {
        k: np.asarray(v)[:1] for k, v in _as_dict(model, samples[0]).items()
    }  # one sequence, batch 1
    for kind in ("tflite", "onnx"):  # interpreter / session made once
        if kind in runners:
            report[f"{kind}_ms_per_sequence"] = _median_ms(lambda run=runners[kind]: run(one))
    if quantize and "tflite" in formats:
        if metric is not None:
            report["keras_metric"] = float(
                metric(lambda inputs: np.asarray(_main_output(model, call_model(model, inputs))))
            )
        for mode in quantize:
            small = flatbuffers[mode]
            q_path = os.path.join(os.path.dirname(report["tflite"]), f"model-{mode}.tflite")
            with open(q_path, "wb") as f:
                f.write(small)
            report[f"tflite_{mode}_bytes"] = len(small)
            if metric is not None:
                report[f"tflite_{mode}_metric"] = float(
                    metric(
                        lambda inputs, small=small: run_tflite_signature(small, **inputs)[output]
                    )
                )
    if "tflite" in formats and getattr(model, "streamable", False):
        report.update(
            _check_streaming(
                model, _as_dict(model, samples[0]), report["tflite"], stream_max_length
            )
        )
    if vocabulary is not None and texts is not None and "serve_text" in (reloaded.signatures):
        served = reloaded.signatures["serve_text"](text=tf.constant(list(texts)))[output].numpy()
        keras_out = np.asarray(
            call_model(model, {model.inputs[0].name: vocabulary.encode(list(texts))})
        )
        report["serve_text_max_abs_diff"] = float(np.max(np.abs(served - keras_out)))
        scale = max(scale, float(np.max(np.abs(keras_out))))
    if generate is not None:
        report.update(_check_generate(model, reloaded, samples, generate, vocabulary, texts))
    checked = [f"{kind}_max_abs_diff" for kind in runners] + [
        k for k in ("tflite_step_max_abs_diff", "serve_text_max_abs_diff") if k in report
    ]
    for key in checked:
        if report[key] > tolerance * scale:
            raise RuntimeError(
                f"export verification failed: {key}={report[key]:.2e} > "
                f"{tolerance} x max(1, max |output|) = {tolerance * scale:.2e}"
            )
    return report
