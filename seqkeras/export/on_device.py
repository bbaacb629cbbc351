"""A decoder language model for phones, as one directory: `model.tflite`
(builtin ops only; signatures `prefill` and `decode`, the grouped
key/value caches as states: `streaming_tflite(..., prefill=True)`),
optionally `model_int8.tflite` (dynamic-range int8 weights) and
`model_int4.tflite` (int4 weights in blocks of 32), the
tokenizer's `tokenizer.json`, `chat.json` (the chat template's text around
one user turn, the ids that end a turn, the states' shapes) and
`runner.py` (`seqkeras.export.litert_runner`), which generates text from a
string with only `ai_edge_litert` and `tokenizers`."""

import importlib.util
import json
import os
import shutil

from seqkeras.export.files import check_target, place_file, replace_dir, temporary_dir
from seqkeras.models.instruction import end_of_turn_ids
from seqkeras.layers import validation


def chat_bundle(
    model,
    tokenizer,
    directory,
    max_length=512,
    quantize=("dynamic_int8",),
    system=None,
    overwrite=False,
    litert_lm=False,
):
    """Writes the phone bundle of a decoder language model (see the module
    docstring) to `directory`; returns it. `chat_bundle_source` then
    `convert_chat_bundle`: each file is converted in a new Python process
    (the caller's memory plus one conversion's; see `convert_chat_bundle`
    for a caller that frees the model first).

    Args:
        model: a `decoder_language_model` / `llama_language_model` (LoRA
            adapters merged: `seqkeras.models.merge_lora`).
        tokenizer: its `seqkeras.data.ByteLevelBPETokenizer` (with a chat
            template).
        directory: the bundle directory (written whole, then moved into
            place).
        max_length: the caches' positions: prompt and reply together.
        quantize: the extra files' quantizations (`"dynamic_int8"`:
            `model_int8.tflite`; `"float16"`: `model_float16.tflite`;
            `"int4"`: `model_int4.tflite`, see
            `seqkeras.export.tflite.quantize_int4`; `"int4_q4_1"`:
            `model_int4_q4_1.tflite`, a Q4_1 checkpoint's weights kept).
        system: a system message for every conversation (default: the
            template's).
        overwrite: replace an existing `directory`.
        litert_lm: also write `litert_lm_int8.tflite` and
            `litert_lm_int4.tflite` (`litert_lm_tflite`, int8 and int4
            weights) and `litert_lm.pbtxt` (`litert_lm_metadata`), the
            inputs of `litert-lm-builder` for a `.litertlm` file.

    Returns:
        `directory`, absolute.

    Raises:
        ValueError: a model without a several-token step, an unknown
            `quantize`, a `max_length` that is not a positive int, an
            existing `directory` without `overwrite`.
        TypeError: a `tokenizer` without a chat template.

    """
    _bundle_arguments("chat_bundle", model, tokenizer, quantize, max_length, system)
    directory = check_target("chat_bundle", directory, overwrite, want="dir", argument="directory")
    # beside the bundle (the same disk), not named as its temporary paths
    # (`check_target` deletes those); a killed call's is replaced next time
    source = os.path.join(os.path.dirname(directory), f".source-{os.path.basename(directory)}")
    try:
        _write_source(
            "chat_bundle", model, tokenizer, source, max_length, quantize, system, True, litert_lm
        )
        return convert_chat_bundle(source, directory, overwrite=overwrite)
    finally:
        shutil.rmtree(source, ignore_errors=True)


_PLAN = "conversions.json"  # a bundle source's list of files to convert


