"""Encoder-decoder builders: `conditioned_decoder` (vec2seq), `seq2seq`
(recurrent, with or without attention) and `transformer_seq2seq`.

All train with teacher forcing: the decoder input `target_ids` is the
target shifted right behind BOS (`seqkeras.data.teacher_forcing`)."""

import keras
from keras import ops

from seqkeras import layers as sk
from seqkeras.data.tokens import PAD
from seqkeras.layers.attention_decoder import STYLES
from seqkeras.layers.scoring import SCORES
from seqkeras.layers.transformer import ACTIVATIONS
from seqkeras.models import backbones as bb
from seqkeras import _traced
from seqkeras.models import steps
from seqkeras.models.base import SequenceModel
from seqkeras.models.base import copy_layers


class _Conditioned(SequenceModel):
    """A decoder conditioned on `conditioning_input`; generation feeds
    `target_ids`. `_encoder(layers)` is the model from the conditioning
    input to those layers' outputs, built once."""

    task = "tokens"
    prompt_input = "target_ids"

    def _encoder(self, role):
        def make():
            layers = self.part(role) if isinstance(self.part(role), list) else [self.part(role)]
            source = [t for t in self.inputs if t.name == self.conditioning_input][0]
            return keras.Model(source, [x.output for x in layers])

        return _traced.cached(self, "encoders", role, make)

    def _encode(self, role, inputs):
        return steps.as_list(self._encoder(role)(inputs))


@keras.saving.register_keras_serializable(package="seqkeras")
class ConditionedDecoder(_Conditioned):
    """`conditioned_decoder`'s class (vec2seq): `features` and
    `target_ids` -> `logits`. Parts: `initial_states` (the bridged
    features), `embedding`, `decoder` (a `Recurrent`), `logits`. The cache
    is the decoder's states; it streams one token at a time."""

    conditioning_input = "features"
    streamable = True

    def init_cache(self, inputs, batch_size, max_length, layout="fixed"):
        return self._encode("initial_states", inputs)

    def call_with_cache(self, token_ids, cache, index, step_weights=None):
        h, states = self.part("decoder").cell(self.part("embedding")(token_ids), list(cache))
        head = steps.step_logits(self.part("logits"), weights=steps.head_weights(step_weights))
        return head(h), steps.as_list(states)


class Seq2Seq(_Conditioned):
    """An encoder-decoder: `source_ids` and `target_ids` -> `logits`; the
    base of `RecurrentSeq2Seq` and `TransformerSeq2Seq`."""

    conditioning_input = "source_ids"


@keras.saving.register_keras_serializable(package="seqkeras")
class RecurrentSeq2Seq(Seq2Seq):
    """`seq2seq`'s class. Parts: `memory` (the encoder outputs),
    `initial_states`, `embedding`, `decoder` (`Recurrent` or
    `AttentionDecoder`), `logits`. The cache is the decoder states (the
    fixed context), with attention also the memory and its mask; it
    streams one token at a time."""

    streamable = True
    #: with attention, `init_cache(...)[1:]` (memory, mask, projected
    #: memory) is the same for every beam of a source (see
    #: `TransformerSeq2Seq.shared_cache_index`); without, the cache is the
    #: states alone (1 == its length).
    shared_cache_index = 1

    @property
    def _attention(self):
        return isinstance(self.part("decoder"), sk.AttentionDecoder)

    def init_cache(self, inputs, batch_size, max_length, layout="fixed"):
        """`[states]`, or with attention `[states, memory, mask]` and the
        attention's projection of the memory (`Attention.project_key`, for
        the `general` and `additive` scores), computed once per source."""
        if not self._attention:
            return [self._encode("initial_states", inputs)]
        memory = self._encode("memory", inputs)[0]
        init = self._encode("initial_states", inputs)
        decoder = self.part("decoder")
        projected = decoder.attention.project_key(memory)
        return [
            decoder.get_initial_state(batch_size, init),
            memory,
            ops.not_equal(inputs, PAD),
        ] + ([] if projected is None else [projected])

    def call_with_cache(self, token_ids, cache, index, step_weights=None):
        x = self.part("embedding")(token_ids)
        decoder = self.part("decoder")
        head = steps.step_logits(self.part("logits"), weights=steps.head_weights(step_weights))
        if not self._attention:
            h, states = decoder.cell(x, list(cache[0]))
            return head(h), [steps.as_list(states)]
        states, memory, mask = cache[:3]
        projected = cache[3] if len(cache) > 3 else None
        h, states, _ = decoder.step(x, states, memory, mask, projected_memory=projected)
        return head(h), [steps.as_list(states)] + list(cache[1:])


