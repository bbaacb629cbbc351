"""Pretraining data: a WordPiece vocabulary for pretraining and the four
objectives of the seed notes as `tf.data` pipelines (graph ops, so they
run on the fly each epoch, on any `tf.distribute` worker).

- `pretraining_vocabulary`: a BERT-format WordPiece vocabulary learned
  from local text (keras-hub's `compute_word_piece_vocabulary`), read by
  `seqkeras.data.BertTokenizer` (and Hugging Face's `BertTokenizer`).
  Its first ids are seqkeras' reserved ids, so one vocabulary serves the
  encoders, the language models and `seqkeras.models.generate`:
  `[PAD]` 0 (PAD), `[CLS]` 1 (BOS), `[SEP]` 2 (EOS), `[UNK]` 3, `[MASK]`
  4, then the span-corruption sentinels `[extra_id_0]`, ...
- `masked_lm_dataset` (BERT): 15% of the tokens selected, of those 80%
  become `[MASK]`, 10% a random token, 10% stay (`mask_tokens`).
- `span_corruption` / `span_corruption_dataset` (T5): noise density 0.15,
  mean span length 3, each span replaced by one sentinel.
- `causal_lm_dataset` (GPT) and `bilm_dataset` (ELMo's forward and
  backward language models).

Sentences are batched by length (buckets padded to 16, 32, 64, ...), so a
`fit(jit_compile=True)` compiles a handful of programs.
"""

import tensorflow as tf

from seqkeras.data.bert_text import BertTokenizer
from seqkeras.data.subword import learn_wordpiece

#: The reserved tokens of `pretraining_vocabulary`, in id order (their ids
#: are seqkeras' PAD, BOS, EOS, UNK; then `[MASK]`).
SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")
MASK_ID = 4


def sentinel_token(k):
    """The k-th span-corruption sentinel's token (`[extra_id_k]`)."""
    return f"[extra_id_{k}]"


def pretraining_vocabulary(texts, vocabulary_size, lowercase=True, sentinels=32, max_length=128):
    """Learns a WordPiece vocabulary from `texts` (a list of strings or a
    `tf.data.Dataset` of strings) and returns its `BertTokenizer`.

    Args:
        texts: the corpus.
        vocabulary_size: tokens in all (the reserved ones included).
        lowercase: lowercase and strip accents (an uncased vocabulary).
        sentinels: how many `[extra_id_k]` sentinels to reserve (T5's span
            corruption needs one per span of a sequence).
        max_length: the tokenizer's `max_length`.

    Examples:
        >>> from seqkeras.data import pretraining
        >>> tok = pretraining.pretraining_vocabulary(
        ...     ["the cat sat.", "the dog sat."], 40, sentinels=2)
        >>> tok.vocabulary[:7]
        ['[PAD]', '[CLS]', '[SEP]', '[UNK]', '[MASK]', '[extra_id_0]', '[extra_id_1]']
        >>> tok.encode(["The cat sat."]).to_list()[0][0], tok.encode(["x"]).to_list()[0][-1]
        (1, 2)
    """
    reserved = list(SPECIAL_TOKENS) + [sentinel_token(k) for k in range(sentinels)]
    vocabulary = learn_wordpiece(
        "pretraining_vocabulary",
        texts,
        vocabulary_size,
        reserved,
        lowercase=lowercase,
        strip_accents=lowercase,
        split=True,
    )
    return BertTokenizer(vocabulary, lowercase=lowercase, max_length=max_length)


def _check_number(name, arg, value, ok, expected):
    """`value` as a float when it is a number with `ok(value)` (NaN never
    is); a ValueError naming `name`, `arg` and `expected` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
        raise ValueError(f"`{name}` expects `{arg}` {expected}. Received: {arg}={value!r}")
    return float(value)


def _check_noise(name, noise_density, mean_span_length):
    _check_number(name, "noise_density", noise_density, lambda v: 0 < v < 1, "in (0, 1)")
    _check_number(name, "mean_span_length", mean_span_length, lambda v: v >= 1, ">= 1")


def sentinel_ids(tokenizer):
    """The sentinel ids of a `pretraining_vocabulary` tokenizer, in order."""
    ids, index = [], {t: i for i, t in enumerate(tokenizer.vocabulary)}
    while sentinel_token(len(ids)) in index:
        ids.append(index[sentinel_token(len(ids))])
    if not ids:
        raise ValueError(
            "span corruption needs sentinel tokens ([extra_id_0], ...) in the "
            "vocabulary: learn it with `pretraining_vocabulary(..., sentinels=N)`"
        )
    return ids


# -- batching ---------------------------------------------------------------


def _edges(max_length):
    edges, edge = [], 16
    while edge < max_length:
        edges.append(edge + 1)
        edge *= 2
    return edges + [max_length + 1]


def _batched(data, length, batch_size, max_length, padding):
    """Buckets by `length(element)`, each padded to its bucket's edge."""
    edges = _edges(max_length)
    return data.bucket_by_sequence_length(
        lambda *e: length(*e),
        bucket_boundaries=edges,
        bucket_batch_sizes=[batch_size] * (len(edges) + 1),
        padding_values=padding,
        pad_to_bucket_boundary=True,
    ).prefetch(tf.data.AUTOTUNE)


