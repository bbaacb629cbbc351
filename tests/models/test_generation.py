"""Every generative builder decodes with a cache that equals the full
recomputation, and `generate` runs every strategy."""

import numpy as np
import pytest

import seqkeras

M = seqkeras.models
V = 13
SRC = np.array([[4, 5, 6, 7, 0, 0], [8, 9, 10, 11, 12, 4]], "int32")
FEATURES = np.random.default_rng(0).normal(size=(2, 5)).astype("float32")


def build(kind):
    if kind == "rnn_lm":
        return M.recurrent_language_model(V, 8, units=12, cell="lstm", num_layers=2), None
    if kind == "transformer_lm":
        return M.transformer_language_model(V, 8, num_layers=2, num_heads=2, hidden_dim=16), None
    if kind == "seq2seq":
        return M.recurrent_seq2seq(V, V, embedding_dim=8, units=12, cell="gru"), SRC
    if kind == "seq2seq_bahdanau":
        return M.recurrent_seq2seq(
            V, V, embedding_dim=8, units=12, cell="lstm", attention="additive"
        ), SRC
    if kind == "seq2seq_luong":
        return M.recurrent_seq2seq(
            V, V, embedding_dim=8, units=12, cell="gru", attention="general", style="luong"
        ), SRC
    if kind == "transformer_seq2seq":
        return M.transformer_seq2seq(
            V, V, max_length=8, num_layers=2, num_heads=2, hidden_dim=16
        ), SRC
    return M.conditioned_decoder(5, V, embedding_dim=8, units=12), FEATURES


KINDS = [
    "rnn_lm",
    "transformer_lm",
    "seq2seq",
    "seq2seq_bahdanau",
    "seq2seq_luong",
    "transformer_seq2seq",
    "conditioned",
]


def full_logits(model, kind, inputs, tokens):
    if inputs is None:
        return np.asarray(model(tokens))
    key = "features" if kind == "conditioned" else "source_ids"
    return np.asarray(model({key: inputs, "target_ids": tokens}))


@pytest.mark.parametrize("kind", KINDS)
def test_cached_steps_equal_the_full_pass(kind):
    model, inputs = build(kind)
    tokens = np.random.default_rng(1).integers(3, V, size=(2, 7))
    tokens[:, 0] = seqkeras.data.BOS
    tokens = tokens.astype("int32")
    expected = full_logits(model, kind, inputs, tokens)
    start, step = M.decoder_step(model)
    cache = start(inputs, 2, 8)
    for t in range(tokens.shape[1]):
        logits, cache = step(tokens[:, t], cache, t)
        np.testing.assert_allclose(
            np.asarray(logits), expected[:, t], atol=1e-5, err_msg=f"step {t}"
        )


@pytest.mark.parametrize("kind", KINDS)
def test_generate_greedy_equals_recomputation_and_strategies_run(kind):
    model, inputs = build(kind)
    prompt = np.full((2, 1), seqkeras.data.BOS, "int32")
    if inputs is None:
        prompt = np.array([[4, 5], [6, 7]], "int32")
    out = np.asarray(M.generate(model, inputs, prompt=prompt, max_length=6, eos_id=None))
    # greedy by recomputing the whole model on the growing prefix
    tokens = prompt
    while tokens.shape[1] < 6:
        nxt = np.argmax(full_logits(model, kind, inputs, tokens)[:, -1], -1)
        tokens = np.concatenate([tokens, nxt[:, None].astype("int32")], 1)
    np.testing.assert_array_equal(out, tokens)
    beam, scores = M.generate(
        model, inputs, prompt=prompt, max_length=6, strategy="beam", beam_width=3
    )
    assert np.asarray(beam).shape == (2, 6) and np.all(np.isfinite(scores))
    a = M.generate(
        model,
        inputs,
        prompt=prompt,
        max_length=6,
        strategy="sample",
        top_p=0.9,
        temperature=0.8,
        seed=4,
    )
    b = M.generate(
        model,
        inputs,
        prompt=prompt,
        max_length=6,
        strategy="sample",
        top_p=0.9,
        temperature=0.8,
        seed=4,
    )
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_generate_bad_arguments():
    model, _ = build("transformer_lm")
    prompt = np.array([[4, 5]], "int32")
    with pytest.raises(ValueError, match="needs a `prompt`"):
        M.generate(model)
    with pytest.raises(ValueError, match="strategy"):
        M.generate(model, prompt=prompt, strategy="nucleus")
    with pytest.raises(ValueError, match="learned positions"):
        M.generate(model, prompt=prompt, max_length=9)
    with pytest.raises(ValueError, match="top_p"):
        M.generate(model, prompt=prompt, strategy="sample", top_p=2.0, max_length=6)
    with pytest.raises(ValueError, match="beam_width"):
        M.generate(model, prompt=prompt, strategy="beam", beam_width=0, max_length=6)
    with pytest.raises(ValueError, match="longer than max_length=2"):
        M.generate(model, prompt=np.ones((1, 3), "int32"), max_length=2)
    with pytest.raises(ValueError, match="seqkeras.models"):
        M.generate(M.classifier(10, 2), prompt=prompt)
    with pytest.raises(ValueError, match="prompt_lengths"):
        M.generate(
            model, prompt=prompt, strategy="beam", max_length=6, prompt_lengths=np.array([1])
        )
    with pytest.raises(ValueError, match="one length per prompt row"):
        M.generate(model, prompt=prompt, max_length=6, prompt_lengths=np.array([1, 2]))


