"""LoRA: adapters on the attention and gated feed-forward projections of a
decoder language model. A new adapter computes what the plain model does;
only the adapters train (the base weights stay bit for bit); the adapted
kernel equals `W + (alpha / rank) A B` computed in NumPy; the cached step
(fused step weights) equals the full pass; merged, saved alone and loaded,
and `.keras` round trips give the same outputs."""

import os

import keras
import numpy as np
import pytest

import seqkeras

M = seqkeras.models
sk = seqkeras.layers


def _model():
    return M.decoder_language_model(40, 16, 2, 4, 32, num_key_value_heads=2, max_length=16)


def _ids(rows=8, length=10, seed=0):
    return np.random.default_rng(seed).integers(1, 40, (rows, length)).astype("int32")


def _randomize_adapters(model, seed=1):
    rng = np.random.default_rng(seed)
    for v in M.lora_variables(model):
        v.assign(rng.normal(0, 0.2, v.shape).astype("float32"))


def test_adapters_start_equal_and_only_they_train():
    model, x = _model(), _ids()
    tuned = M.with_lora(model, rank=4, alpha=8)
    np.testing.assert_array_equal(np.asarray(tuned(x)), np.asarray(model(x)))
    names = {v.name for v in tuned.trainable_weights}
    adapted = ("query", "key", "value", "output", "gate", "up", "down")
    assert names == {f"{k}_lora_{ab}" for k in adapted for ab in "ab"}
    frozen = {v.path: np.asarray(v).copy() for v in tuned.weights if "_lora_" not in v.name}
    tuned.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    loss = tuned.fit(x[:, :-1], x[:, 1:], epochs=4, verbose=0).history["loss"]
    assert loss[-1] < loss[0]
    for v in tuned.weights:
        if v.path in frozen:
            np.testing.assert_array_equal(np.asarray(v), frozen[v.path], err_msg=v.path)
    assert not np.allclose(np.asarray(tuned(x)), np.asarray(model(x)), atol=1e-4)


def test_adapted_kernel_is_w_plus_scaled_ab():
    layer = sk.GatedFeedForward(8, lora_rank=2, lora_alpha=6)
    x = _ids(2, 3).astype("float32") / 40
    layer.build((None, 3, 4))
    for v in layer.weights:
        v.assign(np.random.default_rng(len(v.path)).normal(size=v.shape).astype("float32"))
    w = {n: np.asarray(getattr(layer, f"{n}_kernel")) for n in ("gate", "up", "down")}
    for n in w:
        a, b = (np.asarray(getattr(layer, f"{n}_lora_{s}")) for s in "ab")
        w[n] = w[n] + 3.0 * a @ b
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    gate = x @ w["gate"]
    expected = (gate / (1 + np.exp(-gate)) * (x @ w["up"])) @ w["down"]
    np.testing.assert_allclose(np.asarray(layer(x)), expected, rtol=1e-4, atol=1e-4)


def test_cached_step_merge_save_and_keras_round_trip(tmp_path):
    model, x = _model(), _ids()
    tuned = M.with_lora(model, rank=4)
    _randomize_adapters(tuned)
    full = np.asarray(tuned(x))
    # generate (cached step, fused step weights) equals greedy recomputation
    prompt = x[:2, :3]
    out = np.asarray(M.generate(tuned, prompt=prompt, max_length=9, eos_id=None))
    tokens = prompt
    while tokens.shape[1] < 9:
        nxt = np.argmax(np.asarray(tuned(tokens))[:, -1], -1)
        tokens = np.concatenate([tokens, nxt[:, None].astype("int32")], 1)
    np.testing.assert_array_equal(out, tokens)
    merged = M.merge_lora(tuned)
    assert not M.lora_variables(merged)
    np.testing.assert_allclose(np.asarray(merged(x)), full, atol=1e-5)
    path = M.save_lora(tuned, str(tmp_path / "adapters.npz"))
    assert os.path.getsize(path) < 40_000  # the adapters alone
    again = M.load_lora(M.with_lora(model, rank=4), path)
    np.testing.assert_array_equal(np.asarray(again(x)), full)
    tuned.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(np.asarray(loaded(x)), full)


def test_lora_errors(tmp_path):
    with pytest.raises(ValueError, match="no layer that takes adapters"):
        M.with_lora(M.recurrent_language_model(20, 8), rank=2)
    with pytest.raises(ValueError, match="`with_lora`.*rank"):
        M.with_lora(_model(), rank=0)
    with pytest.raises(ValueError, match="has no adapters"):
        M.merge_lora(_model())
    with pytest.raises(ValueError, match="`MultiHeadAttention`.*lora_rank"):
        sk.MultiHeadAttention(2, 4, lora_rank=-1)
    tuned = M.with_lora(_model(), rank=2)
    path = M.save_lora(tuned, str(tmp_path / "rank2.npz"))
    with pytest.raises(ValueError, match="different rank"):
        M.load_lora(M.with_lora(_model(), rank=3), path)
