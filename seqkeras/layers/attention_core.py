"""The one attention core: scores in, masked float32 softmax, dropout,
weighted sum out.

`Attention`, `MultiHeadAttention` (both its explicit and its fused path),
`AttentionDecoder` (through `Attention`) and `SequencePooling("attention")`
call `attend`; multi-head layers call `multi_head`, which either builds
the logits and calls `attend` or runs Keras' fused
`ops.dot_product_attention` (flash attention where the backend has it)
with the same semantics: masked keys get no weight, and a query that sees
no key outputs zeros (never NaN, never a uniform average over padding).

Which path: the layer's `fused` argument when given; else Keras'
flash-attention setting (`keras.config.enable_flash_attention()` /
`disable_flash_attention()`) when set; else the fused op on every backend
but TensorFlow, whose CPU `dot_product_attention` (einsums in (batch,
heads, time, dim) order) is 3-5% slower than the explicit path.
"""

import keras
from keras import ops

from seqkeras.layers import masking


def attend(logits, value, mask=None, dropout=0.0, seed=None, training=False):
    """`(context, weights)`: `weights = masked_softmax(logits, mask)`
    (float32 inside, `logits`' dtype out; all-masked rows are zeros),
    dropout on the weights in training, `context = weights @ value`.

    Args:
        logits: (..., Tq, Tk) scores.
        value: (..., Tk, d) values, or None for the weights alone.
        mask: optional bool, broadcastable to `logits`.
        dropout: rate of dropout on the weights (training only).
        seed: the dropout's `keras.random.SeedGenerator`.
        training: whether dropout applies.

    Returns:
        `(context (..., Tq, d) or None, weights)`; the returned weights
        are before dropout.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.layers.attention_core import attend
        >>> context, weights = attend(np.zeros((1, 1, 3), "float32"),
        ...                           np.eye(3, dtype="float32")[None],
        ...                           np.array([[[True, True, False]]]))
        >>> np.asarray(context).tolist(), np.asarray(weights).tolist()
        ([[[0.5, 0.5, 0.0]]], [[[0.5, 0.5, 0.0]]])
    """
    weights = masking.masked_softmax(logits, mask)
    if value is None:
        return None, weights
    dropped = weights
    if training and dropout > 0:
        dropped = keras.random.dropout(weights, dropout, seed=seed)
    context = ops.matmul(dropped, ops.cast(value, dropped.dtype))
    return context, weights


def use_fused(fused=None):
    """Whether multi-head attention takes `ops.dot_product_attention` (see
    the module docstring for the order of the settings)."""
    if fused is not None:
        return bool(fused)
    setting = keras.config.is_flash_attention_enabled()
    if setting is not None:
        return bool(setting)
    return keras.backend.backend() != "tensorflow"


def multi_head(
    q,
    k,
    v,
    mask=None,
    scale=1.0,
    fused=None,
    return_weights=False,
    dropout=0.0,
    seed=None,
    training=False,
):
    """Scaled dot-product attention over heads.

    Args:
        q: (batch, Tq, heads, dim); k, v: (batch, Tk, heads, dim).
        mask: optional bool (batch, 1, Tq, Tk) or broadcastable.
        scale: the logits' factor (1 / sqrt(dim)).
        fused: see `use_fused`; the explicit path runs whenever the weights
            are returned or dropout applies.
        return_weights, dropout, seed, training: as `attend`.

    Returns:
        `(context (batch, Tq, heads, dim), weights (batch, heads, Tq, Tk)
        or None)`.
    """
    explicit = return_weights or (training and dropout > 0) or not use_fused(fused)
    if explicit:
        # Head-major (B, H, T, D) operands: plain batched matmuls.
        qh = ops.transpose(q * ops.cast(scale, q.dtype), (0, 2, 1, 3))
        kh = ops.transpose(k, (0, 2, 3, 1))  # (B, H, D, Tk)
        vh = ops.transpose(v, (0, 2, 1, 3))
        context, weights = attend(ops.matmul(qh, kh), vh, mask, dropout, seed, training)
        return ops.transpose(context, (0, 2, 1, 3)), weights
    # TensorFlow has no flash attention: its fused op is plain einsums.
    flash = False if keras.backend.backend() == "tensorflow" else None
    context = ops.dot_product_attention(q, k, v, mask=mask, scale=scale, flash_attention=flash)
    if mask is not None:  # a query that sees no key outputs zeros
        visible = ops.any(mask, axis=-1)  # (batch, 1, Tq)
        visible = ops.transpose(visible, (0, 2, 1))[..., None]
        context = context * ops.cast(visible, context.dtype)
    return context, None


def step_attend(q, k, v, mask=None):
    """A decoding step's attention, heads first: q (batch, heads, Tq, dim),
    already scaled, over k, v (batch, heads, Tk, dim) -> context (batch,
    heads, Tq, dim), with `attend`'s masked softmax (`mask` broadcastable to
    (batch, heads, Tq, Tk)). Batched products in this layout need no
    transpose of the cache (the keys' dim axis is contracted in place).

    One formulation for every batch size: choosing products and sums for
    few rows (issue 27's serving decoder did, per loop) costs a
    conditional per attention in a step, and six such `If` ops made the
    served Transformer step slower at every batch size than batched
    products alone (`benchmarks/served_decoding.py`; the runs are in
    docs/benchmarks/history.md).

    Examples:
        >>> import numpy as np
        >>> from seqkeras.layers.attention_core import step_attend
        >>> q = np.ones((1, 1, 1, 2), "float32")
        >>> k = v = np.eye(2, dtype="float32")[None, None]
        >>> np.asarray(step_attend(q, k, v)).round(3).tolist()
        [[[[0.5, 0.5]]]]
    """
    logits = ops.einsum("bhqd,bhkd->bhqk", q, k)
    return attend(logits, v, mask)[0]