def chat_bundle_source(
    model,
    tokenizer,
    source,
    max_length=512,
    quantize=("dynamic_int8",),
    system=None,
    overwrite=False,
    litert_lm=False,
):
    """Writes what `convert_chat_bundle` makes a phone bundle from, to the
    directory `source`: the bundle's text files (tokenizer, `chat.json`,
    `runner.py`, `litert_lm.pbtxt`), the model's steps as SavedModels and
    the list of files to convert. Needs the model; the conversions do not,
    so a program can write the source in one process, end it, and convert
    in another with the model's memory gone (`apps/instruct.py export`).

    Args:
        model: a `decoder_language_model` / `llama_language_model` (LoRA
            adapters merged).
        tokenizer: its `seqkeras.data.ByteLevelBPETokenizer` (with a chat
            template).
        source: the directory to write.
        max_length: the caches' positions: prompt and reply together.
        quantize: the extra files' quantizations (as `chat_bundle`'s).
        system: a system message for every conversation (default: the
            template's).
        overwrite: replace an existing `source`.
        litert_lm: also LiteRT-LM's layout (as `chat_bundle`'s).

    Returns:
        `source`, absolute.

    Raises:
        ValueError: a model without a several-token step, an unknown
            `quantize`, a `max_length` that is not a positive int, an
            existing `source` without `overwrite`.
        TypeError: a `tokenizer` without a chat template.
    """
    return _write_source(
        "chat_bundle_source",
        model,
        tokenizer,
        source,
        max_length,
        quantize,
        system,
        overwrite,
        litert_lm,
    )


def _write_source(
    name, model, tokenizer, source, max_length, quantize, system, overwrite, litert_lm
):
    """`chat_bundle_source`, its errors naming the function `name`."""
    from seqkeras.export.streaming import prefill_decode_functions
    from seqkeras.export.tflite import save_functions

    names, prefix, suffix = _bundle_arguments(name, model, tokenizer, quantize, max_length, system)
    source = check_target(name, source, overwrite, want="dir", argument="source")
    end_ids = end_of_turn_ids(tokenizer)
    work = temporary_dir(source)
    try:
        functions, shapes = prefill_decode_functions(model, max_length)
        # stand-in weights: a conversion holds the weights once instead of
        # about six times (SmolLM2's export: 2.75 GB, not 4.7); the int8
        # files are then litert-quantizer's, so without it the converter's
        stand_ins = importlib.util.find_spec("litert_quantizer") is not None
        steps = os.path.join(work, "steps")
        keys = save_functions(functions, model.weights, steps, stand_ins=stand_ins)
        plan = [["model.tflite", "steps", keys, None]]
        plan += [[names[q], "steps", keys, q] for q in quantize or ()]
        if litert_lm:
            functions = _litert_lm_functions(model, max_length, _prefill_lengths(max_length))
            steps = os.path.join(work, "litert_lm_steps")
            keys = save_functions(functions, model.weights, steps, stand_ins=stand_ins)
            plan.append(["litert_lm_int8.tflite", "litert_lm_steps", keys, "dynamic_int8"])
            plan.append(["litert_lm_int4.tflite", "litert_lm_steps", keys, "int4"])
            with open(os.path.join(work, "litert_lm.pbtxt"), "w", encoding="utf-8") as f:
                f.write(litert_lm_metadata(tokenizer, max_length))
        with open(os.path.join(work, _PLAN), "w", encoding="utf-8") as f:
            json.dump(plan, f, indent=1)
        tokenizer.save(work)
        os.remove(os.path.join(work, "tokenizer_config.json"))  # the template is in chat.json
        chat = {
            "prefix": prefix,
            "suffix": suffix,
            "end_ids": end_ids,
            "max_length": max_length,
            "states": {f"state_{i}": list(s) for i, s in enumerate(shapes)},
        }
        with open(os.path.join(work, "chat.json"), "w", encoding="utf-8") as f:
            json.dump(chat, f, ensure_ascii=False, indent=1)
        here = os.path.dirname(os.path.abspath(__file__))
        shutil.copy(os.path.join(here, "litert_runner.py"), os.path.join(work, "runner.py"))
        replace_dir(work, source)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return source


