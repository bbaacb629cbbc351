"""Instruction fine-tuning over a tiny Hugging Face directory made in the
test (a byte-level BPE trained by `tokenizers`, a ChatML template, a
random `LlamaForCausalLM`): the answer's tokens are what the template
adds, `answer_model`'s logits are the language model's at those
positions (padding included), LoRA training on the answer tokens teaches
a keyword task that `generate_answers` then decodes (accuracy from the
decoded strings), and the app's train / evaluate / predict run."""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import seqkeras
from tests.pretrained_checks import tiny_chat_directory
from seqkeras.models import instruction

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("tensorflow_text")

WORDS = "good bad fine awful great poor nice dull".split()
TEXT = "Is the sentiment of this movie review positive or negative? Answer with one word. Review:"


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("instruct"))
    corpus = [f"{TEXT} {w} film positive negative user assistant" for w in WORDS]
    return tiny_chat_directory(path, corpus * 20, vocab_size=400)


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
        jit_compile=False,  # a graph: each batch width compiles under XLA
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
    with pytest.raises(ValueError, match="chat_bundle` expects `quantize` among"):
        from seqkeras.export import chat_bundle

        chat_bundle(None, tokenizer, "/nonexistent/bundle", quantize=("int3",))
    with pytest.raises(ValueError, match="answer_ids.*max_new_tokens"):
        instruction.generate_answers(None, tokenizer, ["a"], max_new_tokens=0)


