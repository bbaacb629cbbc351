"""`tf.data` pipelines over text: line-aligned files (translation pairs),
labeled sentences (classification) and tagged words (taggers).

`read_parallel` reads two line-aligned UTF-8 files with clear errors;
`translation_dataset` tokenizes them with two `SubwordTokenizer`s (graph
ops), adds BOS/EOS for teacher forcing, drops over-long pairs (and says how
many), caches, shuffles with a seed, groups pairs of similar length into
buckets (`tf.data.Dataset.bucket_by_sequence_length`) so that each batch is
padded only to its own longest sequence, and prefetches.
"""

import os

import numpy as np
import tensorflow as tf

from seqkeras.data.tokens import PAD
from seqkeras.layers import validation


def _decode(raw, source, name):
    """UTF-8 text of `raw` bytes (CRLF as LF); a one-line error naming
    `source`, the line and the byte otherwise."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ValueError(
            f"`{name}`: {source} line {line} is not UTF-8 text (byte {raw[error.start]:#04x})"
        ) from None
    return text.replace("\r\n", "\n")


def _read_bytes(path, name, arg="path"):
    """The bytes of `path` (the argument `arg` of `name`); one-line errors
    for a path that is not one, a missing file and a directory."""
    if isinstance(path, bool) or not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(
            f"`{name}` expects `{arg}` to be a file path (str). Received: {arg}={path!r}"
        )
    if not os.fspath(path):
        raise ValueError(f"`{name}` expects `{arg}` to be a file path. Received: {arg}=''")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"`{name}`: no such file: {arg}={path}") from None
    except IsADirectoryError:
        raise ValueError(f"`{name}`: {arg}={path} is a directory, not a text file") from None
    return raw


def _source(path, arg):
    """How messages name the file `path` given as the argument `arg`."""
    return f"{arg}={path}"


def read_text(path, name="read_text"):
    """The UTF-8 text of `path` (CRLF read as LF), with one-line errors
    naming `name` for a missing file, a directory, and bytes that are not
    UTF-8 (line number and byte).

    Args:
        path: the file.
        name: the function named in error messages (a caller's own).

    Returns:
        A string.

    Examples:
        >>> import os, tempfile
        >>> from seqkeras.data import read_text
        >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
        >>> with open(path, "wb") as f:
        ...     _ = f.write(b"to be\\r\\nor not")
        >>> read_text(path)
        'to be\\nor not'
    """
    return _decode(_read_bytes(path, name), _source(path, "path"), name)


def text_lines(raw, source, name="text_lines", allow_empty_input=False):
    """The lines of UTF-8 `raw` bytes (newline stripped, LF or CRLF) read
    from `source` (a path, or e.g. "stdin", for the messages); a one-line
    ValueError for bytes that are not UTF-8, an empty line, or (unless
    `allow_empty_input`) no line at all.

    Examples:
        >>> from seqkeras.data.pipelines import text_lines
        >>> text_lines(b"Ein Hund.\\r\\nZwei Katzen.\\n", "stdin")
        ['Ein Hund.', 'Zwei Katzen.']
    """
    lines = _decode(raw, source, name).split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    lines = [line.rstrip("\r") for line in lines]
    for i, line in enumerate(lines):
        if not line.strip():
            raise ValueError(f"`{name}`: {source} line {i + 1} is empty")
    if not lines and not allow_empty_input:
        raise ValueError(f"`{name}`: {source} has no lines")
    return lines


def read_lines(path, name="read_lines"):
    """The lines of the UTF-8 text file `path` (newline stripped); a clear
    error for a missing file, bytes that are not UTF-8, or an empty line.

    Args:
        path: the file.
        name: the function named in error messages (a caller's own).

    Returns:
        A list of strings.

    Raises:
        ValueError: a missing file, bytes that are not UTF-8, an empty line.
    """
    return _read_lines(path, name, "path")


def _read_lines(path, name, arg):
    return text_lines(_read_bytes(path, name, arg), _source(path, arg), name)


def read_parallel(source_path, target_path, name="read_parallel"):
    """`(sources, targets)`: two line-aligned files, checked to have the
    same number of lines (see `read_lines` for the other checks).

    Args:
        source_path: the source sentences, one per line.
        target_path: their translations, line-aligned.
        name: the function named in error messages (a caller's own).

    Returns:
        `(sources, targets)`, two lists of strings.

    Raises:
        ValueError: files of different line counts (or as `read_lines`).
    """
    sources = _read_lines(source_path, name, "source_path")
    targets = _read_lines(target_path, name, "target_path")
    if len(sources) != len(targets):
        raise ValueError(
            f"`{name}`: the files are not line-aligned: source_path={source_path} has "
            f"{len(sources)} lines, target_path={target_path} {len(targets)}"
        )
    return sources, targets


def _check_tokenizer(name, arg, tokenizer):
    """Raises a TypeError naming `name` and `arg` unless `tokenizer` has
    an `encode` method (`SubwordTokenizer`, `WordTokenizer`, ...)."""
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(
            f"`{name}` expects `{arg}` to be a tokenizer with an `encode` method (e.g. a "
            f"`SubwordTokenizer`). Received: {type(tokenizer).__name__}"
        )


def _tokenized(texts, tokenizer, **kwargs):
    """A dataset of int32 id vectors, one per text (tokenized in batches)."""
    data = tf.data.Dataset.from_tensor_slices(list(texts)).batch(1024)
    return data.map(lambda s: tokenizer.encode(s, **kwargs)).unbatch()


def translation_dataset(
    sources,
    targets,
    source_tokenizer,
    target_tokenizer,
    batch_size=64,
    max_length=64,
    boundaries=(8, 12, 16, 20, 24, 32, 48),
    shuffle=True,
    seed=0,
    verbose=True,
    pad_to_bucket=False,
    drop_remainder=False,
):
    """Teacher-forcing batches for a seq2seq model.

    Args:
        sources, targets: lists of strings, aligned.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s.
        batch_size: pairs per batch.
        max_length: pairs whose source (with EOS) or target (with BOS and
            EOS) is longer are dropped; the count is printed (`verbose`).
        boundaries: bucket edges on the longer side's length.
        shuffle, seed: shuffle the pairs (a buffer of all of them) with a
            fixed seed, reshuffled each epoch.
        verbose: print how many pairs were kept and dropped.
        pad_to_bucket: pad every batch to its bucket's upper edge
            (`max_length` for the last bucket) instead of its own longest
            row: a few more PAD tokens, but only `len(boundaries) + 1`
            batch shapes, so `fit(jit_compile=True)` compiles a handful of
            XLA programs instead of one per new (source, target) width.
        drop_remainder: drop each bucket's last, smaller batch (with
            `pad_to_bucket`, every batch then has one of those shapes);
            the shuffle puts other pairs there each epoch.

    Returns:
        `(dataset, kept)`: batches of `({"source_ids", "target_ids"},
        labels)`, int32, padded with PAD to the batch's longest row
        (`target_ids` is BOS + target, `labels` target + EOS), and the
        number of pairs kept.
    """
    name = "translation_dataset"
    if len(sources) != len(targets):
        raise ValueError(
            "`translation_dataset` needs aligned sources and targets. "
            f"Received {len(sources)} sources and {len(targets)} targets"
        )
    _check_tokenizer(name, "source_tokenizer", source_tokenizer)
    _check_tokenizer(name, "target_tokenizer", target_tokenizer)
    batch_size = validation.positive_int(name, "batch_size", batch_size)
    max_length = validation.positive_int(name, "max_length", max_length)
    src = _tokenized(sources, source_tokenizer, add_eos=True)
    tgt = _tokenized(targets, target_tokenizer, add_bos=True, add_eos=True)
    pairs = tf.data.Dataset.zip(src, tgt)

    def fits(s, t):
        return tf.logical_and(tf.size(s) <= max_length, tf.size(t) <= max_length)

    pairs = pairs.filter(fits).cache()
    kept = int(pairs.reduce(0, lambda n, _: n + 1))
    if verbose:
        print(
            f"translation_dataset: {len(sources)} pairs, {kept} kept, "
            f"{len(sources) - kept} dropped (longer than {max_length} "
            "tokens)"
        )
    if shuffle:
        pairs = pairs.shuffle(kept, seed=seed, reshuffle_each_iteration=True)
    pairs = pairs.map(lambda s, t: ({"source_ids": s, "target_ids": t[:-1]}, t[1:]))
    edges = [b + 1 for b in boundaries if b < max_length]
    if pad_to_bucket:  # the last bucket pads to max_length
        edges.append(max_length + 1)
    data = pairs.bucket_by_sequence_length(
        lambda x, y: tf.maximum(tf.size(x["source_ids"]), tf.size(y)),
        bucket_boundaries=edges,
        bucket_batch_sizes=[batch_size] * (len(edges) + 1),
        padding_values=({"source_ids": PAD, "target_ids": PAD}, PAD),
        pad_to_bucket_boundary=pad_to_bucket,
        drop_remainder=drop_remainder,
    )
    return data.prefetch(tf.data.AUTOTUNE), kept


def random_windows_dataset(ids, block, batch_size, seed=0):
    """An endless `tf.data.Dataset` of `(inputs, targets)` batches of
    `batch_size` windows of `block` tokens, each starting at a random
    offset of the token stream `ids` (nanoGPT's sampler: every epoch is
    as many fresh random windows as `fit(steps_per_epoch=...)` asks for),
    the targets the inputs shifted by one token.

    Args:
        ids: the token stream, a 1-D int array.
        block: tokens per window, a positive int.
        batch_size: windows per batch, a positive int.
        seed: the offsets' random seed.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.data import random_windows_dataset
        >>> data = random_windows_dataset(np.arange(100), block=4, batch_size=2)
        >>> x, y = next(iter(data))
        >>> x.shape, bool(np.all(y.numpy() == x.numpy() + 1))
        (TensorShape([2, 4]), True)
    """
    block = validation.positive_int("random_windows_dataset", "block", block)
    batch_size = validation.positive_int("random_windows_dataset", "batch_size", batch_size)
    seed = validation.seed("random_windows_dataset", "seed", seed)
    ids = np.asarray(ids)
    if ids.size and ids.dtype.kind not in "iu":
        raise TypeError(
            f"`random_windows_dataset` expects integer token `ids`. Received: dtype {ids.dtype}"
        )
    starts = len(ids) - block - 1
    if ids.ndim != 1 or starts < 1:
        raise ValueError(
            "`random_windows_dataset` needs 1-D `ids` longer than block + 1 tokens. "
            f"Received: ids.shape={ids.shape}, block={block!r}"
        )
    ids = tf.constant(ids, tf.int32)
    offsets = tf.range(block + 1, dtype=tf.int64)

    def gather(r):
        chunk = tf.gather(ids, tf.math.floormod(r, starts)[:, None] + offsets)
        return chunk[:, :-1], chunk[:, 1:]

    return (
        tf.data.Dataset.random(seed=seed)
        .batch(batch_size)
        .map(gather, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


def _shuffled_buckets(
    data,
    size,
    shuffle,
    seed,
    boundaries,
    max_length,
    batch_size,
    padding_values,
    pad_to_bucket,
    drop_remainder,
):
    """`(sequence, labels)` examples shuffled (a buffer of all `size`)
    and batched by the sequence's length into buckets, each batch padded
    to its bucket's edge (`pad_to_bucket`, the last to `max_length`) or to
    its longest row."""
    if shuffle:
        data = data.shuffle(size, seed=seed, reshuffle_each_iteration=True)
    edges = [b + 1 for b in boundaries if b < max_length]
    if pad_to_bucket:
        edges.append(max_length + 1)
    return data.bucket_by_sequence_length(
        lambda x, y: tf.size(x),
        bucket_boundaries=edges,
        bucket_batch_sizes=[batch_size] * (len(edges) + 1),
        padding_values=padding_values,
        pad_to_bucket_boundary=pad_to_bucket,
        drop_remainder=drop_remainder,
    )


def classification_dataset(
    texts,
    labels,
    tokenizer,
    batch_size=64,
    max_length=128,
    boundaries=(8, 16, 24, 32, 48),
    shuffle=True,
    seed=0,
    pad_to_bucket=True,
    drop_remainder=False,
):
    """Batches of `(token_ids, labels)` for a classifier.

    Args:
        texts: strings.
        labels: their integer classes, aligned with `texts`.
        tokenizer: an object with graph-op `encode(strings)` giving ragged
            ids (`WordTokenizer`, `SubwordTokenizer`).
        batch_size: examples per batch.
        max_length: longer texts are cut to their first `max_length`
            tokens (a classifier reads what it gets; nothing is dropped).
        boundaries: bucket edges on the length.
        pad_to_bucket: pad each batch to its bucket's edge (default), so
            that `fit(jit_compile=True)` compiles one program per bucket;
            False: to the batch's longest text.
        shuffle, seed: shuffle all examples with a fixed seed, reshuffled
            each epoch.
        drop_remainder: drop each bucket's last, smaller batch.

    Returns:
        A `tf.data.Dataset` of `(token_ids int32 (batch, time), labels int32
        (batch,))`, padded with PAD.
    """
    name = "classification_dataset"
    texts, labels = list(texts), list(labels)
    for i, value in enumerate(labels):
        integral = isinstance(value, (int, np.integer)) or (
            isinstance(value, (float, np.floating)) and float(value).is_integer()
        )
        if isinstance(value, (bool, np.bool_)) or not integral:
            raise TypeError(
                f"`{name}` expects `labels` as integer classes. Received: labels[{i}]={value!r}"
            )
    labels = [int(v) for v in labels]
    if len(texts) != len(labels):
        raise ValueError(
            "`classification_dataset` needs aligned texts and labels. "
            f"Received {len(texts)} texts and {len(labels)} labels"
        )
    if not texts:
        raise ValueError("`classification_dataset` received no text")
    _check_tokenizer(name, "tokenizer", tokenizer)
    batch_size = validation.positive_int(name, "batch_size", batch_size)
    max_length = validation.positive_int(name, "max_length", max_length)
    ids = _tokenized(texts, tokenizer).map(lambda x: x[:max_length])
    data = tf.data.Dataset.zip(
        ids, tf.data.Dataset.from_tensor_slices(tf.constant(labels, tf.int32))
    ).cache()
    data = _shuffled_buckets(
        data,
        len(texts),
        shuffle,
        seed,
        boundaries,
        max_length,
        batch_size,
        (PAD, 0),
        pad_to_bucket,
        drop_remainder,
    )
    return data.prefetch(tf.data.AUTOTUNE)


def tag_vocabulary(tags, pad="<pad>", outside="O"):
    """The tag vocabulary of tagged sentences, in id order: `pad` (id 0,
    what `tagging_dataset` and the taggers pad with), `outside`, then the
    tags seen, grouped by entity type (`B-LOC`, `I-LOC`, `B-PER`, ...).

    Args:
        tags: lists of tag strings, one list per sentence.
        pad: the padding tag.
        outside: the tag outside any entity.

    Examples:
        >>> from seqkeras.data import tag_vocabulary
        >>> tag_vocabulary([["B-PER", "I-PER", "O"], ["B-LOC", "O"]])
        ['<pad>', 'O', 'B-LOC', 'B-PER', 'I-PER']
    """
    if isinstance(tags, str) or any(isinstance(t, str) for t in tags):
        raise TypeError("`tag_vocabulary` expects `tags` as one list of tag strings per sentence")
    for sentence in tags:
        for tag in sentence:
            if not isinstance(tag, str):
                raise TypeError(
                    f"`tag_vocabulary` expects `tags` as lists of tag strings. Received: {tag!r}"
                )
    seen = sorted({t for sentence in tags for t in sentence} - {outside, pad})
    return [pad, outside] + sorted(seen, key=lambda t: (t[2:], t))


def tagging_dataset(
    sentences,
    tags,
    features,
    tag_vocabulary,
    batch_size=32,
    max_length=128,
    boundaries=(8, 16, 24, 32, 48, 64),
    shuffle=True,
    seed=0,
    pad_to_bucket=True,
    drop_remainder=False,
    name="tagging_dataset",
):
    """Batches of `(features, tag ids)` for a tagger over word features.

    Args:
        sentences: lists of words.
        tags: their tag strings, aligned with `sentences`.
        features: a `seqkeras.data.WordFeatures` (graph ops).
        tag_vocabulary: the tags in id order; id 0 must be the padding tag
            (e.g. `"<pad>"`), so real tags start at 1.
        batch_size: as `classification_dataset`'s.
        boundaries: as `classification_dataset`'s.
        shuffle: as `classification_dataset`'s.
        seed: as `classification_dataset`'s.
        pad_to_bucket: as `classification_dataset`'s.
        drop_remainder: as `classification_dataset`'s.
        max_length: longer sentences are cut (words and tags).
        name: the function named in error messages (a caller's own).

    Returns:
        A `tf.data.Dataset` of `({"token_ids", "char_ids", "casing_ids"},
        tag_ids int32 (batch, time))`, padded with 0.
    """
    sentences, tags = list(sentences), list(tags)
    if len(sentences) != len(tags):
        raise ValueError(
            f"`{name}` needs aligned sentences and tags. Received "
            f"{len(sentences)} sentences and {len(tags)} tag lists"
        )
    if not sentences:
        raise ValueError(f"`{name}` received no sentence")
    if not callable(features):
        raise TypeError(
            f"`{name}` expects `features` to be a `seqkeras.data.WordFeatures`. Received: "
            f"{type(features).__name__}"
        )
    batch_size = validation.positive_int(name, "batch_size", batch_size)
    max_length = validation.positive_int(name, "max_length", max_length)
    index = {t: i for i, t in enumerate(tag_vocabulary)}
    tag_ids = []
    for n, (words, labels) in enumerate(zip(sentences, tags)):
        if len(words) != len(labels) or not words:
            raise ValueError(
                f"`{name}`: sentence {n} has {len(words)} words and {len(labels)} tags"
            )
        unknown = [t for t in labels if t not in index or index[t] == 0]
        if unknown:
            raise ValueError(
                f"`{name}`: sentence {n} has the tag {unknown[0]!r}, not "
                f"one of the {len(tag_vocabulary) - 1} known tags "
                f"{list(tag_vocabulary)[1:]}"
            )
        tag_ids.append([index[t] for t in labels[:max_length]])
    cut = [s[:max_length] for s in sentences]
    flat_words = tf.constant([w for s in cut for w in s], tf.string)
    flat_tags = tf.constant([t for s in tag_ids for t in s], tf.int32)
    splits = tf.constant(np.cumsum([0] + [len(s) for s in cut]), tf.int64)

    def example(i):  # rows of the flat lists: plain (not ragged) tensors
        a, b = splits[i], splits[i + 1]
        return flat_words[a:b], flat_tags[a:b]

    data = tf.data.Dataset.range(len(cut)).map(example).cache()
    data = _shuffled_buckets(
        data,
        len(sentences),
        shuffle,
        seed,
        boundaries,
        max_length,
        batch_size,
        ("", 0),
        pad_to_bucket,
        drop_remainder,
    )
    return data.map(lambda w, t: (features(w), t)).prefetch(tf.data.AUTOTUNE)
