"""Word-level tokenization as TensorFlow graph ops: whitespace split,
optional lowercasing, and a `keras.layers.StringLookup` over a vocabulary
learned from local text.

Ids follow `seqkeras.data.tokens`: PAD 0, BOS 1, EOS 2, UNK 3, then the
words by decreasing count (ties in first-seen order). The vocabulary file
is one token per line, the reserved four first (`save` / `load`), as for
`SubwordTokenizer`. The same object tokenizes in `tf.data` pipelines, in
`fit`, and inside an exported SavedModel (split, lower and the lookup
table are core TensorFlow ops, which the TF Serving binary registers).
"""

import collections

import keras
import tensorflow as tf

from seqkeras.data.tokens import FIRST_ID, PAD, RESERVED, UNK
from seqkeras.data.tokens import load_vocabulary, save_vocabulary


class WordTokenizer(tf.Module):
    """Whitespace words -> ids with seqkeras' reserved ids.

    Args:
        vocabulary: the tokens in id order; the first four must be
            `seqkeras.data.tokens.RESERVED`.
        lowercase: lowercase text before the lookup (the vocabulary must
            then be lowercase too).

    Examples:
        >>> from seqkeras.data import WordTokenizer
        >>> tok = WordTokenizer.train(["a good film", "a bad film"])
        >>> tok.vocabulary[4:]
        ['a', 'film', 'good', 'bad']
        >>> tok.encode(["A GOOD plot"]).to_list()
        [[4, 6, 3]]
    """

    def __init__(self, vocabulary, lowercase=True):
        # a tf.Module: a SavedModel that holds it tracks its lookup table
        super().__init__(name="word_tokenizer")
        vocabulary = [str(t) for t in vocabulary]
        if tuple(vocabulary[: len(RESERVED)]) != RESERVED:
            raise ValueError(
                "`WordTokenizer` expects a vocabulary that starts with the "
                f"reserved tokens {list(RESERVED)}. Received: "
                f"{vocabulary[: len(RESERVED)]}"
            )
        words = vocabulary[len(RESERVED) :]
        if not words:
            raise ValueError(
                "`WordTokenizer` received a vocabulary with no word after the reserved tokens"
            )
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("`WordTokenizer` received a vocabulary with duplicate tokens")
        if any(not w or w != w.strip() or len(w.split()) != 1 for w in words):
            raise ValueError("`WordTokenizer` expects vocabulary words without whitespace")
        if not isinstance(lowercase, bool):
            raise TypeError(f"`WordTokenizer` expects a bool `lowercase`. Received: {lowercase!r}")
        self.vocabulary = vocabulary
        self.lowercase = lowercase
        # Keras' StringLookup: out-of-vocabulary -> 0, word i -> i + 1;
        # `lookup` shifts that onto the reserved ids (UNK 3, words from 4).
        self._lookup = keras.layers.StringLookup(
            vocabulary=words, num_oov_indices=1, mask_token=None, output_mode="int", dtype="string"
        )

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    @classmethod
    def train(cls, texts, min_count=1, max_tokens=None, lowercase=True):
        """Learns the vocabulary of `texts` (strings, or lists of words
        already split): every word seen at least `min_count` times, at
        most `max_tokens` tokens in all (the reserved four included)."""
        # Counted in Python: StringLookup.adapt has no minimum count.
        counts = collections.Counter()
        texts = list(texts)
        if not texts:
            raise ValueError("`WordTokenizer.train` received no text")
        for text in texts:
            words = text.split() if isinstance(text, str) else list(text)
            counts.update(w.lower() if lowercase else w for w in words)
        if not isinstance(min_count, int) or min_count < 1:
            raise ValueError(
                f"`WordTokenizer.train` expects an int `min_count` >= 1. Received: {min_count!r}"
            )
        words = [w for w, c in counts.most_common() if c >= min_count and w not in RESERVED]
        if max_tokens is not None:
            if not isinstance(max_tokens, int) or max_tokens <= FIRST_ID:
                raise ValueError(
                    "`WordTokenizer.train` expects an int `max_tokens` "
                    f"above {FIRST_ID}. Received: {max_tokens!r}"
                )
            words = words[: max_tokens - FIRST_ID]
        return cls(list(RESERVED) + words, lowercase=lowercase)

    def lookup(self, words):
        """Ids of `words` (a string tensor of any shape, dense or ragged;
        empty strings are padding, id 0). Graph ops."""
        # map_flat_values: the same ops on a dense tensor or on a ragged
        # one's values
        if self.lowercase:
            words = tf.ragged.map_flat_values(tf.strings.lower, words)
        raw = tf.ragged.map_flat_values(self._lookup, words)

        def shift(raw_ids, strings):
            ids = tf.where(raw_ids == 0, tf.cast(UNK, raw_ids.dtype), raw_ids + (FIRST_ID - 1))
            ids = tf.where(tf.equal(strings, ""), tf.cast(PAD, ids.dtype), ids)
            return tf.cast(ids, tf.int32)

        return tf.ragged.map_flat_values(shift, raw, words)

    def split(self, strings):
        """Whitespace words of `strings` (batch,): a ragged string tensor
        (batch, None). Graph ops."""
        from seqkeras.data.subword import check_strings

        check_strings("WordTokenizer.encode", "strings", strings)
        return tf.strings.split(tf.convert_to_tensor(strings, tf.string))

    def encode(self, strings):
        """Ids of `strings` (batch,): an int32 `tf.RaggedTensor`
        (batch, None). Graph ops."""
        return self.lookup(self.split(strings))

    def save(self, directory):
        """Writes `directory/vocabulary.txt` (one token per line); returns
        its path."""
        return save_vocabulary(directory, self.vocabulary)

    @classmethod
    def load(cls, path, lowercase=True):
        """The tokenizer saved at `path` (a `save` directory or its
        vocabulary file)."""
        return cls(load_vocabulary(path, "WordTokenizer.load"), lowercase=lowercase)