def test_phone_bundle_runs_without_seqkeras_and_equals_keras(loaded, tmp_path):
    # chat_bundle: the prompt tokenized by `tokenizers` from chat.json's
    # text equals ours; the LiteRT prefill/decode runner's greedy ids equal
    # Keras' generate (float32); runner.py prints the reply
    # in a process where seqkeras cannot be imported.
    from seqkeras.export import chat_bundle, litert_runner

    model, tokenizer = loaded
    path = chat_bundle(model, tokenizer, str(tmp_path / "phone"), max_length=64)
    assert sorted(os.listdir(path)) == [
        "chat.json",
        "model.tflite",
        "model_int8.tflite",
        "runner.py",
        "tokenizer.json",
    ]
    for text in ["a good film", "what is the capital ?"]:
        ours = tokenizer.encode(instruction.render_prompts(tokenizer, [text])).to_list()[0]
        keras_ids = instruction.answer_ids(model, tokenizer, [text], max_new_tokens=8)[0]
        for file in ("model.tflite", "model_int8.tflite"):
            prefill, decode, hf, chat = litert_runner.load(path, file)
            ids = litert_runner.prompt_ids(hf, chat, text)
            assert ids == ours
            new, _, _ = litert_runner.generate(prefill, decode, chat, ids, 8)
            if file == "model.tflite":
                assert new == keras_ids
            else:  # int8 weights on a random model: near ties differ; it runs
                assert 0 < len(new) <= 8 and max(new) < tokenizer.vocabulary_size
    code = (
        "import sys, runpy; sys.modules['seqkeras'] = None; "
        f"sys.argv = ['runner.py', 'a good film', '--max-new-tokens', '8']; "
        f"runpy.run_path({os.path.join(path, 'runner.py')!r}, run_name='__main__')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    expected = instruction.generate_answers(model, tokenizer, ["a good film"], max_new_tokens=8)
    assert result.stdout.strip() == expected[0]


def test_runner_writes_the_caches_of_litert_lm_files_in_place(loaded, tmp_path):
    # the runner on a file in LiteRT-LM's layout (each cache one buffer,
    # in and out; the prompt in chunks of the prefill lengths, the last
    # padded) gives Keras' greedy ids (float32), here with prompts longer
    # than every prefill signature
    from seqkeras.export import chat_bundle, litert_lm_tflite, litert_runner

    model, tokenizer = loaded
    path = chat_bundle(model, tokenizer, str(tmp_path / "phone"), max_length=64, quantize=())
    litert_lm_tflite(model, os.path.join(path, "litert_lm.tflite"), 64, prefill_lengths=(4, 8))
    prefill, decode, hf, chat = litert_runner.load(path, "litert_lm.tflite")
    padded = []
    for text in ["a good film", "what is the capital of France ?"]:
        ids = litert_runner.prompt_ids(hf, chat, text)
        assert len(ids) > 9  # several chunks
        padded.append((len(ids) - 1) % 4 > 0)
        new, _, _ = litert_runner.generate(prefill, decode, chat, ids, 8)
        assert new == instruction.answer_ids(model, tokenizer, [text], max_new_tokens=8)[0]
    assert any(padded)  # a last chunk padded
    if importlib.util.find_spec("litert_quantizer"):  # the int4 file runs in the same layout
        name = "litert_lm_int4.tflite"
        litert_lm_tflite(model, os.path.join(path, name), 64, (4, 8), quantize="int4")
        prefill, decode, hf, chat = litert_runner.load(path, name)
        new, _, _ = litert_runner.generate(prefill, decode, chat, ids, 8)
        assert 0 < len(new) <= 8 and max(new) < tokenizer.vocabulary_size


def test_served_chat_signature_in_a_process_without_seqkeras(loaded, tmp_path):
    # `chat`: template text, tokenizer, decoding loop and detokenizer in the
    # graph; the reply equals Keras' greedy answer ids decoded; the export
    # passes the servability audit.
    from seqkeras.export import assert_servable, fresh_signature, saved_model
    from seqkeras.export.signatures import Chat, Generate

    model, tokenizer = loaded
    path = saved_model(
        model, str(tmp_path / "chat" / "1"), [Chat(tokenizer, max_length=48), Generate(48)]
    )
    assert_servable(path)
    texts = ["a good film", "what is the capital of France ?"]
    out, _ = fresh_signature(path, "chat", text=texts)
    for text, reply in zip(texts, out["reply"]):
        prompt = instruction.render_prompts(tokenizer, [text])[0]
        length = len(tokenizer.encode([prompt]).to_list()[0])
        ids = instruction.answer_ids(model, tokenizer, [text], max_new_tokens=48 - length)[0]
        expected = tokenizer.decode(np.array([ids], "int32"), skip_special_tokens=True)
        assert reply == expected.numpy()[0].decode()
    # an empty message, or one that leaves no room for a reply: refused by
    # the graph's own checks (loaded here: a fresh process per refusal
    # took 8 s each)
    import tensorflow as tf

    chat = tf.saved_model.load(path).signatures["chat"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="`chat`: input `text` has an empty"):
        chat(text=tf.constant(["a good film", "  "]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="`chat`: input `text` is longer .*47"):
        chat(text=tf.constant(["a good film " * 20]))


_FRESH_CHAT = r"""
import json, sys
sys.modules["seqkeras"] = None  # as on a model server
import tensorflow as tf
import tensorflow_text  # noqa: F401
chat = tf.saved_model.load(sys.argv[1]).signatures["chat"]
out = [chat(text=tf.constant([text]), seed=tf.constant(seed))["reply"].numpy()[0].decode()
       for text, seed in json.load(sys.stdin)]
print(json.dumps(out))
"""


def test_sampled_chat_is_one_reply_in_every_runtime(loaded, tmp_path):
    # 8 seeded conversations: the served, sampled `chat` signature (each
    # message its own request, in a process without seqkeras), ChatSession
    # and `generate(strategy="sample", seed=)` on the rendered prompt give
    # the same reply: one prefill, one step, one sampler (choose_token).
    from seqkeras.export import saved_model
    from seqkeras.export.signatures import Chat
    from seqkeras.pretrained.chat import ChatSession

    model, tokenizer = loaded
    options = dict(temperature=0.8, top_k=50, top_p=0.95)
    path = saved_model(model, str(tmp_path / "chat" / "1"), [Chat(tokenizer, 40, **options)])
    requests = [(f"a {WORDS[i]} film number {i}", i) for i in range(8)]
    result = subprocess.run(
        [sys.executable, "-c", _FRESH_CHAT, str(path)],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    session = ChatSession(model, tokenizer, context=64)
    for (text, seed), reply in zip(requests, served):
        prompt = instruction.render_prompts(tokenizer, [text])[0]
        ids = tokenizer.encode([prompt]).to_list()[0]
        session.messages, session.fed, session.cache = [], [], None
        # the reply's bound: 40 tokens in all, as the signature's max_length
        ours = "".join(session.reply(text, max_new_tokens=40 - len(ids), seed=seed, **options))
        out = seqkeras.models.generate(
            model,
            prompt=np.array([ids], "int32"),
            max_length=40,
            strategy="sample",
            seed=seed,
            eos_id=session.eos_ids[0],
            pad_id=0,
            **options,
        )
        new = []
        for i in np.asarray(out)[0, len(ids) :].tolist():
            if i in session.eos_ids:
                break
            new.append(i)
        expected = tokenizer.decode(np.array([new], "int32"), skip_special_tokens=True)
        assert reply == ours == expected.numpy()[0].decode(), (text, seed)
    assert len(set(served)) > 1  # different seeds, different replies


def test_batches_of_several_widths_fit_with_validation(loaded):
    # Keras' TensorFlow adapter takes the shapes from the first two batches:
    # batches of 16 and 32 tokens, shuffled or not, train and validate.
    model, tokenizer = loaded
    short, _ = keyword_task(8, 3)
    texts = [t.split("Review:")[-1] for t in short] + short
    data = instruction.instruction_data(tokenizer, texts, ["positive"] * len(texts))
    trainer = instruction.answer_model(seqkeras.models.with_lora(model, rank=2))
    trainer.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    for shuffle in (False, True):
        batches = instruction.InstructionBatches(data, 4, shuffle=shuffle, multiple=8)
        assert (
            len(set(batches.widths)) > 1
            and batches[0][0]["token_ids"].shape[1] != (batches[1][0]["token_ids"].shape[1])
        )
        trainer.fit(batches, validation_data=batches, epochs=2, verbose=0)


def test_litert_lm_layout_equals_keras_with_the_runtimes_padded_prefill(loaded, tmp_path):
    # LiteRT-LM's layout (litert_lm_tflite): prefill_<T> and decode, batch
    # 1, caches in and out under one name. Fed as LiteRT-LM's runtime feeds
    # it (the prompt but its last token in a prefill chunk padded with
    # token 0 at position 0, then decode from the last prompt token), each
    # decode step's logits equal Keras' full pass over the same tokens.
    from ai_edge_litert.interpreter import Interpreter

    from seqkeras.export import litert_lm_metadata, litert_lm_tflite
    from seqkeras.export.tflite import tflite_runner

    model, tokenizer = loaded
    path = litert_lm_tflite(model, str(tmp_path / "lm.tflite"), max_length=32, prefill_lengths=[8])
    flatbuffer = open(path, "rb").read()
    listed = Interpreter(model_content=flatbuffer).get_signature_list()
    assert sorted(listed) == ["decode", "prefill_8"]
    caches = sorted(n for n in listed["decode"]["inputs"] if n.startswith("kv_cache_"))
    assert len(caches) == 2 * len(model.part("blocks"))
    assert sorted(listed["decode"]["outputs"]) == sorted(caches + ["logits"])
    assert sorted(listed["prefill_8"]["outputs"]) == caches
    prefill, decode = tflite_runner(flatbuffer, "prefill_8"), tflite_runner(flatbuffer, "decode")
    assert decode.output_details["logits"]["shape"].tolist() == [1, 1, tokenizer.vocabulary_size]
    prompt = tokenizer.encode(instruction.render_prompts(tokenizer, ["a good film"])).to_list()[0]
    head, rng = prompt[:-1][:8], np.random.default_rng(0)
    tokens = head + [0] * (8 - len(head))
    positions = list(range(len(head))) + [0] * (8 - len(head))
    states = {n: np.zeros(decode.input_details[n]["shape"], np.float32) for n in caches}
    out = prefill(
        tokens=np.array([tokens], np.int32), input_pos=np.array(positions, np.int32), **states
    )
    states = {n: out[n] for n in caches}
    fed = head + [prompt[len(head)]]
    for step in range(6):
        position = len(fed) - 1
        out = decode(
            tokens=np.array([[fed[-1]]], np.int32),
            input_pos=np.array([position], np.int32),
            **states,
        )
        states = {n: out[n] for n in caches}
        expected = np.asarray(model(np.array([fed], np.int32)))[0, -1]
        np.testing.assert_allclose(out["logits"][0, 0], expected, atol=1e-4, rtol=1e-4)
        fed.append(int(rng.integers(4, tokenizer.vocabulary_size)))  # any next token
    meta = litert_lm_metadata(tokenizer, 32)
    assert 'stop_tokens { token_str: "<|im_end|>" }' in meta and "max_num_tokens: 32" in meta
    assert 'user { prefix: "<|im_start|>user\\n" suffix: "<|im_end|>\\n" }' in meta
