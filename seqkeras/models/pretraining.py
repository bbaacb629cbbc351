"""Classifiers over pretrained models: `elmo_classifier` (ELMo's biLM,
frozen, beside a recurrent classifier) and `classify_by_generation`
(T5's text-to-text classification with a seq2seq model)."""

import keras

from seqkeras import layers as sk
from seqkeras.models.base import SequenceModel
from seqkeras.models.classification import classifier_head
from seqkeras.models.elmo import _ROLES, _features, _frozen_bilm


@keras.saving.register_keras_serializable(package="seqkeras")
class ElmoClassifier(SequenceModel):
    """`elmo_classifier`'s class: `token_ids` -> class `logits`."""

    task = "classes"


def elmo_classifier(
    vocab_size,
    num_classes,
    bilm_arguments,
    backbone="lstm",
    pooling="attention",
    embedding_dim=300,
    units=256,
    num_layers=1,
    bidirectional=True,
    dropout=0.5,
    word_dropout=0.0,
    layer_norm=False,
):
    """A classifier with ELMo (Peters et al. 2018, section 3.3): the frozen
    biLM's layers mixed by a `ScalarMix` and concatenated with the
    classifier's own token embedding, `[x_k; ELMo_k]`, then the recurrent
    classifier of `seqkeras.models.classifier` (the same arguments).

    Args:
        vocab_size: the biLM's vocabulary (the classifier reads the same
            token ids).
        num_classes: positive int.
        bilm_arguments: the `bilm` keyword arguments (without
            `vocab_size`) of the pretrained biLM; copy its weights in with
            `load_bilm`.
        backbone: `"rnn"`, `"gru"`, `"lstm"`, `"mingru"`, `"minlstm"` or
            `"transformer"`, over the concatenated features.
        pooling: `"last"`, `"mean"`, `"max"` or `"attention"` (see
            `seqkeras.layers.SequencePooling`).
        embedding_dim: the classifier's own token embedding width.
        units: recurrent units.
        num_layers: stacked layers or blocks.
        bidirectional: recurrent backbones: run both directions, concat.
        dropout: dropout in the recurrent cells / Transformer blocks.
        word_dropout: during training, each token becomes UNK with this
            probability (`seqkeras.layers.TokenDropout`).
        layer_norm: normalise each biLM layer before mixing
            (`seqkeras.layers.ScalarMix`'s `layer_norm`).

    Returns:
        An `ElmoClassifier`: `token_ids` (batch, time) -> `logits`
        (batch, num_classes). The biLM's layers are frozen; the mix
        weights, gamma and the classifier train.

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.elmo_classifier(
        ...     30, 2, {"embedding_dim": 8, "units": 8, "num_layers": 1},
        ...     embedding_dim=8, units=8)
        >>> tuple(model(np.array([[1, 5, 2, 0]])).shape)
        (1, 2)
    """
    name = "elmo_classifier"
    lm = _frozen_bilm(name, vocab_size, bilm_arguments)
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    features = _features(token_ids, lm)
    mix = sk.ScalarMix(len(features), layer_norm=layer_norm, name="elmo_mix")(features)
    logits, pool = classifier_head(
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
        4,
        None,
        512,
        word_dropout,
        features=[mix],
    )
    return ElmoClassifier(
        token_ids,
        logits,
        name=name,
        vocabulary_sizes={"token_ids": vocab_size},
        parts={"pooling": pool, **{role: lm.part(role) for role in _ROLES}},
    )


def classify_by_generation(
    model, tokenizer, texts, label_words, prefix="", batch_size=64, max_length=128
):
    """T5-style classification: each text (with `prefix`) is decoded
    greedily by `model` (a seq2seq model trained on
    `seqkeras.data.pretraining.text_to_text_dataset`) and the output
    compared with each label word's pieces.

    Args:
        model: a seq2seq model of `seqkeras.models`.
        tokenizer: the pretraining vocabulary's tokenizer (both sides).
        texts: the strings to classify.
        label_words: one word per class, in class order.
        prefix: a task prefix put before each text (T5's "sst2 sentence:").
        batch_size: texts per `generate` call.
        max_length: output tokens in all.

    Returns:
        int array (len(texts),): the index of the label word the model
        wrote, or -1 where it wrote anything else.

    Examples:
        >>> import seqkeras
        >>> from seqkeras.data import pretraining
        >>> tok = pretraining.pretraining_vocabulary(["good bad movie"], 40, sentinels=1)
        >>> model = seqkeras.models.transformer_seq2seq(
        ...     tok.vocabulary_size, tok.vocabulary_size, 16, num_layers=1, hidden_dim=8,
        ...     num_heads=2)
        >>> out = seqkeras.models.classify_by_generation(
        ...     model, tok, ["good movie"], ["good", "bad"])
        >>> out.shape, int(out[0]) in (-1, 0, 1)
        ((1,), True)
    """
    import numpy as np

    from seqkeras.data import length_batches
    from seqkeras.models.generation import generate

    from seqkeras.layers import validation

    where = "classify_by_generation"
    for arg, value in (("texts", texts), ("label_words", label_words)):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise TypeError(
                f"`{where}` expects `{arg}` to be a list of strings. Received: "
                f"{type(value).__name__}"
            )
    validation.positive_int(where, "batch_size", batch_size)
    validation.positive_int(where, "max_length", max_length)
    special = tokenizer.special_ids
    cls, sep = special["cls"], special["sep"]
    words = [tuple(r) for r in tokenizer.encode(list(label_words), special_tokens=False).to_list()]
    if len(set(words)) != len(words) or not all(words):
        raise ValueError(
            f"`{where}` expects `label_words` with distinct, non-empty pieces. "
            f"Received: {list(label_words)} -> {words}"
        )
    width = max(len(w) for w in words) + 2  # BOS, the word, EOS
    pieces = tokenizer.encode([prefix + t for t in texts], special_tokens=False)
    rows = [r[: max_length - 1] + [sep] for r in pieces.to_list()]
    out = np.full(len(rows), -1, "int64")
    for chunk, x in length_batches(rows, batch_size, max_length):
        y = np.asarray(generate(model, x, max_length=width, bos_id=cls, eos_id=sep))[:, 1:]
        for i, row in zip(chunk, y):
            row = list(row)
            written = tuple(row[: row.index(sep)] if sep in row else row)
            out[i] = words.index(written) if written in words else -1
    return out
