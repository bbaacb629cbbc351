"""The one time loop behind `Recurrent`, with an exact hand-written gradient.

Why a custom gradient instead of autodiff through `while_loop`:

1. Speed. Autodiff of a while loop computes the recurrent-weight gradient
   with one small GEMM per step, inside the sequential backward loop. Here
   the backward loop only carries `dh`, `dc` (one small GEMM per step), and
   the weight gradient is one large GEMM over all steps afterwards.
2. Exportability. Inference (and exported) graphs write their outputs
   into a preallocated buffer with `slice_update` (XLA's
   DynamicUpdateSlice, a TFLite builtin), not a TensorArray; TensorArrays
   become TensorList ops that TFLite only runs through the Flex delegate,
   and only with a static batch size. TensorFlow defines no gradient for
   DynamicUpdateSlice, so the loop must bring its own.
3. Training stacks its steps with `keras.ops.scan` (`_scan`: a
   TensorArray on TensorFlow) instead: outside XLA, TensorFlow copies a
   whole buffer at every write, and the training loops write several
   (outputs and residuals; backward: deltas). Under XLA the two compile
   alike; without it the LSTM training step ran 4.3x (float32) and 2.5x
   (mixed_bfloat16) faster on the scan (benchmarks/recurrent.py).

The forward loop saves per-step residuals only when `save_residuals` is
True (training); otherwise the gradient function recomputes them, so
inference graphs (and exported models) carry no residual buffers.
"""

from keras import backend
from keras import ops

from seqkeras.layers import state


def _step(cell, p, bias, states, consts, m, rmask):
    """One forward step of both loops: `(h, new_states, residuals)`; a row
    masked by `m` keeps its states and outputs zeros."""
    p = p if bias is None else p + bias
    h_in = states[0] * rmask if rmask is not None else states[0]
    h, new_states, res = cell.forward_step(p, states, consts, h_in)
    if m is not None:
        new_states = [ops.where(m, n, o) for n, o in zip(new_states, states)]
        h = ops.where(m, h, ops.zeros_like(h))
    return h, list(new_states), res


def _back_step(cell, dh, d_states, coeffs, consts, m, rmask):
    """One step of the backward loop: `(dp, d_prev_states, deltas)`; a row
    masked by `m` passes its state gradients through unchanged."""
    dp, dh_in, d_prev, step_deltas = cell.backward_step(
        dh, list(d_states[1:]), list(coeffs), consts
    )
    if rmask is not None:
        dh_in = dh_in * rmask
    d_prev = [d_prev[0] + dh_in] + list(d_prev[1:])
    if m is not None:
        d_prev = [ops.where(m, n, o) for n, o in zip(d_prev, d_states)]
        dp = ops.where(m, dp, ops.zeros_like(dp))
        step_deltas = [ops.where(m, d, ops.zeros_like(d)) for d in step_deltas]
    return dp, d_prev, list(step_deltas)


def _forward(cell, proj, bias, states, consts, mask, rmask, write_outputs):
    """Runs the cell over time saving nothing for a gradient (inference and
    export; training runs `_forward_scan`). Returns (outputs or None, final
    states)."""
    steps = ops.shape(proj)[0]
    batch = ops.shape(proj)[1]
    dtype = proj.dtype
    buffers = [ops.zeros((steps, batch, cell.units), dtype)] * write_outputs

    def body(t, states, buffers):
        # A gather (TFLite GATHER, which XNNPACK runs with the rest of the
        # loop body) rather than a strided slice at a loop-carried index
        # (which it does not, splitting the body): 1.4x faster in LiteRT
        # (benchmarks/tflite_latency.py). Training's loop keeps XLA's
        # dynamic slice.
        p = ops.take(proj, t, axis=0)
        h, new_states, _ = _step(
            cell, p, bias, states, consts, None if mask is None else mask[t], rmask
        )
        return t + 1, list(new_states), [state.write_step(b, t, h) for b in buffers]

    _, states, buffers = ops.while_loop(lambda t, *_: t < steps, body, (0, list(states), buffers))
    return (buffers[0] if write_outputs else None), states


def _scan(body, carry, xs, reverse=False):
    """`keras.ops.scan` whose per-step outputs are its carry: `body(carry,
    xs_t) -> new_carry`; returns `(final_carry, stacked)` with `stacked[i]`
    the (time, ...) sequence of `new_carry[i]`.

    Why: Keras' TensorFlow `scan` requires the per-step outputs to match
    the carry in shape and dtype (it sizes its TensorArrays from the
    carry); carrying the step's outputs satisfies that on every backend.
    The TensorArray stacks each step in O(1), where writing a (time, ...)
    buffer copies the whole buffer at every step outside XLA (see the
    module docstring).
    """

    def step(carry, x):
        new = list(body(list(carry), x))
        return new, new

    final, stacked = ops.scan(step, list(carry), xs, reverse=reverse)
    return list(final), list(stacked)


