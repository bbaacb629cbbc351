"""`BertEmbedding` (token + position + segment embeddings, LayerNorm) and
`GatherSteps` (pick steps of a sequence by index: a word's first
subword)."""

import keras
from keras import ops

from seqkeras.layers import validation

_PACKAGE = "seqkeras"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertEmbedding(keras.layers.Layer):
    """BERT's input embedding (Devlin et al. 2019):
    `LN(E_token[x_t] + E_position[t] + E_segment[s_t])`, then dropout.

    Id 0 is padding: the output carries the mask `token_ids != 0`
    (BERT's `[PAD]` is id 0).

    Args:
        vocab_size: positive int, token ids in [0, vocab_size).
        hidden_dim: positive int, embedding width.
        max_length: positive int, learned positions.
        num_segments: positive int, segment (token type) ids in
            [0, num_segments).
        layer_norm_epsilon: the LayerNorm's epsilon (BERT: 1e-12).
        dropout: rate in [0, 1) after the LayerNorm.
        embeddings_initializer: of the three tables.
        output_bias: also create `output_bias` (vocab_size,), added to the
            logits of `reverse=True` (a masked-LM head's output bias,
            Hugging Face's `cls.predictions.bias`).

    Call arguments:
        token_ids: int (batch, time); with `reverse=True`, vectors
            (..., hidden_dim) instead.
        segment_ids: optional int (batch, time); default all 0.
        training: enables dropout.
        reverse: weight tying: vectors -> logits over the vocabulary,
            `x E_token^T (+ output_bias)`, float32 under mixed precision.

    Examples:
        >>> import numpy as np, seqkeras
        >>> layer = seqkeras.layers.BertEmbedding(200, 8, max_length=16)
        >>> tuple(layer(np.array([[101, 7, 102, 0]])).shape)
        (1, 4, 8)
    """

    def __init__(
        self,
        vocab_size,
        hidden_dim,
        max_length=512,
        num_segments=2,
        layer_norm_epsilon=1e-12,
        dropout=0.0,
        embeddings_initializer=None,
        output_bias=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "BertEmbedding"
        self.output_bias = bool(output_bias)
        self.vocab_size = validation.positive_int(name, "vocab_size", vocab_size)
        self.hidden_dim = validation.positive_int(name, "hidden_dim", hidden_dim)
        self.max_length = validation.positive_int(name, "max_length", max_length)
        self.num_segments = validation.positive_int(name, "num_segments", num_segments)
        self.layer_norm_epsilon = validation.greater_than(
            name, "layer_norm_epsilon", layer_norm_epsilon, 0.0
        )
        self.dropout = validation.rate(name, "dropout", dropout)
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )
        self.supports_masking = True

    def build(self, token_ids_shape, segment_ids_shape=None):
        if len(token_ids_shape) != 2:
            raise ValueError(
                "`BertEmbedding` expects `token_ids` of rank 2, (batch, time). "
                f"Received: token_ids.shape={tuple(token_ids_shape)}"
            )

        def table(name, rows):
            initializer = keras.initializers.get(
                keras.initializers.serialize(self.embeddings_initializer)
            )
            return self.add_weight(
                shape=(rows, self.hidden_dim), name=name, initializer=initializer
            )

        self.token_embeddings = table("token_embeddings", self.vocab_size)
        self.position_embeddings = table("position_embeddings", self.max_length)
        self.segment_embeddings = table("segment_embeddings", self.num_segments)
        self.output_bias_weight = None
        if self.output_bias:
            self.output_bias_weight = self.add_weight(
                shape=(self.vocab_size,), name="output_bias", initializer="zeros"
            )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.layer_norm.build((None, None, self.hidden_dim))
        self.dropout_layer = keras.layers.Dropout(self.dropout, name="dropout")

    def _check_ids(self, arg, ids, size, shape=None):
        """Numeric ids in [0, size) (cast to int32, as
        `keras.layers.Embedding` does; concrete ids are checked)."""
        validation.numeric("BertEmbedding", arg, ids)
        if shape is not None:
            validation.same_dims("BertEmbedding", arg, ids, shape, "(batch, time)")
        validation.ids_in_range("BertEmbedding", arg, ids, size)
        return ops.cast(ids, "int32")

    def __call__(self, *args, **kwargs):
        # strings refused before Keras converts the arguments to backend
        # tensors (on JAX that conversion fails first, with a bare error)
        validation.numeric_arguments("BertEmbedding", ("token_ids", "segment_ids"), args, kwargs)
        return super().__call__(*args, **kwargs)

    def call(self, token_ids, segment_ids=None, training=None, reverse=False):
        if reverse:
            return self._logits(token_ids)
        token_ids = self._check_ids("token_ids", token_ids, self.vocab_size)
        shape = validation.static_shape(token_ids)
        if shape[1] is not None and shape[1] > self.max_length:
            raise ValueError(
                f"`BertEmbedding` has {self.max_length} positions (`max_length`). "
                f"Received: token_ids of length {shape[1]}"
            )
        positions = ops.minimum(ops.arange(ops.shape(token_ids)[1]), self.max_length - 1)
        x = ops.take(self.token_embeddings, token_ids, axis=0)
        x = x + ops.expand_dims(ops.take(self.position_embeddings, positions, axis=0), 0)
        if segment_ids is None:
            x = x + self.segment_embeddings[0]
        else:
            segment_ids = self._check_ids("segment_ids", segment_ids, self.num_segments, shape)
            x = x + ops.take(self.segment_embeddings, segment_ids, axis=0)
        x = self.layer_norm(ops.cast(x, self.compute_dtype))
        return self.dropout_layer(x, training=training)

    def _logits(self, x):
        shape = validation.static_shape(x)
        if shape[-1] != self.hidden_dim:
            raise ValueError(
                f"`BertEmbedding(reverse=True)` expects vectors of width {self.hidden_dim} "
                f"(`hidden_dim`). Received: shape {shape}"
            )
        table = ops.cast(self.token_embeddings, x.dtype)
        logits = ops.cast(ops.matmul(x, ops.transpose(table)), "float32")
        if self.output_bias_weight is not None:
            logits = logits + ops.cast(self.output_bias_weight, "float32")
        return logits

    def compute_mask(self, token_ids, mask=None, reverse=False):
        if reverse or "float" in str(token_ids.dtype):  # reverse: vectors in
            return mask
        return ops.not_equal(token_ids, 0)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_dim,)

    def compute_output_spec(self, token_ids, segment_ids=None, training=None, reverse=False):
        if reverse:
            shape = tuple(token_ids.shape[:-1]) + (self.vocab_size,)
            return keras.KerasTensor(shape, dtype="float32")
        shape = self.compute_output_shape(token_ids.shape)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "hidden_dim": self.hidden_dim,
                "max_length": self.max_length,
                "num_segments": self.num_segments,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
                "output_bias": self.output_bias,
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GatherSteps(keras.layers.Layer):
    """Picks steps of a sequence by index: `out[b, i] = x[b, index[b, i]]`.

    For a tagger over subwords: `index` holds each word's first subword
    position, and index 0 marks a padding word (position 0 is `[CLS]`,
    never a word's start); the output's mask is `index > 0`.

    Call arguments:
        inputs: `[sequence, index]`: sequence (batch, time, features),
            index int (batch, steps) in [0, time).

    Examples:
        >>> import numpy as np, seqkeras
        >>> x = np.arange(12, dtype="float32").reshape(1, 4, 3)
        >>> out = seqkeras.layers.GatherSteps()([x, np.array([[1, 3, 0]])])
        >>> np.asarray(out).tolist()
        [[[3.0, 4.0, 5.0], [9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]]
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def _split(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) != 2:
            raise ValueError(
                "`GatherSteps` expects `inputs` = [sequence, index]. "
                f"Received: {type(inputs).__name__}"
            )
        return inputs

    def call(self, inputs):
        sequence, index = self._split(inputs)
        validation.numeric("GatherSteps", "sequence", sequence)
        shape = validation.static_shape(sequence)
        if len(shape) != 3:
            raise ValueError(
                "`GatherSteps` expects `sequence` of rank 3, (batch, time, features). "
                f"Received: sequence.shape={shape}"
            )
        validation.numeric("GatherSteps", "index", index)
        if len(index.shape) != 2:
            raise ValueError(
                "`GatherSteps` expects `index` of rank 2, (batch, steps). "
                f"Received: index.shape={tuple(index.shape)}"
            )
        if shape[1] is not None:  # concrete indices are checked; traced ones clipped
            validation.ids_in_range("GatherSteps", "index", index, shape[1])
        index = ops.clip(ops.cast(index, "int32"), 0, ops.shape(sequence)[1] - 1)
        return ops.take_along_axis(sequence, ops.expand_dims(index, -1), axis=1)

    def compute_mask(self, inputs, mask=None):
        return ops.greater(self._split(inputs)[1], 0)

    def compute_output_shape(self, input_shape):
        sequence_shape, index_shape = input_shape
        return (sequence_shape[0], index_shape[1], sequence_shape[2])
