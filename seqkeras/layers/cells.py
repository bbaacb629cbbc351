"""Recurrent cells: `SimpleRNNCell`, `GRUCell`, `LSTMCell`.

Each cell implements one step of the seed equations, with the same weight
names, shapes and gate order as the matching `keras.layers.*Cell`, so weights
copied from one to the other give the same outputs:

| cell          | `kernel`        | `recurrent_kernel` | `bias`                       | gates      |
|---------------|-----------------|--------------------|------------------------------|------------|
| SimpleRNNCell | (input, units)  | (units, units)     | (units,)                     | -          |
| GRUCell       | (input, 3units) | (units, 3units)    | (3units,) or (2, 3units) [1] | z, r, h    |
| LSTMCell      | (input, 4units) | (units, 4units)    | (4units,)                    | i, f, c, o |

[1] `reset_after=True` keeps a separate input bias `bias[0]` and recurrent
bias `bias[1]`, as Keras and cuDNN do.

A cell splits its step in two, so that `seqkeras.layers.Recurrent` can run
the input-to-hidden matmul for every time step at once (one large GEMM)
and only the hidden-to-hidden part inside the time loop:

- `project_inputs(x)`: `x @ kernel` for any leading shape (the input bias
  is added inside the loop, where it fuses with the recurrent matmul's
  output instead of costing a pass over the whole projected sequence);
- `forward_step(p, states, consts, h_in)`: the recurrent part of one step;
- `backward_step(...)`: its exact hand-written derivative, which lets the
  loop hoist the recurrent-weight gradient out of the time loop (one large
  GEMM over all steps instead of one small GEMM per step).

The cells also follow the Keras cell contract (`state_size`, `output_size`,
`get_initial_state`, `call(inputs, states, training)`), so they run inside
`keras.layers.RNN` too.
"""

import keras
from keras import ops

from seqkeras.layers import time_loop
from seqkeras.layers import validation

_PACKAGE = "seqkeras"