def _pack(seqs):
    """One (time, batch, sum of widths) tensor of the (time, batch, width)
    `seqs` (the last one may be a bool mask), and the function that splits
    a step of it back (the mask as bool).

    Why: Keras' TensorFlow `scan` fails on several per-step inputs when
    the time axis is dynamic (it checks their lengths agree with a method
    the unknown length does not have); one packed input avoids that. With
    a static time axis the tensors go as a list (no concatenation).
    """
    if len(seqs) == 1:
        return seqs[0], lambda x: [x]
    if all(isinstance(s.shape[0], int) for s in seqs):
        return list(seqs), list
    dtype = seqs[0].dtype
    is_mask = backend.standardize_dtype(seqs[-1].dtype) == "bool"
    parts = [
        ops.cast(s, dtype) if is_mask and i == len(seqs) - 1 else s for i, s in enumerate(seqs)
    ]
    widths = [p.shape[-1] for p in parts]
    bounds = [sum(widths[:i]) for i in range(len(widths) + 1)]

    def split(x):
        out = [x[:, bounds[i] : bounds[i + 1]] for i in range(len(widths))]
        if is_mask:
            out[-1] = out[-1] > 0.5
        return out

    return ops.concatenate(parts, axis=-1), split


def _forward_scan(cell, proj, bias, states, consts, mask, rmask, write_outputs, save):
    """`_forward` on `_scan`: the training path (inference and exported
    graphs use `_forward`, whose buffer writes TFLite runs natively)."""
    n_s = len(states)
    batch = ops.shape(proj)[1]
    dtype = proj.dtype
    widths = [cell.units] * write_outputs + (list(cell.residual_widths()) if save else [])
    extra = [ops.zeros((batch, w), dtype) for w in widths]
    xs, split = _pack([proj] + ([] if mask is None else [mask]))

    def body(carry, x):
        x = split(x)
        h, new_states, res = _step(
            cell, x[0], bias, carry[:n_s], consts, x[1] if mask is not None else None, rmask
        )
        return new_states + [h] * write_outputs + (list(res) if save else [])

    final, stacked = _scan(body, list(states) + extra, xs)
    seqs = stacked[n_s:]
    outputs = seqs.pop(0) if write_outputs else None
    return outputs, final[:n_s], seqs


def _backward_scan(cell, residuals, consts, mask, rmask, d_outputs, d_states):
    """The reverse loop, on `_scan`. Returns (d_proj, d_initial_states,
    d_recurrent_weights)."""
    n_s = len(d_states)
    batch = ops.shape(residuals[0])[1]
    dtype = residuals[0].dtype
    widths = [cell.gates * cell.units] + list(cell.delta_widths())
    extra = [ops.zeros((batch, w), dtype) for w in widths]
    coeffs = list(residuals[1:])  # residuals[0]: h_in, for the weights
    has_d = d_outputs is not None
    xs, split = _pack(coeffs + [d_outputs] * has_d + ([] if mask is None else [mask]))

    def body(carry, x):
        d_states = carry[:n_s]
        x = split(x)
        coeffs_t = x[: len(coeffs)]
        dh = d_states[0] + x[len(coeffs)] if has_d else d_states[0]
        dp, d_prev, step_deltas = _back_step(
            cell, dh, d_states, coeffs_t, consts, x[-1] if mask is not None else None, rmask
        )
        return d_prev + [dp] + step_deltas

    final, stacked = _scan(body, list(d_states) + extra, xs, reverse=True)
    d_proj, deltas = stacked[n_s], stacked[n_s + 1 :]
    return d_proj, final[:n_s], cell.recurrent_weight_grads(residuals, d_proj, deltas)


