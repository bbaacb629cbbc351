"""`Recurrent` (the time loop), `Bidirectional` and `StackedRecurrent`."""

import keras
from keras import ops

from seqkeras.layers import time_loop
from seqkeras.layers import validation
from seqkeras.layers.cells import RecurrentCell
from seqkeras.layers.min_rnn import LinearRecurrentCell

_PACKAGE = "seqkeras"


def _check_rank3(layer, input_shape):
    if len(input_shape) != 3:
        raise ValueError(
            f"`{layer}` expects inputs of rank 3, (batch, time, features). "
            f"Received: input_shape={tuple(input_shape)}"
        )


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Recurrent(keras.layers.Layer):
    """Runs a seqkeras cell over time.

    The input-to-hidden matmul runs for all steps at once (one GEMM); the
    loop runs only the recurrent part, and its gradient is exact and hand
    written (see `seqkeras.layers.time_loop`). The loop uses builtin ops
    only, so models convert to TFLite without Flex ops, with a dynamic batch
    and sequence length.

    Args:
        cell: a `SimpleRNNCell`, `GRUCell` or `LSTMCell` (or a config dict);
            or a cell linear in its state (`MinGRUCell`, `MinLSTMCell`),
            whose whole sequence is one parallel scan (`cell.parallel`).
        return_sequences: return the output at every step, (batch, time,
            units), instead of the last one, (batch, units).
        return_state: also return the final states, `[output, *states]`.
        go_backwards: process the sequence in reverse; with
            `return_sequences`, outputs come in processing (reversed) order,
            as in Keras.
        stateful: carry the final states of a batch into the next call, for
            truncated backpropagation through time; `reset_states()` zeroes
            them. Needs a fixed batch size (`keras.Input(batch_size=...)`).

    Call arguments:
        inputs: (batch, time, features).
        mask: optional bool (batch, time); a masked step leaves the states
            unchanged and outputs zeros, so padding on the right or on the
            left gives the same final state as the unpadded sequence.
        initial_state: optional list of (batch, size) tensors, one per cell
            state (LSTM: `[h, c]`).
        training: enables dropout (one mask for all steps).

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.Recurrent(
        ...     seqkeras.layers.GRUCell(8), return_sequences=True)
        >>> tuple(layer(np.ones((2, 5, 3), "float32")).shape)
        (2, 5, 8)
    """

    def __init__(
        self,
        cell,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(cell, dict):
            cell = keras.saving.deserialize_keras_object(cell)
        if not isinstance(cell, (RecurrentCell, LinearRecurrentCell)):
            raise TypeError(
                "`Recurrent` received an invalid value for `cell`: expected a "
                "seqkeras cell (SimpleRNNCell, GRUCell, LSTMCell, MinGRUCell or "
                "MinLSTMCell). "
                f"Received: cell={cell!r}"
            )
        self.cell = cell
        for arg in ("return_sequences", "return_state", "go_backwards", "stateful"):
            setattr(self, arg, validation.boolean("Recurrent", arg, locals()[arg]))
        self.supports_masking = True
        self.states = None

    @property
    def state_sizes(self):
        """The sizes of the cell's states, one per state (h; h and c)."""
        sizes = self.cell.state_size
        return list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]

    @property
    def stream_state_sizes(self):
        """The widths of the states `stream_step` carries: the cell's. A
        layer that runs backwards needs the whole sequence: ValueError."""
        if self.go_backwards:
            raise ValueError(f"layer {self.name!r} runs backwards")
        return list(self.state_sizes)

    def stream_step(self, x, states):
        """One streamed time step, `x` (batch, features) and the states ->
        `(output, states)`: the cell's step (`seqkeras.export.streaming`
        chains these). A layer that runs backwards needs the whole
        sequence and raises a ValueError."""
        if self.go_backwards:
            raise ValueError(f"layer {self.name!r} runs backwards")
        h, new = self.cell(x, list(states))
        return h, list(new) if isinstance(new, (list, tuple)) else [new]

    def build(self, input_shape):
        _check_rank3("Recurrent", input_shape)
        if not self.cell.built:
            self.cell.build((input_shape[0], input_shape[-1]))
        if self.stateful:
            batch = input_shape[0]
            if batch is None:
                raise ValueError(
                    "`Recurrent` with `stateful=True` needs a fixed batch "
                    "size: use `keras.Input(shape, batch_size=N)`. Received: "
                    f"input_shape={tuple(input_shape)}"
                )
            self.states = [
                self.add_weight(
                    shape=(batch, size),
                    initializer="zeros",
                    trainable=False,
                    name=f"state_{i}",
                )
                for i, size in enumerate(self.state_sizes)
            ]

    def reset_states(self):
        """Zeroes the carried states of a stateful layer."""
        if self.states is not None:
            for state in self.states:
                state.assign(ops.zeros_like(state))

    def _check_initial_state(self, initial_state, batch):
        if not isinstance(initial_state, (list, tuple)):
            initial_state = [initial_state]
        sizes = self.state_sizes
        if len(initial_state) != len(sizes):
            raise ValueError(
                f"`Recurrent` ({type(self.cell).__name__}) expects "
                f"{len(sizes)} initial state tensor(s) for `initial_state`. "
                f"Received: {len(initial_state)}"
            )
        states = []
        for s, size in zip(initial_state, sizes):
            shape = tuple(s.shape)
            if (
                len(shape) != 2
                or shape[-1] not in (None, size)
                or (shape[0] is not None and batch is not None and shape[0] != batch)
            ):
                raise ValueError(
                    "`Recurrent` received an invalid value for "
                    f"`initial_state`: expected tensors of shape ({batch}, "
                    f"{size}). Received: shape={shape}"
                )
            states.append(ops.cast(s, self.compute_dtype))
        return states

    def __call__(self, *args, **kwargs):
        # strings refused before Keras converts the arguments to backend
        # tensors (on JAX that conversion fails first, with a bare error)
        validation.numeric_arguments("Recurrent", ("inputs",), args, kwargs)
        return super().__call__(*args, **kwargs)

    def call(self, inputs, mask=None, initial_state=None, training=None):
        validation.numeric("Recurrent", "inputs", inputs)
        inputs = ops.convert_to_tensor(inputs, self.compute_dtype)
        _check_rank3("Recurrent", inputs.shape)
        validation.features("Recurrent", "inputs", inputs, self.cell.input_size)
        batch = ops.shape(inputs)[0]
        static_batch = inputs.shape[0]
        if (
            self.stateful
            and self.states is not None
            and (static_batch is not None and static_batch != self.states[0].shape[0])
        ):
            raise ValueError(
                "`Recurrent` with `stateful=True` was built for batch size "
                f"{self.states[0].shape[0]}; its carried states have that "
                f"many rows. Received: inputs.shape="
                f"{tuple(inputs.shape)} (batch {static_batch})"
            )
        if mask is not None:
            expected = tuple(inputs.shape[:2])
            if len(mask.shape) != 2 or any(
                a is not None and b is not None and a != b for a, b in zip(mask.shape, expected)
            ):
                raise ValueError(
                    "`Recurrent` received an invalid value for `mask`: "
                    f"expected shape (batch, time) = {expected}. Received: "
                    f"shape={tuple(mask.shape)}"
                )
            mask = ops.cast(mask, "bool")
        if initial_state is not None:
            states = self._check_initial_state(initial_state, static_batch)
        elif self.stateful:
            states = [ops.cast(s, self.compute_dtype) for s in self.states]
        else:
            states = self.cell.get_initial_state(batch)

        rmask = None
        if training and self.cell.dropout > 0:
            step_shape = (batch, inputs.shape[-1])
            dmask = self.cell.get_dropout_mask(ops.ones(step_shape, self.compute_dtype))
            inputs = inputs * ops.expand_dims(dmask, 1)
        if training and self.cell.recurrent_dropout > 0:
            rmask = self.cell.get_recurrent_dropout_mask(states[0])

        if isinstance(self.cell, LinearRecurrentCell):  # one parallel scan
            if self.go_backwards:
                inputs = ops.flip(inputs, axis=1)
                mask = None if mask is None else ops.flip(mask, axis=1)
            sequence, states = self.cell.parallel(inputs, states, mask)
        else:
            x = ops.transpose(inputs, (1, 0, 2))  # (time, batch, features)
            if mask is not None:
                mask = ops.expand_dims(ops.transpose(mask, (1, 0)), -1)
            if self.go_backwards:
                x = ops.flip(x, axis=0)
                mask = None if mask is None else ops.flip(mask, axis=0)
            proj = self.cell.project_inputs(x)  # (time, batch, gates * units)
            outputs, states = time_loop.run(
                self.cell,
                proj,
                states,
                mask=mask,
                rmask=rmask,
                return_sequences=self.return_sequences,
                save_residuals=bool(training),
            )
            sequence = ops.transpose(outputs, (1, 0, 2)) if self.return_sequences else None
        if self.stateful:
            for var, s in zip(self.states, states):
                var.assign(ops.cast(s, var.dtype))
        output = sequence if self.return_sequences else states[0]
        if self.return_state:
            return [output] + list(states)
        return output

    def compute_output_shape(self, input_shape):
        batch, steps = input_shape[0], input_shape[1]
        units = self.cell.units
        out = (batch, steps, units) if self.return_sequences else (batch, units)
        if self.return_state:
            return [out] + [(batch, s) for s in self.state_sizes]
        return out

    def compute_mask(self, inputs, mask=None):
        out_mask = mask if self.return_sequences else None
        if self.return_state:
            return [out_mask] + [None] * len(self.state_sizes)
        return out_mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cell": keras.saving.serialize_keras_object(self.cell),
                "return_sequences": self.return_sequences,
                "return_state": self.return_state,
                "go_backwards": self.go_backwards,
                "stateful": self.stateful,
            }
        )
        return config


