"""The two primitives every linear recurrence of seqkeras is built from.

- `linear_scan(a, b, initial)`: `h_t = a_t * h_{t-1} + b_t` for every t
  at once (minGRU/minLSTM, RG-LRU, Mamba's selective scan);
- `causal_conv(x, kernel, bias, window)`: the short depthwise causal
  convolution in front of RG-LRU and Mamba, carrying its last inputs as a
  state so that a step (or a prompt's several) continues where the last
  call stopped.

`linear_scan` is an associative scan (Blelloch's work-efficient form: pair
up neighbours, scan the pairs, fill in the rest; log2(T) levels, O(T)
work), written with `keras.ops` reshapes so that it traces to plain
element-wise ops under XLA, TensorFlow graphs and JAX. It needs the time
length at trace time (it always is under `fit` and JAX); a graph traced
with an unknown length (a SavedModel signature of any length) runs the
same recurrence as a loop over log2(T) doubling levels. Measured on a 2-core
AMD EPYC (XLA, batch 8, time 1,024, width 256, float32), forward and
gradient: this scan 10 ms and 22 ms; a loop over time 6 ms and 771 ms; a
chunked form (the within-chunk decays as a 32 x 32 matrix per channel,
a loop over chunks) 409 ms and 592 ms; `keras.ops.associative_scan` does
not compile under XLA on the TensorFlow backend with `axis=1` (Keras
3.15). So the associative scan is the default, in linear space: it
multiplies numbers in [0, 1] and so needs no log-space form for
stability (the log-space form exists to make a cumulative-sum scan
stable).
"""

from keras import ops


def _combine(a_left, b_left, a_right, b_right):
    """(a_l, b_l) then (a_r, b_r) as one step: `h -> a_r (a_l h + b_l) + b_r`."""
    return a_left * a_right, a_right * b_left + b_right


