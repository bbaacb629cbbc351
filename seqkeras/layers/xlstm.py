"""xLSTM (Beck et al. 2024): the mLSTM, a matrix memory with exponential
input gates that trains in parallel, and the sLSTM, a scalar memory with
exponential gates and recurrent connections, which does not.

mLSTM, per head (q scaled by d_k^-1/2; i~, f~ the gates' pre-activations):

    m_t = max(log sigmoid(f~_t) + m_{t-1}, i~_t)           (the stabiliser)
    C_t = exp(log sigmoid(f~_t) + m_{t-1} - m_t) C_{t-1} + exp(i~_t - m_t) k_t v_t^T
    n_t = (the same decays) n_{t-1} + exp(i~_t - m_t) k_t
    h_t = C_t^T q_t / (max(|n_t . q_t|, exp(-m_t)) + eps)

A whole sequence runs in the chunkwise form (`mlstm_chunkwise`): within a
chunk the outputs are the quadratic (attention-like) form with each row's
own stabiliser; a loop over chunks carries (C, n, m). One chunk as long
as the sequence is the parallel (quadratic) form. m starts at 0, as the
recurrence does, so the three forms agree to rounding.

sLSTM, per unit (W x the input's gates, R block-diagonal per head):

    i~, f~, z~, o~ = W x_t + R h_{t-1} + b
    m_t = max(log sigmoid(f~) + m_{t-1}, i~)   (i~ at the first step)
    c_t = f' c_{t-1} + i' tanh(z~);  n_t = f' n_{t-1} + i'
    h_t = sigmoid(o~) c_t / n_t

with i' = exp(i~ - m_t), f' = exp(log sigmoid(f~) + m_{t-1} - m_t). h_{t-1}
enters the gates, so the sLSTM runs step by step over time (a loop, as
LSTM does): it is the one cell here with no parallel form, and the one
that tracks state (parity, counting) where the linear recurrences cannot.
"""

import collections

import keras
import numpy as np
from keras import ops

from seqkeras.layers import state
from seqkeras.layers import validation
from seqkeras.layers.scan import causal_conv
from seqkeras.layers.scan import chunk_recurrence

_PACKAGE = "seqkeras"
_NEG = -1e30  # log(0) for masked entries (finite: no inf - inf)


class MLSTMState(collections.namedtuple("MLSTMState", ["memory", "normalizer", "stabilizer"])):
    """An mLSTM's decoding state: `memory` C (batch, heads, d_k, d_v),
    `normalizer` n (batch, heads, d_k), `stabilizer` m (batch, heads),
    all float32."""

    __slots__ = ()