_MERGE_MODES = ("concat", "sum", "ave", "mul", None)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Bidirectional(keras.layers.Layer):
    """Runs a `Recurrent` layer forwards and a copy of it backwards.

    `h_t = [h_fw_t ; h_bw_t]` (seed notes) for `merge_mode="concat"`.

    Args:
        layer: a `Recurrent` layer (not yet built); the backward copy is
            made from its config with `go_backwards` flipped.
        merge_mode: `"concat"` (default), `"sum"`, `"ave"`, `"mul"`, or None
            to return the two outputs as a list `[forward, backward]`.
        backward_layer: the backward `Recurrent` layer (None, the default:
            a copy of `layer`'s config running the other way; a saved
            layer passes its own).

    Call arguments:
        inputs, mask, training: as `Recurrent`.
        initial_state: optional list: the forward states, then the backward.

    Returns the merged output (with `return_sequences`, the backward outputs
    are re-aligned with the input time steps), followed, when the layer has
    `return_state=True`, by the forward states and then the backward states.

    Examples:
        >>> import numpy as np, seqkeras
        >>> bi = seqkeras.layers.Bidirectional(
        ...     seqkeras.layers.Recurrent(seqkeras.layers.LSTMCell(4)))
        >>> tuple(bi(np.ones((2, 5, 3), "float32")).shape)
        (2, 8)
    """

    def __init__(self, layer, merge_mode="concat", backward_layer=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(layer, dict):
            layer = keras.saving.deserialize_keras_object(layer)
        if not isinstance(layer, Recurrent):
            raise TypeError(
                "`Bidirectional` received an invalid value for `layer`: "
                "expected a `seqkeras.layers.Recurrent`. "
                f"Received: layer={layer!r}"
            )
        if layer.stateful:
            raise ValueError(
                "`Bidirectional` received an invalid value for `layer`: "
                "a stateful layer cannot run backwards. Received: "
                "stateful=True"
            )
        self.merge_mode = validation.choice("Bidirectional", "merge_mode", merge_mode, _MERGE_MODES)
        self.forward_layer = layer
        if isinstance(backward_layer, dict):
            backward_layer = keras.saving.deserialize_keras_object(backward_layer)
        if backward_layer is None:
            config = layer.get_config()
            config["go_backwards"] = not layer.go_backwards
            config["name"] = "backward_" + layer.name
            backward_layer = Recurrent.from_config(config)
        self.backward_layer = backward_layer
        self.return_sequences = layer.return_sequences
        self.return_state = layer.return_state
        self.supports_masking = True

    def build(self, input_shape):
        _check_rank3("Bidirectional", input_shape)
        for layer in (self.forward_layer, self.backward_layer):
            if not layer.built:
                layer.build(input_shape)

    def _merge(self, fw, bw):
        if self.merge_mode == "concat":
            return ops.concatenate([fw, bw], axis=-1)
        if self.merge_mode == "sum":
            return fw + bw
        if self.merge_mode == "ave":
            return (fw + bw) / 2
        if self.merge_mode == "mul":
            return fw * bw
        return [fw, bw]

    def call(self, inputs, mask=None, initial_state=None, training=None):
        validation.numeric("Bidirectional", "inputs", inputs)
        _check_rank3("Bidirectional", inputs.shape)
        validation.features("Bidirectional", "inputs", inputs, self.forward_layer.cell.input_size)
        validation.same_dims(
            "Bidirectional", "mask", mask, validation.static_shape(inputs)[:2], "(batch, time)"
        )
        fw_init = bw_init = None
        if initial_state is not None:
            n = len(self.forward_layer.state_sizes)
            if len(initial_state) != 2 * n:
                raise ValueError(
                    f"`Bidirectional` expects {2 * n} initial state tensors "
                    "for `initial_state` (forward states, then backward). "
                    f"Received: {len(initial_state)}"
                )
            fw_init, bw_init = initial_state[:n], initial_state[n:]
        fw = self.forward_layer(inputs, mask=mask, initial_state=fw_init, training=training)
        bw = self.backward_layer(inputs, mask=mask, initial_state=bw_init, training=training)
        fw_states = bw_states = []
        if self.return_state:
            fw, fw_states = fw[0], fw[1:]
            bw, bw_states = bw[0], bw[1:]
        if self.return_sequences:
            bw = ops.flip(bw, axis=1)
        output = self._merge(fw, bw)
        if self.return_state:
            output = output if isinstance(output, list) else [output]
            return output + list(fw_states) + list(bw_states)
        return output

    def compute_output_shape(self, input_shape):
        shape = self.forward_layer.compute_output_shape(input_shape)
        states = []
        if self.return_state:
            shape, states = shape[0], list(shape[1:])
        if self.merge_mode == "concat":
            out = [tuple(shape[:-1]) + (shape[-1] * 2,)]
        elif self.merge_mode is None:
            out = [tuple(shape), tuple(shape)]
        else:
            out = [tuple(shape)]
        if self.return_state:
            return out + states + states
        return out if self.merge_mode is None else out[0]

    def compute_mask(self, inputs, mask=None):
        out_mask = mask if self.return_sequences else None
        n_out = 2 if self.merge_mode is None else 1
        if self.return_state:
            n_states = 2 * len(self.forward_layer.state_sizes)
            return [out_mask] * n_out + [None] * n_states
        return [out_mask] * 2 if n_out == 2 else out_mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "layer": keras.saving.serialize_keras_object(self.forward_layer),
                "backward_layer": keras.saving.serialize_keras_object(self.backward_layer),
                "merge_mode": self.merge_mode,
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class StackedRecurrent(keras.layers.Layer):
    """Recurrent layers run in sequence (a deep RNN).

    `h_t^(l) = cell(h_t^(l-1), h_{t-1}^(l))` (seed notes): each layer reads
    the output sequence of the one below. Every layer but the last must have
    `return_sequences=True`; none may have `return_state=True`.

    Args:
        layers: a non-empty list of `Recurrent` or `Bidirectional` layers.
        dropout: rate in [0, 1) of dropout applied between layers (not after
            the last).
        residual: add each layer's input to its output when their feature
            sizes match (an error at build time otherwise); for the last
            layer only when it returns sequences.

    Call arguments: `inputs` (batch, time, features), `mask` (batch, time),
    `training`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> L = seqkeras.layers
        >>> stack = L.StackedRecurrent([
        ...     L.Recurrent(L.GRUCell(6), return_sequences=True),
        ...     L.Recurrent(L.GRUCell(6), return_sequences=True),
        ... ], dropout=0.1, residual=True)
        >>> tuple(stack(np.ones((2, 5, 6), "float32")).shape)
        (2, 5, 6)
    """

    def __init__(self, layers, dropout=0.0, residual=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(layers, (list, tuple)) or not layers:
            raise ValueError(
                "`StackedRecurrent` received an invalid value for `layers`: "
                f"expected a non-empty list of layers. Received: {layers!r}"
            )
        layers = [
            keras.saving.deserialize_keras_object(x) if isinstance(x, dict) else x for x in layers
        ]
        for i, layer in enumerate(layers):
            if not isinstance(layer, (Recurrent, Bidirectional)):
                raise TypeError(
                    "`StackedRecurrent` received an invalid value for "
                    "`layers`: expected Recurrent or Bidirectional layers. "
                    f"Received at index {i}: {layer!r}"
                )
            if layer.return_state:
                raise ValueError(
                    "`StackedRecurrent` received an invalid value for "
                    f"`layers`: layer {i} ({layer.name}) has "
                    "return_state=True; stacked layers return outputs only."
                )
            if (i < len(layers) - 1 and not layer.return_sequences) or (
                isinstance(layer, Bidirectional) and layer.merge_mode is None
            ):
                raise ValueError(
                    "`StackedRecurrent` received an invalid value for "
                    f"`layers`: layer {i} ({layer.name}) must return merged "
                    "sequences (return_sequences=True, merge_mode not None) "
                    "to feed the next layer."
                )
        self.stack = list(layers)
        self.dropout = validation.rate("StackedRecurrent", "dropout", dropout)
        self.residual = validation.boolean("StackedRecurrent", "residual", residual)
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="dropout"
        )
        self.supports_masking = True

    def _residual_at(self, i):
        return self.residual and self.stack[i].return_sequences

    def build(self, input_shape):
        _check_rank3("StackedRecurrent", input_shape)
        shape = tuple(input_shape)
        for i, layer in enumerate(self.stack):
            if not layer.built:
                layer.build(shape)
            out = layer.compute_output_shape(shape)
            if self._residual_at(i) and out[-1] != shape[-1]:
                raise ValueError(
                    "`StackedRecurrent` with `residual=True` needs each "
                    "layer's output size to equal its input size. Layer "
                    f"{i} ({layer.name}) maps {shape[-1]} -> {out[-1]} "
                    "features."
                )
            shape = out

    def call(self, inputs, mask=None, training=None):
        validation.numeric("StackedRecurrent", "inputs", inputs)
        _check_rank3("StackedRecurrent", inputs.shape)
        validation.same_dims(
            "StackedRecurrent", "mask", mask, validation.static_shape(inputs)[:2], "(batch, time)"
        )
        x = inputs
        last = len(self.stack) - 1
        for i, layer in enumerate(self.stack):
            y = layer(x, mask=mask, training=training)
            if self._residual_at(i):
                y = y + ops.cast(x, y.dtype)
            if i < last and self.dropout > 0:
                y = self.dropout_layer(y, training=training)
            x = y
        return x

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.stack:
            shape = layer.compute_output_shape(shape)
        return shape

    def compute_mask(self, inputs, mask=None):
        return mask if self.stack[-1].return_sequences else None

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "layers": [keras.saving.serialize_keras_object(x) for x in self.stack],
                "dropout": self.dropout,
                "residual": self.residual,
            }
        )
        return config
