"""minGRU and minLSTM (Feng et al. 2024, "Were RNNs All We Needed?").

Both drop the previous state from the gates, so each step is a linear
recurrence in the state whose coefficients depend on the input alone:

    minGRU:  z_t = sigmoid(x_t W_z + b_z),  h~_t = g(x_t W_h + b_h)
             h_t = (1 - z_t) * h_{t-1} + z_t * h~_t
    minLSTM: f_t = sigmoid(x_t W_f + b_f),  i_t = sigmoid(x_t W_i + b_i)
             f'_t = f_t / (f_t + i_t),      i'_t = i_t / (f_t + i_t)
             h_t = f'_t * h_{t-1} + i'_t * h~_t

with `g(v) = v + 0.5` for v >= 0 and `sigmoid(v)` otherwise (the paper's
log-space version, which keeps every state positive; `candidate="linear"`
is the plain version). A whole sequence is one `linear_scan` (training);
one step is the equation above (generation, streaming), with the same
weights. `Recurrent` runs either form, so the cells stack in
`StackedRecurrent` and `Bidirectional` like `GRUCell`.
"""

import keras
from keras import ops

from seqkeras.layers import validation
from seqkeras.layers.scan import linear_scan

_PACKAGE = "seqkeras"
_CANDIDATES = ("g", "linear")


