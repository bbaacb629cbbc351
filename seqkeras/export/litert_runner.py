"""Generates text with a decoder language model exported for phones
(`seqkeras.export.chat_bundle`), using only `ai_edge_litert`, `tokenizers`
and NumPy: this file is copied beside the model and runs without seqkeras.

    python runner.py "What is the capital of France?"
    python runner.py "Hello" --model model_int8.tflite --max-new-tokens 64 --threads 2
    python runner.py "Hello" --bench   # prefill and decode tokens/s on stderr
    python runner.py "Hello" --model litert_lm_int8.tflite   # LiteRT-LM's layout

The directory holds `model.tflite` (signatures `prefill`: the prompt's
ids and the states in, the last token's logits and the new states out;
`decode`: one token), `tokenizer.json` (Hugging Face `tokenizers`) and
`chat.json` (the chat template's text before and after one user turn,
the ids that end a turn, the states' shapes). The states stay in LiteRT
tensor buffers between calls (`ai_edge_litert`'s `CompiledModel`): no
cache is copied in or out per token. A file in LiteRT-LM's layout
(`export --litert-lm`: `litert_lm_int8.tflite`) runs with each cache
bound to one buffer and written in place, as LiteRT-LM's runtime runs it.
"""

import argparse
import json
import os
import sys
import time

import numpy as np


class _Compiled:
    """A LiteRT `CompiledModel` and the buffer its `decode` writes the
    next token's logits to."""

    def __init__(self, model):
        self.model = model
        details = model.get_output_tensor_details("decode")["logits"]
        self.vocab = int(np.prod(details["shape"]))
        self.logits = model.create_output_buffer_by_name("decode", "logits")

    def read_logits(self):
        return self.logits.read(self.vocab, np.float32)


class _BoundModel(_Compiled):
    """A LiteRT compiled model whose states stay in two sets of tensor
    buffers: each call reads one set and writes the other, so the caches
    never pass through NumPy (no copy in or out per token). (One buffer
    bound to both a state's input and its output gave wrong tokens on
    SmolLM2's file: the step model is not written to update in place.)"""

    def __init__(self, model, chat):
        super().__init__(model)
        self.zeros = {k: np.zeros([1] + s, np.float32) for k, s in chat["states"].items()}
        self.sets = [
            {k: model.create_input_buffer_by_name("decode", k) for k in self.zeros}
            for _ in range(2)
        ]
        self.token = model.create_input_buffer_by_name("decode", "token_ids")
        self.current = 0

    def _run(self, signature, tokens):
        source, target = self.sets[self.current], self.sets[1 - self.current]
        outputs = {"logits": self.logits, **{"new_" + k: b for k, b in target.items()}}
        self.model.run_by_name(signature, {"token_ids": tokens, **source}, outputs)
        self.current = 1 - self.current
        return self.read_logits()

    def prefill(self, token_ids):
        """The logits after the prompt `token_ids` (1, T), from zero states."""
        ids = np.asarray(token_ids, np.int32).reshape(1, -1)
        self.model.resize_input_tensor_by_name("prefill", "token_ids", list(ids.shape))
        tokens = self.model.create_input_buffer_by_name("prefill", "token_ids")
        tokens.write(ids)
        self.current = 0
        for name, buffer in self.sets[0].items():
            buffer.write(self.zeros[name])
        return self._run("prefill", tokens)

    def decode(self, token_id):
        """The logits after one more token."""
        self.token.write(np.array([token_id], np.int32))
        return self._run("decode", self.token)


class _InPlaceModel(_Compiled):
    """A file in LiteRT-LM's layout (`litert_lm_tflite`: `prefill_<T>`
    signatures of T tokens and their positions, `decode` of one; each
    block's `kv_cache_k_<i>` / `kv_cache_v_<i>` in and out under one
    name), each cache bound to one buffer as both input and output, as
    LiteRT-LM's runtime binds them: a step writes its positions in place
    and copies nothing else."""

    def __init__(self, model, chat):
        super().__init__(model)
        signatures = model.get_signature_list()
        self.lengths = sorted(
            int(k[len("prefill_") :]) for k in signatures if k.startswith("prefill_")
        )
        details = self.model.get_input_tensor_details("decode")
        names = [n for n in signatures["decode"]["inputs"] if n.startswith("kv_cache_")]
        self.zeros = {n: np.zeros(details[n]["shape"], np.float32) for n in names}
        self.caches = {n: self.model.create_input_buffer_by_name("decode", n) for n in names}
        # the positions' axis: 2 in our files (1, heads, positions, size),
        # 1 in litert-torch's (1, positions, heads, size)
        shape = [int(d) for d in details[names[0]]["shape"]]
        self.max_length = chat["max_length"] if chat["max_length"] in shape[1:] else shape[2]
        self.inputs = {
            key: (
                self.model.create_input_buffer_by_name(key, "tokens"),
                self.model.create_input_buffer_by_name(key, "input_pos"),
            )
            for key in ["decode"] + [f"prefill_{t}" for t in self.lengths]
        }
        self.position = 0

    def _run(self, key, ids, outputs):
        tokens, positions = self.inputs[key]
        tokens.write(np.array([ids], np.int32))
        positions.write(np.arange(self.position, self.position + len(ids), dtype=np.int32))
        self.model.run_by_name(
            key, {"tokens": tokens, "input_pos": positions, **self.caches}, outputs
        )

    def prefill(self, token_ids):
        """The logits after the prompt `token_ids`, from empty caches: all
        but its last token through the prefill signatures (the last chunk
        padded with 0 to the signature's length, the padding's slots
        overwritten later before any query sees them), the last one through
        `decode`."""
        ids = [int(i) for i in np.asarray(token_ids).reshape(-1)]
        for name, buffer in self.caches.items():
            buffer.write(self.zeros[name])
        self.position = 0
        while len(ids) - 1 - self.position > 0:
            rest = len(ids) - 1 - self.position
            room = [t for t in self.lengths if self.position + t <= self.max_length]
            if not room:
                break
            # whole chunks of the longest length that fits, then the
            # shortest that holds the rest
            length = max([t for t in room if t <= rest] or [min(room)])
            chunk = ids[self.position : self.position + min(rest, length)]
            self._run(f"prefill_{length}", chunk + [0] * (length - len(chunk)), dict(self.caches))
            self.position += len(chunk)
        for token in ids[self.position : -1]:  # what no prefill signature fitted
            self.decode(token)
        return self.decode(ids[-1])

    def decode(self, token_id):
        """The logits after one more token."""
        self._run("decode", [int(token_id)], {"logits": self.logits, **self.caches})
        self.position += 1
        return self.read_logits()