def _blelloch(a, b):
    """`h_t = a_t h_{t-1} + b_t` from `h_{-1} = 0`, for (batch, T, ...)
    tensors of a static T."""
    steps = a.shape[1]
    if steps == 1:
        return b
    if steps % 2:  # one identity step pads to an even length
        a = ops.concatenate([a, ops.ones_like(a[:, :1])], axis=1)
        b = ops.concatenate([b, ops.zeros_like(b[:, :1])], axis=1)
    rest = tuple(a.shape[2:])
    pairs = (-1, a.shape[1] // 2, 2) + rest
    a2, b2 = ops.reshape(a, pairs), ops.reshape(b, pairs)
    a_even, a_odd, b_even, b_odd = a2[:, :, 0], a2[:, :, 1], b2[:, :, 0], b2[:, :, 1]
    # the state after each pair (positions 1, 3, 5, ...), by the same scan
    h_odd = _blelloch(*_combine(a_even, b_even, a_odd, b_odd))
    # then each even position from the pair before it
    before = ops.concatenate([ops.zeros_like(h_odd[:, :1]), h_odd[:, :-1]], axis=1)
    h_even = a_even * before + b_even
    h = ops.reshape(ops.stack([h_even, h_odd], axis=2), (-1, a.shape[1]) + rest)
    return h[:, :steps]


def _doubling(a, b):
    """The same recurrence for a time length unknown when tracing (a
    SavedModel signature of any length): Hillis and Steele's scan, a loop
    over log2(T) levels that each combine every step with the one `s`
    before it (`s` = 1, 2, 4, ...). Shifts are slices and
    concatenations: standard ops for TF Serving and TFLite."""
    steps = ops.shape(a)[1]

    def shifted(t, s, fill):
        return ops.concatenate([ops.full_like(t[:, :s], fill), t[:, : steps - s]], axis=1)

    def level(s, a, b):
        b = a * shifted(b, s, 0.0) + b
        a = a * shifted(a, s, 1.0)
        return s * 2, a, b

    _, _, b = ops.while_loop(lambda s, a, b: s < steps, level, (ops.ones((), "int32"), a, b))
    return b


def linear_scan(a, b, initial=None):
    """Every state of the linear recurrence `h_t = a_t * h_{t-1} + b_t`.

    Args:
        a, b: (batch, time, ...) tensors of one shape: the decays and the
            inputs of each step.
        initial: optional (batch, ...): `h_{-1}` (default zeros).

    Returns:
        (batch, time, ...): `h_0 .. h_{T-1}`. An associative scan when the
        time length is known when tracing; a loop over log2(T) doubling
        levels otherwise.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.layers.scan import linear_scan
        >>> a = np.full((1, 4, 1), 0.5, "float32")
        >>> b = np.ones((1, 4, 1), "float32")
        >>> np.asarray(linear_scan(a, b, initial=np.full((1, 1), 8.0, "float32")))[0, :, 0]
        array([5.   , 3.5  , 2.75 , 2.375], dtype=float32)
    """
    a = ops.convert_to_tensor(a)
    b = ops.convert_to_tensor(b, dtype=a.dtype)
    if initial is not None:  # folded into the first step's input
        first = a[:, :1] * ops.expand_dims(ops.cast(initial, b.dtype), 1) + b[:, :1]
        b = ops.concatenate([first, b[:, 1:]], axis=1)
    if a.shape[1] is None:
        return _doubling(a, b)
    return _blelloch(a, b)


def causal_conv(x, kernel, bias=None, window=None):
    """A depthwise causal convolution that carries its window.

    `y_t = sum_k kernel[k] * x_{t - K + 1 + k} (+ bias)` per channel, where
    the inputs before the first are `window`'s (zeros by default).

    Args:
        x: (batch, time, channels).
        kernel: (K, channels).
        bias: optional (channels,).
        window: optional (batch, K - 1, channels): the last K - 1 inputs
            of the call before (the convolution's state).

    Returns:
        `(y, window)`: y (batch, time, channels) and the last K - 1 inputs
        (the state a next call continues from).
    """
    width = kernel.shape[0]
    if window is None:
        shape = ops.shape(x)
        window = ops.zeros((shape[0], width - 1, shape[2]), x.dtype)
    full = ops.concatenate([ops.cast(window, x.dtype), x], axis=1)
    steps = x.shape[1] if x.shape[1] is not None else ops.shape(x)[1]
    kernel = ops.cast(kernel, x.dtype)
    y = full[:, 0:steps] * kernel[0]
    for k in range(1, width):
        y = y + full[:, k : k + steps] * kernel[k]
    if bias is not None:
        y = y + ops.cast(bias, x.dtype)
    if width == 1:
        return y, window
    # the last K - 1 inputs, their static shape kept (a loop's state)
    window = ops.reshape(full[:, steps:], (-1, width - 1, x.shape[-1]))
    return y, window


def chunk_recurrence(advance, initial, inputs):
    """The states entering each chunk of a chunked recurrence (gated
    DeltaNet, mLSTM): `s_{i+1} = advance(s_i, x_i)` from `s_0 = initial`.

    Args:
        advance: `(state, x_i) -> next state`, a state being a tensor or a
            tuple of tensors of fixed shapes, `x_i` chunk i of `inputs`.
        initial: the state entering chunk 0.
        inputs: a tuple of (batch, heads, chunks, ...) tensors, moved
            here to the chunk axis first (the loop reads `x[i]`, a slice
            every runtime has). A number of chunks known when tracing
            unrolls the loop (a training graph);
            otherwise it is a loop writing a buffer (a graph of any
            length) with `state.write_step_differentiable`.

    Returns:
        `(entering, final)`: the entering states' leaves stacked on a new
        axis 2 (after batch and heads: (batch, heads, chunks, ...)), and
        the state after the last chunk.
    """
    import keras

    inputs = tuple(ops.transpose(t, (2, 0, 1) + tuple(range(3, len(t.shape)))) for t in inputs)
    count = inputs[0].shape[0]
    if count is not None:
        entering, s = [], initial
        for i in range(count):
            entering.append(s)
            s = advance(s, tuple(x[i] for x in inputs))
        return keras.tree.map_structure(lambda *t: ops.stack(t, axis=2), *entering), s
    count = ops.shape(inputs[0])[0]
    buffers = keras.tree.map_structure(
        lambda t: ops.zeros((count,) + tuple(ops.shape(t)), t.dtype), initial
    )

    from seqkeras.layers import state

    def body(i, s, buffers):
        written = keras.tree.map_structure(
            lambda b, t: state.write_step_differentiable(b, i, t), buffers, s
        )
        return i + 1, advance(s, tuple(x[i] for x in inputs)), written

    # the bound lets XLA compile the loop's gradient (its accumulators)
    _, s, buffers = ops.while_loop(
        lambda i, *_: i < count, body, (0, initial, buffers), maximum_iterations=count
    )
    moved = keras.tree.map_structure(
        lambda b: ops.transpose(b, (1, 2, 0) + tuple(range(3, len(b.shape)))), buffers
    )
    return moved, s