@pytest.mark.parametrize("kind", ["rnn_lm", "transformer_lm"])
def test_prompts_of_different_lengths_decode_as_alone(kind):
    model, _ = build(kind)
    prompts = np.array([[4, 5, 6], [7, 8, 0], [9, 0, 0]], "int32")
    lengths = np.array([3, 2, 1])
    ids = np.asarray(
        M.generate(model, prompt=prompts, max_length=8, prompt_lengths=lengths, eos_id=None)
    )
    for row, n in enumerate(lengths):
        alone = np.asarray(
            M.generate(model, prompt=prompts[row : row + 1, :n], max_length=8, eos_id=None)
        )
        np.testing.assert_array_equal(ids[row], alone[0])


def test_numpy_scalars_are_accepted_as_python_numbers():
    # Regression: numpy.int64(6) as max_length was rejected ("expected a
    # positive integer. Received: max_length=6").
    model, _ = build("rnn_lm")
    prompt = np.array([[4, 5]], "int32")
    expected = np.asarray(M.generate(model, prompt=prompt, max_length=6))
    got = M.generate(model, prompt=prompt, max_length=np.int64(6))
    np.testing.assert_array_equal(np.asarray(got), expected)
    sampled = M.generate(
        model,
        prompt=prompt,
        max_length=np.int32(6),
        strategy="sample",
        temperature=np.float32(0.7),
        top_k=np.int64(3),
        seed=np.int64(2),
    )
    again = M.generate(
        model, prompt=prompt, max_length=6, strategy="sample", temperature=0.7, top_k=3, seed=2
    )
    np.testing.assert_array_equal(np.asarray(sampled), np.asarray(again))


def test_compiled_decoders_per_model_are_bounded():
    from seqkeras.models import generation

    model = M.recurrent_language_model(V, 4, cell="gru")
    prompt = np.array([[4, 5]], "int32")
    first = np.asarray(M.generate(model, prompt=prompt, max_length=4, strategy="sample", seed=0))
    for seed in range(1, generation.COMPILED_CACHE_SIZE + 4):
        M.generate(model, prompt=prompt, max_length=4, strategy="sample", seed=seed)
    from seqkeras import _traced

    assert len(_traced.entries(model, "generate")) == generation.COMPILED_CACHE_SIZE
    # an evicted entry is compiled again and gives the same ids
    again = M.generate(model, prompt=prompt, max_length=4, strategy="sample", seed=0)
    np.testing.assert_array_equal(np.asarray(again), first)


