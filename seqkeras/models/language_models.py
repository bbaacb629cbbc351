"""`recurrent_language_model` and `transformer_language_model` (decoder-only),
both with weight tying between the embedding and the output layer."""

import keras
from keras import ops

from seqkeras.layers import validation
from seqkeras.models import backbones as bb
from seqkeras.models import steps
from seqkeras.models.base import SequenceModel


@keras.saving.register_keras_serializable(package="seqkeras")
class LanguageModel(SequenceModel):
    """A decoder-only language model: `token_ids` (batch, time) ->
    `logits` (batch, time, vocab); generation continues a prompt.

    The base of `RecurrentLanguageModel` and `TransformerLanguageModel`;
    a subclass implements `init_cache` and `call_with_cache` (see
    `SequenceModel`) and then generates and exports like a built-in one.
    """

    task = "tokens"
    prompt_input = "token_ids"

    def _head(self, step_weights=None):
        return steps.step_logits(
            self.part("logits"), self.part("embedding"), steps.head_weights(step_weights)
        )


@keras.saving.register_keras_serializable(package="seqkeras")
class RecurrentLanguageModel(LanguageModel):
    """`recurrent_language_model`'s class. Parts: `embedding`, `recurrent` (the
    stacked layers), `projection` (or None), `logits` (a Dense, or None for
    tied weights). The cache is each layer's recurrent states; the model
    streams one token at a time with them."""

    streamable = True

    def init_cache(self, inputs, batch_size, max_length, layout="fixed"):
        return [layer.cell.get_initial_state(batch_size) for layer in self.part("recurrent")]

    def call_with_cache(self, token_ids, cache, index, step_weights=None):
        h, cache = steps.recurrent_step(
            self.part("embedding")(token_ids), self.part("recurrent"), cache
        )
        if self.part("projection") is not None:
            h = self.part("projection")(h)
        return self._head(step_weights)(h), cache


class KeyValueLanguageModel(LanguageModel):
    """The base of the language models whose cache is each block's
    key/value cache (`TransformerLanguageModel`, `DecoderLanguageModel`):
    one cached step (`seqkeras.models.steps.decoder_step`) that takes one
    token or a prompt's several at once, and streams one token per call
    with those caches over `max_length` positions (a TFLite step model:
    `seqkeras.export.streaming_tflite`)."""

    streamable = True
    #: `call_with_cache` also takes several tokens (batch, T) at once (a
    #: prompt's prefill; `stream_prefill`).
    prefills = True
    #: Deprecated: pass `max_length` to `stream_start` (exports take it as
    #: an argument and never set it).
    stream_max_length = None

    def _unbounded(self):
        """The ValueError message when there is no length to stream over."""
        return f"model {self.name!r} has no `max_generation_length` to stream over"

    def stream_start(self, inputs, batch_size, max_length=None):
        """`[position, *caches]`: the next token's position (float32
        (batch, 1), so that every state starts at zeros) and each block's
        key/value cache over `max_length` positions (default
        `max_generation_length`)."""
        max_length = steps.stream_length(self, max_length)
        if max_length is None:
            raise ValueError(self._unbounded())
        position = ops.zeros((batch_size, 1), "float32")
        return [position] + self.init_cache(inputs, batch_size, max_length)

    def stream_step(self, x, states):
        """One token `x` (batch,) at the position the states hold ->
        `(logits (batch, vocab), states)`."""
        position, caches = states[0], list(states[1:])
        index = ops.cast(position[0, 0], "int32")
        logits, caches = self.call_with_cache(x, caches, index)
        return logits, [position + 1.0] + list(caches)

    def init_cache(self, inputs, batch_size, max_length, layout="fixed"):
        return [b.init_cache(batch_size, max_length, layout) for b in self.part("blocks")]

    def _positions(self):
        """The positional layer the step calls with `start_index` (None:
        rotary positions, inside the attention)."""
        return None

    def call_with_cache(self, token_ids, cache, index, step_weights=None):
        """The decoding step: `token_ids` (batch,), one token at position
        `index`, or (batch, T), T tokens at positions `index`..`index + T
        - 1` in one pass (a prompt's prefill: each attends causally to the
        cache and to those before it) -> `(logits (batch, vocab) of the
        last token, cache)`."""
        return steps.decoder_step(
            token_ids,
            cache,
            index,
            self.part("embedding"),
            self.part("blocks"),
            self.part("norm"),
            self._head(step_weights),
            positions=self._positions(),
            step_weights=step_weights,
        )

    def stream_prefill(self, x, states):
        """Tokens `x` (batch, T) at the positions the states hold, in one
        pass -> `(logits (batch, vocab) of the last, states)`."""
        position, caches = states[0], list(states[1:])
        index = ops.cast(position[0, 0], "int32")
        logits, caches = self.call_with_cache(x, caches, index)
        advanced = position + ops.cast(ops.shape(x)[1], position.dtype)
        return logits, [advanced] + list(caches)