def _g(v):
    """The paper's `g`: continuous, positive, linear growth for v >= 0."""
    return ops.where(v >= 0, v + 0.5, ops.sigmoid(v))


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LinearRecurrentCell(keras.layers.Layer):
    """Base of the cells whose step is linear in the state, `h_t = a_t *
    h_{t-1} + b_t` with `a`, `b` computed from `x_t` alone (not used
    directly). A subclass sets `projections` (how many (features, units)
    matrices its one input projection holds) and implements
    `coefficients(projected) -> (a, b)`; `Recurrent` then runs the whole
    sequence as one `linear_scan` (`parallel`) and a step as `call`.

    Args:
        units: state (and output) width.
        use_bias: biases on the input projection.
        candidate: `"g"` (the paper's positive `g`, mingru-pytorch's) or
            `"linear"` (the candidate is the projection itself).
        dropout: input dropout rate (one mask per sequence, training only).
        seed: the dropout's seed.
        kernel_initializer, bias_initializer: of the projection.
    """

    projections = 2
    #: No recurrent matmul, so no recurrent dropout (`Recurrent` reads it).
    recurrent_dropout = 0.0

    def __init__(
        self,
        units,
        use_bias=True,
        candidate="g",
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = type(self).__name__
        self.units = validation.positive_int(name, "units", units)
        self.use_bias = validation.boolean(name, "use_bias", use_bias)
        self.candidate = validation.choice(name, "candidate", candidate, _CANDIDATES)
        self.dropout = validation.rate(name, "dropout", dropout)
        self.seed = validation.seed(name, "seed", seed)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    @property
    def state_size(self):
        return self.units

    @property
    def output_size(self):
        return self.units

    @property
    def input_size(self):
        """The features per step the cell was built for (None unbuilt)."""
        kernel = getattr(self, "kernel", None)
        return None if kernel is None else int(kernel.shape[0])

    def get_dropout_mask(self, step_input):
        """A new input dropout mask shaped like `step_input` (batch,
        features), one per sequence (`Recurrent` draws it)."""
        return keras.random.dropout(
            ops.ones_like(step_input), self.dropout, seed=self.seed_generator
        )

    def get_initial_state(self, batch_size=None):
        return [ops.zeros((batch_size, self.units), dtype=self.compute_dtype)]

    def build(self, input_shape):
        features = input_shape[-1]
        if features is None:
            raise ValueError(
                f"`{type(self).__name__}` needs a known last input dimension "
                f"(features). Received: input_shape={tuple(input_shape)}"
            )
        self.kernel = self.add_weight(
            shape=(features, self.projections * self.units),
            initializer=self.kernel_initializer,
            name="kernel",
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                shape=(self.projections * self.units,),
                initializer=self.bias_initializer,
                name="bias",
            )

    def _candidate(self, v):
        return _g(v) if self.candidate == "g" else v

    def coefficients(self, projected):
        """`(a, b)` of each step from the projected inputs (float32)."""
        raise NotImplementedError

    def _project(self, x):
        y = ops.matmul(x, ops.cast(self.kernel, x.dtype))
        if self.bias is not None:
            y = y + ops.cast(self.bias, x.dtype)
        return ops.cast(y, "float32")  # the recurrence in float32

    def call(self, inputs, states, training=False):
        """One step: `inputs` (batch, features), `states` `[h]` (batch,
        units) -> `(h, [h])`."""
        h = states[0] if isinstance(states, (list, tuple)) else states
        a, b = self.coefficients(self._project(inputs))
        h = ops.cast(a * ops.cast(h, "float32") + b, self.compute_dtype)
        return h, [h]

    def parallel(self, inputs, states, mask=None):
        """The whole sequence at once: `inputs` (batch, time, features),
        `states` `[h_0]`, optional bool `mask` (batch, time; a masked step
        keeps the state and outputs zeros) -> `(outputs (batch, time,
        units), [h_T])`."""
        a, b = self.coefficients(self._project(inputs))
        if mask is not None:
            keep = ops.expand_dims(ops.cast(mask, "float32"), -1)
            a = keep * a + (1.0 - keep)
            b = keep * b
        h = linear_scan(a, b, initial=ops.cast(states[0], "float32"))
        last = h[:, -1]
        if mask is not None:
            h = h * keep
        return ops.cast(h, self.compute_dtype), [ops.cast(last, self.compute_dtype)]

    def compute_output_shape(self, inputs_shape, states_shape=None):
        return (inputs_shape[0], self.units), [(inputs_shape[0], self.units)]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "use_bias": self.use_bias,
                "candidate": self.candidate,
                "dropout": self.dropout,
                "seed": self.seed,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MinGRUCell(LinearRecurrentCell):
    """The minGRU cell (see the module docstring): one (features, 2 *
    units) projection, the candidate's columns first, then the update
    gate's (mingru-pytorch's `to_hidden_and_gate` transposed).

    Args: see `LinearRecurrentCell` (`units`, `use_bias`, `candidate`,
    initializers).

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.Recurrent(
        ...     seqkeras.layers.MinGRUCell(8), return_sequences=True)
        >>> x = np.random.default_rng(0).normal(size=(2, 5, 3)).astype("float32")
        >>> full = np.asarray(layer(x))  # one parallel scan
        >>> h, steps = [np.zeros((2, 8), "float32")], []
        >>> for t in range(5):
        ...     y, h = layer.cell(x[:, t], h)  # the step form
        ...     steps.append(np.asarray(y))
        >>> bool(np.allclose(np.stack(steps, 1), full, atol=1e-5))
        True
    """

    projections = 2

    def coefficients(self, projected):
        hidden, gate = ops.split(projected, 2, axis=-1)
        z = ops.sigmoid(gate)
        return 1.0 - z, z * self._candidate(hidden)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MinLSTMCell(LinearRecurrentCell):
    """The minLSTM cell (see the module docstring): one (features, 3 *
    units) projection, the candidate's columns, then the forget gate's,
    then the input gate's (mingru-pytorch's `to_hidden_and_f_i_gate`
    transposed). The normalised gates are computed as `f' =
    sigmoid(log sigmoid(f) - log sigmoid(i))`, which is f / (f + i)
    without its rounding for saturated gates.

    Args: see `LinearRecurrentCell`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.Bidirectional(seqkeras.layers.Recurrent(
        ...     seqkeras.layers.MinLSTMCell(4), return_sequences=True))
        >>> tuple(layer(np.ones((2, 5, 3), "float32")).shape)
        (2, 5, 8)
    """

    projections = 3

    def coefficients(self, projected):
        hidden, forget, inputs = ops.split(projected, 3, axis=-1)
        f = ops.sigmoid(ops.log_sigmoid(forget) - ops.log_sigmoid(inputs))
        return f, (1.0 - f) * self._candidate(hidden)
