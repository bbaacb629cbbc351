"""Generates text with a decoder language model exported for phones
(`seqkeras.export.chat_bundle`), using only `ai_edge_litert`, `tokenizers`
and NumPy: this file is copied beside the model and runs without seqkeras.

    python runner.py "What is the capital of France?"
    python runner.py "Hello" --model model_int8.tflite --max-new-tokens 64 --threads 2
    python runner.py "Hello" --bench   # prefill and decode tokens/s on stderr

The directory holds `model.tflite` (signatures `prefill`: the prompt's
ids and the states in, the last token's logits and the new states out;
`decode`: one token), `tokenizer.json` (Hugging Face `tokenizers`) and
`chat.json` (the chat template's text before and after one user turn,
the ids that end a turn, the states' shapes).
"""

import argparse
import json
import os
import sys
import time

import numpy as np


def load(directory, model="model.tflite", threads=2):
    """`(prefill, decode, tokenizer, chat)` of a bundle directory."""
    from ai_edge_litert.interpreter import Interpreter
    from tokenizers import Tokenizer

    interpreter = Interpreter(model_path=os.path.join(directory, model), num_threads=threads)
    tokenizer = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "chat.json"), encoding="utf-8") as f:
        chat = json.load(f)
    return (
        interpreter.get_signature_runner("prefill"),
        interpreter.get_signature_runner("decode"),
        tokenizer,
        chat,
    )


def generate(prefill, decode, chat, ids, max_new_tokens, on_token=None):
    """Greedy ids after the prompt `ids` (a list), ending at an
    end-of-turn id (not included) or after `max_new_tokens`; returns
    `(new ids, prefill seconds, decode seconds)`."""
    states = {name: np.zeros([1] + shape, np.float32) for name, shape in chat["states"].items()}
    start = time.perf_counter()
    out = prefill(token_ids=np.array([ids], np.int32), **states)
    prefilled = time.perf_counter()
    new = []
    room = chat["max_length"] - len(ids)
    while len(new) < min(max_new_tokens, room):
        token = int(np.argmax(out["logits"][0]))
        if token in chat["end_ids"]:
            break
        new.append(token)
        if on_token is not None:
            on_token(new)
        states = {k[len("new_") :]: v for k, v in out.items() if k.startswith("new_")}
        out = decode(token_ids=np.array([token], np.int32), **states)
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
