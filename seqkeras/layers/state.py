"""Decoding state as a value.

Every stateful layer and block of seqkeras steps on a state that the
caller makes and passes in; nothing a layer computes depends on a mode
set elsewhere. The contract (docs/design.md, "State as a value"):

- `layer.init_cache(batch_size, max_length, layout="fixed")` returns the
  state before the first step: a small structure of tensors (for
  attention a `KeyValueCache`);
- `layer(x, cache=state, cache_index=index)` runs the step on `x`, one
  position or several (a prompt's prefill) starting at `index`, and
  returns `(y, new_state)`;
- `layer.prepare_step_weights()` (optional) lays out once per decoding
  request the weights the step reads (fused projections), passed to each
  step as `step_weights=`; without them the step reads the variables.

How a key/value cache is laid out and written is a property of the value,
chosen by the caller with `layout=` and carried by the cache's type
(which survives `tf.while_loop`, `jax.lax.while_loop`, `keras.tree` and
`tf.nest`):

- `"fixed"` (`KeyValueCache`): a zero buffer of `max_length` positions
  written in place with `keras.ops.slice_update` (training graphs, XLA,
  TFLite, whose converter makes it the DYNAMIC_UPDATE_SLICE builtin);
- `"scatter"` (`ScatterKeyValueCache`): the same buffer written with
  `keras.ops.scatter_update` (TensorFlow's `TensorScatterUpdate`, a
  standard op: TF Serving and tf2onnx take it, where the XLA-only
  `XlaDynamicUpdateSlice` is refused);
- `"growing"` (`GrowingKeyValueCache`): no positions at first, the new
  keys and values concatenated at each step, so a step reads the
  positions decoded so far and not `max_length` (TF Serving graphs, whose
  decoding loop lets the state change shape).

Examples:
    >>> import numpy as np, seqkeras
    >>> from seqkeras.layers import state
    >>> mha = seqkeras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = np.ones((1, 1, 8), "float32")
    >>> _ = mha(x, x)
    >>> cache = mha.init_cache(1, 3, layout="growing")
    >>> type(cache).__name__, cache.layout, tuple(cache.keys.shape)
    ('GrowingKeyValueCache', 'growing', (1, 2, 0, 4))
    >>> out, cache = mha(x, cache=cache, cache_index=0)
    >>> tuple(out.shape), tuple(cache.keys.shape), state.layout_of(cache)
    ((1, 1, 8), (1, 2, 1, 4), 'growing')
"""

import collections

from keras import backend
from keras import ops

#: The key/value cache layouts (see the module docstring).
LAYOUTS = ("fixed", "scatter", "growing")


class KeyValueCache(collections.namedtuple("KeyValueCache", ["keys", "values"])):
    """An attention layer's decoding state, laid out `"fixed"`: `keys` and
    `values` each (batch, key_value_heads, max_length, head_dim), written
    in place with `keras.ops.slice_update`. A plain `(keys, values)` tuple
    is read as this layout."""

    __slots__ = ()
    layout = "fixed"


class ScatterKeyValueCache(KeyValueCache):
    """A `"scatter"` key/value cache: a fixed buffer written with
    `keras.ops.scatter_update` (standard TensorFlow ops)."""

    __slots__ = ()
    layout = "scatter"


class GrowingKeyValueCache(KeyValueCache):
    """A `"growing"` key/value cache: it starts with no positions and each
    step appends its keys and values."""

    __slots__ = ()
    layout = "growing"


_CACHES = {c.layout: c for c in (KeyValueCache, ScatterKeyValueCache, GrowingKeyValueCache)}


def check_layout(where, layout, argument="layout"):
    """`layout` if it is one of `LAYOUTS`; a ValueError naming `where` and
    the `argument` otherwise."""
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(
            f"`{where}` received an invalid value for `{argument}`: expected one of "
            f"{LAYOUTS}. Received: {argument}={layout!r}"
        )
    return layout


def key_value_cache(keys, values, layout="fixed"):
    """A key/value cache of `layout` holding `keys` and `values`."""
    return _CACHES[check_layout("key_value_cache", layout)](keys, values)


def layout_of(cache):
    """The layout a cache value carries (`"fixed"` for a plain tuple)."""
    return getattr(cache, "layout", "fixed")


def like(cache, keys, values):
    """`keys` and `values` as a cache of `cache`'s type (its layout): a
    `KeyValueCache` of the same class, or a plain tuple for a plain
    tuple or list (a loop's state keeps its structure)."""
    if isinstance(cache, KeyValueCache):
        return type(cache)(keys, values)
    return (keys, values)