def _check_tokenizer(tokenizer, name):
    if not isinstance(tokenizer, BertTokenizer):
        raise TypeError(
            f"`{name}` expects a `seqkeras.data.BertTokenizer` (e.g. from "
            f"`pretraining_vocabulary`). Received: {type(tokenizer).__name__}"
        )


def _seq2seq_example(source, target, special):
    """The seq2seq layout of span corruption and text-to-text: source +
    `[SEP]`, decoder input `[CLS]` + target, labels target + `[SEP]`."""
    cls, sep = special["cls"], special["sep"]
    x = {"source_ids": tf.concat([source, [sep]], 0), "target_ids": tf.concat([[cls], target], 0)}
    return x, tf.concat([target, [sep]], 0)


def _seq2seq_batches(data, batch_size, max_length, pad):
    return _batched(
        data,
        lambda x, y: tf.maximum(tf.size(x["source_ids"]), tf.size(y)),
        batch_size,
        max_length,
        ({"source_ids": pad, "target_ids": pad}, pad),
    )


def _sentences(texts, tokenizer, max_length, shuffle, seed, name):
    """Encoded sentences (`[CLS] pieces [SEP]`, cut to `max_length`),
    unbatched, shuffled each epoch."""
    _check_tokenizer(tokenizer, name)
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError(f"`{name}` received no non-empty text")
    data = tf.data.Dataset.from_tensor_slices(texts)
    if shuffle:
        data = data.shuffle(len(texts), seed=seed, reshuffle_each_iteration=True)
    data = data.batch(1024).map(lambda s: tokenizer.encode(s, max_length=max_length))
    return data.unbatch().map(lambda ids: tf.reshape(ids, [-1]))  # ragged rows -> tensors


# -- BERT ---------------------------------------------------------------------


def mask_tokens(
    token_ids,
    mask_id,
    special_ids,
    random_range,
    selections,
    selection_rate=0.15,
    mask_rate=0.8,
    random_rate=0.1,
    seed=None,
):
    """BERT's masking of a dense batch (batch, time) of ids: each token not
    in `special_ids` is selected with probability `selection_rate` (at
    most `selections` per row, the first ones); a selected token becomes
    `mask_id` with probability `mask_rate`, a random id in
    `random_range` (low, high) with `random_rate`, and stays otherwise.
    Returns `(token_ids, positions, labels)`: the masked ids and, per row,
    the selected positions and their original ids (batch, selections),
    0 where unused. Graph ops.

    (keras-hub's `MaskedLMMaskGenerator` selected 18% instead of 15% of
    the tokens of short padded rows in our test, so the selection is
    written out here: one Bernoulli draw per token.)
    """
    name = "mask_tokens"
    _check_number(name, "selection_rate", selection_rate, lambda v: 0 < v < 1, "in (0, 1)")
    for arg, value in (("mask_rate", mask_rate), ("random_rate", random_rate)):
        _check_number(name, arg, value, lambda v: 0 <= v <= 1, "in [0, 1]")
    if mask_rate + random_rate > 1.0:
        raise ValueError(
            "`mask_tokens` expects mask_rate + random_rate <= 1. Received: "
            f"mask_rate={mask_rate}, random_rate={random_rate}"
        )
    ids = tf.convert_to_tensor(token_ids, tf.int32)
    shape = tf.shape(ids)
    seeds = [None] * 3 if seed is None else [seed, seed + 1, seed + 2]
    eligible = tf.reduce_all(ids[..., None] != tf.constant(list(special_ids), tf.int32), -1)
    chosen = eligible & (tf.random.uniform(shape, seed=seeds[0]) < selection_rate)
    chosen &= tf.cumsum(tf.cast(chosen, tf.int32), axis=1) <= selections
    draw = tf.random.uniform(shape, seed=seeds[1])
    low, high = random_range
    random_ids = tf.random.uniform(shape, low, high, tf.int32, seed=seeds[2])
    masked = tf.where(chosen & (draw < mask_rate), mask_id, ids)
    replace = chosen & (draw >= mask_rate) & (draw < mask_rate + random_rate)
    masked = tf.where(replace, random_ids, masked)
    # the chosen positions first, in order: sort by (not chosen, position)
    steps = tf.range(shape[1])
    order = tf.argsort(tf.where(chosen, steps, shape[1] + steps), axis=1, stable=True)
    width = tf.minimum(selections, shape[1])
    order = order[:, :width]
    live = tf.gather(chosen, order, batch_dims=1)
    positions = tf.where(live, order, 0)
    labels = tf.where(live, tf.gather(ids, order, batch_dims=1), 0)
    pad = [[0, 0], [0, selections - width]]
    return masked, tf.pad(positions, pad), tf.pad(labels, pad)