def mlstm_chunkwise(q, k, v, igate, fgate, initial=None, chunk_size=64, eps=1e-6):
    """The mLSTM over a whole sequence, in the chunkwise form (float32).

    Args:
        q, k: (batch, time, heads, d_k); q already scaled by d_k^-1/2.
        v: (batch, time, heads, d_v).
        igate: (batch, time, heads) the input gates' pre-activations i~.
        fgate: (batch, time, heads) the forget gates' log sigmoid(f~)
            (<= 0; a padded step: 0 with igate -1e30 keeps the state).
        initial: optional `MLSTMState` (default zeros, m = 0).
        chunk_size: the chunk; >= time: the parallel (quadratic) form.
        eps: added to the normalizer.

    Returns:
        `(h (batch, time, heads, d_v), final MLSTMState)`.
    """
    q, k, v, igate, fgate = (ops.cast(t, "float32") for t in (q, k, v, igate, fgate))
    steps = q.shape[1]
    c = chunk_size if steps is None else max(1, min(chunk_size, steps))
    length = ops.shape(q)[1]
    pad = (c - length % c) % c

    def chunks(t, fill=0.0):
        rank = len(t.shape)
        t = ops.pad(t, [[0, 0], [0, pad]] + [[0, 0]] * (rank - 2), constant_values=fill)
        t = ops.reshape(t, (ops.shape(t)[0], -1, c) + tuple(t.shape[2:]))
        return ops.transpose(t, (0, 3, 1, 2) + tuple(range(4, rank + 1)))

    qc, kc, vc = chunks(q), chunks(k), chunks(v)
    ic, fc = chunks(igate, _NEG), chunks(fgate)  # (batch, heads, chunks, c)
    b = ops.cumsum(fc, axis=-1)
    lower = np.tril(np.ones((c, c), "bool"))
    log_d = ops.where(
        lower, ops.expand_dims(b, -1) - ops.expand_dims(b, -2) + ops.expand_dims(ic, -2), _NEG
    )
    intra_max = ops.max(log_d, axis=-1)
    to_end = b[..., -1:] - b + ic  # (batch, heads, chunks, c)
    to_end_max = ops.max(to_end, axis=-1)
    total = b[..., -1]
    if initial is None:
        batch, heads = ops.shape(q)[0], q.shape[2]
        initial = MLSTMState(
            ops.zeros((batch, heads, q.shape[3], v.shape[3]), q.dtype),
            ops.zeros((batch, heads, q.shape[3]), q.dtype),
            ops.zeros((batch, heads), q.dtype),
        )

    def advance(s, i):
        memory, normalizer, m = s
        m_next = ops.maximum(total[:, :, i] + m, to_end_max[:, :, i])
        old = ops.exp(total[:, :, i] + m - m_next)
        gated = kc[:, :, i] * ops.expand_dims(ops.exp(to_end[:, :, i] - m_next[..., None]), -1)
        memory = old[..., None, None] * memory + ops.matmul(
            ops.swapaxes(gated, -1, -2), vc[:, :, i]
        )
        normalizer = old[..., None] * normalizer + ops.sum(gated, axis=-2)
        return MLSTMState(memory, normalizer, m_next)

    count = ops.shape(qc)[2] if steps is None else (steps + pad) // c
    entering, final = chunk_recurrence(advance, MLSTMState(*initial), count)
    memory, normalizer, m = entering  # (batch, heads, chunks, ...)
    inter = b + ops.expand_dims(m, -1)  # (batch, heads, chunks, c)
    row = ops.maximum(inter, intra_max)
    weights = ops.matmul(qc, ops.swapaxes(kc, -1, -2)) * ops.exp(log_d - row[..., None])
    qbar = qc * ops.expand_dims(ops.exp(inter - row), -1)
    numerator = ops.matmul(qbar, memory) + ops.matmul(weights, vc)
    denominator = ops.squeeze(ops.matmul(qbar, normalizer[..., None]), -1) + ops.sum(weights, -1)
    h = numerator / (ops.maximum(ops.abs(denominator), ops.exp(-row)) + eps)[..., None]
    h = ops.transpose(h, (0, 2, 3, 1, 4))
    h = ops.reshape(h, (ops.shape(h)[0], -1) + tuple(h.shape[3:]))[:, :length]
    return h, final


def mlstm_step(q, k, v, igate, fgate, previous, eps=1e-6):
    """One mLSTM step: q (scaled), k (batch, heads, d_k), v (batch, heads,
    d_v), igate and fgate (log sigmoid) (batch, heads), previous
    `MLSTMState` -> `(h (batch, heads, d_v), MLSTMState)`."""
    q, k, v, igate, fgate = (ops.cast(t, "float32") for t in (q, k, v, igate, fgate))
    memory, normalizer, m = previous
    m_new = ops.maximum(fgate + m, igate)
    f = ops.exp(fgate + m - m_new)
    i = ops.exp(igate - m_new)
    memory = f[..., None, None] * memory + i[..., None, None] * (
        ops.expand_dims(k, -1) * ops.expand_dims(v, -2)
    )
    normalizer = f[..., None] * normalizer + i[..., None] * k
    numerator = ops.einsum("bhk,bhkv->bhv", q, memory)
    denominator = ops.sum(q * normalizer, axis=-1)
    h = numerator / (ops.maximum(ops.abs(denominator), ops.exp(-m_new)) + eps)[..., None]
    return h, MLSTMState(memory, normalizer, m_new)
