"""ELMo (Peters et al. 2018): `bi_language_model`, forward and backward LSTM language
models over one token embedding and one softmax, and `elmo_features`,
its layers for a downstream model (mixed there by
`seqkeras.layers.ScalarMix`).

The biLM follows bilm-tf's shape at a small scale: each LSTM layer is
projected back to the embedding width (an LSTM with a projection), with a
residual connection from the layer below, so every layer has the
embedding's width and layer k of the features is `[forward_k;
backward_k]` (layer 0 is the embedding twice). The logits of both
directions are tied to the token embedding, and their losses are summed
(`compile_model` on the two outputs).
"""

import keras

from seqkeras import layers as sk
from seqkeras.models import backbones as bb
from seqkeras.models.base import SequenceModel
from seqkeras.models.base import copy_layers


@keras.saving.register_keras_serializable(package="seqkeras")
class BiLanguageModel(SequenceModel):
    """`bi_language_model`'s class: `token_ids` -> `{"forward": logits, "backward":
    logits}` (batch, time, vocab), the forward direction predicting the
    next token and the backward one the previous token."""

    task = "tokens"


def _directions(token_ids, parts, dropout):
    """Runs the biLM's layers (in `parts`) on `token_ids`: the embedded
    tokens and each direction's layer outputs (in the input's order)."""
    x = parts["embedding"](token_ids)
    mask = keras.ops.not_equal(token_ids, 0)  # explicit: `+` drops Keras masks
    outputs = {}
    for direction in ("forward", "backward"):
        h = parts["reverse"](x, mask=mask) if direction == "backward" else x
        layers = []
        for recurrent, projection in zip(parts[direction], parts[direction + "_projection"]):
            below = h
            if dropout:
                below = keras.layers.Dropout(dropout)(below)
            h = projection(recurrent(below, mask=mask)) + h  # residual (bilm-tf)
            layers.append(h)
        if direction == "backward":
            layers = [parts["reverse"](h, mask=mask) for h in layers]
        outputs[direction] = layers
    return x, outputs


def bi_language_model(vocab_size, embedding_dim=256, units=512, num_layers=2, dropout=0.1):
    """ELMo's bidirectional language model (Peters et al. 2018, eq. 1 of
    the biLM section): a forward LSTM LM and a backward one over a shared
    token embedding, with a shared (tied) softmax.

    Args:
        vocab_size: token ids in [0, vocab_size); 0 is padding.
        embedding_dim: the token embedding width, and every layer's
            (each LSTM's output is projected to it).
        units: LSTM units per layer and direction.
        num_layers: LSTM layers per direction.
        dropout: on each layer's input.

    Returns:
        A `BiLanguageModel`: `token_ids` (batch, time; right-padded) ->
        `{"forward", "backward"}` logits (batch, time, vocab_size),
        float32. Train on `seqkeras.data.pretraining.bilm_dataset`;
        `compile_model(model)` sums the two token losses.

    Examples:
        >>> import numpy as np, seqkeras
        >>> lm = seqkeras.models.bi_language_model(30, embedding_dim=8, units=8, num_layers=1)
        >>> out = lm(np.array([[1, 5, 6, 2, 0]]))
        >>> tuple(out["forward"].shape), tuple(out["backward"].shape)
        ((1, 5, 30), (1, 5, 30))
    """
    name = "bi_language_model"
    vocab_size = bb.check(name, "vocab_size", vocab_size, "int")
    embedding_dim = bb.check(name, "embedding_dim", embedding_dim, "int")
    units = bb.check(name, "units", units, "int")
    num_layers = bb.check(name, "num_layers", num_layers, "int")
    dropout = bb.check(name, "dropout", dropout, "rate")
    parts = {
        "embedding": keras.layers.ReversibleEmbedding(
            vocab_size,
            embedding_dim,
            tie_weights=True,
            mask_zero=True,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.05),
            name="bilm_embedding",
        ),
        "reverse": sk.ReverseSequence(name="bilm_reverse"),
    }
    for direction in ("forward", "backward"):
        parts[direction] = [
            sk.Recurrent(
                bb.make_cell("lstm", units),
                return_sequences=True,
                name=f"bilm_{direction}_lstm_{i}",
            )
            for i in range(num_layers)
        ]
        parts[direction + "_projection"] = [
            keras.layers.Dense(embedding_dim, name=f"bilm_{direction}_projection_{i}")
            for i in range(num_layers)
        ]
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    _, layers = _directions(token_ids, parts, dropout)
    logits = {}
    for direction in ("forward", "backward"):
        h = layers[direction][-1]
        if dropout:
            h = keras.layers.Dropout(dropout)(h)
        logits[direction] = keras.layers.Activation("linear", dtype="float32", name=direction)(
            parts["embedding"](h, reverse=True)
        )
    return BiLanguageModel(
        token_ids,
        logits,
        name=name,
        vocabulary_sizes={"token_ids": vocab_size},
        parts=parts,
    )