@keras.saving.register_keras_serializable(package="seqkeras")
class TransformerSeq2Seq(Seq2Seq):
    """`transformer_seq2seq`'s class. Parts: `memory`, `embedding`,
    `positions`, `blocks` (the decoder's), `norm` (or None), `logits` (or
    None: tied). The cache is the self-attention key/value caches, the
    cross-attention keys and values (projected once), the memory and its
    mask."""

    #: `init_cache(...)[1:]` (cross-attention keys and values, memory,
    #: mask) is the same for every beam of a source: beam search tiles it
    #: once and does not reorder it (`generate`).
    shared_cache_index = 1
    streamable = True
    #: Deprecated: pass `max_length` to `stream_start` (exports take it as
    #: an argument and never set it).
    stream_max_length = None

    @property
    def max_generation_length(self):
        return getattr(self.part("positions"), "max_length", None)

    def stream_start(self, inputs, batch_size, max_length=None):
        """`[position, *self caches, *cross caches, memory, mask]`: the
        next token's position (float32 (batch, 1), so that every state
        starts at zeros), each block's self-attention cache over
        `max_length` positions (default the learned positions'), the
        cross-attention keys and values and the encoder outputs and source
        mask (computed once, by the step pair's `encode`)."""
        length = steps.stream_length(self, max_length)
        if length is None:
            raise ValueError(
                f"model {self.name!r} streams with a bounded output: pass `max_length` "
                "(e.g. the longest output, BOS included) to `stream_start` or "
                "`streaming_tflite`; sinusoidal positions have no length"
            )
        self_caches, cross, memory, mask = self.init_cache(inputs, batch_size, length)
        position = ops.zeros((batch_size, 1), "float32")
        return [position] + list(self_caches) + list(cross) + [memory, mask]

    def stream_step(self, x, states):
        """One decoder token `x` (batch,) at the position the states hold
        -> `(logits (batch, vocab), states)`."""
        n = len(self.part("blocks"))
        position, memory, mask = states[0], states[-2], states[-1]
        self_caches, cross = list(states[1 : 1 + n]), list(states[1 + n : 1 + 2 * n])
        index = ops.cast(position[0, 0], "int32")
        logits, (self_caches, *_) = self.call_with_cache(
            x, [self_caches, cross, memory, mask], index
        )
        return logits, [position + 1.0] + list(self_caches) + cross + [memory, mask]

    def init_cache(self, inputs, batch_size, max_length, layout="fixed"):
        memory = self._encode("memory", inputs)[0]
        blocks = self.part("blocks")
        return [
            [b.init_cache(batch_size, max_length, layout) for b in blocks],
            [b.compute_cross_attention_cache(memory) for b in blocks],
            memory,
            ops.not_equal(inputs, PAD),
        ]

    def call_with_cache(self, token_ids, cache, index, step_weights=None):
        self_caches, cross_caches, memory, mask = cache
        logits, self_caches = steps.decoder_step(
            token_ids,
            self_caches,
            index,
            self.part("embedding"),
            self.part("blocks"),
            self.part("norm"),
            steps.step_logits(
                self.part("logits"), self.part("embedding"), steps.head_weights(step_weights)
            ),
            positions=self.part("positions"),
            memory=memory,
            mask=mask,
            cross=cross_caches,
            step_weights=step_weights,
        )
        return logits, [self_caches, cross_caches, memory, mask]