def convert_chat_bundle(source, directory, overwrite=False):
    """Makes the phone bundle at `directory` from a `chat_bundle_source`
    directory, without the model: each LiteRT file is converted from the
    source's SavedModels in a new Python process that imports TensorFlow
    alone (`seqkeras.export.tflite.convert_in_new_process`), one at a
    time, so the memory of the whole export is the largest of one
    conversion and the caller's (SmolLM2-135M's, with stand-in weights:
    `seqkeras.export.tflite.save_functions`). `source` is left as it was.

    Args:
        source: a directory written by `chat_bundle_source`.
        directory: the bundle directory (written whole, then moved into
            place).
        overwrite: replace an existing `directory`.

    Returns:
        `directory`, absolute.

    Raises:
        ValueError: a `source` that `chat_bundle_source` did not write, an
            existing `directory` without `overwrite`.
        RuntimeError: a conversion failed (its last error lines).

    """
    from seqkeras.export.tflite import convert_in_new_process

    name = "convert_chat_bundle"
    if isinstance(source, bytes) or not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            f"`{name}` expects `source` to be a str or os.PathLike (a directory written by "
            f"`chat_bundle_source`). Received: source={source!r} ({type(source).__name__})"
        )
    source = os.path.abspath(os.fspath(source))
    plan_path = os.path.join(source, _PLAN)
    if not os.path.isfile(plan_path):
        raise ValueError(
            f"`{name}` expects `source` to be a directory written by `chat_bundle_source` "
            f"(with {_PLAN}). Received: source={source!r}"
        )
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    saved = {entry[1] for entry in plan}
    directory = check_target(name, directory, overwrite, want="dir", argument="directory")
    work = temporary_dir(directory)
    try:
        for entry in sorted(os.listdir(source)):
            if entry != _PLAN and entry not in saved:
                shutil.copy(os.path.join(source, entry), os.path.join(work, entry))
        for file, steps, keys, quantize in plan:
            convert_in_new_process(
                os.path.join(source, steps), keys, os.path.join(work, file), quantize
            )
        replace_dir(work, directory)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return directory


def _bundle_arguments(name, model, tokenizer, quantize, max_length, system):
    """`(file names by quantization, chat prefix, chat suffix)` after
    checking a bundle's arguments (the errors name the function `name`)."""
    names = {
        "dynamic_int8": "model_int8.tflite",
        "float16": "model_float16.tflite",
        "int4": "model_int4.tflite",
        "int4_q4_1": "model_int4_q4_1.tflite",
    }
    if isinstance(quantize, str):
        raise ValueError(
            f"`{name}` expects `quantize` to be a list among {sorted(names)} (e.g. "
            f"({quantize!r},)). Received: quantize={quantize!r}"
        )
    unknown = [q for q in quantize or () if q not in names]
    if unknown:
        raise ValueError(f"`{name}` expects `quantize` among {sorted(names)}. Received: {unknown}")
    validation.positive_int(name, "max_length", max_length)
    _check_prefills(name, model)
    prefix, suffix = _chat_text(name, tokenizer, system)
    return names, prefix, suffix


def _check_prefills(name, model):
    if not getattr(model, "prefills", False):
        raise ValueError(
            f"`{name}` needs a decoder language `model` whose step takes several tokens "
            "(decoder_language_model, llama_language_model). Received: "
            f"{getattr(model, 'name', model)!r} ({type(model).__name__})"
        )


def _chat_text(name, tokenizer, system=None):
    """`chat_text(tokenizer, system)`, its errors naming `name`'s
    `tokenizer`."""
    from seqkeras.models.instruction import chat_text

    if not callable(getattr(tokenizer, "apply_chat_template", None)):
        raise TypeError(
            f"`{name}` expects `tokenizer` to be a `seqkeras.data.ByteLevelBPETokenizer` "
            f"with a chat template. Received: {type(tokenizer).__name__}"
        )
    try:
        return chat_text(tokenizer, system)
    except ValueError as error:
        raise ValueError(f"`{name}` cannot use `tokenizer`'s chat template: {error}") from None


# -- LiteRT-LM ---------------------------------------------------------------


def _prefill_lengths(max_length):
    """LiteRT-LM files' default prefill lengths: 32 and 128 tokens, those up
    to `max_length` (or `max_length` alone)."""
    return [t for t in (32, 128) if t <= max_length] or [max_length]


