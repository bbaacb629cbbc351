"""`CRF`: a linear-chain conditional random field over per-token scores.

For emission scores `e_t(y)` (batch, time, tags) and tags `y_1..y_n`:

    score(y) = start[y_1] + sum_t e_t(y_t) + sum_{t>1} A[y_{t-1}, y_t]
               + end[y_n]
    log p(y | x) = score(y) - log Z,  log Z = logsumexp over every y

`log Z` comes from the forward algorithm in log space, the best path from
Viterbi (max-product with back-pointers), per-token marginals from
forward-backward. Every loop is `seqkeras.layers.time_loop.scan`: it
compiles under XLA, differentiates on TensorFlow and JAX, and in
inference (Viterbi) is the plain loop that SavedModel, builtin-only TFLite
and ONNX accept. Masks are right padding (each row's valid steps first);
padded steps carry the state through unchanged, so padding changes
nothing. The layer computes in float32 whatever the global policy (its
`dtype` defaults to `"float32"`, as Keras advises for numerically
sensitive final layers): log-sum-exp over a chain is not a bfloat16 job.

TensorFlow Addons' `CRF` (Keras 2) is gone and Keras 3 / keras-hub have
none (keras-team/keras-hub#2122), hence this layer.
"""

import keras
from keras import ops

from seqkeras.layers import time_loop
from seqkeras.layers import validation


def _argmax(x, axis):
    """The first index of the maximum along `axis` (int32). Keras'
    TensorFlow `argmax` on floats adds a signbit test (BitwiseAnd), which
    builtin-only TFLite lacks; max, equal, where and min are builtins."""
    k = ops.shape(x)[axis]
    best = ops.max(x, axis=axis, keepdims=True)
    shape = [1] * len(x.shape)
    shape[axis] = k
    index = ops.reshape(ops.arange(k, dtype="int32"), shape)
    return ops.min(ops.where(ops.equal(x, best), index, k), axis=axis)


