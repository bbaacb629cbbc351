"""Decoding strategies against deterministic fake step functions."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from seqkeras import decoding

V, L = 5, 6


def table_step(seed=0, vocab=V, length=L):
    """Logits depend on (position, previous token): a fixed random table."""
    table = np.random.default_rng(seed).normal(size=(length, vocab, vocab)).astype("float32") * 2

    def step(tokens, cache, index):
        logits = ops.take(ops.take(table, index, axis=0), tokens, axis=0)
        return logits, cache + 1  # a cache that counts the calls

    return step, table


def prompts(batch=3):
    return np.full((batch, 1), 1, "int32")


def test_greedy_follows_the_argmax_and_fills_the_cache():
    step, table = table_step()
    out = np.asarray(decoding.greedy(step, prompts(), ops.zeros((3,)), L))
    for row in out:
        for t in range(L - 1):
            assert row[t + 1] == np.argmax(table[t, row[t]])


def test_beam_width_one_top_k_one_and_zero_temperature_equal_greedy():
    step, _ = table_step(1)
    cache = ops.zeros((3,))
    greedy = np.asarray(decoding.greedy(step, prompts(), cache, L))
    beam, _ = decoding.beam_search(step, prompts(), cache, L, beam_width=1)
    np.testing.assert_array_equal(np.asarray(beam), greedy)
    top1 = decoding.sample(step, prompts(), cache, L, top_k=1, seed=5)
    np.testing.assert_array_equal(np.asarray(top1), greedy)
    for temperature in (0, 1e-4):
        cold = decoding.sample(step, prompts(), cache, L, temperature=temperature, seed=5)
        np.testing.assert_array_equal(np.asarray(cold), greedy)


def test_beam_search_finds_the_exact_best_sequence():
    step, table = table_step(2, vocab=3, length=4)
    logp = table - np.log(np.exp(table).sum(-1, keepdims=True))
    best, best_score = None, -np.inf
    for tail in itertools.product(range(3), repeat=3):
        seq = (1,) + tail
        score = sum(logp[t, seq[t], seq[t + 1]] for t in range(3))
        if score > best_score:
            best, best_score = seq, score
    # width 9 = every 2-token prefix: exact at the last step
    seqs, scores = decoding.beam_search(step, prompts(1), ops.zeros((1,)), 4, beam_width=9)
    assert tuple(np.asarray(seqs)[0]) == best
    np.testing.assert_allclose(np.asarray(scores)[0], best_score, rtol=1e-5)
    greedy = tuple(np.asarray(decoding.greedy(step, prompts(1), ops.zeros((1,)), 4))[0])
    greedy_score = sum(logp[t, greedy[t], greedy[t + 1]] for t in range(3))
    assert best_score >= greedy_score
    all_seqs, all_scores = decoding.beam_search(
        step, prompts(1), ops.zeros((1,)), 4, beam_width=9, return_all_beams=True
    )
    assert np.all(np.diff(np.asarray(all_scores)[0]) <= 1e-6)  # best first


def test_length_penalty_prefers_longer_hypotheses():
    # EOS (2) right away: log 0.4 = -0.92, the best raw score; a 4-token
    # continuation: log 0.6 + 3 log 0.7 = -1.58, but / ((5 + 4) / 6) ** 3
    # = -0.47 beats -0.92 / 1 once alpha = 3.
    def step(tokens, cache, index):
        eos_now = ops.where(index == 0, 0.4, 0.3)
        probs = ops.stack(
            [
                ops.full((1,), 0.0),
                ops.full((1,), 0.0),
                ops.full((1,), eos_now),
                ops.full((1,), 1 - eos_now),
            ],
            -1,
        )
        return ops.log(probs + 1e-9), cache

    raw, _ = decoding.beam_search(step, prompts(1), (), 5, beam_width=4, eos_id=2)
    assert np.asarray(raw)[0].tolist() == [1, 2, 0, 0, 0]
    long, _ = decoding.beam_search(
        step, prompts(1), (), 5, beam_width=4, eos_id=2, length_penalty_alpha=3.0
    )
    assert np.asarray(long)[0].tolist()[:2] == [1, 3]


def test_top_p_never_leaves_the_nucleus():
    probs = np.array([0.5, 0.2, 0.15, 0.1, 0.05], "float32")

    def step(tokens, cache, index):
        return ops.log(ops.tile(probs[None], (ops.shape(tokens)[0], 1))), cache

    out = np.asarray(decoding.sample(step, prompts(400), (), 4, top_p=0.8, seed=1))
    drawn = set(out[:, 1:].ravel().tolist())
    assert drawn == {0, 1, 2}  # 0.5 + 0.2 < 0.8 <= 0.5 + 0.2 + 0.15


def test_sampling_frequencies_match_the_tempered_softmax():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], "float32"))

    def step(tokens, cache, index):
        return ops.tile(logits[None], (ops.shape(tokens)[0], 1)), cache

    out = np.asarray(decoding.sample(step, prompts(4000), (), 3, temperature=2.0, seed=7))[:, 1:]
    freq = np.bincount(out.ravel(), minlength=4) / out.size
    expected = np.exp(logits / 2) / np.exp(logits / 2).sum()
    np.testing.assert_allclose(freq, expected, atol=0.02)


def test_same_seed_same_samples_other_seed_other_samples():
    step, _ = table_step(3)
    a = np.asarray(decoding.sample(step, prompts(8), ops.zeros((8,)), L, seed=11))
    b = np.asarray(decoding.sample(step, prompts(8), ops.zeros((8,)), L, seed=11))
    c = np.asarray(decoding.sample(step, prompts(8), ops.zeros((8,)), L, seed=12))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_eos_stops_and_pads(strategy):
    def step(tokens, cache, index):  # always predicts token + 1
        return ops.log(0.01 + ops.one_hot(tokens + 1, 8)), cache

    prompt = np.array([[1], [2]], "int32")
    if strategy == "greedy":
        out = decoding.greedy(step, prompt, (), 7, eos_id=4)
    elif strategy == "sample":
        out = decoding.sample(step, prompt, (), 7, top_k=1, eos_id=4)
    else:
        out, _ = decoding.beam_search(step, prompt, (), 7, beam_width=3, eos_id=4)
    assert np.asarray(out).tolist() == [[1, 2, 3, 4, 0, 0, 0], [2, 3, 4, 0, 0, 0, 0]]


def test_prompt_tokens_are_kept_and_generation_follows_them():
    def step(tokens, cache, index):
        return ops.one_hot(ops.minimum(tokens + 1, 9), 10), cache + tokens

    prompt = np.array([[3, 7, 1]], "int32")
    out = np.asarray(decoding.greedy(step, prompt, ops.zeros((1,), "int32"), 5))
    assert out.tolist() == [[3, 7, 1, 2, 3]]


def test_the_loop_compiles_with_xla():
    step, _ = table_step(4)
    eager = np.asarray(decoding.beam_search(step, prompts(), ops.zeros((3,)), L, beam_width=3)[0])

    @tf.function(jit_compile=True)
    def run(prompt):
        return (
            decoding.beam_search(step, prompt, ops.zeros((3,)), L, beam_width=3)[0],
            decoding.sample(step, prompt, ops.zeros((3,)), L, top_p=0.9, top_k=3, seed=2),
        )

    compiled, sampled = run(tf.constant(prompts()))
    np.testing.assert_array_equal(compiled.numpy(), eager)
    np.testing.assert_array_equal(
        sampled.numpy(),
        np.asarray(
            decoding.sample(step, prompts(), ops.zeros((3,)), L, top_p=0.9, top_k=3, seed=2)
        ),
    )


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda s: decoding.beam_search(s, prompts(), (), 4, beam_width=0), "beam_width"),
        (lambda s: decoding.greedy(s, prompts(), (), 0), "max_length"),
        (lambda s: decoding.sample(s, prompts(), (), 4, top_p=0.0), "top_p"),
        (lambda s: decoding.sample(s, prompts(), (), 4, top_p=1.5), "top_p"),
        (lambda s: decoding.sample(s, prompts(), (), 4, temperature=-1), "temperature"),
        (lambda s: decoding.sample(s, prompts(), (), 4, top_k=0), "top_k"),
        (lambda s: decoding.greedy(s, np.ones((2, 6), "int32"), (), 4), "longer than max_length=4"),
    ],
)
def test_bad_arguments(call, match):
    step, _ = table_step()
    with pytest.raises(ValueError, match=match):
        call(step)


@pytest.mark.parametrize("top_k,top_p", [(5, None), (5, 0.7), (None, 0.5)])
def test_top_k_and_top_p_over_a_large_vocabulary(top_k, top_p):
    """The two-level top-k (chunks of 64) and the bisected nucleus keep
    exactly the right tokens and sample them in proportion."""
    rng = np.random.default_rng(8)
    logits = rng.normal(size=300).astype("float32") * 2

    def step(tokens, cache, index):
        return ops.tile(logits[None], (ops.shape(tokens)[0], 1)), cache

    out = np.asarray(decoding.sample(step, prompts(3000), (), 2, top_k=top_k, top_p=top_p, seed=3))[
        :, 1
    ]
    order = np.argsort(-logits)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    keep = order[:top_k] if top_k else order
    if top_p:
        mass = np.cumsum(p[keep] / p[keep].sum())
        keep = keep[: np.searchsorted(mass, top_p) + 1]
    assert set(out.tolist()) <= set(keep.tolist())
    expected = p[keep] / p[keep].sum()
    freq = np.array([(out == t).mean() for t in keep])
    np.testing.assert_allclose(freq, expected, atol=0.03)


@pytest.mark.parametrize("vocab,top_k", [(3, 2), (100, 10), (200, 4)])
def test_top_k_over_vocabularies_of_fewer_chunks_than_k(vocab, top_k):
    """With fewer 64-token chunks than k (a character vocabulary), top-k
    sampling still keeps the k best tokens and samples them in proportion
    (the chunked search picked a chunk twice, and kept only the best
    token)."""
    logits = np.random.default_rng(vocab).normal(size=vocab).astype("float32")

    def step(tokens, cache, index):
        return ops.tile(logits[None], (ops.shape(tokens)[0], 1)), cache

    out = np.asarray(decoding.sample(step, prompts(3000), (), 2, top_k=top_k, seed=5))[:, 1]
    keep = np.argsort(-logits)[:top_k]
    assert set(out.tolist()) <= set(keep.tolist())
    p = np.exp(logits[keep] - logits[keep].max())
    freq = np.array([(out == t).mean() for t in keep])
    np.testing.assert_allclose(freq, p / p.sum(), atol=0.03)