def _litert_lm_functions(model, max_length, prefill_lengths):
    """The `prefill_<T>` and `decode` `tf.function`s of LiteRT-LM's
    prefill/decode layout (its CPU executor reads the signatures by these
    names, google-ai-edge/LiteRT-LM runtime/executor/
    litert_compiled_model_executor_utils.cc): batch 1, static shapes;
    `tokens` (1, T) and `input_pos` (T,) int32 in, each block's
    `kv_cache_k_<i>` / `kv_cache_v_<i>` (1, key/value heads, max_length,
    head size) in and out under the same names (the runtime binds one
    buffer to both: the caches are written in place, at `input_pos[0]`);
    `decode` also returns `logits` (1, 1, vocab). Prefill's unused slots
    (the runtime pads a chunk with token 0) are written after the prompt
    and overwritten by the next step before any query can see them: a
    query at position p sees the cache at positions <= p only."""
    import tensorflow as tf

    start = model.stream_start(None, 1, max_length=max_length)  # the model is not changed
    caches = start[1:]
    if not all(isinstance(c, (tuple, list)) and len(c) == 2 for c in caches):
        raise ValueError(
            "`litert_lm_tflite` needs a model whose caches are one (keys, values) pair per "
            f"block. Received: {type(model).__name__}"
        )
    cache_specs = {}
    for i, (k, v) in enumerate(caches):
        for name, x in ((f"kv_cache_k_{i}", k), (f"kv_cache_v_{i}", v)):
            cache_specs[name] = tf.TensorSpec((1,) + tuple(x.shape[1:]), x.dtype, name=name)

    def states(inputs):
        position = tf.cast(tf.reshape(inputs["input_pos"][0], (1, 1)), "float32")
        pairs = [(inputs[f"kv_cache_k_{i}"], inputs[f"kv_cache_v_{i}"]) for i in range(len(caches))]
        return [position] + pairs

    def named(new_states):
        out = {}
        for i, (k, v) in enumerate(new_states[1:]):
            out[f"kv_cache_k_{i}"], out[f"kv_cache_v_{i}"] = k, v
        return out

    functions = []
    for length in prefill_lengths:
        spec = {
            "tokens": tf.TensorSpec((1, length), tf.int32, name="tokens"),
            "input_pos": tf.TensorSpec((length,), tf.int32, name="input_pos"),
            **cache_specs,
        }

        def prefill(inputs):
            _, new_states = model.stream_prefill(inputs["tokens"], states(inputs))
            return named(new_states)

        prefill.__name__ = f"prefill_{length}"  # the signature key
        functions.append(tf.function(prefill, autograph=False, input_signature=[spec]))
    spec = {
        "tokens": tf.TensorSpec((1, 1), tf.int32, name="tokens"),
        "input_pos": tf.TensorSpec((1,), tf.int32, name="input_pos"),
        **cache_specs,
    }

    @tf.function(autograph=False, input_signature=[spec])
    def decode(inputs):
        logits, new_states = model.stream_step(inputs["tokens"][:, 0], states(inputs))
        return {"logits": tf.reshape(logits, (1, 1, -1)), **named(new_states)}

    return functions + [decode]