@pytest.mark.parametrize("kind", ["transformer_lm", "seq2seq"])
def test_bfloat16_projection_is_the_rounded_matrix_read_once(kind):
    """Given the output matrix cast once (`projection_step_weights`), the
    head computes with it (tied embedding; the seq2seq's Dense kernel and
    bias) rounded to bfloat16, as NumPy does with ml_dtypes; `generate` greedy with
    `projection_dtype="bfloat16"` equals the step-by-step argmax of that
    head."""
    import ml_dtypes

    from seqkeras.models import steps

    model, inputs = build(kind)
    width = (
        model.part("embedding").embeddings.shape[1]
        if kind == "transformer_lm"
        else model.part("logits").kernel.shape[0]
    )
    h = np.random.default_rng(2).normal(size=(3, width)).astype("float32")
    bf16 = ml_dtypes.bfloat16

    def rounded(a):
        return np.asarray(a).astype(bf16).astype("float32")

    cast = steps.projection_step_weights(model, "bfloat16")
    if kind == "transformer_lm":
        head = steps.step_logits(None, model.part("embedding"))
        low_head = steps.step_logits(None, model.part("embedding"), cast)
        expected = rounded(h) @ rounded(model.part("embedding").embeddings).T
    else:
        dense = model.part("logits")
        head = steps.step_logits(dense)
        low_head = steps.step_logits(dense, weights=cast)
        expected = rounded(h) @ rounded(dense.kernel) + rounded(dense.bias)
    exact = np.asarray(head(h))
    low = np.asarray(low_head(h))
    # bfloat16 products, accumulated in bfloat16 or float32 by the kernel
    np.testing.assert_allclose(low, expected, rtol=2e-2, atol=2e-2)
    assert np.abs(low - exact).max() > 0  # it did round

    prompt = np.full((2, 1), seqkeras.data.BOS, "int32")
    if inputs is None:
        prompt = np.array([[4, 5], [6, 7]], "int32")
    out = np.asarray(
        M.generate(
            model, inputs, prompt=prompt, max_length=6, eos_id=None, projection_dtype="bfloat16"
        )
    )
    start, step = M.decoder_step(model)
    weights = model.prepare_step_weights("bfloat16")
    cache = start(inputs, 2, 6)
    tokens = prompt
    for t in range(5):
        logits, cache = step(tokens[:, t], cache, t, step_weights=weights)
        if t + 1 >= tokens.shape[1]:
            nxt = np.argmax(np.asarray(logits), -1).astype("int32")
            tokens = np.concatenate([tokens, nxt[:, None]], 1)
    np.testing.assert_array_equal(out, tokens)
    with pytest.raises(ValueError, match="`projection_dtype`.*'int8'"):
        M.generate(model, inputs, prompt=prompt, max_length=6, projection_dtype="int8")


def test_generate_follows_the_compile_mode_policy(monkeypatch):
    import keras

    from seqkeras.models import generation

    model = M.recurrent_language_model(V, 4, cell="gru")
    prompt = np.array([[4, 5]], "int32")
    chosen = []
    real = generation._compiled

    def spy(model, run, key, jit_compile=True):
        chosen.append(jit_compile)
        return real(model, run, key, jit_compile)

    monkeypatch.setattr(generation, "_compiled", spy)
    xla = np.asarray(M.generate(model, prompt=prompt, max_length=5, jit_compile=True))
    graph = np.asarray(M.generate(model, prompt=prompt, max_length=5, jit_compile=False))
    auto = np.asarray(M.generate(model, prompt=prompt, max_length=5))
    want = M.choose_jit_compile(model, purpose="generate")[0]
    assert chosen == [True, False, want]
    np.testing.assert_array_equal(graph, xla)
    np.testing.assert_array_equal(auto, xla)
    with pytest.raises(ValueError, match="`generate`.*jit_compile.*Received: jit_compile='yes'"):
        M.generate(model, prompt=prompt, max_length=5, jit_compile="yes")
    if keras.backend.backend() == "tensorflow":
        # one policy, by purpose: bfloat16 on CPUs trains without XLA and
        # generates with it (decoding is bound by per-op overhead)
        keras.config.set_dtype_policy("mixed_bfloat16")
        try:
            mixed = M.recurrent_language_model(V, 4, cell="gru")
        finally:
            keras.config.set_dtype_policy("float32")
        M.generate(mixed, prompt=prompt, max_length=5)
        assert chosen[-1] is True
        assert M.choose_jit_compile(mixed, purpose="generate")[0] is True
        with pytest.raises(ValueError, match="choose_jit_compile.*purpose"):
            M.choose_jit_compile(mixed, purpose="serve")