@keras.saving.register_keras_serializable(package="seqkeras")
class TransformerLanguageModel(KeyValueLanguageModel):
    """`transformer_language_model`'s class. Parts: `embedding`,
    `positions`, `blocks`, `norm` (or None), `logits` (or None: tied). The
    cache is each block's key/value cache; it streams with learned
    positions only."""

    @property
    def max_generation_length(self):
        return getattr(self.part("positions"), "max_length", None)

    def _unbounded(self):
        return (
            f"model {self.name!r} streams with learned positions (`max_length` bounds "
            "the caches); sinusoidal positions have no length"
        )

    def _positions(self):
        return self.part("positions")


def recurrent_language_model(
    vocab_size,
    embedding_dim=128,
    units=None,
    cell="lstm",
    num_layers=1,
    dropout=0.0,
    tie_weights=True,
    stateful=False,
    batch_size=None,
):
    """Recurrent language model: `P(w_{t+1} | w_<=t) = softmax(W h_t)`.

    Args:
        vocab_size: token ids in [0, vocab_size); 0 is padding.
        embedding_dim: embedding width.
        units: recurrent units (default `embedding_dim`).
        cell: `"rnn"`, `"gru"`, `"lstm"`, `"mingru"` or `"minlstm"` (trained
            with one parallel scan, generating step by step).
        num_layers: stacked recurrent layers.
        dropout: input dropout of each cell.
        tie_weights: the output layer is the transposed embedding matrix
            (Press & Wolf 2017): one variable; when `units !=
            embedding_dim` a linear projection to `embedding_dim` comes
            first.
        stateful: carry states across batches (truncated BPTT with
            `seqkeras.data.tbptt_windows`); needs `batch_size`.
        batch_size: fixed batch size (required when stateful).

    Returns:
        A `RecurrentLanguageModel` (a functional `keras.Model`):
        `token_ids` (batch, time) -> `logits` (batch, time, vocab_size).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.recurrent_language_model(50, 16, cell="gru")
        >>> tuple(model(np.array([[4, 5, 6]])).shape)
        (1, 3, 50)
    """
    name = "recurrent_language_model"
    vocab_size = bb.check(name, "vocab_size", vocab_size, "int")
    embedding_dim = bb.check(name, "embedding_dim", embedding_dim, "int")
    units = bb.check(name, "units", units, "optional int") or embedding_dim
    cell = bb.check(name, "cell", cell, "choice", bb.RECURRENT)
    num_layers = bb.check(name, "num_layers", num_layers, "int")
    dropout = bb.check(name, "dropout", dropout, "rate")
    tie_weights = bb.check(name, "tie_weights", tie_weights, "bool")
    if stateful and not batch_size:
        raise ValueError(
            f"`{name}` with stateful=True needs a fixed "
            f"`batch_size`. Received: batch_size={batch_size}"
        )
    token_ids = keras.Input((None,), batch_size=batch_size, dtype="int32", name="token_ids")
    embedding = keras.layers.ReversibleEmbedding(
        vocab_size, embedding_dim, tie_weights=True, mask_zero=True, name="embedding"
    )
    x = embedding(token_ids)
    recurrent = []
    x = bb.recurrent_stack(
        x,
        cell,
        units,
        num_layers,
        dropout=dropout,
        stateful=stateful,
        name="recurrent",
        layers=recurrent,
    )
    projection = None
    if tie_weights and units != embedding_dim:
        projection = keras.layers.Dense(embedding_dim, name="projection")
        x = projection(x)
    logits, dense = bb.output_logits(
        x, vocab_size, embedding if tie_weights else None, return_layer=True
    )
    return RecurrentLanguageModel(
        token_ids,
        logits,
        name=name,
        vocabulary_sizes={"token_ids": vocab_size},
        parts={
            "embedding": embedding,
            "recurrent": recurrent,
            "projection": projection,
            "logits": dense,
        },
    )


