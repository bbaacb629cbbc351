"""A decoder language model for phones, as one directory: `model.tflite`
(builtin ops only; signatures `prefill` and `decode`, the grouped
key/value caches as states: `streaming_tflite(..., prefill=True)`),
optionally `model_int8.tflite` (dynamic-range int8 weights), the
tokenizer's `tokenizer.json`, `chat.json` (the chat template's text around
one user turn, the ids that end a turn, the states' shapes) and
`runner.py` (`seqkeras.export.litert_runner`), which generates text from a
string with only `ai_edge_litert` and `tokenizers`."""

import json
import os
import shutil

from seqkeras.export.files import check_target, replace_dir, temporary_dir
from seqkeras.export.streaming import streaming_tflite


def chat_bundle(
    model,
    tokenizer,
    directory,
    max_length=512,
    quantize=("dynamic_int8",),
    system=None,
    overwrite=False,
):
    """Writes the phone bundle of a decoder language model (see the module
    docstring) to `directory`; returns it.

    Args:
        model: a `decoder_language_model` / `llama_language_model` (LoRA
            adapters merged: `seqkeras.models.merge_lora`).
        tokenizer: its `seqkeras.data.ByteLevelBPETokenizer` (with a chat
            template).
        directory: the bundle directory (written whole, then moved into
            place).
        max_length: the caches' positions: prompt and reply together.
        quantize: the extra files' quantizations (`"dynamic_int8"`:
            `model_int8.tflite`; `"float16"`: `model_float16.tflite`).
        system: a system message for every conversation (default: the
            template's).
        overwrite: replace an existing `directory`.
    """
    from seqkeras.models.instruction import chat_text, end_of_turn_id

    names = {"dynamic_int8": "model_int8.tflite", "float16": "model_float16.tflite"}
    unknown = [q for q in quantize or () if q not in names]
    if unknown:
        raise ValueError(
            f"`chat_bundle` expects `quantize` among {sorted(names)}. Received: {unknown}"
        )
    directory = check_target("chat_bundle", directory, overwrite, want="dir")
    prefix, suffix = chat_text(tokenizer, system)
    end_ids = sorted({i for i in (end_of_turn_id(tokenizer), tokenizer.eos_id) if i is not None})
    work = temporary_dir(directory)
    try:
        _, shapes = streaming_tflite(
            model, os.path.join(work, "model.tflite"), max_length=max_length, prefill=True
        )
        for q in quantize or ():
            streaming_tflite(
                model,
                os.path.join(work, names[q]),
                max_length=max_length,
                quantize=q,
                prefill=True,
            )
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
        replace_dir(work, directory)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return directory
