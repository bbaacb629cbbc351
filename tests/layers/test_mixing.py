"""`ScalarMix` against a hand computation (and AllenNLP's layer norm
written out in NumPy) and finite differences; `ReverseSequence` against
NumPy."""

import keras
import numpy as np
import pytest

import seqkeras
from tests.layer_checks import run_layer_test

L = seqkeras.layers


def numpy_mix(layers, w, gamma, mask=None, layer_norm=False):
    s = np.exp(w - w.max())
    s = s / s.sum()
    out = 0.0
    for k, h in enumerate(layers):
        if layer_norm:
            m = np.ones(h.shape[:2], bool) if mask is None else mask
            values = h[m]  # (unmasked steps, features): every element counts
            mean, var = values.mean(), values.var()
            h = (h - mean) / np.sqrt(var + 1e-12)
        out = out + s[k] * h
    return gamma * out


def _layers(seed=0, k=3):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(2, 5, 4)).astype("float32") * (k + 1) for k in range(k)]


@pytest.mark.parametrize("layer_norm", [False, True])
def test_scalar_mix_matches_hand_computation(layer_norm):
    layers = _layers()
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    mix = L.ScalarMix(3, layer_norm=layer_norm)
    mix(layers, mask=mask)
    w = np.array([0.3, -1.0, 2.0], "float32")
    mix.scalar_weights.assign(w)
    mix.gamma.assign(1.7)
    got = np.asarray(mix(layers, mask=mask))
    want = numpy_mix(layers, w, 1.7, mask, layer_norm)
    np.testing.assert_allclose(got[mask], want[mask], rtol=1e-5, atol=1e-5)
    # starts as an equal mix (w = 0) with gamma 1
    fresh = np.asarray(L.ScalarMix(3)(layers))
    np.testing.assert_allclose(fresh, sum(layers) / 3, rtol=1e-6, atol=1e-6)


def test_scalar_mix_layer_norm_ignores_padding_values():
    layers = _layers(1)
    mask = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 0]], bool)
    other = [h.copy() for h in layers]
    for h in other:
        h[~mask] = 1e4  # garbage where padded
    mix = L.ScalarMix(3, layer_norm=True)
    a, b = np.asarray(mix(layers, mask=mask)), np.asarray(mix(other, mask=mask))
    np.testing.assert_allclose(a[mask], b[mask], rtol=1e-5, atol=1e-5)


def test_scalar_mix_gradients_match_finite_differences():
    import tensorflow as tf

    layers = _layers(2)
    mix = L.ScalarMix(3)
    mix(layers)
    mix.scalar_weights.assign([0.2, -0.4, 0.1])
    mix.gamma.assign(0.8)
    probe = np.random.default_rng(3).normal(size=layers[0].shape).astype("float64")

    def objective(w, gamma):
        return float(np.sum(numpy_mix([h.astype("float64") for h in layers], w, gamma) * probe))

    with tf.GradientTape() as tape:
        value = tf.reduce_sum(tf.cast(mix(layers), tf.float64) * probe)
    grad_w, grad_gamma = tape.gradient(value, [mix.scalar_weights, mix.gamma])
    w, gamma, eps = np.array([0.2, -0.4, 0.1]), 0.8, 1e-6
    numeric = [
        (objective(w + eps * e, gamma) - objective(w - eps * e, gamma)) / (2 * eps)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(np.asarray(grad_w), numeric, rtol=1e-3, atol=1e-3)
    numeric_gamma = (objective(w, gamma + eps) - objective(w, gamma - eps)) / (2 * eps)
    np.testing.assert_allclose(float(grad_gamma), numeric_gamma, rtol=1e-3)


def test_scalar_mix_contract_and_errors():
    """`run_layer_test`'s checks for a layer whose input is a list."""
    import os
    import tempfile

    layers = _layers(4)
    mix = L.ScalarMix(3, layer_norm=True)
    assert L.ScalarMix.from_config(mix.get_config()).get_config() == mix.get_config()
    out = mix(layers)
    assert (len(mix.trainable_weights), len(mix.non_trainable_weights)) == (2, 0)
    assert mix.compute_output_shape([h.shape for h in layers]) == tuple(out.shape)
    inputs = [keras.Input((None, 4)) for _ in range(3)]
    masked = [keras.layers.Masking()(x) for x in inputs]
    mixed = L.ScalarMix(3, layer_norm=True)(masked)
    assert tuple(mixed.shape) == (None, None, 4)
    assert mixed._keras_mask is not None  # the mask passes through
    model = keras.Model(inputs, mixed)
    before = np.asarray(model(layers))
    with tempfile.TemporaryDirectory() as tmp:
        model.save(os.path.join(tmp, "m.keras"))
        loaded = keras.saving.load_model(os.path.join(tmp, "m.keras"))
    np.testing.assert_allclose(np.asarray(loaded(layers)), before, atol=1e-6)
    model.compile(optimizer="adam", loss="mse", jit_compile=True)
    history = model.fit(layers, np.zeros_like(before), epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = L.ScalarMix(3)
        out = layer(layers)
        assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
        assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in layer.weights)
    finally:
        keras.config.set_dtype_policy("float32")
    with pytest.raises(ValueError, match="ScalarMix.*mask"):
        L.ScalarMix(3)(layers, mask=np.ones((2, 4), bool))
    with pytest.raises(ValueError, match="ScalarMix.*3 tensors"):
        L.ScalarMix(3)(layers[:2])
    with pytest.raises(ValueError, match="ScalarMix.*one shape"):
        L.ScalarMix(2)([layers[0], layers[1][:, :3]])
    with pytest.raises(ValueError, match="ScalarMix.*trainable_weights_init"):
        L.ScalarMix(2, trainable_weights_init=[0.0])
    with pytest.raises(TypeError, match="ScalarMix.*num_layers"):
        L.ScalarMix(2.0)
    mix = L.ScalarMix(2, trainable_weights_init=[1.0, 0.0])
    mix(layers[:2])
    assert L.ScalarMix.from_config(mix.get_config()).trainable_weights_init == [1.0, 0.0]


def numpy_reverse(x, mask):
    out = x.copy()
    for b in range(len(x)):
        n = int(mask[b].sum())
        out[b, :n] = x[b, :n][::-1]
    return out


def test_reverse_sequence_matches_numpy_and_undoes_itself():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 6, 2)).astype("float32")
    mask = np.array([[1] * 6, [1, 1, 1, 0, 0, 0], [0] * 6], bool)
    layer = L.ReverseSequence()
    once = np.asarray(layer(x, mask=mask))
    np.testing.assert_array_equal(once, numpy_reverse(x, mask))
    np.testing.assert_array_equal(np.asarray(layer(once, mask=mask)), x)
    np.testing.assert_array_equal(np.asarray(layer(x)), x[:, ::-1])  # no mask: all steps
    ids = np.array([[4, 5, 6, 0]])  # rank 2 (token ids) too
    np.testing.assert_array_equal(np.asarray(layer(ids, mask=ids > 0)), [[6, 5, 4, 0]])


def test_reverse_sequence_contract_and_errors():
    x = np.random.default_rng(6).normal(size=(2, 5, 3)).astype("float32")
    run_layer_test(lambda: L.ReverseSequence(), x, num_weights=(0, 0))
    with pytest.raises(ValueError, match="ReverseSequence.*mask"):
        L.ReverseSequence()(x, mask=np.ones((2, 4), bool))
    with pytest.raises(ValueError, match="ReverseSequence.*rank >= 2"):
        L.ReverseSequence()(keras.ops.ones((3,)))