@keras.saving.register_keras_serializable(package="seqkeras")
class CRF(keras.layers.Layer):
    """A linear-chain CRF: transition scores `A` (tags, tags) from tag `i`
    to tag `j`, start and end scores (tags,).

    Called on emission scores it returns the Viterbi tags; the training
    loss is `crf.loss(emissions, tags, mask)` (mean negative
    log-likelihood), e.g. from a model's `compute_loss`
    (`seqkeras.models.tagger(..., crf=True)` does this).

    Args:
        num_tags: the number of tags; the emissions' last axis.
        transition_initializer: for `A`, start and end scores.

    Call arguments:
        emissions: float (batch, time, num_tags).
        mask: optional bool (batch, time), right padding.

    Returns:
        int32 (batch, time): the best tag sequence (0 at padded steps);
        zeros in a training call (`fit` needs only the loss).

    Other methods: `log_likelihood(emissions, tags, mask)` (batch,),
    `log_partition(emissions, mask)` (batch,), `loss(emissions, tags,
    mask)` (scalar), `viterbi(emissions, mask)` -> (tags, best scores),
    `marginals(emissions, mask)` (batch, time, num_tags).

    Examples:
        >>> import numpy as np, seqkeras
        >>> crf = seqkeras.layers.CRF(3)
        >>> e = np.array([[[2.0, 0, 0], [0, 0, 3.0], [0, 1.0, 0]]], "float32")
        >>> np.asarray(crf(e)).tolist()  # zero transitions: argmax per step
        [[0, 2, 1]]
        >>> round(float(np.asarray(crf.marginals(e)).sum()), 4)  # 3 steps
        3.0
    """

    def __init__(self, num_tags, transition_initializer="zeros", **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.num_tags = validation.positive_int("CRF", "num_tags", num_tags)
        self.transition_initializer = keras.initializers.get(transition_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] != self.num_tags:
            raise ValueError(
                "`CRF` expects emissions of shape (batch, time, num_tags="
                f"{self.num_tags}). Received: input_shape="
                f"{tuple(input_shape)}"
            )
        k = self.num_tags
        init = self.transition_initializer
        self.transitions = self.add_weight(shape=(k, k), name="transitions", initializer=init)
        self.start = self.add_weight(shape=(k,), name="start", initializer=init)
        self.end = self.add_weight(shape=(k,), name="end", initializer=init)

    # -- inputs ---------------------------------------------------------
    def _prepare(self, emissions, mask, where):
        validation.numeric("CRF", "emissions", emissions)
        shape = validation.static_shape(emissions)
        if len(shape) != 3 or shape[-1] not in (None, self.num_tags):
            raise ValueError(
                f"`CRF.{where}` expects emissions of shape (batch, time, "
                f"num_tags={self.num_tags}). Received: emissions.shape="
                f"{shape}"
            )
        if not self.built:
            self.build(shape)
        validation.same_dims("CRF", "mask", mask, shape[:2], "(batch, time)")
        e = ops.cast(ops.convert_to_tensor(emissions), "float32")
        if mask is None:
            mask = ops.ones(ops.shape(e)[:2], "bool")
        mask = ops.cast(mask, "bool")
        return e, mask

    def _weights(self):
        return (
            ops.cast(self.transitions, "float32"),
            ops.cast(self.start, "float32"),
            ops.cast(self.end, "float32"),
        )

    @staticmethod
    def _time_major(x):
        return ops.moveaxis(x, 1, 0)

    # -- forward algorithm ----------------------------------------------
    def _alphas(self, e, mask, keep):
        """Forward scores: alpha_0 = start + e_0, alpha_t = logsumexp_i(
        alpha_{t-1}[i] + A[i, :]) + e_t (kept at padded steps); returns
        `(alphas (batch, time, tags) or None, last alpha)`."""
        trans, start, _ = self._weights()
        first = start + e[:, 0]
        steps = ops.concatenate(
            [
                self._time_major(e[:, 1:]),
                ops.expand_dims(ops.cast(self._time_major(mask[:, 1:]), "float32"), -1),
            ],
            axis=-1,
        )

        def step(x, states):
            (alpha,) = states
            e_t, m_t = x[:, :-1], x[:, -1:] > 0.5
            new = ops.logsumexp(ops.expand_dims(alpha, 2) + trans, axis=1) + e_t
            new = ops.where(m_t, new, alpha)
            return (new if keep else new[:, :1]), [new]

        outputs, (last,) = time_loop.scan(
            step, steps, [first], self.num_tags if keep else 1, "float32"
        )
        if not keep:
            return None, last
        alphas = ops.concatenate([ops.expand_dims(first, 1), self._time_major(outputs)], axis=1)
        return alphas, last

    def log_partition(self, emissions, mask=None):
        """log Z (batch,): logsumexp of the scores of every tag sequence
        (0 for a row with no valid step)."""
        e, mask = self._prepare(emissions, mask, "log_partition")
        _, _, end = self._weights()
        _, last = self._alphas(e, mask, keep=False)
        value = ops.logsumexp(last + end, axis=-1)
        return ops.where(mask[:, 0], value, 0.0)

    def sequence_score(self, emissions, tags, mask=None):
        """score(tags) (batch,): start + emissions + transitions + end
        along `tags` (int (batch, time)), padded steps excluded."""
        e, mask = self._prepare(emissions, mask, "sequence_score")
        trans, start, end = self._weights()
        tags = self._check_tags(tags, e)
        m = ops.cast(mask, "float32")
        emit = ops.sum(
            ops.squeeze(ops.take_along_axis(e, ops.expand_dims(tags, -1), axis=-1), -1) * m, axis=1
        )
        k = self.num_tags
        pair = tags[:, :-1] * k + tags[:, 1:]
        moves = ops.sum(ops.take(ops.reshape(trans, (-1,)), pair) * m[:, 1:], axis=1)
        lengths = ops.cast(ops.sum(m, axis=1), "int32")
        last = ops.squeeze(
            ops.take_along_axis(tags, ops.expand_dims(ops.maximum(lengths - 1, 0), 1), axis=1), 1
        )
        score = ops.take(start, tags[:, 0]) + emit + moves + ops.take(end, last)
        return ops.where(lengths > 0, score, 0.0)

    def _check_tags(self, tags, e):
        shape = validation.static_shape(tags)
        want = validation.static_shape(e)[:2]
        if len(shape) != 2 or any(
            a is not None and b is not None and a != b for a, b in zip(shape, want)
        ):
            raise ValueError(
                "`CRF` expects `tags` of shape (batch, time) = "
                f"{want}. Received: tags.shape={shape}"
            )
        validation.numeric("CRF", "tags", tags)
        validation.whole_numbers("CRF", "tags", tags)
        validation.ids_in_range("CRF", "tags", tags, self.num_tags)
        # traced tags cannot be checked; the clip keeps the gathers in
        # bounds (data pipelines check their tags, e.g. tagging_dataset)
        return ops.clip(ops.cast(tags, "int32"), 0, self.num_tags - 1)

    def log_likelihood(self, emissions, tags, mask=None):
        """log p(tags | emissions) (batch,)."""
        return self.sequence_score(emissions, tags, mask) - self.log_partition(emissions, mask)

    def loss(self, emissions, tags, mask=None):
        """The mean negative log-likelihood over the rows (a scalar);
        usable as a model's training loss."""
        return -ops.mean(self.log_likelihood(emissions, tags, mask))

    # -- Viterbi --------------------------------------------------------
    def viterbi(self, emissions, mask=None):
        """`(tags, scores)`: the highest-scoring tag sequence per row,
        int32 (batch, time) with 0 at padded steps, and its score
        (batch,)."""
        e, mask = self._prepare(emissions, mask, "viterbi")
        trans, start, end = self._weights()
        k = self.num_tags
        first = start + e[:, 0]
        steps = ops.concatenate(
            [
                self._time_major(e[:, 1:]),
                ops.expand_dims(ops.cast(self._time_major(mask[:, 1:]), "float32"), -1),
            ],
            axis=-1,
        )
        identity = ops.arange(k, dtype="int32")

        def forward(x, states):
            (delta,) = states
            e_t, m_t = x[:, :-1], x[:, -1:] > 0.5
            cand = ops.expand_dims(delta, 2) + trans  # (batch, from, to)
            best = _argmax(cand, 1)
            new = ops.max(cand, axis=1) + e_t
            pointers = ops.where(m_t, best, identity)  # padded: stay
            return (ops.cast(pointers, "float32"), [ops.where(m_t, new, delta)])

        pointers, (last,) = time_loop.scan(forward, steps, [first], k, "float32", training=False)
        final = last + end
        tag = _argmax(final, 1)
        scores = ops.max(final, axis=-1)

        def backward(p, states):
            (current,) = states
            prev = ops.squeeze(
                ops.take_along_axis(ops.cast(p, "int32"), ops.expand_dims(current, 1), axis=1), 1
            )
            return ops.cast(ops.expand_dims(current, 1), "float32"), [prev]

        # walk the pointers from the last step back: the outputs are the
        # tags of steps time-1 .. 1, the final state the tag of step 0
        reversed_tags, (tag0,) = time_loop.scan(
            backward, ops.flip(pointers, axis=0), [tag], 1, "float32", training=False
        )
        rest = ops.flip(ops.cast(reversed_tags[..., 0], "int32"), axis=0)
        tags = ops.concatenate([ops.expand_dims(tag0, 1), self._time_major(rest)], axis=1)
        tags = ops.where(mask, tags, 0)
        return tags, ops.where(mask[:, 0], scores, 0.0)

    def call(self, emissions, mask=None, training=None):
        if training:  # a training step needs the scores, not the path
            return ops.zeros(ops.shape(emissions)[:2], "int32")
        return self.viterbi(emissions, mask)[0]

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1])

    def compute_output_spec(self, emissions, mask=None):
        return keras.KerasTensor(emissions.shape[:-1], dtype="int32")

    # -- forward-backward -----------------------------------------------
    def marginals(self, emissions, mask=None):
        """p(y_t = j | emissions) (batch, time, num_tags): each valid
        step's row sums to 1; padded steps are 0."""
        e, mask = self._prepare(emissions, mask, "marginals")
        trans, _, end = self._weights()
        alphas, last = self._alphas(e, mask, keep=True)
        log_z = ops.logsumexp(last + end, axis=-1)
        # beta_t[i] = logsumexp_j(A[i, j] + e_{t+1}[j] + beta_{t+1}[j]),
        # beta_{n-1} = end; a padded step t+1 passes beta through
        steps = ops.concatenate(
            [
                self._time_major(e[:, 1:]),
                ops.expand_dims(ops.cast(self._time_major(mask[:, 1:]), "float32"), -1),
            ],
            axis=-1,
        )
        batch = ops.shape(e)[0]
        end_rows = ops.broadcast_to(end, (batch, self.num_tags))

        def step(x, states):
            (beta,) = states
            e_next, m_next = x[:, :-1], x[:, -1:] > 0.5
            new = ops.logsumexp(trans + ops.expand_dims(e_next + beta, 1), axis=2)
            new = ops.where(m_next, new, beta)
            return new, [new]

        outputs, _ = time_loop.scan(
            step, ops.flip(steps, axis=0), [end_rows], self.num_tags, "float32"
        )
        betas = ops.concatenate(
            [ops.flip(self._time_major(outputs), axis=1), ops.expand_dims(end_rows, 1)], axis=1
        )
        log_p = alphas + betas - ops.expand_dims(ops.expand_dims(log_z, 1), 2)
        return ops.where(ops.expand_dims(mask, -1), ops.exp(log_p), 0.0)

    def get_config(self):
        return {
            **super().get_config(),
            "num_tags": self.num_tags,
            "transition_initializer": keras.initializers.serialize(self.transition_initializer),
        }