def run(
    cell, proj, initial_states, mask=None, rmask=None, return_sequences=True, save_residuals=True
):
    """Runs `cell` over `proj` = `cell.project_inputs(x)`, time-major.

    The cell's input bias (`cell.loop_input_bias()`) is added inside the
    training loop, and to all of `proj` before the inference loop (one op
    less per step in a TFLite WHILE).

    Args:
        cell: a `seqkeras.layers.cells.RecurrentCell`.
        proj: (time, batch, gates * units) projected inputs, without bias.
        initial_states: list of (batch, size) tensors.
        mask: None or bool (time, batch, 1); a masked step carries the
            states unchanged and outputs zeros.
        rmask: None or (batch, units) recurrent dropout mask.
        return_sequences: whether to build the (time, batch, units) outputs.
        save_residuals: keep per-step values for the gradient (training);
            otherwise the gradient recomputes them.

    Returns:
        `(outputs, final_states)`; `outputs` is None unless
        `return_sequences`.
    """
    weights = cell.recurrent_weights()
    n_w, n_s = len(weights), len(initial_states)

    def impl(proj, bias, *flat):
        weights, states = list(flat[:n_w]), list(flat[n_w:])
        consts = cell.loop_constants(weights)
        # Training stacks its steps with `_scan` (O(1) per step without
        # XLA); inference writes the preallocated buffer, so that a plain
        # `model.export()` converts to TFLite with builtin ops only (a
        # TensorArray becomes TensorList ops, which need Flex).
        residuals = None
        if save_residuals:
            outputs, final, residuals = _forward_scan(
                cell, proj, bias, states, consts, mask, rmask, return_sequences, True
            )
        else:  # inference and export: the bias added to all steps at once
            outputs, final = _forward(
                cell, proj + bias, None, states, consts, mask, rmask, return_sequences
            )

        def grad(*upstream, **unused_kwargs):
            upstream = _cotangents(upstream)
            d_outputs = upstream.pop(0) if return_sequences else None
            d_final = [ops.zeros_like(s) if d is None else d for d, s in zip(upstream, final)]
            res = residuals
            if not save_residuals:
                _, _, res = _forward_scan(
                    cell, proj, bias, states, consts, mask, rmask, False, True
                )
            d_proj, d_init, d_weights = _backward_scan(
                cell, res, consts, mask, rmask, d_outputs, d_final
            )
            d_bias = sum_rows(d_proj)
            return tuple([d_proj, d_bias] + d_weights + list(d_init))

        result = ([outputs] if return_sequences else []) + list(final)
        return result, grad

    bias = cell.loop_input_bias()
    result = ops.custom_gradient(impl)(proj, bias, *weights, *initial_states)
    result = list(result)
    outputs = result.pop(0) if return_sequences else None
    assert len(result) == n_s
    return outputs, result


def scan(step, inputs, states, width, dtype, training=True):
    """Runs any step function over time: `step(x_t, states) -> (y_t,
    new_states)` for each `x_t` of the time-major `inputs` (time, batch,
    features); returns `(outputs (time, batch, width), final_states)`.

    The loop for computations without a hand-written gradient (e.g.
    `AttentionDecoder`, whose step attends, runs a cell and combines). The
    gradient comes from the backend's autodiff through the loop:

    - JAX: `ops.scan` (`lax.scan`, reverse-differentiable).
    - TensorFlow, `training` (the layer's own `training` argument): a
      `while_loop` with `maximum_iterations` (its gradient compiles under
      XLA, which needs that bound; Keras' TensorFlow `scan` sets none)
      writing each step's output with `scatter_update` (outside XLA,
      TensorScatterUpdate writes a row in place where a slice update
      copies the buffer).
    - TensorFlow, inference (`training=False`: what exports trace, and
      Viterbi): the same loop writing a preallocated buffer with
      `state.write_step_differentiable` (still differentiable), the
      DYNAMIC_UPDATE_SLICE builtin in TFLite and standard ops in served
      SavedModels (`seqkeras.export.saved_model` rewrites it).
    """
    steps = ops.shape(inputs)[0]
    batch = ops.shape(inputs)[1]
    states = list(states)
    n_s = len(states)
    if backend.backend() == "jax":

        def body(carry, x):
            y, new = step(x, carry[:n_s])
            return list(new) + [y]

        final, stacked = _scan(body, states + [ops.zeros((batch, width), dtype)], inputs)
        return stacked[n_s], final[:n_s]
    buffer = ops.zeros((steps, batch, width), dtype)

    def loop(t, states, buffer):
        y, new = step(inputs[t], states)
        if training:
            return t + 1, list(new), state.write_step(buffer, t, y, "scatter")
        return t + 1, list(new), state.write_step_differentiable(buffer, t, y)

    _, final, buffer = ops.while_loop(
        lambda t, *_: t < steps, loop, (0, states, buffer), maximum_iterations=steps
    )
    return buffer, list(final)


def _cotangents(upstream):
    """The output cotangents as one list, whatever the backend's calling
    convention: TensorFlow calls `grad(*cotangents)`, JAX
    (`jax.custom_gradient`) `grad(cotangents)` with one list."""
    if len(upstream) == 1 and isinstance(upstream[0], (list, tuple)):
        return list(upstream[0])
    return list(upstream)


def sum_outer(a, d):
    """sum_t a_t^T d_t for a (T, B, m), d (T, B, n): one (T*B)-deep GEMM."""
    a2, d2 = _rows(a), _rows(d)
    return ops.cast(ops.matmul(ops.transpose(a2), d2), a.dtype)


def sum_rows(d):
    """sum over (T, B) of d (T, B, n), accumulated as `_rows` does."""
    return ops.cast(ops.sum(_rows(d), axis=0), d.dtype)


def _rows(x):
    """(T, B, n) -> (T*B, n), in float32 when x is float16/bfloat16 so that
    sums over many steps do not lose precision or overflow."""
    x = ops.reshape(x, (-1, ops.shape(x)[-1]))
    if backend.standardize_dtype(x.dtype) in ("float16", "bfloat16"):
        x = ops.cast(x, "float32")
    return x