class RecurrentCell(keras.layers.Layer):
    """Base class of seqkeras cells (not used directly).

    Subclasses set `gates` and implement `forward_step`, `backward_step`,
    `loop_constants` and `recurrent_weight_grads`.

    Args:
        units: the state size, a positive int.
        dropout: rate in [0, 1) of dropout on the inputs (training only).
        recurrent_dropout: rate in [0, 1) of dropout on the state.
        kernel_initializer: of the input kernel.
        recurrent_initializer: of the recurrent kernel.
        bias_initializer: of the bias.
        seed: seed of the dropout masks.
    """

    gates = 1

    def __init__(
        self,
        units,
        dropout=0.0,
        recurrent_dropout=0.0,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = type(self).__name__
        self.units = validation.positive_int(name, "units", units)
        self.dropout = validation.rate(name, "dropout", dropout)
        self.recurrent_dropout = validation.rate(name, "recurrent_dropout", recurrent_dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = validation.seed(name, "seed", seed)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True

    # -- Dropout masks -------------------------------------------------------
    # One mask per sequence (variational dropout, Gal & Ghahramani 2016):
    # the layer that runs the time loop (`Recurrent`, `AttentionDecoder`)
    # draws the masks once and passes them to every step. Nothing is cached
    # on the cell, so no mask outlives the call (or the traced graph) that
    # drew it. Called on its own (e.g. inside `keras.layers.RNN`), a cell
    # draws fresh masks at each step.

    def get_dropout_mask(self, step_input):
        """A new input dropout mask shaped like `step_input` (batch,
        features): kept units scaled by 1 / (1 - dropout)."""
        return keras.random.dropout(
            ops.ones_like(step_input), self.dropout, seed=self.seed_generator
        )

    def get_recurrent_dropout_mask(self, state):
        """A new dropout mask for `h_{t-1}`, shaped like `state`."""
        return keras.random.dropout(
            ops.ones_like(state), self.recurrent_dropout, seed=self.seed_generator
        )

    # -- Keras cell contract -------------------------------------------------
    @property
    def state_size(self):
        return self.units

    @property
    def output_size(self):
        return self.units

    def get_initial_state(self, batch_size=None):
        sizes = self.state_size
        sizes = sizes if isinstance(sizes, (list, tuple)) else [sizes]
        return [ops.zeros((batch_size, size), dtype=self.compute_dtype) for size in sizes]

    def build(self, input_shape):
        input_dim = input_shape[-1]
        if input_dim is None:
            raise ValueError(
                f"`{type(self).__name__}` needs a known last input dimension "
                f"(features). Received: input_shape={input_shape}"
            )
        g = self.gates * self.units
        self.kernel = self.add_weight(
            shape=(input_dim, g),
            name="kernel",
            initializer=self.kernel_initializer,
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.units, g),
            name="recurrent_kernel",
            initializer=self.recurrent_initializer,
        )
        self.bias = self.add_weight(
            shape=self._bias_shape(), name="bias", initializer=self._bias_init()
        )

    def _bias_shape(self):
        return (self.gates * self.units,)

    def _bias_init(self):
        return self.bias_initializer

    @property
    def input_size(self):
        """The features per step the cell was built for (None unbuilt)."""
        kernel = getattr(self, "kernel", None)
        return None if kernel is None else int(kernel.shape[0])

    def call(self, inputs, states, training=False, dropout_mask=None, recurrent_dropout_mask=None):
        """One step: `inputs` (batch, features), `states` list of (batch,
        units). In training, `dropout_mask` / `recurrent_dropout_mask`
        (from `get_dropout_mask` / `get_recurrent_dropout_mask`, drawn once
        per sequence) are used; without them fresh masks are drawn."""
        name = type(self).__name__
        states = list(states) if isinstance(states, (list, tuple)) else [states]
        validation.numeric(name, "inputs", inputs)
        validation.features(name, "inputs", inputs, self.input_size)
        sizes = self.state_size
        sizes = sizes if isinstance(sizes, (list, tuple)) else [sizes]
        if len(states) != len(sizes):
            raise ValueError(
                f"`{name}` expects {len(sizes)} tensor(s) for `states`. Received: {len(states)}"
            )
        batch = validation.static_shape(inputs)[0]
        for state, size in zip(states, sizes):
            validation.same_dims(name, "states", state, (batch, size), "(batch, units)")
        if training and self.dropout > 0:
            if dropout_mask is None:
                dropout_mask = self.get_dropout_mask(inputs)
            inputs = inputs * dropout_mask
        h_in = states[0]
        if training and self.recurrent_dropout > 0:
            if recurrent_dropout_mask is None:
                recurrent_dropout_mask = self.get_recurrent_dropout_mask(states[0])
            h_in = h_in * recurrent_dropout_mask
        consts = self.loop_constants(self.recurrent_weights())
        h, new_states, _ = self.forward_step(
            self.project_inputs(inputs) + self.loop_input_bias(), states, consts, h_in
        )
        if not isinstance(self.state_size, (list, tuple)):
            return h, new_states[0]
        return h, new_states

    def compute_output_shape(self, inputs_shape, states_shape=None):
        batch = inputs_shape[0]
        sizes = self.state_size
        sizes = sizes if isinstance(sizes, (list, tuple)) else [sizes]
        return (batch, self.units), [(batch, s) for s in sizes]

    # -- the split step used by `Recurrent` ------------------------------------
    #
    # Internally the gate columns may be permuted and pre-scaled (the
    # "loop layout"): a sigmoid gate's columns are scaled by 1/2 so that one
    # tanh over all gates gives every activation, sigmoid(a) =
    # 0.5 + 0.5 tanh(a / 2). The scaling rides on the matmuls for free, and
    # autodiff maps gradients back to the Keras layout outside the loop.
    def gate_layout(self):
        """(column permutation or None, per-column scale or None)."""
        return None, None

    def to_loop_layout(self, w):
        perm, scale = self.gate_layout()
        w = ops.cast(w, self.compute_dtype)
        if perm is not None:
            w = ops.take(w, perm, axis=-1)
        if scale is not None:
            w = w * ops.convert_to_tensor(scale, self.compute_dtype)
        return w

    def input_bias(self):
        return self.bias

    def loop_input_bias(self):
        """The input bias in the loop layout, (gates * units,)."""
        return self.to_loop_layout(self.input_bias())

    def project_inputs(self, x):
        """`x @ kernel` in the loop layout, for `x` of shape (..., features).

        Leading axes are flattened first, so the projection is one 2-D GEMM.
        """
        kernel = self.to_loop_layout(self.kernel)
        if len(x.shape) == 2:
            return ops.matmul(x, kernel)
        lead = ops.shape(x)[:-1]
        out = ops.matmul(ops.reshape(x, (-1, ops.shape(x)[-1])), kernel)
        return ops.reshape(out, tuple(lead) + (ops.shape(kernel)[-1],))

    def recurrent_weights(self):
        """Tensors the recurrent part depends on (differentiated by the loop)."""
        return [self.to_loop_layout(self.recurrent_kernel)]

    def residual_widths(self):
        """Widths of the per-step values `forward_step` saves for backward:
        `h_in` (for the recurrent-weight gradient), then the coefficients
        `backward_step` reads: every value it needs that does not depend on
        the carried gradients, so the sequential backward loop only
        multiplies, adds and runs one matmul."""
        return [self.units, self.units]  # h_in, phi'(a)

    def delta_widths(self):
        """Widths of the per-step extra deltas `backward_step` returns
        (beyond `dp`, which the loop keeps anyway)."""
        return []

    def loop_constants(self, weights):
        """Loop-invariant tensors derived from `recurrent_weights()`: by
        default the recurrent kernel and its transpose (for the backward
        matmul)."""
        (u,) = weights
        return [u, ops.transpose(u)]

    def recurrent_weight_grads(self, residual_seqs, d_proj, delta_seqs):
        """Gradients of `recurrent_weights()` from the saved `h_in` sequence
        and the per-step pre-activation gradients: by default one GEMM,
        sum_t h_in_t^T dp_t."""
        return [time_loop.sum_outer(residual_seqs[0], d_proj)]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "dropout": self.dropout,
                "recurrent_dropout": self.recurrent_dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SimpleRNNCell(RecurrentCell):
    """Vanilla RNN cell: `h_t = phi(x_t W + h_{t-1} U + b)`.

    Args:
        units: positive int, size of the hidden state.
        activation: `"tanh"` (default) or `"relu"`.
        dropout: rate in [0, 1) of input dropout; one mask for all steps.
        recurrent_dropout: rate in [0, 1) of dropout on `h_{t-1}` before the
            recurrent matmul; one mask for all steps.
        kernel_initializer, recurrent_initializer, bias_initializer:
            initializers, as in Keras.
        seed: int seed of the dropout masks.

    Call arguments (Keras cell contract): `inputs` (batch, features),
    `states` a list of one (batch, units) tensor, `training`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.Recurrent(seqkeras.layers.SimpleRNNCell(4))
        >>> tuple(layer(np.zeros((2, 3, 5), "float32")).shape)
        (2, 4)
    """

    def __init__(self, units, activation="tanh", **kwargs):
        super().__init__(units, **kwargs)
        self.activation = validation.choice(
            "SimpleRNNCell", "activation", activation, ("tanh", "relu")
        )

    def forward_step(self, p, states, consts, h_in):
        a = p + ops.matmul(h_in, consts[0])
        if self.activation == "tanh":
            h = ops.tanh(a)
            return h, [h], [h_in, 1.0 - h * h]
        h = ops.relu(a)
        return h, [h], [h_in, ops.cast(a > 0, h.dtype)]

    def backward_step(self, dh, dstates_rest, coeffs, consts):
        da = dh * coeffs[0]
        return da, ops.matmul(da, consts[1]), [ops.zeros_like(dh)], []

    def get_config(self):
        config = super().get_config()
        config["activation"] = self.activation
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GRUCell(RecurrentCell):
    """Gated recurrent unit cell (Cho et al. 2014), in Keras' weight layout.

    With gate order z (update), r (reset), h (candidate):

        z_t = sigmoid(x_t W_z + h_{t-1} U_z + b_z)
        r_t = sigmoid(x_t W_r + h_{t-1} U_r + b_r)
        reset_after=False (seed notes' form):
            hh_t = tanh(x_t W_h + (r_t * h_{t-1}) U_h + b_h)
        reset_after=True (cuDNN / PyTorch form):
            hh_t = tanh(x_t W_h + b_h + r_t * (h_{t-1} U_h + b'_h))
        h_t = z_t * h_{t-1} + (1 - z_t) * hh_t

    Keras (and so this cell) calls `z` the gate that *keeps* the old state;
    the seed notes write `h_t = (1 - z_t) h_{t-1} + z_t hh_t`, i.e. their
    update gate is `1 - z_t` here (the same gate with negated W_z, U_z, b_z).

    Args:
        units: positive int, size of the hidden state.
        reset_after: False (default; seed notes' form) or True (cuDNN form,
            with a separate recurrent bias: `bias` has shape (2, 3 * units)).
        dropout, recurrent_dropout, initializers, seed: as `SimpleRNNCell`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> cell = seqkeras.layers.GRUCell(4, reset_after=True)
        >>> layer = seqkeras.layers.Recurrent(cell)
        >>> tuple(layer(np.zeros((2, 3, 5), "float32")).shape)
        (2, 4)
    """

    gates = 3

    def __init__(self, units, reset_after=False, **kwargs):
        super().__init__(units, **kwargs)
        self.reset_after = validation.boolean("GRUCell", "reset_after", reset_after)

    def _bias_shape(self):
        if self.reset_after:
            return (2, 3 * self.units)
        return (3 * self.units,)

    def gate_layout(self):
        n = self.units
        return None, [0.5] * (2 * n) + [1.0] * n  # z, r sigmoid via tanh

    def input_bias(self):
        return self.bias[0] if self.reset_after else self.bias

    def recurrent_weights(self):
        weights = super().recurrent_weights()
        if self.reset_after:
            weights.append(self.to_loop_layout(self.bias[1]))
        return weights

    def residual_widths(self):
        return [self.units] * 6  # h_in, k_z, k_h, k_r, r, z

    def delta_widths(self):
        return [self.units] if self.reset_after else []  # r * d(hh pre-act)

    def loop_constants(self, weights):
        n = self.units
        if self.reset_after:
            u, b = weights
            return [u, ops.transpose(u), b]
        (u,) = weights
        u_zr, u_h = u[:, : 2 * n], u[:, 2 * n :]
        return [u_zr, u_h, ops.transpose(u_zr), ops.transpose(u_h)]

    def forward_step(self, p, states, consts, h_in):
        n = self.units
        h_prev = states[0]  # undropped, even under recurrent dropout
        if self.reset_after:
            u, _, b = consts
            rec = ops.matmul(h_in, u) + b
            zr = 0.5 + 0.5 * ops.tanh(p[:, : 2 * n] + rec[:, : 2 * n])
            z, r = zr[:, :n], zr[:, n:]
            r_factor = rec[:, 2 * n :]  # h_in U_h + b'_h
            hh = ops.tanh(p[:, 2 * n :] + r * r_factor)
        else:
            u_zr, u_h = consts[0], consts[1]
            zr = 0.5 + 0.5 * ops.tanh(p[:, : 2 * n] + ops.matmul(h_in, u_zr))
            z, r = zr[:, :n], zr[:, n:]
            r_factor = h_in
            hh = ops.tanh(p[:, 2 * n :] + ops.matmul(r * h_in, u_h))
        h = z * h_prev + (1.0 - z) * hh
        d_zr = 2.0 * zr * (1.0 - zr)  # sigmoid' in the loop layout
        coeffs = [
            (h_prev - hh) * d_zr[:, :n],  # dh -> d(z pre-act)
            (1.0 - z) * (1.0 - hh * hh),  # dh -> d(hh pre-act)
            r_factor * d_zr[:, n:],  # -> d(r pre-act)
            r,
            z,
        ]
        return h, [h], [h_in] + coeffs

    def backward_step(self, dh, dstates_rest, coeffs, consts):
        k_z, k_h, k_r, r, z = coeffs
        da_h = dh * k_h
        if self.reset_after:
            _, u_t, _ = consts
            da_zr = ops.concatenate([dh * k_z, da_h * k_r], axis=-1)
            drec_h = da_h * r
            dh_in = ops.matmul(ops.concatenate([da_zr, drec_h], -1), u_t)
            dp = ops.concatenate([da_zr, da_h], axis=-1)
            return dp, dh_in, [dh * z], [drec_h]
        _, _, u_zr_t, u_h_t = consts
        d_rh = ops.matmul(da_h, u_h_t)
        da_zr = ops.concatenate([dh * k_z, d_rh * k_r], axis=-1)
        dh_in = d_rh * r + ops.matmul(da_zr, u_zr_t)
        dp = ops.concatenate([da_zr, da_h], axis=-1)
        return dp, dh_in, [dh * z], []

    def recurrent_weight_grads(self, residual_seqs, d_proj, delta_seqs):
        h_in, n = residual_seqs[0], self.units
        d_zr = d_proj[..., : 2 * n]
        if self.reset_after:
            drec = ops.concatenate([d_zr, delta_seqs[0]], axis=-1)
            return [time_loop.sum_outer(h_in, drec), time_loop.sum_rows(drec)]
        return [
            ops.concatenate(
                [
                    time_loop.sum_outer(h_in, d_zr),
                    time_loop.sum_outer(
                        residual_seqs[4] * h_in,  # r * h_in
                        d_proj[..., 2 * n :],
                    ),
                ],
                axis=-1,
            )
        ]

    def get_config(self):
        config = super().get_config()
        config["reset_after"] = self.reset_after
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LSTMCell(RecurrentCell):
    """Long short-term memory cell (Hochreiter & Schmidhuber), Keras layout.

    With gate order i, f, c, o and `[.]` the pre-activation
    `x_t W_. + h_{t-1} U_. + b_.`:

        i_t = sigmoid([i]),  f_t = sigmoid([f]),  g_t = tanh([c])
        o_t = sigmoid([o])
        C_t = f_t * C_{t-1} + i_t * g_t
        h_t = o_t * tanh(C_t)

    States are `[h, C]`, each (batch, units).

    Args:
        units: positive int, size of the hidden and cell state.
        unit_forget_bias: if True (default), the forget-gate bias starts at 1
            (Jozefowicz et al. 2015), as in Keras.
        dropout, recurrent_dropout, initializers, seed: as `SimpleRNNCell`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.Recurrent(
        ...     seqkeras.layers.LSTMCell(4), return_state=True)
        >>> out, h, c = layer(np.zeros((2, 3, 5), "float32"))
        >>> tuple(out.shape), tuple(c.shape)
        ((2, 4), (2, 4))
    """

    gates = 4

    def __init__(self, units, unit_forget_bias=True, **kwargs):
        super().__init__(units, **kwargs)
        self.unit_forget_bias = validation.boolean("LSTMCell", "unit_forget_bias", unit_forget_bias)

    @property
    def state_size(self):
        return [self.units, self.units]

    def _bias_init(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        base, n = self.bias_initializer, self.units

        def init(shape, dtype=None):
            return ops.concatenate(
                [
                    base((n,), dtype=dtype),
                    ops.ones((n,), dtype=dtype),
                    base((2 * n,), dtype=dtype),
                ]
            )

        return init

    def residual_widths(self):
        n = self.units
        return [n, n, 4 * n, n]  # h_in, then backward_step's coefficients

    def gate_layout(self):
        # Keras order i, f, c, o -> loop order i, f, o, c: the three sigmoid
        # gates are contiguous (scaled by 1/2), the tanh candidate last.
        n = self.units
        perm = list(range(2 * n)) + list(range(3 * n, 4 * n)) + list(range(2 * n, 3 * n))
        return perm, [0.5] * (3 * n) + [1.0] * n

    def forward_step(self, p, states, consts, h_in):
        n = self.units
        u = consts[0]
        h_prev, c_prev = states
        act = ops.tanh(p + ops.matmul(h_in, u))  # loop layout: i, f, o | c
        # Splits, not slices: one SPLIT_V and one SPLIT op in TFLite.
        a_ifo, g = ops.split(act, [3 * n], axis=-1)
        ifo = 0.5 + 0.5 * a_ifo  # sigmoid of the unscaled gates
        i, f, o = ops.split(ifo, 3, axis=-1)
        c = f * c_prev + i * g
        tc = ops.tanh(c)
        h = o * tc
        # Save the backward coefficients directly: everything the backward
        # step needs that does not depend on the carried gradients.
        d_ifo = 2.0 * ifo * (1.0 - ifo)  # sigmoid' in the loop layout
        k4 = ops.concatenate(
            [
                g * d_ifo[:, :n],
                c_prev * d_ifo[:, n : 2 * n],
                tc * d_ifo[:, 2 * n :],
                i * (1.0 - g * g),
            ],
            axis=-1,
        )
        return h, [h, c], [h_in, o * (1.0 - tc * tc), k4, f]

    def backward_step(self, dh, dstates_rest, coeffs, consts):
        k1, k4, f = coeffs
        dc = dstates_rest[0] + dh * k1
        da = ops.concatenate([dc, dc, dh, dc], axis=-1) * k4  # i, f, o, c
        dh_in = ops.matmul(da, consts[1])
        return da, dh_in, [ops.zeros_like(dh), dc * f], []

    def get_config(self):
        config = super().get_config()
        config["unit_forget_bias"] = self.unit_forget_bias
        return config
