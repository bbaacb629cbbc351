"""The chat command over a tiny Hugging Face directory made in the test (a
byte-level BPE trained by `tokenizers`, a ChatML template, a random
`LlamaForCausalLM`): the streamed reply equals greedy `generate` on the
rendered prompt, a second turn that reuses the cache equals a fresh
session, and the command line prints the reply."""

import numpy as np
import pytest

import seqkeras
from tests.pretrained_checks import tiny_chat_directory
from seqkeras.pretrained import chat

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("tensorflow_text")


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("chat"))
    corpus = ["the cat sat on the mat, what is the capital?"] * 20
    return tiny_chat_directory(path, corpus, vocab_size=300)


def test_reply_equals_greedy_generate(directory):
    session = chat.load_chat(directory, context=128)
    assert 2 in session.eos_ids  # <|im_end|>
    pieces = list(session.reply("what is the cat?", max_new_tokens=20))
    text = "".join(pieces)
    prompt = session.tokenizer.apply_chat_template(
        [{"role": "user", "content": "what is the cat?"}], add_generation_prompt=True
    )
    ids = session.tokenizer.encode([prompt])[0].numpy()
    out = np.asarray(
        seqkeras.models.generate(
            session.model, prompt=ids[None], max_length=len(ids) + 20, eos_id=2, pad_id=2
        )
    )[0, len(ids) :]
    new = [int(i) for i in out if i != 2][:20]
    assert len(new) > 3  # a reply, not an immediate end of turn
    assert text == session.tokenizer.decode([new], skip_special_tokens=True).numpy()[0].decode()
    assert session.messages[-1] == {"role": "assistant", "content": text}

    # a second turn: the cache keeps the first (only the new tokens are
    # fed), and the reply equals a fresh session's over the same history
    fed_before = len(session.fed)
    second = "".join(session.reply("and the mat?", max_new_tokens=10))
    fresh = chat.load_chat(directory, context=128)
    fresh.messages = list(session.messages[:-2])
    assert "".join(fresh.reply("and the mat?", max_new_tokens=10)) == second
    assert len(session.fed) > fed_before


def test_sampled_reply_equals_generate_for_the_same_seed(directory):
    # 8 seeded conversations: ChatSession prefills the rendered prompt with
    # the model's own step and draws with `seqkeras.decoding.choose_token`,
    # so its reply is the ids `generate(..., strategy="sample", seed=s)`
    # draws on the same prompt (one sampler, stateless draws).
    session = chat.load_chat(directory, context=128)
    options = dict(temperature=0.9, top_k=40, top_p=0.95)
    distinct = set()
    for seed in range(8):
        session.messages, session.fed, session.cache = [], [], None
        message = f"what is the cat number {seed}?"
        pieces = list(session.reply(message, max_new_tokens=12, seed=seed, **options))
        prompt = session.tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], add_generation_prompt=True
        )
        ids = session.tokenizer.encode([prompt])[0].numpy()
        out = np.asarray(
            seqkeras.models.generate(
                session.model,
                prompt=ids[None],
                max_length=len(ids) + 12,
                strategy="sample",
                seed=seed,
                eos_id=2,
                pad_id=2,
                **options,
            )
        )[0, len(ids) :]
        new = []
        for i in out:
            if int(i) in session.eos_ids:
                break
            new.append(int(i))
        assert (
            "".join(pieces)
            == session.tokenizer.decode([new], skip_special_tokens=True).numpy()[0].decode()
        )
        distinct.add(tuple(new))
    assert len(distinct) > 1  # the seeds draw different replies


def test_chat_command_streams_a_reply(directory, capsys):
    from seqkeras.pretrained.__main__ import main

    assert main(["chat", directory, "--prompt", "the cat", "--max-new-tokens", "5"]) == 0
    out = capsys.readouterr()
    assert out.out.endswith("\n") and "tokens in" in out.err


def test_chat_errors():
    with pytest.raises(ValueError, match="max_new_tokens"):
        session = chat.ChatSession.__new__(chat.ChatSession)
        next(chat.ChatSession.reply(session, "x", max_new_tokens=0))
    assert chat.sample_token(np.array([0.0, 5.0, 1.0])) == 1
    rng = np.random.default_rng(0)
    draws = {chat.sample_token(np.array([0.0, 5.0, 4.9]), 1.0, top_k=2, rng=rng) for _ in range(50)}
    assert draws == {1, 2}  # top_k keeps the two best, both drawn