def _selections(selection_rate, width):
    """Selection slots for rows of `width` tokens (a tensor): 1.5 times
    the expected count plus 2, so that a batch of short rows does not run
    the output layer over slots sized for `max_length`."""
    expected = tf.math.ceil(selection_rate * 1.5 * tf.cast(width, tf.float32))
    return tf.cast(expected, tf.int32) + 2


def masked_lm_dataset(
    texts,
    tokenizer,
    batch_size=64,
    max_length=128,
    selection_rate=0.15,
    mask_rate=0.8,
    random_rate=0.1,
    shuffle=True,
    seed=0,
):
    """Masked-LM batches (Devlin et al. 2019), masked anew each epoch
    (`mask_tokens`).

    Each sentence is `[CLS] pieces [SEP]`; every token but the special
    ones (`[PAD]`, `[CLS]`, `[SEP]`, ...) is selected with probability
    `selection_rate`; a selected token becomes `[MASK]` with probability
    `mask_rate`, a random token (an id above the special ones) with
    `random_rate`, and stays otherwise.

    Returns:
        batches of `({"token_ids", "mask_positions"}, mask_ids,
        mask_weights)`: token_ids (batch, time) after masking;
        mask_positions, mask_ids (the original tokens, 0 where unused)
        and mask_weights (1 for a selected position) (batch, selections),
        with `selections = ceil(1.5 * selection_rate * width) + 2` for a
        batch `width` tokens wide (its length bucket's edge); the loss is
        the cross-entropy at the selected positions.
    """
    special = tokenizer.special_ids
    data = _sentences(texts, tokenizer, max_length, shuffle, seed, "masked_lm_dataset")
    specials = sorted(set(special.values()) - {special["unk"]})
    low = max(special.values()) + 1
    options = (special["mask"], specials, (low, tokenizer.vocabulary_size))
    rates = (selection_rate, mask_rate, random_rate)
    data = _batched(data, tf.size, batch_size, max_length, special["pad"])

    def mask(ids):  # selection slots for this batch's width (one per bucket)
        slots = _selections(selection_rate, tf.shape(ids)[1])
        masked, positions, labels = mask_tokens(ids, *options, slots, *rates)
        x = {"token_ids": masked, "mask_positions": positions}
        return x, labels, tf.cast(labels > 0, tf.float32)

    return data.map(mask, num_parallel_calls=tf.data.AUTOTUNE)


# -- T5 -----------------------------------------------------------------------


def _segment_lengths(num_items, num_segments, seed):
    """T5's `_random_segmentation`: `num_items` split into `num_segments`
    non-empty runs at random; their lengths."""
    first = tf.cast(tf.range(num_items - 1) < num_segments - 1, tf.int32)
    first = tf.pad(tf.random.shuffle(first, seed=seed), [[1, 0]])
    segment = tf.cumsum(first)
    return tf.math.unsorted_segment_sum(tf.ones_like(segment), segment, num_segments)


