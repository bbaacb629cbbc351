"""Instruction fine-tuning over a tiny Hugging Face directory made in the
test (a byte-level BPE trained by `tokenizers`, a ChatML template, a
random `LlamaForCausalLM`): the answer's tokens are what the template
adds, `answer_model`'s logits are the language model's at those
positions (padding included), LoRA training on the answer tokens teaches
a keyword task that `generate_answers` then decodes (accuracy from the
decoded strings), and the app's train / evaluate / predict run."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import seqkeras
from seqkeras.models import instruction

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("tensorflow_text")

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
WORDS = "good bad fine awful great poor nice dull".split()
TEXT = "Is the sentiment of this movie review positive or negative? Answer with one word. Review:"


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    from tokenizers import decoders, models, pre_tokenizers, trainers

    path = str(tmp_path_factory.mktemp("instruct"))
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [f"{TEXT} {w} film positive negative user assistant" for w in WORDS]
    hf.train_from_iterator(corpus * 20, trainer)
    hf.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": CHATML, "eos_token": "<|im_end|>"}, f)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=hf.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
        initializer_range=0.2,  # logits that differ (a pretrained model's, not near-uniform)
        bos_token_id=None,
        eos_token_id=2,
        tie_word_embeddings=True,
    )
    transformers.LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture(scope="module")
def loaded(directory):
    import seqkeras.pretrained as sp
    from seqkeras.data import ByteLevelBPETokenizer

    checkpoint = sp.read_checkpoint(directory)
    model = sp.llama_language_model(checkpoint.architecture)
    sp.load_pretrained(model, checkpoint)
    return model, ByteLevelBPETokenizer.load(directory)


def test_answer_tokens_are_what_the_template_adds(loaded):
    _, tokenizer = loaded
    data = instruction.instruction_data(tokenizer, ["a good film", "hi"], ["positive", "neg"])
    for ids, start, prompt, answer in zip(
        data["token_ids"], data["answer_start"], ["a good film", "hi"], ["positive", "neg"]
    ):
        head = f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
        assert tokenizer.encode([head]).to_list()[0] == ids[:start].tolist()
        text = tokenizer.decode(np.array([ids[start:]])).numpy()[0].decode()
        assert text == f"{answer}<|im_end|>"  # the template's trailing newline dropped


def test_answer_model_logits_are_the_models_at_the_answer_positions(loaded):
    model, tokenizer = loaded
    texts = ["a good film", "an awful , dull , poor film indeed", "fine"]
    data = instruction.instruction_data(tokenizer, texts, ["positive", "negative", "positive"])
    batches = instruction.InstructionBatches(data, batch_size=3, shuffle=False, multiple=16)
    x, targets, weights = batches[0]
    assert x["token_ids"].shape[1] % 16 == 0
    logits = np.asarray(instruction.answer_model(model)(x))
    full = np.asarray(model(x["token_ids"]))
    order = np.argsort([len(i) for i in data["token_ids"]], kind="stable")
    for row, i in enumerate(order):
        ids, start = data["token_ids"][i], data["answer_start"][i]
        n = len(ids) - start
        assert weights[row].sum() == n and targets[row, :n].tolist() == ids[start:].tolist()
        alone = np.asarray(model(ids[None]))[0]  # unpadded: padding after it changes nothing
        np.testing.assert_allclose(logits[row, :n], alone[start - 1 : len(ids) - 1], atol=1e-4)
        np.testing.assert_allclose(logits[row, :n], full[row, start - 1 : len(ids) - 1], atol=1e-5)


def test_generate_answers_equals_greedy_generate_one_prompt_at_a_time(loaded):
    model, tokenizer = loaded
    texts = ["good", "a bad , dull film", "nice film"]
    answers = instruction.generate_answers(model, tokenizer, texts, max_new_tokens=3, batch_size=2)
    eos = instruction.end_of_turn_id(tokenizer)
    for text, answer in zip(texts, answers):
        prompt = instruction.render_prompts(tokenizer, [text])[0]
        ids = np.array(tokenizer.encode([prompt]).to_list())
        out = np.asarray(
            seqkeras.models.generate(model, prompt=ids, max_length=ids.shape[1] + 3, eos_id=eos)
        )[0, ids.shape[1] :].tolist()
        out = out[: out.index(eos)] if eos in out else out
        expected = tokenizer.decode(np.array([out], np.int32)).numpy()[0].decode().strip()
        assert answer == expected


def keyword_task(n, seed):
    rng = np.random.default_rng(seed)
    words = rng.choice(WORDS, n)
    labels = [("positive", "negative")[WORDS.index(w) % 2] for w in words]
    return [f"{TEXT} a {w} film" for w in words], labels


def test_lora_on_answer_tokens_learns_a_keyword_task(loaded):
    model, tokenizer = loaded
    keras.utils.set_random_seed(0)
    lm = seqkeras.models.with_lora(model, rank=8, alpha=16)
    prompts, labels = keyword_task(256, 0)
    data = instruction.instruction_data(tokenizer, prompts, labels)
    trainer = instruction.answer_model(lm)
    trainer.compile(
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    before = instruction.generate_answers(lm, tokenizer, prompts[:16], max_new_tokens=2)
    assert sum(a == y for a, y in zip(before, labels)) < 12  # untrained: not the task
    trainer.fit(instruction.InstructionBatches(data, 16), epochs=8, verbose=0)
    test_prompts, test_labels = keyword_task(32, 1)
    said = instruction.generate_answers(lm, tokenizer, test_prompts, max_new_tokens=2)
    assert sum(a == y for a, y in zip(said, test_labels)) == len(test_labels)
    # only the adapters moved
    tuned = {v.path: v for v in lm.weights}
    for old in model.weights:
        np.testing.assert_array_equal(np.asarray(old), np.asarray(tuned[old.path]))


def test_bad_inputs_are_named(loaded):
    _, tokenizer = loaded
    with pytest.raises(ValueError, match="instruction_data.*as many answers as prompts"):
        instruction.instruction_data(tokenizer, ["a", "b"], ["x"])
    with pytest.raises(TypeError, match="instruction_data.*`prompts` as a list of strings"):
        instruction.instruction_data(tokenizer, "a", ["x"])
    with pytest.raises(TypeError, match="answer_model` expects a DecoderLanguageModel"):
        instruction.answer_model(keras.Sequential([keras.layers.Dense(2)]))
    with pytest.raises(ValueError, match="generate_answers.*max_new_tokens"):
        instruction.generate_answers(None, tokenizer, ["a"], max_new_tokens=0)


def test_app_trains_evaluates_and_predicts(directory, tmp_path):
    app = os.path.join(os.path.dirname(__file__), "..", "..", "apps", "instruct.py")
    rows = ["sentence\tlabel"]
    for prompt, label in zip(*keyword_task(48, 2)):
        rows.append(f"{prompt.split('Review: ')[-1]}\t{int(label == 'positive')}")
    tsv = tmp_path / "data.tsv"
    tsv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "model"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}

    def run(*args, stdin=None):
        result = subprocess.run(
            [sys.executable, app, *args], capture_output=True, text=True, env=env, input=stdin
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    run(
        "train",
        "--init",
        directory,
        "--lora",
        "4",
        "--out",
        str(out),
        "--train",
        str(tsv),
        "--validation",
        str(tsv),
        "--epochs",
        "2",
        "--examples",
        "32",
        "--verbose",
        "0",
    )
    config = json.loads((out / "config.json").read_text())
    assert config["rank"] == 4 and (out / "adapters.npz").is_file()
    assert os.path.getsize(out / "adapters.npz") < 2 * config["adapter_bytes"]
    last = run("evaluate", "--model", str(out), "--data", str(tsv)).strip().splitlines()[-1]
    assert last.startswith("accuracy = ") and last.endswith("%")
    printed = run("predict", "--model", str(out), stdin="a good film\na bad film\n")
    assert [line.split("\t")[1] for line in printed.strip().splitlines()] == [
        "a good film",
        "a bad film",
    ]
