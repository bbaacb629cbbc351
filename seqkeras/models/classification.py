"""`classifier` (seq2vec) and `tagger` (one label per token)."""

import keras
from keras import ops

from seqkeras import layers as sk
from seqkeras.data.tokens import PAD
from seqkeras.layers.pooling import MODES as POOLINGS
from seqkeras.models import backbones as bb
from seqkeras.models.base import SequenceModel
from seqkeras.models.elmo import elmo_word_vectors
from seqkeras.models.steps import ChainStreaming


@keras.saving.register_keras_serializable(package="seqkeras")
class Classifier(ChainStreaming, SequenceModel):
    """`classifier`'s class: `token_ids` -> class `logits`. With a
    one-direction recurrent backbone it streams: each step's output is the
    logits of the sequence so far. Part `pooling` (the `SequencePooling`
    layer; None when a recurrent backbone returns its last state)."""

    task = "classes"
    stream_per_step = False


@keras.saving.register_keras_serializable(package="seqkeras")
class Tagger(ChainStreaming, SequenceModel):
    """`tagger`'s class: `token_ids` -> one tag's `logits` per token. With
    a one-direction recurrent backbone it streams a tag per token."""

    task = "tokens"


@keras.saving.register_keras_serializable(package="seqkeras")
class CRFTagger(SequenceModel):
    """`tagger(..., crf=True)`'s class: `token_ids` -> `{"logits": the
    emission scores (batch, time, num_tags), "tags": the Viterbi tags
    (batch, time)}`. Part `crf` (`seqkeras.layers.CRF`). Its loss is the
    CRF's negative log-likelihood (`compute_loss`; labels are tag ids with
    0 at padding, as for `Tagger`), so `compile_model` compiles it without
    a Keras loss or metrics. During `fit` the `tags` output is not
    computed (zeros): training needs only the emissions. Viterbi needs the
    whole sequence: it does not stream."""

    task = "tokens"
    own_loss = True
    #: The input whose nonzero entries mark the words (default: the first).
    mask_input = None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        ids = x[self.mask_input or self.inputs[0].name] if isinstance(x, dict) else x
        emissions = y_pred["logits"] if isinstance(y_pred, dict) else y_pred[0]
        mask = ops.not_equal(ops.cast(ids, "int32"), PAD)
        loss = self.part("crf").loss(emissions, y, mask)
        if self.losses:
            loss = loss + ops.sum(ops.stack(self.losses))
        return loss


#: `"bag"`: no sequence model, a feed-forward network over the embeddings
#: (the seed notes' bag-of-embeddings baseline).
BACKBONES = bb.BACKBONES + ("bag",)


def _encode(
    builder,
    token_ids,
    vocab_size,
    backbone,
    embedding_dim,
    units,
    num_layers,
    bidirectional,
    dropout,
    num_heads,
    intermediate_dim,
    max_length,
    return_sequences,
    word_dropout=0.0,
    features=(),
):
    vocab_size = bb.check(builder, "vocab_size", vocab_size, "int")
    backbone = bb.check(builder, "backbone", backbone, "choice", BACKBONES)
    embedding_dim = bb.check(builder, "embedding_dim", embedding_dim, "int")
    num_layers = bb.check(builder, "num_layers", num_layers, "int")
    dropout = bb.check(builder, "dropout", dropout, "rate")
    word_dropout = bb.check(builder, "word_dropout", word_dropout, "rate")
    # the transformer backbone's arguments, checked whatever the backbone
    # (a mistake should not wait for the day the backbone changes)
    num_heads = bb.check(builder, "num_heads", num_heads, "int")
    intermediate_dim = bb.check(builder, "intermediate_dim", intermediate_dim, "optional int")
    max_length = bb.check(builder, "max_length", max_length, "int")
    ids = token_ids
    if word_dropout:
        ids = sk.TokenDropout(word_dropout, name="word_dropout")(ids)
    x = keras.layers.Embedding(vocab_size, embedding_dim, mask_zero=True, name="embedding")(ids)
    if features:  # per-word features beside the embedding; Keras'
        # Concatenate ORs the masks, so each feature masks padding words
        x = keras.layers.Concatenate(name="word_features")([x, *features])
        if dropout:
            x = keras.layers.Dropout(dropout, name="features_dropout")(x)
    if backbone == "bag":
        return x, True
    if backbone == "transformer":
        num_heads = bb.check(builder, "num_heads", num_heads, "int")
        if embedding_dim % num_heads:
            raise ValueError(
                f"`{builder}` needs embedding_dim divisible by num_heads. "
                f"Received: embedding_dim={embedding_dim}, "
                f"num_heads={num_heads}"
            )
        x = bb.positions(x, "learned", max_length, "positions")
        x = bb.transformer_stack(
            x, num_layers, num_heads, intermediate_dim or 4 * embedding_dim, dropout
        )
        return x, True
    units = bb.check(builder, "units", units, "int")
    x = bb.recurrent_stack(
        x, backbone, units, num_layers, bidirectional, dropout, return_sequences=return_sequences
    )
    return x, return_sequences