def load(directory, model="model.tflite", threads=2):
    """`(prefill, decode, tokenizer, chat)` of a bundle directory:
    `prefill(ids)` (a list of prompt ids) and `decode(id)` return the next
    token's logits, the states kept between calls. `model`: `model.tflite`
    and `model_<quantization>.tflite` (prefill/decode with the states in
    and out), or a file in LiteRT-LM's layout (its `decode` takes
    `input_pos`: `litert_lm_*.tflite`; the caches written in place)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "chat.json"), encoding="utf-8") as f:
        chat = json.load(f)
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.options import CpuOptions, Options

    options = Options(cpu_options=CpuOptions(num_threads=threads))
    compiled = CompiledModel.from_file(os.path.join(directory, model), options=options)
    if "input_pos" in compiled.get_signature_list()["decode"]["inputs"]:  # LiteRT-LM's
        bound = _InPlaceModel(compiled, chat)
    else:
        bound = _BoundModel(compiled, chat)
    return bound.prefill, bound.decode, tokenizer, chat


def generate(prefill, decode, chat, ids, max_new_tokens, on_token=None):
    """Greedy ids after the prompt `ids` (a list), ending at an
    end-of-turn id (not included) or after `max_new_tokens`; returns
    `(new ids, prefill seconds, decode seconds)`."""
    start = time.perf_counter()
    logits = prefill(ids)
    prefilled = time.perf_counter()
    new = []
    room = chat["max_length"] - len(ids)
    while len(new) < min(max_new_tokens, room):
        token = int(np.argmax(logits))
        if token in chat["end_ids"]:
            break
        new.append(token)
        if on_token is not None:
            on_token(new)
        logits = decode(token)
    return new, prefilled - start, time.perf_counter() - prefilled


def prompt_ids(tokenizer, chat, text):
    """The ids of `text` as one user turn of the chat template."""
    rendered = chat["prefix"] + text + chat["suffix"]
    return tokenizer.encode(rendered, add_special_tokens=False).ids


def check(directory, model, prompts, expected, max_new_tokens, threads=2):
    """Greedy decoding of each prompt with a bundle's `model` file beside
    the ids another runtime gave (`expected`: one id list per prompt):
    `(equal, prefill tokens/s, decode tokens/s)`, the speeds the median
    over the prompts."""
    prefill, decode, tokenizer, chat = load(directory, model, threads)
    equal, speed = 0, []
    for prompt, want in zip(prompts, expected):
        ids = prompt_ids(tokenizer, chat, prompt)
        new, first, rest = generate(prefill, decode, chat, ids, max_new_tokens)
        equal += new == list(want)
        speed.append((len(ids) / first, len(new) / rest if rest else 0.0))
    prefill_speed, decode_speed = np.median(np.array(speed), axis=0)
    return equal, float(prefill_speed), float(decode_speed)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("text", help="the user's message")
    p.add_argument("--dir", default=os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--model", default="model.tflite")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bench", action="store_true", help="tokens/s of prefill and decode")
    args = p.parse_args(argv)
    prefill, decode, tokenizer, chat = load(args.dir, args.model, args.threads)
    ids = prompt_ids(tokenizer, chat, args.text)
    if len(ids) >= chat["max_length"]:
        raise SystemExit(
            f"runner.py: the prompt has {len(ids)} tokens; the model holds {chat['max_length']}"
        )
    shown = [""]

    def show(new):
        text = tokenizer.decode(new)
        if not text.endswith("\ufffd"):  # a character cut in the middle waits
            sys.stdout.write(text[len(shown[0]) :])
            sys.stdout.flush()
            shown[0] = text

    new, first, rest = generate(prefill, decode, chat, ids, args.max_new_tokens, show)
    text = tokenizer.decode(new)
    sys.stdout.write(text[len(shown[0]) :] + "\n")
    if args.bench:
        print(
            f"prefill {len(ids)} tokens: {len(ids) / first:.1f} tokens/s; decode {len(new)} "
            f"tokens: {len(new) / rest if rest else 0:.1f} tokens/s",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