def _bridge(states, units, name):
    """Maps encoder final states to decoder initial states, one dense tanh
    layer per state kind (h; and c for LSTM)."""
    return [
        keras.layers.Dense(units, activation="tanh", name=f"{name}_{i}")(s)
        for i, s in enumerate(states)
    ]


def _named(states):
    """`(states, layers)`: the decoder's initial states through Identity
    layers (`decoder_init_i`), the model's `initial_states` part, from
    which generation builds the encoder half."""
    layers = [keras.layers.Identity(name=f"decoder_init_{i}") for i in range(len(states))]
    return [layer(s) for layer, s in zip(layers, states)], layers


def conditioned_decoder(
    feature_dim, vocab_size, embedding_dim=64, units=128, cell="lstm", dropout=0.0
):
    """vec2seq: a feature vector (e.g. image features) initialises a
    recurrent decoder, `h_0 = tanh(W f)`, that generates tokens.

    Args:
        feature_dim: size of the conditioning vector.
        vocab_size: token ids in [0, vocab_size); 0 is padding.
        embedding_dim, units, cell, dropout: the decoder.

    Returns:
        A `ConditionedDecoder` (a functional `keras.Model`): inputs
        `features` (batch, feature_dim) and
        `target_ids` (batch, time) -> `logits` (batch, time, vocab_size).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.conditioned_decoder(10, 30, units=16)
        >>> out = model({"features": np.ones((2, 10), "float32"),
        ...              "target_ids": np.array([[1, 5, 0], [1, 6, 7]])})
        >>> tuple(out.shape)
        (2, 3, 30)
    """
    name = "conditioned_decoder"
    feature_dim = bb.check(name, "feature_dim", feature_dim, "int")
    vocab_size = bb.check(name, "vocab_size", vocab_size, "int")
    embedding_dim = bb.check(name, "embedding_dim", embedding_dim, "int")
    units = bb.check(name, "units", units, "int")
    cell = bb.check(name, "cell", cell, "choice", bb.DECODER_CELLS)
    dropout = bb.check(name, "dropout", dropout, "rate")
    features = keras.Input((feature_dim,), name="features")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")
    n_states = 2 if cell == "lstm" else 1
    init, init_layers = _named(_bridge([features] * n_states, units, "bridge"))
    embedding = keras.layers.Embedding(
        vocab_size, embedding_dim, mask_zero=True, name="target_embedding"
    )
    decoder = sk.Recurrent(
        bb.make_cell(cell, units, dropout), return_sequences=True, name="decoder"
    )
    x = decoder(embedding(target_ids), initial_state=init)
    logits, dense = bb.output_logits(x, vocab_size, return_layer=True)
    return ConditionedDecoder(
        {"features": features, "target_ids": target_ids},
        logits,
        name=name,
        vocabulary_sizes={"target_ids": vocab_size},
        parts={
            "initial_states": init_layers,
            "embedding": embedding,
            "decoder": decoder,
            "logits": dense,
        },
    )


