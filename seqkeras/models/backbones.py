"""Pieces the model builders share: argument checks, embeddings, recurrent
and Transformer stacks, the float32 logits head."""

import keras

from seqkeras import layers as sk
from seqkeras.layers import validation

CELLS = {
    "rnn": sk.SimpleRNNCell,
    "gru": sk.GRUCell,
    "lstm": sk.LSTMCell,
    "mingru": sk.MinGRUCell,
    "minlstm": sk.MinLSTMCell,
}
RECURRENT = tuple(CELLS)
#: The cells a step-by-step decoder runs (attention decoders, seq2seq):
#: the classic ones.
DECODER_CELLS = ("rnn", "gru", "lstm")
BACKBONES = RECURRENT + ("transformer",)
POSITIONAL = ("learned", "sinusoidal")


def check(builder, arg, value, kind, choices=None):
    """`value` checked as `kind` ("choice" among `choices`, "int" a positive
    integer, "optional int" None or one, "rate" in [0, 1), "positive" a
    number > 0, "bool"); errors name `builder`
    and `arg` (not a layer the builder makes)."""
    if kind == "choice":
        return validation.choice(builder, arg, value, choices)
    if kind == "int":
        return validation.positive_int(builder, arg, value)
    if kind == "optional int":
        return None if value is None else validation.positive_int(builder, arg, value)
    if kind == "rate":
        return validation.rate(builder, arg, value)
    if kind == "positive":
        return validation.greater_than(builder, arg, value, 0.0)
    return validation.boolean(builder, arg, value)


def make_cell(kind, units, dropout=0.0, name=None):
    return CELLS[kind](units, dropout=dropout, name=name)


def recurrent_stack(
    x,
    kind,
    units,
    num_layers=1,
    bidirectional=False,
    dropout=0.0,
    return_sequences=True,
    return_state=False,
    initial_state=None,
    stateful=False,
    name="encoder",
    layers=None,
):
    """`num_layers` recurrent layers; returns the output, plus the last
    layer's final states (forward, then backward) when `return_state`.
    The layers are appended to `layers` when given."""
    for i in range(num_layers):
        last = i == num_layers - 1
        layer = sk.Recurrent(
            make_cell(kind, units, dropout=dropout),
            return_sequences=return_sequences or not last,
            return_state=return_state and last,
            stateful=stateful,
            name=f"{name}_{i}" if not bidirectional else None,
        )
        if bidirectional:
            layer = sk.Bidirectional(layer, name=f"{name}_{i}")
        x = layer(x, initial_state=initial_state if i == 0 else None)
        if layers is not None:
            layers.append(layer)
    if return_state:
        return x[0], list(x[1:])
    return x


def transformer_stack(
    x,
    num_layers,
    num_heads,
    intermediate_dim,
    dropout,
    activation="gelu",
    norm_first=True,
    causal=False,
    memory=None,
    name="encoder",
    parts=None,
    layer_norm_epsilon=1e-5,
):
    """Encoder blocks (or decoder blocks when `causal` or with `memory`);
    pre-LN stacks end with a LayerNorm (nanoGPT's `ln_f`). With `parts` (a
    dict), its `"blocks"` and `"norm"` (or None) are set."""
    blocks, norm = [], None
    for i in range(num_layers):
        if causal or memory is not None:
            block = sk.TransformerDecoderBlock(
                num_heads,
                intermediate_dim,
                dropout=dropout,
                activation=activation,
                norm_first=norm_first,
                layer_norm_epsilon=layer_norm_epsilon,
                name=f"{name}_block_{i}",
            )
            x = block(x, memory) if memory is not None else block(x)
        else:
            block = sk.TransformerEncoderBlock(
                num_heads,
                intermediate_dim,
                dropout=dropout,
                activation=activation,
                norm_first=norm_first,
                layer_norm_epsilon=layer_norm_epsilon,
                name=f"{name}_block_{i}",
            )
            x = block(x)
        blocks.append(block)
    if norm_first:
        norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name=f"{name}_norm")
        x = norm(x)
    if parts is not None:
        parts.update(blocks=blocks, norm=norm)
    return x


def position_layer(kind, max_length, name):
    if kind == "learned":
        return sk.PositionalEmbedding(max_length, name=name)
    # the paper's sqrt(d) scaling of the embeddings: without it Keras'
    # embedding initializer (|w| <= 0.05) leaves the token signal ~20x
    # below the sinusoids' and training starts slowly (measured on
    # Multi30k: val perplexity 39 after 3 epochs where the attention RNN
    # had 8)
    return sk.SinusoidalPositionalEncoding(scale_inputs=True, name=name)


def positions(x, kind, max_length, name):
    return position_layer(kind, max_length, name)(x)


def output_logits(x, vocab_size, embedding=None, name="logits", return_layer=False):
    """Dense logits, or `embedding(x, reverse=True)` (weight tying: one
    variable, the embedding matrix); float32 under mixed precision. With
    `return_layer`, also the Dense layer (None when tied)."""
    dense = None
    if embedding is not None:
        x = embedding(x, reverse=True)
    else:
        dense = keras.layers.Dense(vocab_size, name=f"{name}_dense")
        x = dense(x)
    x = keras.layers.Activation("linear", dtype="float32", name=name)(x)
    return (x, dense) if return_layer else x
