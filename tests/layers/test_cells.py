"""Cells against NumPy seed equations, Keras cells and finite differences."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqkeras.layers import GRUCell, LSTMCell, Recurrent, SimpleRNNCell
from tests.layer_checks import check_gradients_numerically, run_layer_test

UNITS, FEATURES, STEPS, BATCH = 5, 3, 7, 4
CELLS = {
    "rnn_tanh": lambda: SimpleRNNCell(UNITS),
    "rnn_relu": lambda: SimpleRNNCell(UNITS, activation="relu"),
    "gru": lambda: GRUCell(UNITS),
    "gru_reset_after": lambda: GRUCell(UNITS, reset_after=True),
    "lstm": lambda: LSTMCell(UNITS),
}
KERAS_CELLS = {
    "rnn_tanh": lambda: keras.layers.SimpleRNNCell(UNITS),
    "rnn_relu": lambda: keras.layers.SimpleRNNCell(UNITS, activation="relu"),
    "gru": lambda: keras.layers.GRUCell(UNITS, reset_after=False),
    "gru_reset_after": lambda: keras.layers.GRUCell(UNITS, reset_after=True),
    "lstm": lambda: keras.layers.LSTMCell(UNITS),
}


def sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


# --- the seed notes' equations, written literally in NumPy -----------------
def np_simple_rnn(x, W_x, W_h, b, phi):
    """h_t = phi(W_h h_{t-1} + W_x x_t + b_h) (column-vector form)."""
    h = np.zeros((x.shape[0], W_h.shape[0]))
    for t in range(x.shape[1]):
        h = phi(h @ W_h.T + x[:, t] @ W_x.T + b)
    return h


def np_gru_seed(x, W, U, b):
    """Seed notes: z = s(W_z x + U_z h + b_z), r = s(W_r x + U_r h + b_r),
    h~ = tanh(W_h x + U_h (r * h) + b_h), h = (1 - z) * h + z * h~."""
    h = np.zeros((x.shape[0], U["z"].shape[0]))
    for t in range(x.shape[1]):
        xt = x[:, t]
        z = sigmoid(xt @ W["z"].T + h @ U["z"].T + b["z"])
        r = sigmoid(xt @ W["r"].T + h @ U["r"].T + b["r"])
        hh = np.tanh(xt @ W["h"].T + (r * h) @ U["h"].T + b["h"])
        h = (1 - z) * h + z * hh
    return h


def np_gru_cudnn(x, W, U, b_i, b_h):
    """PyTorch/cuDNN form: n = tanh(W_n x + b_in + r * (U_n h + b_hn)),
    h = (1 - z) * n + z * h."""
    h = np.zeros((x.shape[0], U["z"].shape[0]))
    for t in range(x.shape[1]):
        xt = x[:, t]
        r = sigmoid(xt @ W["r"].T + b_i["r"] + h @ U["r"].T + b_h["r"])
        z = sigmoid(xt @ W["z"].T + b_i["z"] + h @ U["z"].T + b_h["z"])
        n = np.tanh(xt @ W["h"].T + b_i["h"] + r * (h @ U["h"].T + b_h["h"]))
        h = (1 - z) * n + z * h
    return h


def np_lstm_seed(x, W, b):
    """Seed notes: gates from W_g [h_{t-1}, x_t] + b_g, C = f C + i C~,
    h = o tanh(C)."""
    n = b["f"].shape[0]
    h = np.zeros((x.shape[0], n))
    c = np.zeros_like(h)
    for t in range(x.shape[1]):
        hx = np.concatenate([h, x[:, t]], axis=1)
        f = sigmoid(hx @ W["f"].T + b["f"])
        i = sigmoid(hx @ W["i"].T + b["i"])
        c_tilde = np.tanh(hx @ W["c"].T + b["c"])
        c = f * c + i * c_tilde
        o = sigmoid(hx @ W["o"].T + b["o"])
        h = o * np.tanh(c)
    return h


def _split(m, names):
    n = m.shape[-1] // len(names)
    return {k: m[..., j * n : (j + 1) * n] for j, k in enumerate(names)}


def numpy_reference(name, cell, x):
    K = cell.kernel.numpy().astype("float64")
    U = cell.recurrent_kernel.numpy().astype("float64")
    b = cell.bias.numpy().astype("float64")
    if name.startswith("rnn"):
        phi = np.tanh if name == "rnn_tanh" else (lambda a: np.maximum(a, 0))
        return np_simple_rnn(x, K.T, U.T, b, phi)
    if name == "gru":
        W, Uw, bb = (_split(m, "zrh") for m in (K, U, b))
        # Keras' z keeps the old state; the seed notes' z is 1 - z_keras,
        # i.e. the same gate with negated parameters.
        W = {k: v.T for k, v in W.items()}
        Uw = {k: v.T for k, v in Uw.items()}
        W["z"], Uw["z"], bb["z"] = -W["z"], -Uw["z"], -bb["z"]
        return np_gru_seed(x, W, Uw, bb)
    if name == "gru_reset_after":
        W = {k: v.T for k, v in _split(K, "zrh").items()}
        Uw = {k: v.T for k, v in _split(U, "zrh").items()}
        return np_gru_cudnn(x, W, Uw, _split(b[0], "zrh"), _split(b[1], "zrh"))
    W = {
        k: np.concatenate([u, w], axis=0).T
        for (k, u), w in zip(_split(U, "ifco").items(), _split(K, "ifco").values())
    }
    return np_lstm_seed(x, W, _split(b, "ifco"))


def _randomize(layer, rng, scale=0.5):
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape, scale=scale).astype(w.dtype))


@pytest.mark.parametrize("name", sorted(CELLS))
def test_matches_numpy_seed_equation(name):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH, STEPS, FEATURES))
    layer = Recurrent(CELLS[name]())
    layer(x.astype("float32"))
    _randomize(layer, rng)
    ours = layer(x.astype("float32")).numpy()
    ref = numpy_reference(name, layer.cell, x)
    np.testing.assert_allclose(ours, ref, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_matches_keras_cell_with_copied_weights(name):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(BATCH, STEPS, FEATURES)).astype("float32")
    mask = np.ones((BATCH, STEPS), bool)
    mask[1, 5:] = False
    ours = Recurrent(CELLS[name](), return_sequences=True, return_state=True)
    theirs = keras.layers.RNN(KERAS_CELLS[name](), return_sequences=True, return_state=True)
    ours(x), theirs(x)
    _randomize(ours, rng)
    for a, b in zip(ours.weights, theirs.weights):
        assert a.shape == b.shape and a.name == b.name
        b.assign(a.numpy())
    for m in (None, mask):
        out_a = ours(x, mask=m)
        out_b = theirs(x, mask=m)
        # Outputs at masked steps differ by convention (we output zeros,
        # Keras repeats the last output); states must agree everywhere.
        valid = np.ones((BATCH, STEPS), bool) if m is None else m
        np.testing.assert_allclose(out_a[0].numpy()[valid], out_b[0].numpy()[valid], atol=1e-5)
        for sa, sb in zip(out_a[1:], out_b[1:]):
            np.testing.assert_allclose(sa, sb, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_gradients_match_keras_autodiff(name):
    rng = np.random.default_rng(2)
    x = tf.constant(rng.normal(size=(BATCH, STEPS, FEATURES)), "float32")
    mask = np.ones((BATCH, STEPS), bool)
    mask[0, :2] = False  # left padding
    mask[2, 4:] = False  # right padding
    ours = Recurrent(CELLS[name](), return_sequences=True)
    theirs = keras.layers.RNN(KERAS_CELLS[name](), return_sequences=True)
    ours(x), theirs(x)
    _randomize(ours, rng)
    for a, b in zip(ours.weights, theirs.weights):
        b.assign(a.numpy())
    w = rng.normal(size=(BATCH, STEPS, UNITS)).astype("float32")
    w = w * mask[..., None]  # Keras repeats outputs at masked steps
    for training in (True, False):  # saved and recomputed residuals
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            la = tf.reduce_sum(ours(x, mask=mask, training=training) * w)
            lb = tf.reduce_sum(theirs(x, mask=mask) * w)
        ga = tape.gradient(la, [x] + ours.trainable_weights)
        gb = tape.gradient(lb, [x] + theirs.trainable_weights)
        for a, b in zip(ga, gb):
            np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CELLS))
@pytest.mark.parametrize("return_sequences", [True, False])
def test_gradients_match_finite_differences(name, return_sequences):
    """Central differences in float64 on every parameter and the inputs."""
    rng = np.random.default_rng(3)
    steps, batch = 4, 2
    x = tf.Variable(rng.normal(size=(batch, steps, FEATURES)))
    mask = np.array([[True] * 4, [False, True, True, False]])
    cell = CELLS[name]()
    cell.dtype_policy = keras.DTypePolicy("float64")
    layer = Recurrent(cell, return_sequences=return_sequences, dtype="float64")
    layer(x)
    _randomize(layer, rng)
    n_states = 2 if name == "lstm" else 1
    h0 = [tf.Variable(rng.normal(size=(batch, UNITS))) for _ in range(n_states)]
    out_shape = (batch, steps, UNITS) if return_sequences else (batch, UNITS)
    probe = tf.constant(rng.normal(size=out_shape))

    def loss():
        return tf.reduce_sum(layer(x, mask=mask, initial_state=h0, training=True) * probe)

    check_gradients_numerically(loss, [x] + layer.trainable_weights + h0, rng=rng, entries=12)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_runs_inside_keras_rnn(name):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(BATCH, STEPS, FEATURES)).astype("float32")
    cell = CELLS[name]()
    ours = Recurrent(cell)
    expected = ours(x)
    keras_rnn = keras.layers.RNN(cell)
    np.testing.assert_allclose(keras_rnn(x), expected, atol=1e-6)


def test_dropout_uses_one_mask_for_all_steps():
    """Identity kernels and relu make each step's output show its mask."""
    n = 64
    cell = SimpleRNNCell(
        n,
        activation="relu",
        dropout=0.5,
        recurrent_dropout=0.5,
        kernel_initializer="identity",
        recurrent_initializer="identity",
        bias_initializer="ones",
    )
    layer = Recurrent(cell, return_sequences=True)
    x = np.ones((3, 4, n), "float32")
    out = layer(x, training=True).numpy()
    # Input dropout: dropped units get only the bias at every step.
    dropped_in = out[:, 0] == 1.0
    assert 0 < dropped_in.mean() < 1
    # h_1 = 1 + 2m, h_t = 1 + 2m + 2r h_{t-1}: a unit dropped by the
    # recurrent mask at step 2 stays dropped at steps 3 and 4.
    recur_dropped = out[:, 1] == out[:, 0]
    assert 0 < recur_dropped.mean() < 1
    for t in (2, 3):
        np.testing.assert_array_equal(out[:, t] == out[:, 0], recur_dropped)
    # No dropout at inference.
    np.testing.assert_allclose(layer(x, training=False)[:, 0], np.full((3, n), 2.0))


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_config_round_trip(name):
    cell = CELLS[name]()
    clone = type(cell).from_config(cell.get_config())
    assert clone.get_config() == cell.get_config()
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(cell))
    assert type(restored) is type(cell)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_layer_contract(name):
    x = np.random.default_rng(5).normal(size=(2, 6, 3)).astype("float32")
    # kernel, recurrent kernel, bias
    run_layer_test(lambda: Recurrent(CELLS[name](), return_sequences=True), x, num_weights=(3, 0))


def test_lstm_unit_forget_bias():
    layer = Recurrent(LSTMCell(3))
    layer(np.zeros((1, 2, 2), "float32"))
    np.testing.assert_array_equal(layer.cell.bias.numpy(), [0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    layer = Recurrent(LSTMCell(3, unit_forget_bias=False))
    layer(np.zeros((1, 2, 2), "float32"))
    np.testing.assert_array_equal(layer.cell.bias.numpy(), np.zeros(12))


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: SimpleRNNCell(0), "`SimpleRNNCell` received an invalid value for `units`"),
        (lambda: GRUCell(-3), "`GRUCell` received an invalid value for `units`"),
        (lambda: LSTMCell(4, dropout=1.5), "`LSTMCell` received an invalid value for `dropout`"),
        (
            lambda: SimpleRNNCell(4, activation="gelu"),
            "`activation`: expected one of 'tanh', 'relu'",
        ),
    ],
)
def test_bad_constructor_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_argument_types():
    with pytest.raises(TypeError, match="`units`"):
        LSTMCell(2.5)
    with pytest.raises(TypeError, match="`reset_after`"):
        GRUCell(2, reset_after="yes")
