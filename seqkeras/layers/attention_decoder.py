"""`AttentionDecoder`: a recurrent decoder that attends to a memory (the
encoder outputs) at every step, Bahdanau- or Luong-style."""

import keras
from keras import ops

from seqkeras.layers import time_loop
from seqkeras.layers import validation
from seqkeras.layers.attention import Attention
from seqkeras.layers.cells import RecurrentCell
from seqkeras.layers.scoring import SCORES

STYLES = ("bahdanau", "luong")


def _as_list(states):
    """A cell with one state returns it bare; make it a list."""
    return list(states) if isinstance(states, (list, tuple)) else [states]


@keras.saving.register_keras_serializable(package="seqkeras")
class AttentionDecoder(keras.layers.Layer):
    """A recurrent decoder with attention over a memory.

    With `style="bahdanau"` (Bahdanau et al. 2014), step t scores the
    previous state against the memory, `c_t = attend(h_{t-1}, memory)`,
    feeds `[x_t; c_t]` to the cell and outputs `[h_t; c_t]`. With
    `style="luong"` (Luong et al. 2015) the cell runs first,
    `h_t = cell([x_t; a_{t-1}])`, then `c_t = attend(h_t, memory)` and the
    attentional vector `a_t = tanh(W_c [c_t; h_t])` is the output and, with
    `input_feeding=True`, part of the next step's input.

    Args:
        cell: a seqkeras cell (or its config dict); its `units` is the
            decoder size.
        score: attention score, one of `dot`, `scaled_dot`, `general`,
            `additive`, `cosine` (dot, scaled_dot and cosine need the memory
            features to equal the cell units).
        style: `"bahdanau"` or `"luong"`.
        input_feeding: Luong style: feed `a_{t-1}` into step t.
        attention_units: hidden size of the additive score.
        return_state: also return the final states.

    Call arguments:
        inputs: (batch, time, features), e.g. embedded target tokens
            shifted right (teacher forcing).
        memory: (batch, source_time, memory_features).
        initial_state: optional list of the cell's states (e.g. the
            encoder's final state, bridged to `units`).
        memory_mask: optional bool (batch, source_time); filled from the
            memory's Keras mask.
        inputs_mask: the decoder's padding mask; steps are computed through
            padding (their outputs are ignored by masked losses) and the mask
            is propagated to the outputs.
        return_attention_scores: also return the weights
            (batch, time, source_time).

    Output: (batch, time, units + memory_features) for Bahdanau style,
    (batch, time, units) for Luong style.

    Examples:
        >>> import numpy as np, seqkeras
        >>> decoder = seqkeras.layers.AttentionDecoder(
        ...     seqkeras.layers.GRUCell(8), score="additive")
        >>> x, memory = np.ones((2, 3, 4), "float32"), np.ones((2, 5, 6), "float32")
        >>> outputs, weights = decoder(x, memory, return_attention_scores=True)
        >>> tuple(outputs.shape), tuple(weights.shape)
        ((2, 3, 14), (2, 3, 5))
    """

    def __init__(
        self,
        cell,
        score="additive",
        style="bahdanau",
        input_feeding=True,
        attention_units=None,
        return_state=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(cell, dict):
            cell = keras.saving.deserialize_keras_object(cell)
        if not isinstance(cell, RecurrentCell):
            raise TypeError(
                f"`AttentionDecoder` expects a seqkeras cell for `cell`. Received: cell={cell!r}"
            )
        self.cell = cell
        self.score = validation.choice("AttentionDecoder", "score", score, SCORES)
        self.style = validation.choice("AttentionDecoder", "style", style, STYLES)
        self.input_feeding = validation.boolean("AttentionDecoder", "input_feeding", input_feeding)
        self.attention_units = attention_units
        self.return_state = validation.boolean("AttentionDecoder", "return_state", return_state)
        self.attention = Attention(
            self.score, units=attention_units, dtype=self.dtype_policy, name="attention"
        )
        if self.style == "luong":
            self.combine = keras.layers.Dense(
                cell.units,
                activation="tanh",
                use_bias=False,
                dtype=self.dtype_policy,
                name="combine",
            )
        self.supports_masking = True

    @property
    def sizes_of_cell_states(self):
        sizes = self.cell.state_size
        return list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]

    @property
    def _feeding(self):
        return self.style == "luong" and self.input_feeding

    @property
    def state_size(self):
        sizes = self.sizes_of_cell_states
        return sizes + [self.cell.units] if self._feeding else sizes

    def output_size(self, memory_features):
        units = self.cell.units
        return units + memory_features if self.style == "bahdanau" else units

    def build(self, inputs_shape, memory_shape, initial_state_shape=None):
        for arg, shape in (("inputs", inputs_shape), ("memory", memory_shape)):
            if len(shape) != 3 or shape[-1] is None:
                raise ValueError(
                    f"`AttentionDecoder` expects `{arg}` of rank 3 with "
                    f"known features. Received: {arg}.shape={tuple(shape)}"
                )
        units, features = self.cell.units, memory_shape[-1]
        if self.score in ("dot", "scaled_dot", "cosine") and units != features:
            raise ValueError(
                f"`AttentionDecoder` with score={self.score!r} needs the "
                f"cell units ({units}) to equal the memory features "
                f"({features}); use score='general' or 'additive' for "
                "different sizes"
            )
        extra = {"bahdanau": features, "luong": units if self.input_feeding else 0}[self.style]
        if not self.cell.built:  # a deserialized cell comes built
            self.cell.build((inputs_shape[0], inputs_shape[-1] + extra))
        self.attention.build((memory_shape[0], 1, units), memory_shape)
        if self.style == "luong":
            self.combine.build((memory_shape[0], features + units))

    def get_initial_state(self, batch_size, initial_state=None):
        """The decoder's states: the cell's (zeros or `initial_state`), plus
        the zero attentional vector for Luong input feeding."""
        states = (
            list(initial_state)
            if initial_state is not None
            else list(self.cell.get_initial_state(batch_size))
        )
        n = len(self.sizes_of_cell_states)
        if len(states) != n:
            raise ValueError(
                f"`AttentionDecoder` expects {n} tensor(s) for "
                f"`initial_state`. Received: {len(states)}"
            )
        states = [ops.cast(s, self.compute_dtype) for s in states]
        if self._feeding:
            states.append(ops.zeros((batch_size, self.cell.units), self.compute_dtype))
        return states

    def dropout_masks(self, batch_size, states, training):
        """The cell's dropout masks for one sequence (drawn once, used at
        every step: variational dropout), or {} outside training."""
        masks = {}
        if training and self.cell.dropout > 0:
            masks["dropout_mask"] = self.cell.get_dropout_mask(
                ops.ones((batch_size, self.cell.input_size), self.compute_dtype)
            )
        if training and self.cell.recurrent_dropout > 0:
            masks["recurrent_dropout_mask"] = self.cell.get_recurrent_dropout_mask(states[0])
        return masks

    def _attend(self, query, memory, memory_mask, projected_key=None):
        """`(context (rows, d_v), weights (rows, source_time))` of queries
        (rows, d) over `memory`: one query per memory row, or, when decoding
        beams, `rows / memory rows` consecutive queries per memory row (the
        beams of a source read its memory, never repeated per beam)."""
        sources = ops.shape(memory)[0]
        queries = ops.reshape(query, (sources, -1, query.shape[-1]))  # (sources, beams, d)
        context, weights = self.attention(
            queries,
            memory,
            value_mask=memory_mask,
            return_attention_scores=True,
            projected_key=projected_key,
        )
        return (
            ops.reshape(context, (-1, context.shape[-1])),
            ops.reshape(weights, (-1, ops.shape(memory)[1])),
        )

    def step(
        self,
        inputs,
        states,
        memory,
        memory_mask=None,
        training=None,
        dropout_masks=None,
        projected_memory=None,
    ):
        """One decoding step: `(inputs (batch, features), states)` ->
        `(output, new_states, weights (batch, source_time))`.
        `dropout_masks`: the cell's masks for this sequence (a dict of
        `dropout_mask` / `recurrent_dropout_mask`, see `dropout_masks`).
        `projected_memory`: `self.attention.project_key(memory)`, computed
        once for all steps (recomputed per step when None). `memory` (and
        its mask and projection) may have fewer rows than `inputs`, a
        divisor: consecutive rows share a memory row (the beams of a
        source)."""
        masks = dropout_masks or {}

        def run_cell(x, extra, cell_states):
            if extra is not None:
                x = ops.concatenate([x, extra], -1)
            h, new_states = self.cell(x, cell_states, training=training, **masks)
            return h, _as_list(new_states)

        return self._step(run_cell, inputs, states, memory, memory_mask, projected_memory)

    def _step(self, run_cell, x, states, memory, memory_mask, projected):
        """The step's equations; `run_cell(x, extra, cell_states) -> (h,
        new_states)` runs the cell on `[x; extra]` (extra: the context for
        Bahdanau, the fed attentional vector for Luong, or None)."""
        n = len(self.sizes_of_cell_states)
        cell_states = list(states[:n])
        if self.style == "bahdanau":
            context, weights = self._attend(cell_states[0], memory, memory_mask, projected)
            h, new_states = run_cell(x, context, cell_states)
            return ops.concatenate([h, context], -1), new_states, weights
        h, new_states = run_cell(x, states[n] if self._feeding else None, cell_states)
        context, weights = self._attend(h, memory, memory_mask, projected)
        output = self.combine(ops.concatenate([context, h], -1))
        if self._feeding:
            new_states = new_states + [output]
        return output, new_states, weights

    def _sequence_cell(self, inputs, masks):
        """`(projected inputs (time, batch, gates*units), run_cell)` for the
        whole-sequence loop: the inputs' share of the cell's input
        projection (and the input bias) as one GEMM over every step, so
        each step only projects its context / fed vector and runs the
        recurrent part (`RecurrentCell.forward_step`), as
        `seqkeras.layers.Recurrent` does. Same equations as `cell(...)`."""
        cell = self.cell
        dx = inputs.shape[-1]
        kernel = cell.to_loop_layout(cell.kernel)
        k_x, k_extra = kernel[:dx], kernel[dx:]
        dmask = masks.get("dropout_mask")
        x = inputs if dmask is None else inputs * ops.expand_dims(dmask[:, :dx], 1)
        proj = ops.matmul(x, k_x) + cell.loop_input_bias()
        proj = ops.transpose(proj, (1, 0, 2))  # (time, batch, gates*units)
        consts = cell.loop_constants(cell.recurrent_weights())
        rmask = masks.get("recurrent_dropout_mask")

        def run_cell(p, extra, cell_states):
            if extra is not None:
                if dmask is not None:
                    extra = extra * dmask[:, dx:]
                p = p + ops.matmul(extra, k_extra)
            h_in = cell_states[0]
            if rmask is not None:
                h_in = h_in * rmask
            h, new_states, _ = cell.forward_step(p, cell_states, consts, h_in)
            return h, list(new_states)

        return proj, run_cell

    def call(
        self,
        inputs,
        memory,
        initial_state=None,
        inputs_mask=None,
        memory_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        name = "AttentionDecoder"
        for arg, x in (("inputs", inputs), ("memory", memory)):
            validation.numeric(name, arg, x)
            if len(x.shape) != 3:
                raise ValueError(
                    f"`{name}` expects `{arg}` of rank 3, (batch, time, "
                    f"features). Received: {arg}.shape="
                    f"{validation.static_shape(x)}"
                )
        source = validation.static_shape(memory)
        target = validation.static_shape(inputs)
        validation.same_dims(name, "memory_mask", memory_mask, source[:2], "(batch, memory_time)")
        validation.same_dims(name, "inputs_mask", inputs_mask, target[:2], "(batch, time)")
        if initial_state is not None:
            sizes = self.sizes_of_cell_states
            given = (
                list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
            )
            for state, size in zip(given, sizes):
                validation.same_dims(
                    name, "initial_state", state, (target[0], size), "(batch, units)"
                )
        inputs = ops.convert_to_tensor(inputs, self.compute_dtype)
        memory = ops.convert_to_tensor(memory, self.compute_dtype)
        batch = ops.shape(inputs)[0]
        if memory_mask is None:
            memory_mask = ops.ones(ops.shape(memory)[:2], "bool")
        states = self.get_initial_state(batch, initial_state)
        out_dim = self.output_size(memory.shape[-1])
        mem_mask = ops.cast(memory_mask, "bool")
        masks = self.dropout_masks(batch, states, training)
        projected = self.attention.project_key(memory)  # once, not per step
        proj, run_cell = self._sequence_cell(inputs, masks)

        def step(p, states):
            out, new_states, weights = self._step(run_cell, p, states, memory, mem_mask, projected)
            if return_attention_scores:
                out = ops.concatenate([out, ops.cast(weights, out.dtype)], -1)
            return out, new_states

        width = out_dim + (ops.shape(memory)[1] if return_attention_scores else 0)
        outputs, final = time_loop.scan(
            step, proj, states, width, self.compute_dtype, training=bool(training)
        )
        outputs = ops.transpose(outputs, (1, 0, 2))
        result = [outputs[..., :out_dim]]
        if return_attention_scores:
            result.append(outputs[..., out_dim:])
        if self.return_state:
            result.extend(final)
        return result[0] if len(result) == 1 else tuple(result)

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        extra = (1 + len(self.state_size)) if self.return_state else 1
        return mask if extra == 1 else [mask] + [None] * (extra - 1)

    def compute_output_spec(
        self, inputs, memory, initial_state=None, return_attention_scores=False, **kwargs
    ):
        batch, time = inputs.shape[0], inputs.shape[1]
        dtype = self.compute_dtype
        result = [keras.KerasTensor((batch, time, self.output_size(memory.shape[-1])), dtype=dtype)]
        if return_attention_scores:
            result.append(keras.KerasTensor((batch, time, memory.shape[1]), dtype=dtype))
        if self.return_state:
            result.extend(keras.KerasTensor((batch, s), dtype=dtype) for s in self.state_size)
        return result[0] if len(result) == 1 else tuple(result)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cell": keras.saving.serialize_keras_object(self.cell),
                "score": self.score,
                "style": self.style,
                "input_feeding": self.input_feeding,
                "attention_units": self.attention_units,
                "return_state": self.return_state,
            }
        )
        return config
