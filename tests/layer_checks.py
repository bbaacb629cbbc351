"""One helper every layer test calls (docs/design.md, Style 6)."""

import os
import tempfile

import keras
import numpy as np
import tensorflow as tf


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _shapes(x):
    return [tuple(np.shape(t)) for t in _as_list(x)]


def _sublayers(layer):
    """The layers `layer` holds as attributes (directly or in lists)."""
    for value in vars(layer).values():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, keras.layers.Layer) and item is not layer:
                yield item


class _MaskProbe(keras.layers.Layer):
    """Records the mask Keras hands it (public API: a layer whose `call`
    takes `mask` receives the mask of its input)."""

    def call(self, x, mask=None):
        self.seen = mask
        return x


def mask_of(x):
    """The Keras mask carried by `x` (symbolic or eager), or None."""
    probe = _MaskProbe()
    probe(x)
    return probe.seen


def _dims_agree(symbolic, eager, exact):
    """Every dimension of the symbolic shape equals the eager one (`exact`)
    or is unknown."""
    assert len(symbolic) == len(eager), (symbolic, eager)
    for s, e in zip(symbolic, eager):
        assert s == e or (s is None and not exact), (symbolic, eager)


def run_layer_test(
    make_layer, inputs, call_kwargs=None, num_weights=None, mixed_precision=True, fit=True
):
    """The one layer-test helper (like Keras' and keras-hub's
    `run_layer_test`): every layer test calls it.

    Checks: the config round trip; symbolic outputs against eager ones on
    every dimension (fully static inputs: equal; dynamic batch and time:
    equal where known), every returned tensor included (e.g. attention
    weights with query length != key length), and `compute_output_shape`
    where the layer defines it for these inputs; the output mask's shape;
    the number of trainable and non-trainable weights (`num_weights`, a
    pair); a `.keras` round trip; a jit-compiled `fit`; under
    `mixed_float16` / `mixed_bfloat16`: float32 weights, the policy on
    every sublayer, outputs in the compute dtype and finite. (TensorFlow:
    on JAX, `tests/jax` trains each layer family under jit and re-runs the
    layers' equality tests.)

    Args:
        make_layer: zero-argument callable returning a fresh layer.
        inputs: one NumPy batch, or a tuple of them (positional inputs,
            e.g. query and value).
        call_kwargs: keyword arguments of every call.
        num_weights: `(trainable, non_trainable)` weight counts.
    """
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    call_kwargs = dict(call_kwargs or {})
    layer = make_layer()
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config

    eager = _as_list(layer(*inputs, **call_kwargs))
    if num_weights is not None:
        assert (len(layer.trainable_weights), len(layer.non_trainable_weights)) == tuple(
            num_weights
        )
    try:
        expected = layer.compute_output_shape(*[x.shape for x in inputs])
    except (NotImplementedError, TypeError):
        expected = None  # needs call arguments (e.g. returned weights)
    if expected is not None and not call_kwargs:
        expected = expected if isinstance(expected, list) else [expected]
        if not isinstance(expected[0], (list, tuple)):
            expected = [expected]
        assert _shapes(eager)[: len(expected)] == [tuple(e) for e in expected]
    for batch_size, dynamic in ((inputs[0].shape[0], False), (None, True)):
        symbolic_in = [
            keras.Input(
                (None,) * (x.ndim - 2) + x.shape[-1:] if dynamic else x.shape[1:],
                batch_size=batch_size,
            )
            for x in inputs
        ]
        symbolic = _as_list(make_layer()(*symbolic_in, **call_kwargs))
        assert len(symbolic) == len(eager)
        for s, e in zip(symbolic, eager):
            _dims_agree(tuple(s.shape), tuple(np.shape(e)), not dynamic)

    # The output mask: one per sequence output, shaped (batch, time).
    if layer.supports_masking and inputs[0].ndim == 3:
        mask = np.ones(inputs[0].shape[:2], bool)
        out_mask = layer.compute_mask(inputs[0], mask)
        for m, e in zip(_as_list(out_mask), eager):
            if m is not None:
                assert tuple(np.shape(m)) == tuple(np.shape(e))[:2]

    # `.keras` round trip.
    symbolic_in = [keras.Input(x.shape[1:]) for x in inputs]
    model = keras.Model(
        symbolic_in if len(inputs) > 1 else symbolic_in[0],
        make_layer()(*symbolic_in, **call_kwargs),
    )
    feed = list(inputs) if len(inputs) > 1 else inputs[0]
    before = [np.asarray(t) for t in _as_list(model(feed))]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    after = [np.asarray(t) for t in _as_list(loaded(feed))]
    for a, b in zip(before, after):
        np.testing.assert_allclose(a, b, atol=1e-6)

    if fit:
        model.compile(optimizer="adam", loss="mse", jit_compile=True)
        # built here, not in the train step's first trace (which TensorFlow
        # then traces twice: SequenceModel.fit does the same)
        model.optimizer.build(model.trainable_variables)
        targets = [np.zeros_like(a) for a in before]
        history = model.fit(feed, targets if len(targets) > 1 else targets[0], epochs=2, verbose=0)
        assert np.all(np.isfinite(history.history["loss"]))

    if mixed_precision:
        _check_policies(make_layer, inputs, call_kwargs, ("mixed_float16", "mixed_bfloat16"))


def _check_policies(make_layer, inputs, call_kwargs, policies):
    """Under each mixed policy: float32 weights, the policy on every
    sublayer, outputs in the compute dtype and finite."""
    for policy in policies:
        keras.config.set_dtype_policy(policy)
        try:
            layer = make_layer()
            out = _as_list(layer(*inputs, training=True, **call_kwargs))
            for w in layer.weights:
                if "seed_generator" in w.path:
                    continue
                assert keras.backend.standardize_dtype(w.dtype) in ("float32",), w.path
            for sub in _sublayers(layer):
                assert sub.dtype_policy.name == policy, sub.name
            compute = policy.split("_")[1]
            for o in out:
                if keras.backend.is_float_dtype(o.dtype):
                    assert keras.backend.standardize_dtype(o.dtype) == compute
                assert np.all(np.isfinite(np.asarray(o, "float32")))
        finally:
            keras.config.set_dtype_policy("float32")


def check_gradients_numerically(loss, variables, rng=None, entries=None, eps=1e-6, tol=1e-6):
    """Compares tape gradients of `loss()` (float64) with central finite
    differences on every entry of `variables`, or on `entries` random ones
    per variable (with `rng`)."""
    with tf.GradientTape() as tape:
        value = loss()
    grads = tape.gradient(value, variables)
    for var, grad in zip(variables, grads):
        flat = var.numpy().reshape(-1)
        idx = (
            range(flat.size)
            if entries is None
            else rng.choice(flat.size, size=min(flat.size, entries), replace=False)
        )
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
                var.name,
                j,
                numeric,
                analytic,
            )
    return value
