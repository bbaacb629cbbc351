"""Inference over many sequences of different lengths, and the attention
weights a trained model puts on its input (what a heatmap shows)."""

import numpy as np

from seqkeras.data.checks import check_token_ids
from seqkeras.data.tokens import BOS, EOS, PAD
from seqkeras.layers import validation


def _check_rows(where, arg, rows):
    """`rows` must be sequences (a list, tuple or array of them), not one string."""
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__len__"):
        raise TypeError(
            f"`{where}` expects `{arg}` to be a list of sequences. Received: {type(rows).__name__}"
        )


def predict_by_length(predict, rows, batch_size=128, max_width=None, fill=PAD, dtype="int32"):
    """`predict` over every row, in batches of rows of similar length
    (`seqkeras.data.length_batches`: sorted by length, padded to a
    multiple of 8, so few compiled shapes and little padding), the results
    back in the rows' order.

    Args:
        predict: a function of one padded batch (len(batch), width) that
            returns an array (or a dict of arrays) with the batch first,
            e.g. `model.predict_on_batch`, or a TFLite runner.
        rows: sequences (lists of ids; strings with `fill=""` and
            `dtype=object`).
        batch_size: rows per call.
        max_width: the widest padding (rows must not be longer), or None.
        fill, dtype: the padding value and the batch's dtype.

    Returns:
        A list with `predict`'s output for each row (a NumPy array, or a
        dict of them), padded positions included.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.models import predict_by_length
        >>> out = predict_by_length(lambda x: (x > 0).sum(-1), [[5, 6, 7], [1], [2, 3]])
        >>> [int(n) for n in out]
        [3, 1, 2]
    """
    from seqkeras.data import length_batches

    where = "predict_by_length"
    if not callable(predict):
        raise TypeError(
            f"`{where}` expects a callable `predict`. Received: {type(predict).__name__}"
        )
    _check_rows(where, "rows", rows)
    validation.positive_int(where, "batch_size", batch_size)
    if max_width is not None:
        validation.positive_int(where, "max_width", max_width)
        longest = max((len(r) for r in rows), default=0)
        if longest > max_width:
            raise ValueError(
                f"`{where}` expects rows no longer than `max_width`={max_width}. "
                f"Received: a row of length {longest}"
            )
    out = [None] * len(rows)
    for chunk, x in length_batches(rows, batch_size, max_width, fill, dtype):
        result = predict(x)
        if isinstance(result, dict):
            result = {k: np.asarray(v) for k, v in result.items()}
            for j, i in enumerate(chunk):
                out[i] = {k: v[j] for k, v in result.items()}
            continue
        result = np.asarray(result)
        if result.shape[:1] != (len(chunk),):
            raise ValueError(
                f"`predict_by_length`: `predict` returned shape {result.shape} for a batch of "
                f"{len(chunk)} rows; its first axis must be the batch"
            )
        for j, i in enumerate(chunk):
            out[i] = result[j]
    return out


def predict_tags(model, features, tag_vocabulary, sentences, batch_size=128):
    """The tag strings a CRF tagger predicts for each sentence (Viterbi).

    Args:
        model: a `tagger(..., crf=True)` (its `tags` output: ids).
        features: the word features (e.g. `seqkeras.data.WordFeatures`):
            words (batch, time), "" as padding -> the model's inputs.
        tag_vocabulary: tag strings by id.
        sentences: lists of words.
        batch_size: sentences per call.

    Returns:
        One list of tags per sentence, as long as the sentence.
    """
    where = "predict_tags"
    _check_rows(where, "sentences", sentences)
    validation.positive_int(where, "batch_size", batch_size)
    if not callable(features):
        raise TypeError(
            f"`{where}` expects `features` to be a callable of the padded words (e.g. "
            f"`seqkeras.data.WordFeatures`). Received: {type(features).__name__}"
        )
    try:
        outputs = model.output
    except (AttributeError, ValueError):  # not a Keras model, or an unbuilt one
        outputs = None
    if not isinstance(outputs, dict) or "tags" not in outputs:
        raise ValueError(
            f"`{where}` expects `model` to be a CRF tagger (`tagger(..., crf=True)`, with a "
            f"`tags` output). Received: {getattr(model, 'name', type(model).__name__)!r}"
        )
    if not sentences:
        return []

    def predict(words):
        inputs = {k: np.asarray(v) for k, v in features(words).items()}
        return np.asarray(model.predict_on_batch(inputs)["tags"])

    ids = predict_by_length(predict, sentences, batch_size, fill="", dtype=object)
    return [[tag_vocabulary[k] for k in row[: len(s)]] for row, s in zip(ids, sentences)]


