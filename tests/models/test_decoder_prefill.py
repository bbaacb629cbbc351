"""A decoder language model's step on several tokens at once (a prompt's
prefill): the same logits and caches as one token at a time, and the
logits of the full causal pass, from a buffer and from a cache that grows
(TF Serving), eagerly and under XLA; every decoder-block family (Llama
blocks, Transformer/GPT-2 blocks) through the one cached step."""

import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import seqkeras


def tiny(window=None, hidden_dim=16):
    return seqkeras.models.decoder_language_model(
        vocab_size=40,
        hidden_dim=hidden_dim,
        num_layers=2,
        num_heads=4,
        intermediate_dim=2 * hidden_dim,
        num_key_value_heads=2,
        max_length=16,
        window=window,
    )


def tiny_transformer():
    """`transformer_language_model`: GPT-2's blocks (pre-LN, learned
    positions), ids from 1 (0 is padding)."""
    return seqkeras.models.transformer_language_model(
        40, 16, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32
    )


@pytest.mark.parametrize("layout", ["fixed", "scatter", "growing"])
@pytest.mark.parametrize("kind", ["llama", "llama_window", "transformer"])
def test_several_tokens_in_one_step_equal_one_at_a_time(layout, kind):
    model = tiny_transformer() if kind == "transformer" else tiny(3 if "window" in kind else None)
    ids = np.random.default_rng(0).integers(1, 40, (2, 7)).astype("int32")
    full = np.asarray(model(ids))
    weights = model.prepare_step_weights()
    cache = model.init_cache(None, 2, 16, layout=layout)
    logits, cache = model.call_with_cache(ids[:, :5], cache, 0, step_weights=weights)  # prefill
    np.testing.assert_allclose(logits, full[:, 4], atol=1e-5)
    for i in (5, 6):
        logits, cache = model.call_with_cache(ids[:, i], cache, i, step_weights=weights)
        np.testing.assert_allclose(logits, full[:, i], atol=1e-5)
    one = model.init_cache(None, 2, 16, layout=layout)
    for i in range(7):
        _, one = model.call_with_cache(ids[:, i], one, i)
    for a, b in zip(cache, one):
        assert a.layout == b.layout == layout
        np.testing.assert_allclose(a[0], b[0], atol=1e-5)
        np.testing.assert_allclose(a[1], b[1], atol=1e-5)


def test_transformer_language_model_generate_prefills_the_prompt():
    # `generate` feeds a prompt of one length to the model's step in one
    # pass (the Transformer/GPT-2 family too): a step that counts its calls
    # sees 1 prefill call and 1 call per new token, and the ids equal greedy
    # decoding by full passes.
    model = tiny_transformer()
    prompt = np.random.default_rng(2).integers(1, 40, (2, 6)).astype("int32")
    calls = []
    step = model.call_with_cache

    def counted(tokens, cache, index, step_weights=None):
        calls.append(tuple(tokens.shape))
        return step(tokens, cache, index, step_weights=step_weights)

    model.call_with_cache = counted
    try:
        ids = np.asarray(
            seqkeras.models.generate(
                model, prompt=prompt, max_length=10, eos_id=None, jit_compile=False
            )
        )
    finally:
        del model.call_with_cache
    assert calls[0] == (2, 5)  # the prompt but its last token, in one pass
    assert all(shape == (2,) for shape in calls[1:])
    expected = prompt
    for _ in range(4):
        nxt = np.asarray(model(expected))[:, -1].argmax(-1)
        expected = np.concatenate([expected, nxt[:, None]], axis=1)
    np.testing.assert_array_equal(ids, expected)