def litert_lm_tflite(
    model, path, max_length=512, prefill_lengths=None, quantize=None, overwrite=False
):
    """Writes a decoder language model as a builtin-ops TFLite file in
    LiteRT-LM's layout (signatures `prefill_<T>` for each prefill length
    and `decode`; see `_litert_lm_functions`), for `litert-lm-builder` to
    bundle with the tokenizer and `litert_lm_metadata`'s text into a
    `.litertlm` file; returns `path`.

    Args:
        model: a `decoder_language_model` / `llama_language_model` (LoRA
            adapters merged).
        path: the `.tflite` file to write.
        max_length: the caches' positions (the runtime's context length).
        prefill_lengths: the prefill signatures' token counts (the
            runtime splits a prompt over them); default 32 and 128 (those
            up to `max_length`, or `max_length` alone).
        quantize: None, `"dynamic_int8"` (int8 weights), `"int4"` (int4
            weights in blocks of 32: `seqkeras.export.tflite.quantize_int4`)
            or `"int4_q4_1"` (the same, a Q4_1 checkpoint's weights kept).
        overwrite: replace an existing file.

    Examples:
        >>> import os, tempfile, numpy as np, seqkeras
        >>> from seqkeras.export import litert_lm_tflite
        >>> from seqkeras.export.tflite import tflite_runner
        >>> lm = seqkeras.models.decoder_language_model(
        ...     vocab_size=30, hidden_dim=8, num_layers=1, num_heads=2,
        ...     intermediate_dim=16, max_length=16)
        >>> path = litert_lm_tflite(lm, os.path.join(tempfile.mkdtemp(), "lm.tflite"),
        ...                         max_length=16, prefill_lengths=(4,))
        >>> decode = tflite_runner(open(path, "rb").read(), "decode")
        >>> sorted(decode.input_details)[:3], decode.output_details["logits"]["shape"].tolist()
        (['input_pos', 'kv_cache_k_0', 'kv_cache_v_0'], [1, 1, 30])
    """
    from seqkeras.export.tflite import QUANTIZATIONS, convert_functions

    name = "litert_lm_tflite"
    _check_prefills(name, model)
    validation.positive_int(name, "max_length", max_length)
    if prefill_lengths is None:
        prefill_lengths = _prefill_lengths(max_length)
    lengths = validation.int_list(name, "prefill_lengths", prefill_lengths, 1, max_length)
    if quantize not in QUANTIZATIONS:
        raise ValueError(
            f"`{name}` expects `quantize` among {QUANTIZATIONS}. Received: quantize={quantize!r}"
        )
    path = check_target(name, path, overwrite)
    work = temporary_dir(path)
    try:
        functions = _litert_lm_functions(model, max_length, sorted(set(lengths)))
        flatbuffer = convert_functions(functions, model.weights, quantize)
        with open(os.path.join(work, "model.tflite"), "wb") as f:
            f.write(flatbuffer)
        place_file(os.path.join(work, "model.tflite"), path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return path


def litert_lm_metadata(tokenizer, max_length=512):
    """The `LlmMetadata` text (protobuf text format) that
    `litert-lm-builder llm_metadata --path` takes for a tokenizer with a
    ChatML chat template (`<|im_start|>role ... <|im_end|>`: SmolLM2,
    Qwen2): the turns' prefixes and suffixes, the stop tokens, greedy
    sampling (LiteRT-LM's CPU sampler is top-p only: `k: 1`).

    Args:
        tokenizer: a `ByteLevelBPETokenizer` with a ChatML template.
        max_length: the model's context in tokens, a positive int.

    Returns:
        The metadata text, a string.

    Raises:
        ValueError: a template that is not ChatML, or a bad `max_length`.
    """
    from seqkeras.layers import validation

    validation.positive_int("litert_lm_metadata", "max_length", max_length)
    prefix, suffix = _chat_text("litert_lm_metadata", tokenizer)
    if "<|im_start|>user\n" not in prefix or not suffix.startswith("<|im_end|>"):
        raise ValueError(
            "`litert_lm_metadata` writes the turns of a ChatML template (<|im_start|>role, "
            "<|im_end|>: SmolLM2, Qwen2); `tokenizer`'s template renders "
            f"{prefix + suffix!r}"
        )
    words = [tokenizer.vocabulary[i] for i in end_of_turn_ids(tokenizer)]
    lines = [f'stop_tokens {{ token_str: "{w}" }}' for w in words]
    lines.append("prompt_templates {")
    for role, name in (("user", "user"), ("model", "assistant"), ("system", "system")):
        lines.append(f'  {role} {{ prefix: "<|im_start|>{name}\\n" suffix: "<|im_end|>\\n" }}')
    lines += [
        "}",
        "sampler_params { type: TOP_P k: 1 p: 0.0 temperature: 1.0 seed: 0 }",
        f"max_num_tokens: {max_length}",
        "llm_model_type { generic_model {} }",
        "supports_thinking: false",
        "supports_function_calling: false",
    ]
    return "\n".join(lines) + "\n"
