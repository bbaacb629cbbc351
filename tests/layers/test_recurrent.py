"""Recurrent, Bidirectional and StackedRecurrent: masking, direction,
merging, stacking, stateful carry, serialization, training, errors."""

import keras
import numpy as np
import pytest

from seqkeras.data import adding_problem
from seqkeras.layers import (
    Bidirectional,
    GRUCell,
    LSTMCell,
    Recurrent,
    SimpleRNNCell,
    StackedRecurrent,
)
from tests.layer_checks import run_layer_test

CELLS = {
    "rnn": lambda: SimpleRNNCell(4),
    "gru": lambda: GRUCell(4),
    "gru_reset_after": lambda: GRUCell(4, reset_after=True),
    "lstm": lambda: LSTMCell(4),
}


def _x(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _copy_weights(src, dst):
    for a, b in zip(src.weights, dst.weights):
        b.assign(a.numpy())


@pytest.mark.parametrize("name", sorted(CELLS))
def test_padding_right_and_left_equal_unpadded(name):
    layer = Recurrent(CELLS[name](), return_state=True)
    x = _x(3, 5, 2)
    unpadded = layer(x)
    pad = np.zeros((3, 3, 2), "float32")
    ones, zeros = np.ones((3, 5), bool), np.zeros((3, 3), bool)
    right = layer(np.concatenate([x, pad], 1), mask=np.concatenate([ones, zeros], 1))
    left = layer(np.concatenate([pad, x], 1), mask=np.concatenate([zeros, ones], 1))
    for a, b, c in zip(unpadded, right, left):
        np.testing.assert_allclose(b, a, atol=1e-6)
        np.testing.assert_allclose(c, a, atol=1e-6)
    # Masked steps output zeros, and the mask propagates.
    seq = Recurrent(CELLS[name](), return_sequences=True)
    mask = np.concatenate([ones, zeros], 1)
    out = seq(np.concatenate([x, pad], 1), mask=mask)
    np.testing.assert_array_equal(out.numpy()[:, 5:], 0.0)
    assert seq.compute_mask(x, mask) is mask


def test_mask_flows_from_embedding():
    inp = keras.Input((None,), dtype="int32")
    emb = keras.layers.Embedding(10, 3, mask_zero=True)(inp)
    seq = Recurrent(LSTMCell(4), return_sequences=True)(emb)
    last = Recurrent(GRUCell(4))(seq)
    model = keras.Model(inp, last)
    padded = np.array([[3, 4, 5, 0, 0]])
    np.testing.assert_allclose(model(padded), model(padded[:, :3]), atol=1e-6)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_go_backwards_equals_reversed_input(name):
    fw = Recurrent(CELLS[name](), return_sequences=True, return_state=True)
    bw = Recurrent(CELLS[name](), return_sequences=True, return_state=True, go_backwards=True)
    x = _x(2, 6, 3)
    fw(x), bw(x)
    _copy_weights(fw, bw)
    for a, b in zip(bw(x), fw(x[:, ::-1])):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("mode", ["concat", "sum", "ave", "mul", None])
def test_bidirectional_merge_modes(mode):
    layer = Bidirectional(
        Recurrent(LSTMCell(4), return_sequences=True, return_state=True),
        merge_mode=mode,
    )
    x = _x(2, 5, 3)
    mask = np.array([[True] * 5, [True, True, True, False, False]])
    out = layer(x, mask=mask)
    fw = Recurrent(LSTMCell(4), return_sequences=True, return_state=True)
    fw(x)
    _copy_weights(layer.forward_layer, fw)
    fw_out = fw(x, mask=mask)
    # The backward direction equals the forward layer (with the backward
    # weights) on each sequence reversed without its padding.
    bw = Recurrent(LSTMCell(4), return_sequences=True, return_state=True)
    bw(x)
    _copy_weights(layer.backward_layer, bw)
    bw_seq = np.zeros((2, 5, 4), "float32")
    bw_states = []
    for i, n in enumerate([5, 3]):
        o = bw(x[i : i + 1, :n][:, ::-1])
        bw_seq[i, :n] = o[0].numpy()[0, ::-1]
        bw_states.append([s.numpy()[0] for s in o[1:]])
    f, b = fw_out[0].numpy(), bw_seq
    expected = {
        "concat": [np.concatenate([f, b], -1)],
        "sum": [f + b],
        "ave": [(f + b) / 2],
        "mul": [f * b],
        None: [f, b],
    }[mode]
    n_out = len(expected)
    for a, e in zip(out[:n_out], expected):
        np.testing.assert_allclose(a, e, atol=1e-5)
    states = out[n_out:]
    assert len(states) == 4
    np.testing.assert_allclose(states[0], fw_out[1], atol=1e-6)
    np.testing.assert_allclose(states[1], fw_out[2], atol=1e-6)
    np.testing.assert_allclose(states[2], np.stack([s[0] for s in bw_states]), atol=1e-5)
    np.testing.assert_allclose(states[3], np.stack([s[1] for s in bw_states]), atol=1e-5)
    shapes = layer.compute_output_shape(x.shape)
    assert [tuple(s) for s in shapes] == [tuple(o.shape) for o in out]


def test_stacked_equals_manual_chain_with_residual():
    a = Recurrent(GRUCell(3), return_sequences=True)
    b = Recurrent(LSTMCell(3), return_sequences=True)
    c = Recurrent(SimpleRNNCell(5))
    stack = StackedRecurrent([a, b, c], dropout=0.3, residual=True)
    x = _x(2, 4, 3)
    mask = np.array([[True] * 4, [False, True, True, True]])
    out = stack(x, mask=mask)
    h1 = a(x, mask=mask) + x
    h2 = b(h1, mask=mask) + h1
    np.testing.assert_allclose(out, c(h2, mask=mask), atol=1e-6)
    assert not np.allclose(stack(x, mask=mask, training=True), out)
    assert tuple(stack.compute_output_shape(x.shape)) == (2, 5)


def test_stacked_bidirectional():
    stack = StackedRecurrent(
        [
            Bidirectional(Recurrent(GRUCell(3), return_sequences=True)),
            Recurrent(LSTMCell(2), return_sequences=True),
        ]
    )
    x = _x(2, 4, 3)
    assert tuple(stack(x).shape) == (2, 4, 2)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_stateful_carry_and_reset(name):
    inp = keras.Input((3, 2), batch_size=2)
    layer = Recurrent(CELLS[name](), return_state=True, stateful=True)
    model = keras.Model(inp, layer(inp))
    plain = Recurrent(CELLS[name](), return_state=True)
    x = _x(2, 6, 2)
    plain(x)
    _copy_weights(layer.cell, plain.cell)
    model(x[:, :3])
    second = model(x[:, 3:])
    for a, b in zip(second, plain(x)):  # carried == one long pass
        np.testing.assert_allclose(a, b, atol=1e-6)
    layer.reset_states()
    for s in layer.states:
        np.testing.assert_array_equal(s.numpy(), 0.0)
    for a, b in zip(model(x[:, 3:]), plain(x[:, 3:])):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_stateful_needs_fixed_batch():
    with pytest.raises(ValueError, match="fixed batch size"):
        Recurrent(LSTMCell(2), stateful=True)(keras.Input((3, 2)))


def test_initial_state_is_used():
    layer = Recurrent(LSTMCell(3), return_state=True)
    x = _x(2, 4, 2)
    h0, c0 = _x(2, 3, seed=1), _x(2, 3, seed=2)
    out = layer(x, initial_state=[h0, c0])
    assert not np.allclose(out[0], layer(x)[0])
    # Zero steps of input: the state passes through unchanged.
    empty = layer(x[:, :0], initial_state=[h0, c0])
    np.testing.assert_allclose(empty[1], h0)
    np.testing.assert_allclose(empty[2], c0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Bidirectional(Recurrent(GRUCell(3), return_sequences=True)),
        lambda: Bidirectional(Recurrent(LSTMCell(3), return_state=True), merge_mode="sum"),
        lambda: StackedRecurrent(
            [
                Recurrent(GRUCell(3), return_sequences=True),
                Recurrent(SimpleRNNCell(3), return_sequences=True),
            ],
            dropout=0.2,
            residual=True,
        ),
    ],
)
def test_wrapper_layer_contract(make):
    run_layer_test(make, _x(2, 5, 3))