def write(buffer, start, update, layout="fixed", depth=None):
    """`buffer` with `update` written at `start` (one index per axis): by
    `keras.ops.slice_update` (`"fixed"`) or by `keras.ops.scatter_update`
    (`"scatter"`).

    Args:
        depth: `"scatter"`: the number of leading axes the scatter indexes
            (default all); the axes after them must be covered whole by
            `update` (starts 0, sizes those of `buffer`): fewer indices.
    """
    if layout != "scatter":
        return ops.slice_update(buffer, start, update)
    depth = len(start) if depth is None else depth
    shape = ops.shape(update)
    ranges = [
        ops.arange(shape[axis], dtype="int32") + ops.cast(start[axis], "int32")
        for axis in range(depth)
    ]
    if depth == 1:
        indices = ops.expand_dims(ranges[0], -1)
    else:
        indices = ops.stack(ops.meshgrid(*ranges, indexing="ij"), axis=-1)
    return ops.scatter_update(buffer, indices, update)


def write_step(buffer, t, value, layout="fixed"):
    """`buffer[t] = value` for a (time, ...) buffer: one slice update, or
    one `TensorScatterUpdate` row (`"scatter"`)."""
    value = ops.expand_dims(value, 0)
    if layout != "scatter":
        return ops.slice_update(buffer, (t,) + (0,) * (len(buffer.shape) - 1), value)
    return ops.scatter_update(buffer, ops.reshape(ops.cast(t, "int32"), (1, 1)), value)


def write_step_differentiable(buffer, t, value):
    """`write_step(buffer, t, value)` (one slice update) with a gradient
    on every backend: TensorFlow defines none for its DynamicUpdateSlice,
    so on TensorFlow the write brings its own (the buffer's cotangent with
    row `t` zeroed; `value`'s: row `t`). The loops of inference graphs
    write with it: XLA writes in place, the TFLite converter makes it the
    DYNAMIC_UPDATE_SLICE builtin, and `seqkeras.export.saved_model`
    rewrites it into standard ops for TF Serving."""
    if backend.backend() != "tensorflow":
        return write_step(buffer, t, value)
    zeros = (0,) * (len(buffer.shape) - 1)

    @ops.custom_gradient
    def write(buffer, value):
        def grad(*upstream, **unused_kwargs):
            (d_out,) = upstream[0] if isinstance(upstream[0], (list, tuple)) else upstream
            row = ops.take(d_out, t, axis=0)
            cleared = ops.slice_update(d_out, (t,) + zeros, ops.zeros_like(row)[None])
            return cleared, row

        return write_step(buffer, t, value), grad

    return write(buffer, value)


def check_step(where, cache, cache_index):
    """A step's arguments come together: a `cache` needs its `cache_index`
    and an index needs a cache (ValueError naming `where`)."""
    if cache is not None and cache_index is None:
        raise ValueError(f"`{where}` received a `cache` without a `cache_index`")
    if cache is None and cache_index is not None:
        raise ValueError(f"`{where}` received a `cache_index` without a `cache`")


def check_cache(layer, cache, cache_index, kind):
    """A fixed-size state layer's step arguments: `cache` a tuple (its
    `init_cache`'s `kind`, TypeError otherwise) with its `cache_index`."""
    name = type(layer).__name__
    if cache is not None and not isinstance(cache, (tuple, list)):
        raise TypeError(
            f"`{name}` received an invalid value for `cache`: expected the `{kind}` of "
            f"`init_cache`. Received: {type(cache).__name__}"
        )
    check_step(name, cache, cache_index)


def check_features(layer, input_shape):
    """The features d of a (batch, time, d) input shape; a ValueError
    naming the layer otherwise."""
    if len(input_shape) != 3 or input_shape[-1] is None:
        raise ValueError(
            f"`{type(layer).__name__}` expects inputs of rank 3 with known features, "
            f"(batch, time, d). Received: inputs.shape={tuple(input_shape)}"
        )
    return int(input_shape[-1])


def output_spec(layer, inputs, cache=None):
    """The symbolic outputs of a fixed-state layer's call: like `inputs`,
    and, given a `cache`, the new state (symbolic tensors of the cache's
    shapes in the cache's structure and types)."""
    import keras

    out = keras.KerasTensor(inputs.shape, dtype=layer.compute_dtype)
    if cache is None:
        return out
    return out, keras.tree.map_structure(lambda c: keras.KerasTensor(c.shape, dtype=c.dtype), cache)


def check_built(layer):
    """`layer.init_cache` needs the layer's width: a ValueError unbuilt."""
    if not layer.built:
        raise ValueError(
            f"`{type(layer).__name__}.init_cache` needs the layer built (its width): "
            "call it once or `build((batch, time, d))` first"
        )


def kept_steps(where, inputs, padding_mask):
    """float32 (batch, time, 1): 1 at the steps `padding_mask` keeps (its
    shape checked against `inputs`'), or None without a mask."""
    from seqkeras.layers import validation

    if padding_mask is None:
        return None
    shape = validation.static_shape(inputs)
    validation.same_dims(where, "padding_mask", padding_mask, shape[:2], "(batch, time)")
    return ops.expand_dims(ops.cast(padding_mask, "float32"), -1)
