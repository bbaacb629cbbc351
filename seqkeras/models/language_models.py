"""`rnn_language_model` and `transformer_language_model` (decoder-only),
both with weight tying between the embedding and the output layer."""

import keras

from seqkeras.models import backbones as bb
from seqkeras.models.base import SequenceModel


def rnn_language_model(vocab_size, embedding_dim=128, units=None,
                       cell="lstm", num_layers=1, dropout=0.0,
                       tie_weights=True, stateful=False, batch_size=None):
    """Recurrent language model: `P(w_{t+1} | w_<=t) = softmax(W h_t)`.

    Args:
        vocab_size: token ids in [0, vocab_size); 0 is padding.
        embedding_dim: embedding width.
        units: recurrent units (default `embedding_dim`).
        cell: `"rnn"`, `"gru"` or `"lstm"`.
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
        A `keras.Model`: `token_ids` (batch, time) -> `logits`
        (batch, time, vocab_size).

    Example:

    >>> import numpy as np, seqkeras
    >>> model = seqkeras.models.rnn_language_model(50, 16, cell="gru")
    >>> tuple(model(np.array([[4, 5, 6]])).shape)
    (1, 3, 50)
    """
    name = "rnn_language_model"
    vocab_size = bb.check(name, "vocab_size", vocab_size, "int")
    embedding_dim = bb.check(name, "embedding_dim", embedding_dim, "int")
    units = bb.check(name, "units", units or embedding_dim, "int")
    cell = bb.check(name, "cell", cell, "choice", bb.RECURRENT)
    num_layers = bb.check(name, "num_layers", num_layers, "int")
    dropout = bb.check(name, "dropout", dropout, "rate")
    tie_weights = bb.check(name, "tie_weights", tie_weights, "bool")
    if stateful and not batch_size:
        raise ValueError(f"`{name}` with stateful=True needs a fixed "
                         f"`batch_size`. Received: batch_size={batch_size}")
    token_ids = keras.Input((None,), batch_size=batch_size, dtype="int32",
                            name="token_ids")
    embedding = keras.layers.ReversibleEmbedding(
        vocab_size, embedding_dim, tie_weights=True, mask_zero=True,
        name="embedding")
    x = embedding(token_ids)
    x = bb.recurrent_stack(x, cell, units, num_layers, dropout=dropout,
                           stateful=stateful, name="recurrent")
    if tie_weights and units != embedding_dim:
        x = keras.layers.Dense(embedding_dim, name="projection")(x)
    logits = bb.logits_head(x, vocab_size, embedding if tie_weights else None)
    return SequenceModel(token_ids, logits, name=name,
                         vocabulary_sizes={"token_ids": vocab_size})


def transformer_language_model(vocab_size, max_length, num_layers=4,
                               num_heads=4, hidden_dim=128,
                               intermediate_dim=None, dropout=0.0,
                               positional="learned", norm_first=True,
                               activation="gelu", tie_weights=True):
    """Decoder-only Transformer language model (GPT): token and position
    embeddings, causal pre-LN blocks, a final LayerNorm and tied logits.

    Args:
        vocab_size: token ids in [0, vocab_size); 0 is padding.
        max_length: the context length (learned positions have this many).
        num_layers, num_heads, hidden_dim: blocks, heads, model width.
        intermediate_dim: feed-forward width (default 4 * hidden_dim).
        dropout: dropout in the blocks.
        positional: `"learned"` or `"sinusoidal"`.
        norm_first: pre-LN blocks (GPT-2) or post-LN (the original paper).
        activation: `"gelu"` or `"relu"`.
        tie_weights: output layer = transposed token embedding.

    Returns:
        A `keras.Model`: `token_ids` (batch, time) -> `logits`
        (batch, time, vocab_size).

    Example:

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
    positional = bb.check(name, "positional", positional, "choice",
                          bb.POSITIONAL)
    dropout = bb.check(name, "dropout", dropout, "rate")
    if hidden_dim % num_heads:
        raise ValueError(
            f"`{name}` needs hidden_dim divisible by num_heads. Received: "
            f"hidden_dim={hidden_dim}, num_heads={num_heads}")
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    embedding = keras.layers.ReversibleEmbedding(
        vocab_size, hidden_dim, tie_weights=True, mask_zero=True,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02),
        name="embedding")
    x = bb.positions(embedding(token_ids), positional, max_length,
                     "positions")
    if dropout:
        x = keras.layers.Dropout(dropout)(x)
    x = bb.transformer_stack(x, num_layers, num_heads,
                             intermediate_dim or 4 * hidden_dim, dropout,
                             activation=activation, norm_first=norm_first,
                             causal=True, name="decoder")
    logits = bb.logits_head(x, vocab_size, embedding if tie_weights else None)
    return SequenceModel(token_ids, logits, name=name,
                         vocabulary_sizes={"token_ids": vocab_size})