def span_noise_mask(length, noise_density=0.15, mean_span_length=3.0, max_spans=None, seed=None):
    """T5's `random_spans_noise_mask` (Raffel et al. 2020): a bool vector of
    `length` with `round(length * noise_density)` noise positions (at
    least 1, at most `length - 1`) in `round(noise / mean_span_length)`
    spans (at least 1, at most `max_spans`), the spans and the gaps
    between them of random lengths; the sequence starts with a gap.
    Graph ops."""
    _check_noise("span_noise_mask", noise_density, mean_span_length)
    length = tf.convert_to_tensor(length, tf.int32)
    noise = tf.cast(tf.round(tf.cast(length, tf.float32) * noise_density), tf.int32)
    noise = tf.clip_by_value(noise, 1, length - 1)
    spans = tf.cast(tf.round(tf.cast(noise, tf.float32) / mean_span_length), tf.int32)
    spans = tf.maximum(spans, 1)
    if max_spans is not None:
        spans = tf.minimum(spans, max_spans)
    spans = tf.minimum(spans, tf.minimum(noise, length - noise))
    noise_lengths = _segment_lengths(noise, spans, seed)
    gap_lengths = _segment_lengths(length - noise, spans, None if seed is None else seed + 1)
    interleaved = tf.reshape(tf.stack([gap_lengths, noise_lengths], axis=1), [2 * spans])
    starts = tf.cumsum(interleaved)[:-1]
    indicator = tf.math.unsorted_segment_sum(tf.ones_like(starts), starts, length)
    return tf.equal(tf.math.floormod(tf.cumsum(indicator), 2), 1)


def _replace_spans(ids, noise, sentinels):
    """Each run of `noise` positions becomes its sentinel (the k-th run,
    `sentinels[k]`); the other positions are kept."""
    previous = tf.pad(noise[:-1], [[1, 0]])
    first = tf.logical_and(noise, tf.logical_not(previous))
    later = tf.logical_and(noise, previous)
    k = tf.cumsum(tf.cast(first, tf.int32)) - 1
    ids = tf.where(first, tf.gather(sentinels, tf.maximum(k, 0)), ids)
    return tf.boolean_mask(ids, tf.logical_not(later))


def span_corruption(token_ids, sentinel_ids, noise_density=0.15, mean_span_length=3.0, seed=None):
    """T5's span corruption of one sequence (a 1-D int tensor, no
    specials): `(inputs, targets)`, where `inputs` is the sequence with
    each noise span replaced by a sentinel and `targets` is each sentinel
    followed by the span it replaced. Replacing each sentinel of `inputs`
    by its span in `targets` gives the sequence back (`restore_spans`).
    Graph ops.

    Examples:
        >>> import tensorflow as tf
        >>> from seqkeras.data.pretraining import span_corruption, restore_spans
        >>> ids = tf.range(10, 30)
        >>> x, y = span_corruption(ids, [5, 6, 7], seed=1)
        >>> restore_spans(x.numpy(), y.numpy(), [5, 6, 7]) == list(range(10, 30))
        True
    """
    ids = tf.convert_to_tensor(token_ids)
    sentinels = tf.constant(list(sentinel_ids), ids.dtype)
    length = tf.size(ids)
    if len(sentinel_ids) < 1:
        raise ValueError("`span_corruption` needs at least one sentinel id")
    _check_noise("span_corruption", noise_density, mean_span_length)

    def corrupt():
        noise = span_noise_mask(
            length, noise_density, mean_span_length, max_spans=len(sentinel_ids), seed=seed
        )
        return (
            _replace_spans(ids, noise, sentinels),
            _replace_spans(ids, tf.logical_not(noise), sentinels),
        )

    def too_short():  # one token: nothing to corrupt around
        return ids, tf.zeros([0], ids.dtype)

    return tf.cond(length >= 2, corrupt, too_short)


def restore_spans(inputs, targets, sentinel_ids):
    """The sequence that `span_corruption` produced `(inputs, targets)`
    from (lists or arrays of ids): each sentinel of `inputs` replaced by
    the tokens after the same sentinel in `targets`."""
    sentinels = {int(s): k for k, s in enumerate(sentinel_ids)}
    spans, current = {}, None
    for token in [int(t) for t in targets]:
        if token in sentinels:
            current = sentinels[token]
            spans[current] = []
        elif current is not None:
            spans[current].append(token)
    out = []
    for token in [int(t) for t in inputs]:
        out.extend(spans.get(sentinels[token], []) if token in sentinels else [token])
    return out