def recurrent_seq2seq(
    source_vocab_size,
    target_vocab_size,
    embedding_dim=64,
    units=128,
    cell="lstm",
    attention=None,
    style="bahdanau",
    input_feeding=True,
    attention_units=None,
    bidirectional=True,
    encoder_units=None,
    encoder_layers=1,
    bridge=True,
    dropout=0.0,
):
    """Recurrent encoder-decoder, with or without attention.

    Without attention the decoder sees the source only through its
    initial state, the encoder's final state (the "fixed context vector"
    bottleneck). With attention every decoder step also reads the encoder
    outputs (`seqkeras.layers.AttentionDecoder`).

    Args:
        source_vocab_size, target_vocab_size: vocabularies (0 = padding).
        embedding_dim: embedding width of both sides.
        units: decoder units.
        cell: `"rnn"`, `"gru"` or `"lstm"` (encoder and decoder).
        attention: None, or a score: `dot`, `scaled_dot`, `general`,
            `additive`, `cosine` (dot-like scores need encoder outputs of
            `units` features).
        style: `"bahdanau"` or `"luong"`.
        input_feeding: Luong style: feed the attentional vector forward.
        attention_units: hidden size of the additive score.
        bidirectional: bidirectional encoder.
        encoder_units: encoder units per direction (default `units`).
        encoder_layers: stacked encoder layers.
        bridge: map the encoder's final states to the decoder's with a dense
            tanh layer; without it the sizes must match.
        dropout: dropout inside the cells.

    Returns:
        A `RecurrentSeq2Seq` (a functional `keras.Model`): inputs
        `source_ids` (batch, source_time) and
        `target_ids` (batch, time) -> `logits` (batch, time,
        target_vocab_size). With attention, the decoder layer (named
        `decoder`) also outputs the weights: `attention_model(model)` gives
        a model returning them.

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.recurrent_seq2seq(20, 30, units=16,
        ...                                 attention="additive")
        >>> out = model({"source_ids": np.array([[4, 5, 6, 0]]),
        ...              "target_ids": np.array([[1, 7, 8]])})
        >>> tuple(out.shape)
        (1, 3, 30)
    """
    name = "recurrent_seq2seq"
    source_vocab_size = bb.check(name, "source_vocab_size", source_vocab_size, "int")
    target_vocab_size = bb.check(name, "target_vocab_size", target_vocab_size, "int")
    embedding_dim = bb.check(name, "embedding_dim", embedding_dim, "int")
    units = bb.check(name, "units", units, "int")
    cell = bb.check(name, "cell", cell, "choice", bb.DECODER_CELLS)
    if attention is not None:
        attention = bb.check(name, "attention", attention, "choice", SCORES)
    style = bb.check(name, "style", style, "choice", STYLES)
    encoder_units = bb.check(name, "encoder_units", encoder_units, "optional int") or units
    attention_units = bb.check(name, "attention_units", attention_units, "optional int")
    encoder_layers = bb.check(name, "encoder_layers", encoder_layers, "int")
    dropout = bb.check(name, "dropout", dropout, "rate")
    directions = 2 if bidirectional else 1
    if not bridge and encoder_units * directions != units:
        raise ValueError(
            f"`{name}` without a bridge needs the encoder's final state "
            f"({directions} x {encoder_units} = "
            f"{directions * encoder_units} features) to match the decoder "
            f"units ({units}); set bridge=True or change the sizes"
        )
    if attention in ("dot", "scaled_dot", "cosine") and encoder_units * directions != units:
        raise ValueError(
            f"`{name}` with attention={attention!r} needs encoder outputs "
            f"({directions} x {encoder_units} = "
            f"{directions * encoder_units} features) of the decoder's size "
            f"({units}); use 'general' or 'additive', or change the sizes"
        )

    source_ids = keras.Input((None,), dtype="int32", name="source_ids")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")
    src = keras.layers.Embedding(
        source_vocab_size, embedding_dim, mask_zero=True, name="source_embedding"
    )(source_ids)
    memory, states = bb.recurrent_stack(
        src,
        cell,
        encoder_units,
        encoder_layers,
        bidirectional,
        dropout,
        return_sequences=True,
        return_state=True,
    )
    n_states = 2 if cell == "lstm" else 1
    if bidirectional:  # [fw states..., bw states...] -> per kind, concat
        states = [ops.concatenate([states[i], states[n_states + i]], -1) for i in range(n_states)]
    init, init_layers = _named(_bridge(states, units, "bridge") if bridge else states)
    memory_layer = keras.layers.Identity(name="memory")
    memory = memory_layer(memory)
    embedding = keras.layers.Embedding(
        target_vocab_size, embedding_dim, mask_zero=True, name="target_embedding"
    )
    tgt = embedding(target_ids)
    if attention is None:
        decoder = sk.Recurrent(
            bb.make_cell(cell, units, dropout), return_sequences=True, name="decoder"
        )
        x = decoder(tgt, initial_state=init)
    else:
        decoder = sk.AttentionDecoder(
            bb.make_cell(cell, units, dropout),
            score=attention,
            style=style,
            input_feeding=input_feeding,
            attention_units=attention_units,
            name="decoder",
        )
        x, _ = decoder(tgt, memory, initial_state=init, return_attention_scores=True)
    logits, dense = bb.output_logits(x, target_vocab_size, return_layer=True)
    return RecurrentSeq2Seq(
        {"source_ids": source_ids, "target_ids": target_ids},
        logits,
        name=name,
        vocabulary_sizes={"source_ids": source_vocab_size, "target_ids": target_vocab_size},
        parts={
            "memory": memory_layer if attention else None,
            "initial_states": init_layers,
            "embedding": embedding,
            "decoder": decoder,
            "logits": dense,
        },
    )