def elmo_features(model, trainable=False):
    """The layers of a trained `bi_language_model` as features for a downstream model
    (ELMo): `token_ids` -> a list of `num_layers + 1` tensors (batch, time,
    2 * embedding_dim): layer 0 is `[embedding; embedding]`, layer k is
    `[forward_k; backward_k]`, each masked where token_ids is 0. Mix them
    with `seqkeras.layers.ScalarMix(num_layers + 1)`.

    Args:
        model: a `bi_language_model` (its layers are shared, not copied).
        trainable: False (default) freezes the biLM, as ELMo does.

    Examples:
        >>> import numpy as np, seqkeras
        >>> lm = seqkeras.models.bi_language_model(30, embedding_dim=8, units=8, num_layers=2)
        >>> features = seqkeras.models.elmo_features(lm)
        >>> [tuple(f.shape) for f in features(np.array([[1, 5, 2, 0]]))]
        [(1, 4, 16), (1, 4, 16), (1, 4, 16)]
    """
    if not isinstance(model, BiLanguageModel):
        raise TypeError(
            "`elmo_features` expects `model` to be a `bi_language_model` model (a "
            f"`BiLanguageModel`). Received: {type(model).__name__}"
        )
    trainable = bb.check("elmo_features", "trainable", trainable, "bool")
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    features_model = keras.Model(token_ids, _features(token_ids, model), name="elmo_features")
    features_model.trainable = trainable
    return features_model


_ROLES = (
    "embedding",
    "reverse",
    "forward",
    "backward",
    "forward_projection",
    "backward_projection",
)


def _features(token_ids, model):
    """ELMo's layers of `model` (a `bi_language_model`) on `token_ids`."""
    x, layers = _directions(token_ids, {role: model.part(role) for role in _ROLES}, dropout=0.0)
    concat = keras.layers.Concatenate
    features = [concat(name="elmo_layer_0")([x, x])]
    for k, (f, b) in enumerate(zip(layers["forward"], layers["backward"])):
        features.append(concat(name=f"elmo_layer_{k + 1}")([f, b]))
    return features


def _frozen_bilm(builder, vocab_size, bilm_arguments):
    if not isinstance(bilm_arguments, dict):
        raise TypeError(
            f"`{builder}` expects `bilm_arguments` (or `elmo_arguments`): the "
            "`bi_language_model` keyword arguments as a dict. "
            f"Received: {type(bilm_arguments).__name__}"
        )
    lm = bi_language_model(vocab_size, **bilm_arguments)
    for layer in lm.layers:
        layer.trainable = False
    return lm


def elmo_word_vectors(inputs, sizes, vocab_size, bilm_arguments, layer_norm=False):
    """For `tagger(elmo_...)`: adds the inputs `elmo_ids` and `word_starts`
    to `inputs` (and `sizes`) and returns ELMo at each word's first
    subword, (batch, words, 2 * embedding_dim), masked at padding words."""
    inputs["elmo_ids"] = keras.Input((None,), dtype="int32", name="elmo_ids")
    inputs["word_starts"] = keras.Input((None,), dtype="int32", name="word_starts")
    sizes["elmo_ids"] = vocab_size
    lm = _frozen_bilm("tagger", vocab_size, bilm_arguments)
    features = _features(inputs["elmo_ids"], lm)
    mix = sk.ScalarMix(len(features), layer_norm=layer_norm, name="elmo_mix")(features)
    return sk.GatherSteps(name="elmo_words")([mix, inputs["word_starts"]])


def load_bilm(model, source):
    """Copies the weights of `source` (a trained `bi_language_model`) into the biLM
    layers of `model` (an `elmo_classifier`, or another `bi_language_model`), by layer
    name.

    Args:
        model: an `elmo_classifier`, a tagger with ELMo, or a
            `bi_language_model`.
        source: the trained `bi_language_model`.

    Returns:
        `model`.

    Raises:
        TypeError: a `model` or `source` of the wrong kind.
        ValueError: a layer `model` lacks or whose shapes differ.
    """
    for arg, value in (("model", model), ("source", source)):
        if not isinstance(value, keras.Model):
            raise TypeError(
                f"`load_bilm` expects `{arg}` to be a keras.Model. Received: {type(value).__name__}"
            )
    if not isinstance(source, BiLanguageModel):
        raise TypeError(
            "`load_bilm` expects `source` to be a trained `bi_language_model` (a "
            f"`BiLanguageModel`). Received: {type(source).__name__} {source.name!r}"
        )
    copy_layers(
        "load_bilm",
        model,
        [layer for layer in source.layers if layer.weights],
        "the biLM",
        "was it built with the biLM's `bilm_arguments`?",
    )
    return model