def classifier(
    vocab_size,
    num_classes,
    backbone="lstm",
    pooling="last",
    embedding_dim=64,
    units=64,
    num_layers=1,
    bidirectional=False,
    dropout=0.0,
    num_heads=4,
    intermediate_dim=None,
    max_length=512,
    word_dropout=0.0,
):
    """Sequence classifier (seq2vec): token ids -> class logits.

    Args:
        vocab_size: token ids are in [0, vocab_size); 0 is padding.
        num_classes: number of classes.
        backbone: `"rnn"`, `"gru"`, `"lstm"`, `"mingru"`, `"minlstm"`,
            `"transformer"`, or
            `"bag"`: the pooled embeddings (use `pooling="mean"` for the
            average) through a `units`-wide ReLU layer, no sequence model.
        pooling: `"last"` (a recurrent backbone's final state, which skips
            padding; the last unpadded step of a Transformer), `"mean"`,
            `"max"` or `"attention"` (see `seqkeras.layers.SequencePooling`).
        embedding_dim: embedding (and Transformer model) width.
        units: recurrent units.
        num_layers: stacked layers or blocks.
        bidirectional: recurrent backbones: run both directions, concat.
        dropout: dropout in the recurrent cells / Transformer blocks.
        num_heads, intermediate_dim, max_length: Transformer backbone.
        word_dropout: during training, each token becomes UNK with this
            probability (`seqkeras.layers.TokenDropout`).

    Returns:
        A `Classifier` (a functional `keras.Model`): input `token_ids`
        (batch, time) int, output
        `logits` (batch, num_classes).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.classifier(100, 3, backbone="gru")
        >>> tuple(model(np.array([[5, 6, 0]])).shape)
        (1, 3)
    """
    name = "classifier"
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    logits, pooling_layer = classifier_head(
        name,
        token_ids,
        vocab_size,
        num_classes,
        backbone,
        pooling,
        embedding_dim,
        units,
        num_layers,
        bidirectional,
        dropout,
        num_heads,
        intermediate_dim,
        max_length,
        word_dropout,
    )
    return Classifier(
        token_ids,
        logits,
        name=name,
        vocabulary_sizes={"token_ids": vocab_size},
        parts={"pooling": pooling_layer},
    )


def classifier_head(
    name,
    token_ids,
    vocab_size,
    num_classes,
    backbone,
    pooling,
    embedding_dim,
    units,
    num_layers,
    bidirectional,
    dropout,
    num_heads,
    intermediate_dim,
    max_length,
    word_dropout,
    features=(),
):
    """`classifier`'s network on `token_ids` (with `features` beside the
    embedding, as `_encode`): `(logits, pooling layer or None)`."""
    num_classes = bb.check(name, "num_classes", num_classes, "int")
    pooling = bb.check(name, "pooling", pooling, "choice", POOLINGS)
    recurrent_last = backbone in bb.RECURRENT and pooling == "last"
    x, is_sequence = _encode(
        name,
        token_ids,
        vocab_size,
        backbone,
        embedding_dim,
        units,
        num_layers,
        bidirectional,
        dropout,
        num_heads,
        intermediate_dim,
        max_length,
        return_sequences=not recurrent_last,
        word_dropout=word_dropout,
        features=features,
    )
    pooling_layer = None
    if is_sequence:
        pooling_layer = sk.SequencePooling(pooling, name="pooling")
        x = pooling_layer(x)
    if backbone == "bag":
        units = bb.check(name, "units", units, "int")
        x = keras.layers.Dense(units, activation="relu", name="hidden")(x)
    if dropout:
        x = keras.layers.Dropout(dropout)(x)
    return bb.output_logits(x, num_classes), pooling_layer


def word_features(
    inputs, sizes, char_vocab_size, char_embedding_dim, char_filters, casing, where="tagger"
):
    """The per-word feature inputs of a tagger, added to `inputs` and
    `sizes` (dicts by input name): `char_ids` (batch, time, chars) through
    a `CharacterEncoder` when `char_vocab_size` is given, `casing_ids`
    (batch, time) embedded in 8 dimensions when `casing`. Returns their
    encoded tensors, to concatenate beside the word representation.
    Errors name `where` (the builder)."""
    char_vocab_size = bb.check(where, "char_vocab_size", char_vocab_size, "optional int")
    char_embedding_dim = bb.check(where, "char_embedding_dim", char_embedding_dim, "int")
    char_filters = bb.check(where, "char_filters", char_filters, "int")
    features = []
    if char_vocab_size is not None:
        inputs["char_ids"] = keras.Input((None, None), dtype="int32", name="char_ids")
        features.append(
            sk.CharacterEncoder(
                char_vocab_size, char_embedding_dim, char_filters, name="characters"
            )(inputs["char_ids"])
        )
        sizes["char_ids"] = char_vocab_size
    if casing:
        from seqkeras.data.word_features import CASINGS

        inputs["casing_ids"] = keras.Input((None,), dtype="int32", name="casing_ids")
        features.append(
            keras.layers.Embedding(  # id 0: padding words
                len(CASINGS), 8, mask_zero=True, name="casing"
            )(inputs["casing_ids"])
        )
        sizes["casing_ids"] = len(CASINGS)
    return features