def attention_model(model):
    """A model with the same inputs returning `[logits, weights]`, the
    weights (batch, time, source_time) of a `recurrent_seq2seq(attention=...)`
    model's decoder.

    Args:
        model: a `recurrent_seq2seq` built with `attention`.

    Returns:
        A functional `keras.Model` sharing `model`'s layers.

    Raises:
        ValueError: a model without an attention decoder.
    """
    decoder = model.part("decoder") if isinstance(model, SequenceModel) else None
    if not isinstance(decoder, sk.AttentionDecoder):
        raise ValueError(
            "`attention_model` expects `model` to be a seq2seq model built with attention "
            "(`recurrent_seq2seq(..., attention=...)`). Received: "
            f"{getattr(model, 'name', type(model).__name__)!r} ({type(model).__name__})"
        )
    return keras.Model(model.inputs, [model.outputs[0], decoder.output[1]])


def transformer_seq2seq(
    source_vocab_size,
    target_vocab_size,
    max_length,
    num_layers=2,
    num_heads=4,
    hidden_dim=128,
    intermediate_dim=None,
    dropout=0.0,
    positional="sinusoidal",
    norm_first=False,
    activation="relu",
    tie_weights=True,
):
    """Transformer encoder-decoder (Vaswani et al. 2017): encoder blocks
    over the source, causal decoder blocks with cross-attention.

    Args:
        source_vocab_size, target_vocab_size: vocabularies (0 = padding).
        max_length: the longest source or target (learned positions).
        num_layers: blocks on each side.
        num_heads: attention heads per block.
        hidden_dim: the model width.
        intermediate_dim: the feed-forward width.
        dropout: the dropout rate.
        activation: the feed-forward activation.
        positional: `"sinusoidal"` (the paper: embeddings scaled by
            sqrt(hidden_dim), then the sinusoids added) or `"learned"`.
        norm_first: pre-LN instead of the paper's post-LN.
        tie_weights: output layer = transposed target embedding.

    Returns:
        A `TransformerSeq2Seq` (a functional `keras.Model`): `source_ids`,
        `target_ids` -> `logits`
        (batch, time, target_vocab_size).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.transformer_seq2seq(
        ...     20, 30, max_length=8, num_layers=1, num_heads=2, hidden_dim=16)
        >>> out = model({"source_ids": np.array([[4, 5, 0]]),
        ...              "target_ids": np.array([[1, 7]])})
        >>> tuple(out.shape)
        (1, 2, 30)
    """
    name = "transformer_seq2seq"
    source_vocab_size = bb.check(name, "source_vocab_size", source_vocab_size, "int")
    target_vocab_size = bb.check(name, "target_vocab_size", target_vocab_size, "int")
    max_length = bb.check(name, "max_length", max_length, "int")
    num_layers = bb.check(name, "num_layers", num_layers, "int")
    num_heads = bb.check(name, "num_heads", num_heads, "int")
    hidden_dim = bb.check(name, "hidden_dim", hidden_dim, "int")
    positional = bb.check(name, "positional", positional, "choice", bb.POSITIONAL)
    intermediate_dim = bb.check(name, "intermediate_dim", intermediate_dim, "optional int")
    dropout = bb.check(name, "dropout", dropout, "rate")
    activation = bb.check(name, "activation", activation, "choice", ACTIVATIONS)
    if hidden_dim % num_heads:
        raise ValueError(
            f"`{name}` needs hidden_dim divisible by num_heads. Received: "
            f"hidden_dim={hidden_dim}, num_heads={num_heads}"
        )
    ffn = intermediate_dim or 4 * hidden_dim
    source_ids = keras.Input((None,), dtype="int32", name="source_ids")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")
    src = keras.layers.Embedding(
        source_vocab_size, hidden_dim, mask_zero=True, name="source_embedding"
    )(source_ids)
    src = bb.positions(src, positional, max_length, "source_positions")
    memory = bb.transformer_stack(
        src, num_layers, num_heads, ffn, dropout, activation, norm_first, name="encoder"
    )
    memory_layer = keras.layers.Identity(name="memory")
    memory = memory_layer(memory)
    embedding = keras.layers.ReversibleEmbedding(
        target_vocab_size, hidden_dim, tie_weights=True, mask_zero=True, name="target_embedding"
    )
    positions = bb.position_layer(positional, max_length, "target_positions")
    tgt = positions(embedding(target_ids))
    parts = {"memory": memory_layer, "embedding": embedding, "positions": positions}
    x = bb.transformer_stack(
        tgt,
        num_layers,
        num_heads,
        ffn,
        dropout,
        activation,
        norm_first,
        causal=True,
        memory=memory,
        name="decoder",
        parts=parts,
    )
    logits, parts["logits"] = bb.output_logits(
        x, target_vocab_size, embedding if tie_weights else None, return_layer=True
    )
    return TransformerSeq2Seq(
        {"source_ids": source_ids, "target_ids": target_ids},
        logits,
        name=name,
        vocabulary_sizes={"source_ids": source_vocab_size, "target_ids": target_vocab_size},
        parts=parts,
    )


