"""One helper every layer test calls (DESIGN.md, "Style" 6)."""

import os
import tempfile

import keras
import numpy as np
import tensorflow as tf


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _shapes(x):
    return [tuple(np.shape(t)) for t in _as_list(x)]


def build_model(make_layer, input_shape, batch_size=None):
    inp = keras.Input(input_shape, batch_size=batch_size)
    out = make_layer()(inp)
    return keras.Model(inp, out)


def check_layer(make_layer, x, mixed_precision=True, fit=True):
    """Checks config round trip, symbolic/eager/compute_output_shape shapes,
    `.keras` save/load equality, a jit-compiled fit step and mixed precision.

    Args:
        make_layer: zero-argument callable returning a fresh layer.
        x: a NumPy input batch (batch, time, features).
    """
    layer = make_layer()
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config

    # Symbolic (dynamic time) and eager shapes agree with compute_output_shape.
    eager = layer(x)
    expected = layer.compute_output_shape(x.shape)
    if not isinstance(expected, list):
        expected = [expected]
    assert _shapes(eager) == [tuple(s) for s in expected]
    inp = keras.Input((None, x.shape[-1]))
    symbolic = _as_list(make_layer()(inp))
    for s, e in zip(symbolic, expected):
        assert tuple(s.shape)[2:] == tuple(e)[2:]
        assert tuple(s.shape)[-1] == tuple(e)[-1]

    # `.keras` round trip.
    model = build_model(make_layer, x.shape[1:])
    before = [np.asarray(t) for t in _as_list(model(x))]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    after = [np.asarray(t) for t in _as_list(loaded(x))]
    for a, b in zip(before, after):
        np.testing.assert_allclose(a, b, atol=1e-6)

    if fit:
        model.compile(optimizer="adam", loss="mse", jit_compile=True)
        targets = [np.zeros_like(a) for a in before]
        history = model.fit(
            x, targets if len(targets) > 1 else targets[0], epochs=2,
            verbose=0,
        )
        assert np.all(np.isfinite(history.history["loss"]))

    if mixed_precision:
        for policy in ("mixed_float16", "mixed_bfloat16"):
            keras.config.set_dtype_policy(policy)
            try:
                layer = make_layer()
                out = _as_list(layer(x, training=True))
                for o in out:
                    assert keras.backend.standardize_dtype(o.dtype) == (
                        policy.split("_")[1]
                    )
                    assert np.all(np.isfinite(np.asarray(o, "float32")))
            finally:
                keras.config.set_dtype_policy("float32")


def check_gradients_numerically(loss, variables, rng=None, entries=None,
                                eps=1e-6, tol=1e-6):
    """Compares tape gradients of `loss()` (float64) with central finite
    differences on every entry of `variables`, or on `entries` random ones
    per variable (with `rng`)."""
    with tf.GradientTape() as tape:
        value = loss()
    grads = tape.gradient(value, variables)
    for var, grad in zip(variables, grads):
        flat = var.numpy().reshape(-1)
        idx = range(flat.size) if entries is None else rng.choice(
            flat.size, size=min(flat.size, entries), replace=False)
        for j in idx:
            orig = flat[j]
            values = []
            for step in (eps, -eps):
                flat[j] = orig + step
                var.assign(flat.reshape(var.shape))
                values.append(float(loss()))
            flat[j] = orig
            var.assign(flat.reshape(var.shape))
            numeric = (values[0] - values[1]) / (2 * eps)
            analytic = np.asarray(grad).reshape(-1)[j]
            assert abs(numeric - analytic) <= tol * max(1.0, abs(numeric)), (
                var.name, j, numeric, analytic)
    return value
