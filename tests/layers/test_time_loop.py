"""The time loop's hand-written gradient, with padding and recurrent dropout
masks fixed, against central finite differences in float64."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqkeras.layers import GRUCell, LSTMCell, SimpleRNNCell, time_loop
from tests.layer_checks import check_gradients_numerically

CELLS = {
    "rnn": lambda: SimpleRNNCell(3, dtype="float64"),
    "gru": lambda: GRUCell(3, dtype="float64"),
    "gru_reset_after": lambda: GRUCell(3, reset_after=True, dtype="float64"),
    "lstm": lambda: LSTMCell(3, dtype="float64"),
}


@pytest.mark.parametrize("name", sorted(CELLS))
@pytest.mark.parametrize("save_residuals", [True, False])
def test_gradient_with_recurrent_dropout_and_mask(name, save_residuals):
    rng = np.random.default_rng(0)
    steps, batch, units = 4, 2, 3
    cell = CELLS[name]()
    cell.build((batch, 2))
    for w in cell.weights:
        w.assign(rng.normal(size=w.shape, scale=0.6))
    x = tf.Variable(rng.normal(size=(steps, batch, 2)))
    n_states = len(cell.get_initial_state(batch))
    h0 = [tf.Variable(rng.normal(size=(batch, units))) for _ in range(n_states)]
    mask = tf.constant([[[True], [True]], [[False], [True]], [[True], [True]], [[True], [False]]])
    rmask = tf.constant([[2.0, 0.0, 2.0], [0.0, 2.0, 2.0]], tf.float64)
    probe_seq = tf.constant(rng.normal(size=(steps, batch, units)))
    probe_states = [tf.constant(rng.normal(size=(batch, units))) for _ in range(n_states)]

    def loss():
        out, states = time_loop.run(
            cell,
            cell.project_inputs(x),
            h0,
            mask=mask,
            rmask=rmask,
            return_sequences=True,
            save_residuals=save_residuals,
        )
        total = tf.reduce_sum(out * probe_seq)
        for s, p in zip(states, probe_states):
            total += tf.reduce_sum(s * p)
        return total

    value = check_gradients_numerically(loss, [x] + cell.trainable_weights + h0)
    assert keras.backend.standardize_dtype(value.dtype) == "float64"