def tagger(
    vocab_size,
    num_tags,
    backbone="lstm",
    embedding_dim=64,
    units=64,
    num_layers=1,
    bidirectional=True,
    dropout=0.0,
    num_heads=4,
    intermediate_dim=None,
    max_length=512,
    crf=False,
    word_dropout=0.0,
    char_vocab_size=None,
    char_embedding_dim=30,
    char_filters=50,
    casing=False,
    elmo_vocab_size=None,
    elmo_arguments=None,
):
    """Sequence tagger: one label per token (e.g. named entities).

    Bidirectional by default: a tag may depend on the right context.

    Args:
        vocab_size: token ids are in [0, vocab_size); 0 is padding.
        num_tags: number of tags (labels per token).
        backbone: `"rnn"`, `"gru"`, `"lstm"`, `"mingru"`, `"minlstm"` or
            `"transformer"`.
        embedding_dim: embedding (and Transformer model) width.
        units: recurrent units.
        num_layers: stacked layers or blocks.
        bidirectional: recurrent backbones: run both directions, concat.
        dropout: dropout in the recurrent cells / Transformer blocks (and
            on the concatenated word features, see `casing`).
        num_heads, intermediate_dim, max_length: Transformer backbone.
        crf: put a linear-chain CRF (`seqkeras.layers.CRF`) on the logits:
            trained by its log-likelihood, decoded by Viterbi.
        word_dropout: during training, each token becomes UNK with this
            probability (`seqkeras.layers.TokenDropout`).
        char_vocab_size: add the input `char_ids` (batch, time, chars),
            encoded per word by `seqkeras.layers.CharacterEncoder` and
            concatenated to the word embedding (Ma and Hovy 2016).
        char_embedding_dim, char_filters: the character encoder's
            embedding width and convolution filters.
        casing: add the input `casing_ids` (batch, time), one of
            `seqkeras.data.word_features.CASINGS`, embedded in 8
            dimensions and concatenated too. With either, the
            concatenated features go through `dropout` before the
            backbone (Lample et al. 2016). Make the inputs with
            `seqkeras.data.WordFeatures`.
        elmo_vocab_size, elmo_arguments: add ELMo (Peters et al. 2018):
            the inputs `elmo_ids` (the biLM's subword ids) and
            `word_starts` (each word's first subword), a frozen `bilm`
            of these arguments (copy its weights in with
            `seqkeras.models.load_bilm`), its layers mixed by a
            `ScalarMix` and read at each word's first subword, then
            concatenated to the word features. Make the inputs with
            `seqkeras.data.bert_text.ElmoWordFeatures`.

    Returns:
        A `Tagger` (a functional `keras.Model`): input `token_ids`
        (batch, time), output `logits`
        (batch, time, num_tags) carrying the padding mask. With `crf`, a
        `CRFTagger` with outputs `logits` and `tags` (the Viterbi path,
        int32 (batch, time), 0 at padding).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.tagger(100, 5)
        >>> tuple(model(np.array([[5, 6, 0]])).shape)
        (1, 3, 5)
    """
    name = "tagger"
    num_tags = bb.check(name, "num_tags", num_tags, "int")
    casing = bb.check(name, "casing", casing, "bool")
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    inputs, sizes = {"token_ids": token_ids}, {"token_ids": vocab_size}
    features = word_features(
        inputs, sizes, char_vocab_size, char_embedding_dim, char_filters, casing, name
    )
    if elmo_vocab_size is not None:
        features.append(elmo_word_vectors(inputs, sizes, elmo_vocab_size, elmo_arguments))
    x, _ = _encode(
        name,
        token_ids,
        vocab_size,
        backbone,
        embedding_dim,
        units,
        num_layers,
        bidirectional,
        dropout,
        num_heads,
        intermediate_dim,
        max_length,
        return_sequences=True,
        word_dropout=word_dropout,
        features=features,
    )
    model_inputs = inputs if len(inputs) > 1 else token_ids
    if backbone == "bag":
        units = bb.check(name, "units", units, "int")
        x = keras.layers.Dense(units, activation="relu", name="hidden")(x)
    logits = bb.output_logits(x, num_tags)
    if crf:
        layer = sk.CRF(num_tags, name="crf")
        tags = layer(logits)
        return CRFTagger(
            model_inputs,
            {"logits": logits, "tags": tags},
            name=name,
            vocabulary_sizes=sizes,
            parts={"crf": layer},
        )
    return Tagger(model_inputs, logits, name=name, vocabulary_sizes=sizes)