def span_corruption_dataset(
    texts,
    tokenizer,
    batch_size=64,
    max_length=128,
    noise_density=0.15,
    mean_span_length=3.0,
    shuffle=True,
    seed=0,
):
    """Span-corruption batches for `seqkeras.models.transformer_seq2seq`,
    corrupted anew each epoch: `({"source_ids", "target_ids"}, labels)`,
    the source `inputs + [SEP]`, the decoder input `[CLS] + targets` and
    the labels `targets + [SEP]` (`[CLS]`/`[SEP]` are seqkeras' BOS/EOS
    in a `pretraining_vocabulary`)."""
    sentinels = sentinel_ids(tokenizer)
    special = tokenizer.special_ids
    data = _sentences(texts, tokenizer, max_length, shuffle, seed, "span_corruption_dataset")

    def corrupt(ids):
        x, y = span_corruption(ids[1:-1], sentinels, noise_density, mean_span_length)
        return _seq2seq_example(x, y, special)

    data = data.map(corrupt, num_parallel_calls=tf.data.AUTOTUNE)
    return _seq2seq_batches(data, batch_size, max_length, special["pad"])


# -- GPT and ELMo -----------------------------------------------------------


def causal_lm_dataset(texts, tokenizer, batch_size=64, max_length=128, shuffle=True, seed=0):
    """Next-token batches: `(token_ids, labels)` with token_ids `[CLS]
    pieces` and labels `pieces [SEP]` (padding 0 is skipped by the
    loss)."""
    data = _sentences(texts, tokenizer, max_length, shuffle, seed, "causal_lm_dataset")
    data = data.map(lambda ids: (ids[:-1], ids[1:]))
    pad = tokenizer.special_ids["pad"]
    return _batched(data, lambda x, y: tf.size(x), batch_size, max_length, (pad, pad))


def bilm_dataset(texts, tokenizer, batch_size=64, max_length=128, shuffle=True, seed=0):
    """ELMo's biLM batches: `(token_ids, {"forward": next, "backward":
    previous})`: token_ids `[CLS] pieces [SEP]`; the forward target at t
    is the token at t + 1, the backward one the token at t - 1 (0, skipped
    by the loss, where there is none)."""
    data = _sentences(texts, tokenizer, max_length, shuffle, seed, "bilm_dataset")
    zero = tf.zeros([1], tf.int32)
    data = data.map(
        lambda ids: (
            ids,
            {"forward": tf.concat([ids[1:], zero], 0), "backward": tf.concat([zero, ids[:-1]], 0)},
        )
    )
    pad = tokenizer.special_ids["pad"]
    return _batched(
        data,
        lambda x, y: tf.size(x),
        batch_size,
        max_length,
        (pad, {"forward": pad, "backward": pad}),
    )


# -- T5 fine-tuning ---------------------------------------------------------


def text_to_text_dataset(
    texts, targets, tokenizer, prefix="", batch_size=64, max_length=128, shuffle=True, seed=0
):
    """T5's text-to-text fine-tuning (Raffel et al. 2020): every task as
    strings in and strings out, e.g. `"sst2 sentence: a gorgeous movie"`
    -> `"positive"`. Batches of `({"source_ids", "target_ids"}, labels)`
    laid out as `span_corruption_dataset`'s: the source `pieces(prefix +
    text) + [SEP]`, the decoder input `[CLS] + pieces(target)`, the labels
    `pieces(target) + [SEP]`."""
    if len(texts) != len(targets):
        raise ValueError(
            "`text_to_text_dataset` needs aligned texts and targets. "
            f"Received {len(texts)} texts and {len(targets)} targets"
        )
    _check_tokenizer(tokenizer, "text_to_text_dataset")
    special = tokenizer.special_ids
    pairs = tf.data.Dataset.from_tensor_slices(([prefix + t for t in texts], list(targets)))
    if shuffle:
        pairs = pairs.shuffle(len(texts), seed=seed, reshuffle_each_iteration=True)

    def encode(source, target):
        s = tokenizer.encode(source, special_tokens=False, max_length=max_length - 1)
        t = tokenizer.encode(target, special_tokens=False, max_length=max_length - 1)
        return s, t

    def layout(s, t):  # ragged rows -> tensors
        return _seq2seq_example(tf.reshape(s, [-1]), tf.reshape(t, [-1]), special)

    data = pairs.batch(1024).map(encode).unbatch().map(layout)
    return _seq2seq_batches(data, batch_size, max_length, special["pad"])
