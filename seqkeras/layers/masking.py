"""Padding and causal masks, and the one dtype-safe masked softmax.

Every attention layer in seqkeras turns its logits into weights with
`masked_softmax`: the softmax runs in float32, or in bfloat16 for bfloat16
logits (the mask constant cannot overflow either; float16 logits go to
float32), masked keys get exactly zero weight, and a
row whose keys are all masked gives all-zero weights (so a zero context and
zero, finite gradients), never NaN and never uniform weights over padding.
"""

from keras import ops

# Large enough to vanish in a float32 softmax, far inside float32's range.
_MASKED_LOGIT = -1e9


def masked_softmax(logits, mask=None, axis=-1):
    """Softmax over `axis` that ignores masked positions.

    Args:
        logits: float tensor, any dtype.
        mask: optional bool tensor broadcastable to `logits`; True keeps a
            position.
        axis: the axis to normalize over (the keys).

    Returns:
        Weights of the same shape and dtype as `logits`; rows with no
        unmasked position are all zeros.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.layers.masking import masked_softmax
        >>> w = masked_softmax(np.zeros((2, 3), "float32"),
        ...                    np.array([[True, True, False], [False] * 3]))
        >>> np.asarray(w).tolist()
        [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]
    """
    dtype = logits.dtype
    # bfloat16 has float32's range (the mask constant fits) and the
    # backend's softmax kernel accumulates in float32: computing in
    # bfloat16 skips two casts of the (batch, heads, Tq, Tk) logits each
    # way (the encoder block's mixed_bfloat16 training without XLA went
    # from 0.88x to 0.91x keras-hub's best, benchmarks/attention.py).
    # float16 (max 65504) runs in float32.
    compute = "bfloat16" if str(dtype).endswith("bfloat16") else "float32"
    x = ops.cast(logits, compute)
    if mask is None:
        return ops.cast(ops.softmax(x, axis=axis), dtype)
    # The mask as 0/1 numbers, added and multiplied rather than selected:
    # the same weights (exp(-1e9) is 0 in float32 and bfloat16; a row with
    # no key left is multiplied to zeros), and ops that LiteRT's XNNPACK
    # delegate runs (it has no SELECT: SmolLM2's prefill left the delegate
    # twice per block for two selects over its (heads, queries, cache) logits).
    keep = ops.cast(ops.cast(mask, "bool"), compute)
    x = x + (1.0 - keep) * _MASKED_LOGIT
    weights = ops.softmax(x, axis=axis) * keep
    return ops.cast(weights, dtype)


def causal_mask(query_length, key_length, offset=0, window=None):
    """Bool (query_length, key_length): query i sees keys j <= i + offset,
    and with `window` only the last `window` of them (j > i + offset -
    window: sliding-window attention, as Mistral's and `transformers`').

    `offset` is the position of the first query, e.g. the number of cached
    keys during incremental decoding.
    """
    rows = ops.expand_dims(ops.arange(query_length), 1) + offset
    cols = ops.expand_dims(ops.arange(key_length), 0)
    mask = rows >= cols
    if window is not None:
        mask = ops.logical_and(mask, rows - cols < window)
    return mask


def attention_mask(
    query_mask=None,
    value_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    query_length=None,
    key_length=None,
    offset=0,
    window=None,
):
    """Combines masks into one bool (batch, query_time, key_time), or None.

    Args:
        query_mask: (batch, query_time) bool or None.
        value_mask: (batch, key_time) bool or None.
        attention_mask: (batch, query_time, key_time) bool or None.
        use_causal_mask: add the causal mask (needs the two lengths).
        offset: position of the first query, for the causal mask.
        window: with `use_causal_mask`, a query sees only its last
            `window` keys (`causal_mask`).
    """
    mask = None

    def combine(a, b):
        return b if a is None else ops.logical_and(a, b)

    if query_mask is not None:
        mask = combine(mask, ops.expand_dims(ops.cast(query_mask, "bool"), -1))
    if value_mask is not None:
        mask = combine(mask, ops.expand_dims(ops.cast(value_mask, "bool"), -2))
    if attention_mask is not None:
        mask = combine(mask, ops.cast(attention_mask, "bool"))
    if use_causal_mask:
        causal = ops.expand_dims(causal_mask(query_length, key_length, offset, window), 0)
        mask = combine(mask, causal)
    return mask
