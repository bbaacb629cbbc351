"""`CharacterEncoder`: one vector per word from its characters (a char
CNN with max pooling over time, Ma and Hovy 2016)."""

import keras
from keras import ops

from seqkeras.layers import validation

ACTIVATIONS = ("tanh", "relu")


@keras.saving.register_keras_serializable(package="seqkeras")
class CharacterEncoder(keras.layers.Layer):
    """Encodes each word from its character ids: embed the characters,
    convolve over them (`filters` filters of width `kernel_size`, "same"
    padding), and max-pool over the word's real characters:

        e_c = E[c] (0 for c = 0);  h_i = act(sum_j W_j e_{i+j-k//2} + b);
        out = max_{i: c_i != 0} h_i   (zeros for a word with no character)

    A word's vector depends only on its own characters: padding characters
    (id 0) and padding words change nothing. Gives a tagger the spelling
    that a word vocabulary loses (capitals, suffixes, unseen words).

    Args:
        vocab_size: character ids are in [0, vocab_size); 0 is padding.
        embedding_dim: the character embedding width.
        filters: output features per word.
        kernel_size: characters per convolution window (odd).
        activation: `"tanh"` (Ma and Hovy) or `"relu"`.
        embeddings_initializer: the character embeddings' initializer.
        kernel_initializer: the convolution kernel's initializer.
        bias_initializer: the convolution bias' initializer.

    Call arguments:
        inputs: int character ids (batch, words, characters).

    Returns:
        (batch, words, filters), with a mask (batch, words) that is false
        for padding words (no character).

    Examples:
        >>> import numpy as np, seqkeras
        >>> enc = seqkeras.layers.CharacterEncoder(40, filters=6)
        >>> chars = np.array([[[5, 6, 7], [8, 0, 0], [0, 0, 0]]])
        >>> tuple(enc(chars).shape)
        (1, 3, 6)
        >>> float(np.abs(np.asarray(enc(chars))[0, 2]).max())  # a padding word
        0.0
    """

    def __init__(
        self,
        vocab_size,
        embedding_dim=30,
        filters=50,
        kernel_size=3,
        activation="tanh",
        embeddings_initializer="uniform",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "CharacterEncoder"
        self.vocab_size = validation.positive_int(name, "vocab_size", vocab_size)
        self.embedding_dim = validation.positive_int(name, "embedding_dim", embedding_dim)
        self.filters = validation.positive_int(name, "filters", filters)
        self.kernel_size = validation.positive_int(name, "kernel_size", kernel_size)
        if self.kernel_size % 2 == 0:
            raise ValueError(
                f"`{name}` received an invalid value for `kernel_size`: "
                f"expected an odd integer. Received: kernel_size="
                f"{kernel_size!r}"
            )
        self.activation = validation.choice(name, "activation", activation, ACTIVATIONS)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(
                "`CharacterEncoder` expects inputs of rank 3, (batch, "
                f"words, characters). Received: input_shape="
                f"{tuple(input_shape)}"
            )
        self.embeddings = self.add_weight(
            shape=(self.vocab_size, self.embedding_dim),
            name="embeddings",
            initializer=self.embeddings_initializer,
        )
        self.kernel = self.add_weight(
            shape=(self.kernel_size, self.embedding_dim, self.filters),
            name="kernel",
            initializer=self.kernel_initializer,
        )
        self.bias = self.add_weight(
            shape=(self.filters,), name="bias", initializer=self.bias_initializer
        )

    def call(self, inputs):
        validation.numeric("CharacterEncoder", "inputs", inputs)
        shape = validation.static_shape(inputs)
        if len(shape) != 3:
            raise ValueError(
                "`CharacterEncoder` expects `inputs` of rank 3, (batch, "
                f"words, characters). Received: inputs.shape={shape}"
            )
        validation.ids_in_range("CharacterEncoder", "inputs", inputs, self.vocab_size)
        ids = ops.cast(inputs, "int32")
        dims = ops.shape(ids)
        flat = ops.reshape(ids, (-1, dims[2]))  # (batch * words, chars)
        real = ops.expand_dims(ops.not_equal(flat, 0), -1)
        # padding characters embed as zeros, as the convolution's own
        # "same" padding does: more padding never changes a word
        x = ops.take(ops.cast(self.embeddings, self.compute_dtype), flat, axis=0) * ops.cast(
            real, self.compute_dtype
        )
        h = ops.conv(x, ops.cast(self.kernel, self.compute_dtype), padding="same") + ops.cast(
            self.bias, self.compute_dtype
        )
        h = ops.tanh(h) if self.activation == "tanh" else ops.relu(h)
        lowest = ops.cast(
            -1e4 if self.activation == "tanh" else -1.0, h.dtype
        )  # below any activation value
        pooled = ops.max(ops.where(real, h, lowest), axis=1)
        any_char = ops.any(real, axis=1)
        pooled = ops.where(any_char, pooled, ops.zeros_like(pooled))
        return ops.reshape(pooled, (dims[0], dims[1], self.filters))

    def compute_mask(self, inputs, mask=None):
        """A word with no character (all ids 0) is padding: (batch,
        words) bool. Keras' `Concatenate` ORs its inputs' masks, so every
        per-word feature beside a masked word embedding must mask its
        padding words too."""
        return ops.any(ops.not_equal(ops.cast(inputs, "int32"), 0), axis=-1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], self.filters)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            embedding_dim=self.embedding_dim,
            filters=self.filters,
            kernel_size=self.kernel_size,
            activation=self.activation,
            embeddings_initializer=keras.initializers.serialize(self.embeddings_initializer),
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
        )
        return config