def test_one_block_signature_and_the_old_names():
    # `TransformerDecoderBlock` takes the block signature every decoder
    # block takes (`cache`, `cache_index`); its old names still work, with
    # a DeprecationWarning, and give the same result.
    block = seqkeras.layers.TransformerDecoderBlock(2, 16, norm_first=True)
    x = np.random.default_rng(3).normal(size=(1, 3, 8)).astype("float32")
    full = np.asarray(block(x))
    new, _ = block(x, cache=block.init_cache(1, 4), cache_index=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old, _ = block(x, self_attention_cache=block.init_cache(1, 4), self_attention_cache_index=0)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    np.testing.assert_allclose(new, full, atol=1e-5)
    np.testing.assert_allclose(old, full, atol=1e-5)
    with pytest.raises(ValueError, match="both `cache` and its old name"):
        block(x, cache=block.init_cache(1, 4), self_attention_cache=block.init_cache(1, 4))
    with pytest.raises(ValueError, match="`cache` without a `cache_index`"):
        block(x, cache=block.init_cache(1, 4))


def test_prefill_after_a_cached_prefix_under_xla():
    model = tiny()
    ids = np.random.default_rng(1).integers(0, 40, (1, 9)).astype("int32")
    full = np.asarray(model(ids))

    @tf.function(jit_compile=True)
    def prefill(tokens, cache, index):
        return model.call_with_cache(tokens, cache, index)

    cache = model.init_cache(None, 1, 16)
    _, cache = prefill(ids[:, :4], cache, 0)
    logits, _ = prefill(ids[:, 4:], cache, 4)  # a second turn's tokens
    np.testing.assert_allclose(logits, full[:, 8], atol=1e-5)


@pytest.mark.parametrize("quantize", [None, "dynamic_int8"])
def test_tflite_prefill_and_decode_equal_keras(tmp_path, quantize):
    # One builtin-only file with `prefill` (the prompt in one pass) and
    # `decode` (one token) signatures, the grouped key/value caches as
    # states over 12 positions: greedy continuation token by token equal to
    # Keras' (float32: logits within 1e-4; int8 weights: the same tokens
    # here, and a smaller file).
    from seqkeras.export.streaming import streaming_tflite
    from seqkeras.export.tflite import op_names, tflite_runner

    model = tiny(hidden_dim=64)  # products of >= 1,024 weights: int8 quantizes them
    path, shapes = streaming_tflite(
        model, str(tmp_path / "lm.tflite"), max_length=12, quantize=quantize, prefill=True
    )
    flatbuffer = open(path, "rb").read()
    ops = op_names(flatbuffer)
    assert not [op for op in ops if "FLEX" in op.upper()]
    assert "VAR_HANDLE" not in ops and "READ_VARIABLE" not in ops  # weights folded in
    assert shapes[1] == (2, 12, 16)  # key/value heads only, 12 positions
    prefill, decode = tflite_runner(flatbuffer, "prefill"), tflite_runner(flatbuffer, "decode")
    ids = np.random.default_rng(2).integers(0, 40, (1, 5)).astype("int32")
    states = {f"state_{i}": np.zeros((1,) + s, "float32") for i, s in enumerate(shapes)}
    out = prefill(token_ids=ids, **states)
    tokens = list(ids[0])
    for _ in range(6):
        expected = np.asarray(model(np.array([tokens], "int32")))[0, -1]
        if quantize is None:
            np.testing.assert_allclose(out["logits"][0], expected, atol=1e-4)
        assert int(np.argmax(out["logits"][0])) == int(np.argmax(expected))
        tokens.append(int(np.argmax(expected)))
        states = {k.replace("new_", ""): v for k, v in out.items() if k.startswith("new_")}
        out = decode(token_ids=np.array([tokens[-1]], "int32"), **states)
    assert float(out["new_state_0"][0, 0]) == 11.0
    if quantize:
        plain, _ = streaming_tflite(
            model, str(tmp_path / "f32.tflite"), max_length=12, prefill=True
        )
        assert os.path.getsize(path) < 0.6 * os.path.getsize(plain)


@pytest.mark.parametrize("kind", ["llama", "transformer"])
def test_tflite_prefill_and_step_decode_as_keras_generate(kind, tmp_path):
    # The phone's loop: one builtin-only file, `prefill` (a prompt in one
    # pass) and `decode` (one token), tokens chosen on the host by
    # `seqkeras.decoding.choose_token`: for prompts of different lengths
    # (each its own request) greedy and seeded sampling give the ids of
    # Keras `generate` (Llama blocks and GPT-2's Transformer blocks alike).
    from seqkeras.decoding import choose_token
    from seqkeras.export.streaming import streaming_tflite
    from seqkeras.export.tflite import tflite_runner

    model = tiny_transformer() if kind == "transformer" else tiny()
    path, shapes = streaming_tflite(model, str(tmp_path / "lm.tflite"), max_length=12, prefill=True)
    flatbuffer = open(path, "rb").read()
    prefill, decode = tflite_runner(flatbuffer, "prefill"), tflite_runner(flatbuffer, "decode")
    prompts = np.random.default_rng(4).integers(4, 40, (3, 5)).astype("int32")
    for n, prompt in zip((5, 2, 3), prompts):
        for options in ({}, dict(strategy="sample", temperature=0.9, top_k=8, seed=n)):
            expected = np.asarray(
                seqkeras.models.generate(
                    model, prompt=prompt[None, :n], max_length=10, eos_id=None, **options
                )
            )[0]
            sampling = {k: v for k, v in options.items() if k != "strategy"}
            states = {f"state_{i}": np.zeros((1,) + s, "float32") for i, s in enumerate(shapes)}
            out = prefill(token_ids=prompt[None, :n], **states)
            tokens = list(prompt[:n])
            while len(tokens) < 10:
                chosen = choose_token(out["logits"], len(tokens) - 1, **sampling)
                tokens.append(int(np.asarray(chosen)[0]))
                states = {k.replace("new_", ""): v for k, v in out.items() if k.startswith("new_")}
                out = decode(token_ids=np.array([tokens[-1]], "int32"), **states)
            np.testing.assert_array_equal(tokens, expected, err_msg=f"{kind} {n} {options}")


def test_tflite_prefill_needs_a_model_that_prefills(tmp_path):
    from seqkeras.export.streaming import streaming_tflite

    model = seqkeras.models.recurrent_language_model(30, 8)
    with pytest.raises(ValueError, match="streaming_tflite` with `prefill=True` needs"):
        streaming_tflite(model, str(tmp_path / "x.tflite"), prefill=True)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_generate_prefills_the_prompt_and_decodes_as_the_token_loop(jit_compile, monkeypatch):
    # generate on one prompt length: the prompt but its last token in one
    # call_with_cache (counted), then the loop from the last prompt token;
    # the ids equal the token-by-token loop's (forced by prompt_lengths)
    # for greedy decoding and sampling, at a model with logits far from ties
    import keras

    keras.utils.set_random_seed(3)
    model = tiny()
    for layer in model.layers:  # larger weights: logits far apart
        for w in layer.weights:
            w.assign(np.asarray(w) * 3.0)
    calls = []
    original = type(model).call_with_cache

    def counted(self, tokens, cache, index):
        calls.append(tuple(tokens.shape))
        return original(self, tokens, cache, index)

    monkeypatch.setattr(type(model), "call_with_cache", counted)
    prompt = np.random.default_rng(0).integers(3, 40, (3, 6)).astype("int32")
    lengths = np.full((3,), 6, "int32")
    options = dict(prompt=prompt, max_length=14, eos_id=None, jit_compile=jit_compile)
    for strategy, extra in (("greedy", {}), ("sample", {"seed": 4, "top_k": 5})):
        calls.clear()
        fast = np.asarray(seqkeras.models.generate(model, strategy=strategy, **options, **extra))
        assert (3, 5) in calls  # the prefill: 5 of the 6 prompt tokens at once
        slow = np.asarray(
            seqkeras.models.generate(
                model, strategy=strategy, prompt_lengths=lengths, **options, **extra
            )
        )
        assert (3, 5) not in calls[calls.index((3, 5)) + 1 :]
        np.testing.assert_array_equal(fast, slow)
        np.testing.assert_array_equal(fast[:, :6], prompt)


def test_decoding_start_feeds_the_prompt_from_start():
    # decoding.greedy(start=k): the loop's first step feeds prompt[:, k] at
    # index k (the cache holding positions < k)
    from keras import ops

    from seqkeras import decoding

    seen = []

    def step(tokens, cache, index):
        seen.append(int(index))
        return ops.one_hot(tokens + 1, 12), cache

    out = decoding.greedy(step, np.array([[1, 2, 3, 4]]), (), max_length=8, start=3)
    assert np.asarray(out).tolist() == [[1, 2, 3, 4, 5, 6, 7, 8]]
    assert seen[0] == 3
    with pytest.raises(ValueError, match="`greedy` expects `start`.*below the prompt's 4 tokens"):
        decoding.greedy(step, np.array([[1, 2, 3, 4]]), (), max_length=8, start=4)
    with pytest.raises(ValueError, match="`sample`.*start"):
        decoding.sample(step, np.array([[1, 2]]), (), max_length=8, start=-1)
    with pytest.raises(TypeError, match="`greedy`.*start"):
        decoding.greedy(step, np.array([[1, 2]]), (), max_length=8, start=1.5)


def test_one_name_per_concept_and_the_old_names():
    # The two language-model builders share their names (`tie_weights`,
    # `norm_epsilon`, `max_length`, `mask_padding` default True); the old
    # names build the same model, with a DeprecationWarning; both given is
    # refused.
    args = dict(vocab_size=40, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16)
    new = seqkeras.models.decoder_language_model(**args, tie_weights=False)
    with pytest.warns(DeprecationWarning, match="`tie_embeddings` is deprecated"):
        old = seqkeras.models.decoder_language_model(**args, tie_embeddings=False)
    assert new.part("logits") is not None and old.part("logits") is not None
    assert new.part("embedding").mask_zero  # one default: id 0 is padding
    with pytest.raises(ValueError, match="both `tie_weights` and its old name"):
        seqkeras.models.decoder_language_model(**args, tie_weights=False, tie_embeddings=True)
    assert new.max_length == new.max_generation_length == 2048
    with pytest.warns(DeprecationWarning, match="`context_length` is deprecated"):
        assert new.context_length == 2048
    restored = type(new).from_config(new.get_config())
    assert restored.max_length == 2048
    with pytest.warns(DeprecationWarning, match="`layer_norm_epsilon` is deprecated"):
        lm = seqkeras.models.transformer_language_model(
            40, 8, num_layers=1, num_heads=2, hidden_dim=8, layer_norm_epsilon=1e-3
        )
    assert lm.part("blocks")[0].layer_norm_epsilon == 1e-3
    lm = seqkeras.models.transformer_language_model(
        40, 8, num_layers=1, num_heads=2, hidden_dim=8, norm_epsilon=1e-3
    )
    assert lm.part("blocks")[0].layer_norm_epsilon == 1e-3


def test_prompt_lengths_after_one_length_prompts_reuse_no_compiled_loop():
    # The compiled decoders are cached per option; prompts of different
    # lengths are decoded as such after a call with one length (whose
    # cached loop prefilled the whole width): each row continues its own
    # prompt, as greedy decoding by full passes does.
    model = tiny_transformer()
    prompt = np.array([[4, 5, 6, 7, 9], [8, 9, 10, 0, 0], [11, 12, 13, 14, 0]], "int32")
    lengths = np.array([5, 3, 4], "int32")
    options = dict(max_length=8, eos_id=None)
    seqkeras.models.generate(model, prompt=prompt, **options)  # the whole width prefilled
    ids = np.asarray(
        seqkeras.models.generate(model, prompt=prompt, prompt_lengths=lengths, **options)
    )
    for row, given, n in zip(ids, prompt, lengths):
        expected = list(given[:n])
        while len(expected) < 8:
            expected.append(int(np.asarray(model(np.array([expected])))[0, -1].argmax()))
        np.testing.assert_array_equal(row, expected)


def test_a_serving_runtime_is_refused_under_xla():
    from seqkeras.export import loops

    with pytest.raises(ValueError, match="does not compile with XLA"):
        seqkeras.models.generate(
            tiny(), prompt=np.array([[4, 5]]), max_length=8, runtime=loops.SERVING, jit_compile=True
        )