#: The layers of a `transformer_seq2seq` that read the source (by name).
ENCODER_LAYERS = ("source_", "encoder_")


def load_encoder(model, source):
    """Copies the encoder side of `source`, a trained `transformer_seq2seq`
    (e.g. one pretrained by span corruption), into `model`, another
    `transformer_seq2seq` with the same source vocabulary and encoder
    shape but any target side: the source embedding and positions, the
    encoder blocks and the encoder's final norm. The decoder is left as
    it is. A ValueError names a layer `model` lacks or whose shapes
    differ (nothing is copied then).

    Args:
        model: the `transformer_seq2seq` to start.
        source: the trained `transformer_seq2seq`.

    Returns:
        The names of the layers copied.

    Raises:
        TypeError: a `model` or `source` that is not a `transformer_seq2seq`.
        ValueError: a layer `model` lacks or whose shapes differ.

    Examples:
        >>> import numpy as np, seqkeras
        >>> pretrained = seqkeras.models.transformer_seq2seq(
        ...     20, 20, max_length=8, num_layers=1, num_heads=2, hidden_dim=16)
        >>> model = seqkeras.models.transformer_seq2seq(
        ...     20, 30, max_length=8, num_layers=1, num_heads=2, hidden_dim=16)
        >>> seqkeras.models.load_encoder(model, pretrained)
        ['source_embedding', 'encoder_block_0']
    """
    for arg, value in (("model", model), ("source", source)):
        if not isinstance(value, TransformerSeq2Seq):
            raise TypeError(
                f"`load_encoder` expects `{arg}` to be a `transformer_seq2seq` model. "
                f"Received: {type(value).__name__}"
            )
    layers = [
        layer for layer in source.layers if layer.name.startswith(ENCODER_LAYERS) and layer.weights
    ]
    hint = "give both models the same encoder arguments and source vocabulary"
    return copy_layers("load_encoder", model, layers, source.name, hint)
