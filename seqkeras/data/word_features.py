"""Per-word input features for taggers, as TensorFlow graph ops: the word
id (lowercased, `WordTokenizer`), the character ids (for
`seqkeras.layers.CharacterEncoder`) and a casing category. The same object
makes the features in `tf.data` pipelines and inside an exported
SavedModel (core TensorFlow string ops and `StringLookup` tables only)."""

import os

import tensorflow as tf

from seqkeras.data.tokens import RESERVED
from seqkeras.data.words import WordTokenizer

#: Casing categories (`casing_ids`); 0 is padding.
CASINGS = ("<pad>", "numeric", "has_digit", "title", "upper", "lower", "mixed", "other")
WORDS_DIR, CHARS_DIR = "words", "characters"


def casing(words):
    """Casing ids (int32, the shape of `words`, dense or ragged) of
    `words` (strings): numeric ("1996", "3.5"), has_digit ("1996-08-22"),
    title ("Peter", "I"), upper ("EU"), lower, mixed ("McDonald"), other
    (punctuation); padding ("") is 0. Graph ops."""
    if isinstance(words, tf.RaggedTensor):
        return words.with_flat_values(casing(words.flat_values))
    words = tf.convert_to_tensor(words, tf.string)
    upper = tf.strings.upper(words, encoding="utf-8")
    lower = tf.strings.lower(words, encoding="utf-8")
    length = tf.strings.length(words, unit="UTF8_CHAR")
    first = tf.strings.substr(words, 0, 1, unit="UTF8_CHAR")
    rest = tf.strings.substr(
        words, tf.minimum(length, 1), tf.maximum(length - 1, 0), unit="UTF8_CHAR"
    )
    has_letter = tf.logical_or(tf.not_equal(words, upper), tf.not_equal(words, lower))
    first_upper = tf.logical_and(
        tf.equal(first, tf.strings.upper(first, encoding="utf-8")),
        tf.not_equal(first, tf.strings.lower(first, encoding="utf-8")),
    )
    rest_lower = tf.equal(rest, tf.strings.lower(rest, encoding="utf-8"))
    rules = [  # in order: the first that holds
        (tf.equal(words, ""), 0),
        (tf.strings.regex_full_match(words, r"[0-9]+([.,][0-9]+)*"), 1),
        (tf.strings.regex_full_match(words, r".*[0-9].*"), 2),
        (tf.logical_and(first_upper, rest_lower), 3),
        (tf.logical_and(has_letter, tf.equal(words, upper)), 4),
        (tf.logical_and(has_letter, tf.equal(words, lower)), 5),
        (has_letter, 6),
    ]
    out = tf.fill(tf.shape(words), 7)
    for condition, value in reversed(rules):
        out = tf.where(condition, value, out)
    return tf.cast(out, tf.int32)


def character_tokenizer(sentences):
    """A cased `WordTokenizer` over every character of `sentences` (lists
    of words), for `char_ids`."""
    chars = sorted({c for s in sentences for w in s for c in w})
    return WordTokenizer(list(RESERVED) + chars, lowercase=False)


class WordFeatures(tf.Module):
    """Words -> `{"token_ids", "char_ids", "casing_ids"}`.

    Args:
        words: a `WordTokenizer` (lowercasing: case lives in the
            characters and the casing ids).
        characters: a `WordTokenizer` over single characters (cased).
        max_chars: characters kept per word (the rest are cut).

    Examples:
        >>> import tensorflow as tf
        >>> from seqkeras.data import WordFeatures
        >>> f = WordFeatures.train([["EU", "rejects", "German", "call"]])
        >>> out = f(tf.ragged.constant([["German", "EU", "calls"]]))
        >>> out["casing_ids"].numpy().tolist()
        [[3, 4, 5]]
        >>> out["char_ids"].shape.as_list()  # max_chars wide
        [1, 3, 20]
    """

    def __init__(self, words, characters, max_chars=20):
        super().__init__(name="word_features")
        for arg, value in (("words", words), ("characters", characters)):
            if not isinstance(value, WordTokenizer):
                raise TypeError(
                    f"`WordFeatures` expects a `WordTokenizer` for `{arg}`."
                    f" Received: {type(value).__name__}"
                )
        if characters.lowercase:
            raise ValueError(
                "`WordFeatures` expects `characters` to be a cased character tokenizer "
                "(lowercase=False). Received: a lowercasing WordTokenizer"
            )
        if not isinstance(max_chars, int) or max_chars < 1:
            raise ValueError(
                f"`WordFeatures` expects an int `max_chars` >= 1. Received: {max_chars!r}"
            )
        self.words = words
        self.characters = characters
        self.max_chars = max_chars

    @property
    def sizes(self):
        """The vocabulary size of each input."""
        return {
            "token_ids": self.words.vocabulary_size,
            "char_ids": self.characters.vocabulary_size,
            "casing_ids": len(CASINGS),
        }

    @classmethod
    def train(cls, sentences, min_count=1, max_chars=20):
        """Vocabularies from `sentences` (lists of words): words (lowercase)
        seen at least `min_count` times, and every character."""
        sentences = [list(s) for s in sentences]
        words = WordTokenizer.train(sentences, min_count=min_count)
        return cls(words, character_tokenizer(sentences), max_chars)

    def __call__(self, words):
        """Features of `words`, strings (batch, time), ragged or dense with
        "" as padding: int32 `token_ids` and `casing_ids` (batch, time)
        and `char_ids` (batch, time, max_chars), padded with 0 (always
        `max_chars` wide: one compiled shape per sentence width). Graph
        ops."""
        from seqkeras.data.subword import check_strings

        check_strings("WordFeatures", "words", words)
        if isinstance(words, tf.RaggedTensor):
            words = words.to_tensor("")
        words = tf.convert_to_tensor(words, tf.string)
        chars = tf.strings.unicode_split(words, "UTF-8")
        char_ids = self.characters.lookup(chars).to_tensor(0, shape=[None, None, self.max_chars])
        return {
            "token_ids": self.words.lookup(words),
            "char_ids": char_ids,
            "casing_ids": casing(words),
        }

    def split(self, strings):
        """Whitespace words of raw sentences (batch,): ragged (batch,
        None)."""
        return tf.strings.split(tf.convert_to_tensor(strings, tf.string))

    def save(self, directory):
        """Writes `directory/words/vocabulary.txt` and
        `directory/characters/vocabulary.txt`."""
        self.words.save(os.path.join(directory, WORDS_DIR))
        self.characters.save(os.path.join(directory, CHARS_DIR))
        return directory

    @classmethod
    def load(cls, directory, max_chars=20):
        return cls(
            WordTokenizer.load(os.path.join(directory, WORDS_DIR)),
            WordTokenizer.load(os.path.join(directory, CHARS_DIR), lowercase=False),
            max_chars,
        )