def test_fit_under_xla_learns_adding_problem():
    x, y = adding_problem(2048, 20, seed=0)
    xv, yv = adding_problem(256, 20, seed=1)
    inp = keras.Input((None, 2))
    h = Recurrent(GRUCell(32))(inp)
    model = keras.Model(inp, keras.layers.Dense(1)(h))
    model.compile(keras.optimizers.Adam(1e-2), "mse", jit_compile=True)
    model.fit(x, y, batch_size=64, epochs=8, verbose=0)
    baseline = float(np.mean((yv - y.mean()) ** 2))  # predict the mean
    mse = model.evaluate(xv, yv, verbose=0)
    assert baseline > 0.15
    assert mse < 0.1 * baseline, (mse, baseline)


# --- bad input -----------------------------------------------------------------
def test_bad_inputs():
    with pytest.raises(ValueError, match="`Recurrent` expects inputs of rank 3"):
        Recurrent(GRUCell(2))(np.zeros((2, 3), "float32"))
    with pytest.raises(TypeError, match="`Recurrent` received an invalid value for `cell`"):
        Recurrent(keras.layers.GRUCell(2))
    with pytest.raises(ValueError, match="`merge_mode`: expected one of"):
        Bidirectional(Recurrent(GRUCell(2)), merge_mode="max")
    with pytest.raises(ValueError, match="expects 2 initial state"):
        Recurrent(LSTMCell(2))(_x(1, 3, 2), initial_state=[np.zeros((1, 2))])
    with pytest.raises(ValueError, match=r"`initial_state`: expected tensors of shape \(1, 2\)"):
        Recurrent(GRUCell(2))(_x(1, 3, 2), initial_state=[np.zeros((1, 5))])
    with pytest.raises(ValueError, match=r"`mask`: expected shape \(batch, time\)"):
        Recurrent(GRUCell(2))(_x(1, 3, 2), mask=np.ones((1, 4), bool))
    with pytest.raises(ValueError, match="residual=True"):
        StackedRecurrent([Recurrent(GRUCell(4), return_sequences=True)], residual=True)(_x(1, 3, 2))
    with pytest.raises(ValueError, match="return_sequences=True"):
        StackedRecurrent([Recurrent(GRUCell(4)), Recurrent(GRUCell(4))])
    with pytest.raises(ValueError, match="`dropout`"):
        StackedRecurrent([Recurrent(GRUCell(4))], dropout=-0.1)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_gradient_through_states_only(name):
    """A loss on the final states of a return_sequences layer (its output
    sequence unused) gets the same gradient as with return_sequences=False."""
    import tensorflow as tf

    x = tf.constant(_x(2, 5, 3))
    seq = Recurrent(CELLS[name](), return_sequences=True, return_state=True)
    last = Recurrent(CELLS[name](), return_state=True)
    seq(x), last(x)
    _copy_weights(seq, last)
    grads = []
    for layer in (seq, last):
        with tf.GradientTape() as tape:
            states = layer(x, training=True)[1:]
            loss = sum(tf.reduce_sum(s * s) for s in states)
        grads.append(tape.gradient(loss, layer.trainable_weights))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_stream_step_equals_the_full_pass(name):
    # the layer's own streaming step, from zero states, gives each step's
    # output of the full pass
    layer = Recurrent(CELLS[name](), return_sequences=True)
    x = _x(2, 5, 3)
    full = np.asarray(layer(x))
    states = [np.zeros((2, s), "float32") for s in layer.stream_state_sizes]
    assert layer.stream_state_sizes == layer.state_sizes
    for t in range(5):
        out, states = layer.stream_step(x[:, t], states)
        np.testing.assert_allclose(np.asarray(out), full[:, t], atol=1e-5)


def test_a_backward_layer_refuses_to_stream():
    layer = Recurrent(GRUCell(4), go_backwards=True)
    layer(_x(1, 3, 2))
    with pytest.raises(ValueError, match="runs backwards"):
        layer.stream_state_sizes
    with pytest.raises(ValueError, match="runs backwards"):
        layer.stream_step(_x(1, 2), [np.zeros((1, 4), "float32")])


def test_all_layers_walks_wrappers_and_stacks():
    from seqkeras.layers import all_layers

    first = Bidirectional(Recurrent(GRUCell(3), return_sequences=True))
    stack = StackedRecurrent([first, Recurrent(LSTMCell(2))])
    inp = keras.Input((4, 2))
    model = keras.Model(inp, stack(inp))
    found = all_layers(model)
    kinds = [type(x).__name__ for x in found]
    assert kinds.count("Recurrent") == 3 and "Bidirectional" in kinds
    assert len({id(x) for x in found}) == len(found)  # each once