def transformer_language_model(
    vocab_size,
    max_length,
    num_layers=4,
    num_heads=4,
    hidden_dim=128,
    intermediate_dim=None,
    dropout=0.0,
    positional="learned",
    norm_first=True,
    activation="gelu",
    tie_weights=True,
    norm_epsilon=1e-5,
    mask_padding=True,
    layer_norm_epsilon=validation.UNSET,
):
    """Decoder-only Transformer language model (GPT): token and position
    embeddings, causal pre-LN blocks, a final LayerNorm and tied logits.

    Args:
        vocab_size: token ids in [0, vocab_size); 0 is padding.
        max_length: the context length (learned positions have this many).
        num_layers, num_heads, hidden_dim: blocks, heads, model width.
        intermediate_dim: feed-forward width (default 4 * hidden_dim).
        dropout: dropout in the blocks.
        positional: `"learned"` or `"sinusoidal"` (embeddings scaled by
            sqrt(hidden_dim), then the sinusoids added, as the paper).
        norm_first: pre-LN blocks (GPT-2) or post-LN (the original paper).
        activation: `"gelu"`, `"gelu_tanh"` (GPT-2's) or `"relu"`.
        tie_weights: output layer = transposed token embedding.
        norm_epsilon: of every LayerNorm (`layer_norm_epsilon` is its old
            name, deprecated).
        mask_padding: id 0 is padding (masked). False: id 0 is a token
            like any other (GPT-2's "!"); pad with any id and give
            `generate` the `prompt_lengths`.

    Returns:
        A `TransformerLanguageModel` (a functional `keras.Model`):
        `token_ids` (batch, time) -> `logits` (batch, time, vocab_size).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.transformer_language_model(
        ...     50, max_length=8, num_layers=1, num_heads=2, hidden_dim=16)
        >>> tuple(model(np.array([[4, 5, 6]])).shape)
        (1, 3, 50)
    """
    name = "transformer_language_model"
    vocab_size = bb.check(name, "vocab_size", vocab_size, "int")
    max_length = bb.check(name, "max_length", max_length, "int")
    num_layers = bb.check(name, "num_layers", num_layers, "int")
    num_heads = bb.check(name, "num_heads", num_heads, "int")
    hidden_dim = bb.check(name, "hidden_dim", hidden_dim, "int")
    positional = bb.check(name, "positional", positional, "choice", bb.POSITIONAL)
    dropout = bb.check(name, "dropout", dropout, "rate")
    intermediate_dim = bb.check(name, "intermediate_dim", intermediate_dim, "optional int")
    if hidden_dim % num_heads:
        raise ValueError(
            f"`{name}` needs hidden_dim divisible by num_heads. Received: "
            f"hidden_dim={hidden_dim}, num_heads={num_heads}"
        )
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    parts = {}
    x = causal_network(
        token_ids,
        parts,
        vocab_size=vocab_size,
        max_length=max_length,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        dropout=dropout,
        positional=positional,
        norm_first=norm_first,
        activation=activation,
        layer_norm_epsilon=bb.check(
            name,
            "norm_epsilon",
            validation.renamed(
                name, "norm_epsilon", norm_epsilon, "layer_norm_epsilon", layer_norm_epsilon, 1e-5
            ),
            "positive",
        ),
        mask_padding=bb.check(name, "mask_padding", mask_padding, "bool"),
    )
    embedding = parts["embedding"]
    logits, parts["logits"] = bb.output_logits(
        x, vocab_size, embedding if tie_weights else None, return_layer=True
    )
    return TransformerLanguageModel(
        token_ids, logits, name=name, vocabulary_sizes={"token_ids": vocab_size}, parts=parts
    )


def causal_network(
    token_ids,
    parts,
    vocab_size,
    max_length,
    num_layers,
    num_heads,
    hidden_dim,
    intermediate_dim,
    dropout,
    positional,
    norm_first,
    activation,
    layer_norm_epsilon,
    mask_padding,
):
    """The body of `transformer_language_model` on `token_ids` (its final
    hidden states, (batch, time, hidden_dim)), for heads other than the
    logits (a GPT classifier); `parts` gets `embedding`, `positions`,
    `blocks` and `norm`."""
    embedding = keras.layers.ReversibleEmbedding(
        vocab_size,
        hidden_dim,
        tie_weights=True,
        mask_zero=mask_padding,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02),
        name="embedding",
    )
    positions = bb.position_layer(positional, max_length, "positions")
    x = positions(embedding(token_ids))
    if dropout:
        x = keras.layers.Dropout(dropout)(x)
    parts.update(embedding=embedding, positions=positions)
    return bb.transformer_stack(
        x,
        num_layers,
        num_heads,
        intermediate_dim or 4 * hidden_dim,
        dropout,
        activation=activation,
        norm_first=norm_first,
        causal=True,
        name="decoder",
        parts=parts,
        layer_norm_epsilon=layer_norm_epsilon,
    )
