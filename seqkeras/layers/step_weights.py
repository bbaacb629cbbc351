"""Weights a decoding step reads, laid out once per decoding request.

A decoding loop runs a model's `call_with_cache` once per token. Inside
`prepared(layers)`, entered by `seqkeras.models.generate` before its loop
(so in Keras, under XLA and in every exported decoding signature alike),
each layer with a `prepare_step_weights()` method lays out the weights its
cached step reads: `MultiHeadAttention` fuses its query, key and value
kernels into one product and folds the attention scale into the query
columns; `generate` adds the output matrix cast to its projection dtype
(`seqkeras.models.steps.projection_step_weights`). The tensors are made
outside the loop: a graph reads (and casts,
reshapes, concatenates) them once per request, not once per step. Outside
the context the step reads the layers' variables as training does; the
two give the same outputs up to float rounding.

Examples:
    >>> import numpy as np, seqkeras
    >>> from seqkeras.layers import step_weights
    >>> mha = seqkeras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = np.ones((1, 1, 8), "float32")
    >>> _ = mha(x, x)
    >>> with step_weights.prepared([mha]):
    ...     out, cache = mha(x, cache=mha.init_cache(1, 3), cache_index=0)
    >>> tuple(out.shape), tuple(cache[0].shape)
    ((1, 1, 8), (1, 2, 3, 4))
"""

import contextlib
import threading

_STATE = threading.local()


@contextlib.contextmanager
def prepared(layers, weights=None):
    """Inside, `get(layer)` returns the step weights that `layers` (each
    with `prepare_step_weights() -> {id(layer): weights}`, others skipped)
    laid out on entry, and those given in `weights` (`{id(layer):
    weights}`, e.g. an output matrix cast once); an enclosing context's
    weights stay visible."""
    store = dict(getattr(_STATE, "store", None) or {})
    store.update(weights or {})
    for layer in layers:
        prepare = getattr(layer, "prepare_step_weights", None)
        if callable(prepare) and getattr(layer, "built", True):
            store.update(prepare())
    previous = getattr(_STATE, "store", None)
    _STATE.store = store
    try:
        yield
    finally:
        _STATE.store = previous


def get(layer):
    """The weights `layer` prepared in the innermost `prepared` context, or
    None."""
    store = getattr(_STATE, "store", None)
    return None if store is None else store.get(id(layer))