def attention_weights(model, source_ids, max_length, eos_id=EOS):
    """What a recurrent seq2seq model with attention looks at while it
    translates one source greedily: its output ids and the decoder's
    attention weights over the source at each output step.

    Args:
        model: a `recurrent_seq2seq(..., attention=...)`.
        source_ids: one source, ids (source_time,).
        max_length: the longest output, BOS included.
        eos_id: the end id (the output stops after it).

    Returns:
        `(output_ids, weights)`: the greedy output (BOS dropped, EOS kept
        when reached) and the weights (len(output_ids), source_time).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.recurrent_seq2seq(12, 12, units=8, attention="additive")
        >>> out, weights = seqkeras.models.attention_weights(model, np.array([4, 5, 6]), 5)
        >>> weights.shape == (len(out), 3), bool(np.allclose(weights.sum(-1), 1.0, atol=1e-5))
        (True, True)
    """
    from seqkeras.models.encoder_decoder import attention_model
    from seqkeras.models.generation import generate

    where = "attention_weights"
    if not _has_attention(model):
        raise ValueError(
            f"`{where}` (its `attention_model`) expects `model` to be a seq2seq model built "
            "with attention "
            "(`recurrent_seq2seq(..., attention=...)`). Received: "
            f"{getattr(model, 'name', type(model).__name__)!r} ({type(model).__name__})"
        )
    validation.positive_int(where, "max_length", max_length)
    source = _one_sequence(where, "source_ids", source_ids, model)
    probe = attention_model(model)
    source = source[None].astype("int32")
    out = np.asarray(generate(model, source, max_length=max_length, eos_id=eos_id))[0, 1:]
    if (out == eos_id).any():
        out = out[: int(np.argmax(out == eos_id)) + 1]
    decoder_in = np.concatenate([[BOS], out[:-1]])[None].astype("int32")
    _, weights = probe.predict({"source_ids": source, "target_ids": decoder_in}, verbose=0)
    return out, np.asarray(weights)[0]


def _has_attention(model):
    from seqkeras import layers as sk
    from seqkeras.models.base import SequenceModel

    return isinstance(model, SequenceModel) and isinstance(
        model.part("decoder"), sk.AttentionDecoder
    )


def pooling_weights(model, token_ids):
    """The weights a classifier's attention pooling gives each step of one
    input (softmax of its scores), and the class probabilities.

    Args:
        model: a `classifier(..., pooling="attention")`.
        token_ids: one input, ids (time,).

    Returns:
        `(weights, probabilities)`: (time,) and (num_classes,).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.classifier(20, 2, units=4, pooling="attention")
        >>> weights, p = seqkeras.models.pooling_weights(model, np.array([3, 4, 5]))
        >>> weights.shape, round(float(weights.sum()), 4), p.shape
        ((3,), 1.0, (2,))
    """
    import keras

    pooling = model.part("pooling") if hasattr(model, "part") else None
    if pooling is None or not hasattr(pooling, "scores"):
        raise ValueError(
            "`pooling_weights` expects `model` to be a classifier built with "
            f"pooling='attention'. Received: {getattr(model, 'name', type(model).__name__)!r}"
        )
    ids = _one_sequence("pooling_weights", "token_ids", token_ids, model)
    ids = ids[None].astype("int32")
    sequence = pooling.input  # (sequence, mask) when called with a mask
    sequence = sequence[0] if isinstance(sequence, (list, tuple)) else sequence
    sequence = keras.Model(model.inputs, sequence)(ids)
    weights = np.asarray(keras.ops.softmax(pooling.scores(sequence)))[0]
    probabilities = np.asarray(keras.ops.softmax(model.predict(ids, verbose=0)))[0]
    return weights, probabilities


def class_probabilities(model, tokenizer, texts, max_length, batch_size=256):
    """A text classifier's class probabilities for raw texts: tokenized,
    cut to `max_length` tokens, run in batches of similar length
    (`predict_by_length`), softmax in float32.

    Args:
        model: a classifier of `token_ids` -> logits (batch, classes); or
            a function of an int32 id batch returning them (e.g. a
            TFLite runner).
        tokenizer: its tokenizer (`encode(texts)` -> ragged ids).
        texts: strings.
        max_length: the longest input in tokens.
        batch_size: texts per call.

    Returns:
        float32 (len(texts), classes).

    Examples:
        >>> import seqkeras
        >>> tok = seqkeras.data.WordTokenizer.train(["a good film", "a bad film"])
        >>> model = seqkeras.models.classifier(tok.vocabulary_size, 2, units=4)
        >>> p = seqkeras.models.class_probabilities(model, tok, ["good", "bad film"], 16)
        >>> p.shape, bool(abs(p.sum() - 2.0) < 1e-5)
        ((2, 2), True)
    """
    import keras

    where = "class_probabilities"
    if isinstance(texts, str):
        raise TypeError(f"`{where}` expects `texts` to be a list of strings, not a str")
    validation.positive_int(where, "max_length", max_length)
    validation.positive_int(where, "batch_size", batch_size)
    predict = model.predict_on_batch if hasattr(model, "predict_on_batch") else model
    if not callable(predict):
        raise TypeError(
            f"`{where}` expects `model` to be a classifier or a function of an id batch. "
            f"Received: {type(model).__name__}"
        )
    rows = [r[:max_length] for r in tokenizer.encode(list(texts)).to_list()]
    if not rows:
        return np.zeros((0, 0), "float32")
    logits = predict_by_length(lambda x: predict(x.astype("int32")), rows, batch_size, max_length)
    return np.asarray(keras.ops.softmax(np.asarray(logits, "float32")), "float32")


def _one_sequence(where, argument, ids, model):
    """`ids` as one sequence (time,) of integer ids inside the model's
    vocabulary of `argument` (a ValueError naming `where` otherwise)."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(
            f"`{where}` expects `{argument}` to be one sequence of integer ids (time,). "
            f"Received: shape {ids.shape}, dtype {ids.dtype}"
        )
    if argument in model.vocabulary_sizes:
        check_token_ids(where, argument, ids, model.vocabulary_sizes[argument])
    return ids
