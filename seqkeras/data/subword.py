"""Subword tokenization trained on local text, as TensorFlow graph ops.

`SubwordTokenizer` is WordPiece (the vocabulary learned by keras-hub's
`compute_word_piece_vocabulary`, text tokenized by TF Text's
`FastWordpieceTokenizer`)
over whitespace-separated words: text is split on whitespace only, so
punctuation stays attached to its word as a continuation piece
("Büsche." -> "Büsche", "##.") and decoding gives back the text with its
spaces and punctuation as written (runs of whitespace become one space).
BERT-style splitting on punctuation would lose that ("Büsche ." on the
way back). SentencePiece would keep it too, but its ops are not linked
into the TF Serving binary (tensorflow/serving#1333); WordPiece's are.

The same object tokenizes in `tf.data` pipelines, in `fit`, and inside an
exported SavedModel (`encode` and `decode` are graph ops). Ids follow
`seqkeras.data.tokens`: PAD 0, BOS 1, EOS 2, UNK 3, then the learned
pieces. The vocabulary is one token per line (`save` / `load`).

Needs the `text` extra (`pip install "seqkeras[text]"`: keras-hub and
tensorflow-text).
"""

import importlib

import numpy as np
import tensorflow as tf

from seqkeras.data.tokens import BOS, EOS, RESERVED
from seqkeras.data.tokens import load_vocabulary, save_vocabulary
from seqkeras.layers import validation


def _text_extra(module):
    """`module` (keras_hub or tensorflow_text), or a clear ImportError
    naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:  # pragma: no cover - depends on extras
        raise ImportError(
            f"`seqkeras.data.SubwordTokenizer` needs {module}: pip install "
            '"seqkeras[text]" (keras-hub and tensorflow-text)'
        ) from error


def _words(strings):
    """Whitespace split (a core TensorFlow op, `StringSplitV2`)."""
    return tf.strings.split(strings)


def check_strings(where, arg, strings):
    """Raises a TypeError naming `where` and `arg` when `strings` (text
    for a tokenizer's graph ops) hold numbers: a numeric tensor, or
    concrete values that are not strings. Checked on the static dtype,
    so also when traced."""
    if isinstance(strings, (tf.Tensor, tf.RaggedTensor, tf.Variable)):
        if strings.dtype != tf.string:
            raise TypeError(
                f"`{where}` expects `{arg}` as strings. Received: dtype {strings.dtype.name}; "
                "decode ids to text first"
            )
        return
    if isinstance(strings, (str, bytes)):
        return
    try:
        array = np.asarray(strings)
    except (ValueError, TypeError):  # ragged nested lists: TensorFlow's conversion says
        return
    if array.size and array.dtype.kind not in "USO":
        raise TypeError(
            f"`{where}` expects `{arg}` as strings. Received: dtype {array.dtype} "
            f"(e.g. {array.flat[0]!r}); decode ids to text first"
        )


def with_bos_eos(ids, add_bos, add_eos):
    """Ragged ids (batch, None) with BOS prepended / EOS appended to each
    row when asked (the tokenizers' `encode`)."""
    batch = ids.nrows()
    if add_bos:
        ids = tf.concat([tf.fill([batch, 1], BOS), ids], axis=1)
    if add_eos:
        ids = tf.concat([ids, tf.fill([batch, 1], EOS)], axis=1)
    return ids


def ids_before_eos(ids, where="decode"):
    """`(ids, before_eos)` for the tokenizers' `decode`: ids (batch,
    time), dense or ragged, as int32 ragged ids, and a mask of the
    positions before each row's first EOS; a TypeError naming `where`
    for ids that are not integers."""
    if not isinstance(ids, tf.RaggedTensor):
        ids = tf.convert_to_tensor(ids)
        if ids.shape.rank != 2:
            raise ValueError(
                f"`{where}` expects `ids` of shape (batch, time). Received: shape {ids.shape}"
            )
        ids = tf.RaggedTensor.from_tensor(ids)
    if not ids.dtype.is_integer:
        raise TypeError(f"`{where}` expects integer `ids`. Received: dtype {ids.dtype.name}")
    ids = tf.cast(ids, tf.int32)
    return ids, tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS), tf.int32), axis=1), 0)


def check_decoded_ids(where, kept, size):
    """Raises a ValueError naming `where` when concrete (eager) ragged
    `kept` ids, those a tokenizer's `decode` looks up, fall outside [0,
    size); in a graph (a served signature, whose ids are the model's) the
    ids pass unchecked."""
    validation.ids_in_range(where, "ids", kept.flat_values, size)


def learn_wordpiece(name, texts, vocabulary_size, reserved, prepare=None, **options):
    """A WordPiece vocabulary (keras-hub's `compute_word_piece_vocabulary`
    with `options`) of at most `vocabulary_size` tokens, `reserved` first,
    from `texts` (a list of strings or a `tf.data.Dataset` of strings),
    batched and mapped through `prepare` when given. `name` is the caller,
    for the ValueErrors about the size and empty text."""
    if not isinstance(vocabulary_size, int) or vocabulary_size <= len(reserved):
        raise ValueError(
            f"`{name}` expects an int `vocabulary_size` above the {len(reserved)} "
            f"reserved tokens. Received: {vocabulary_size!r}"
        )
    data = texts
    if not isinstance(texts, tf.data.Dataset):
        texts = list(texts)
        if not texts:
            raise ValueError(f"`{name}` received no text (`texts` is empty)")
        data = tf.data.Dataset.from_tensor_slices(texts)
    data = data.batch(1024)
    if prepare is not None:
        data = data.map(prepare)
    learn = _text_extra("keras_hub").tokenizers.compute_word_piece_vocabulary
    return learn(data, vocabulary_size, reserved_tokens=list(reserved), **options)


class SubwordTokenizer:
    """A WordPiece tokenizer with seqkeras' reserved ids.

    Args:
        vocabulary: the tokens in id order; the first four must be
            `seqkeras.data.tokens.RESERVED` (`<pad>`, `<bos>`, `<eos>`,
            `<unk>`).

    Examples:
        >>> from seqkeras.data import SubwordTokenizer
        >>> tok = SubwordTokenizer.train(["Ein Hund läuft.", "Ein Mann läuft."],
        ...                              vocabulary_size=60)
        >>> ids = tok.encode(["Ein Hund läuft."], add_eos=True)
        >>> [t.decode() for t in tok.decode(ids).numpy()]
        ['Ein Hund läuft.']
    """

    def __init__(self, vocabulary):
        vocabulary = [str(t) for t in vocabulary]
        if tuple(vocabulary[: len(RESERVED)]) != RESERVED:
            raise ValueError(
                "`SubwordTokenizer` expects a vocabulary that starts with "
                f"the reserved tokens {list(RESERVED)}. Received: "
                f"{vocabulary[: len(RESERVED)]}"
            )
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("`SubwordTokenizer` received a vocabulary with duplicate tokens")
        self.vocabulary = vocabulary
        # TF Text's tokenizer directly (keras-hub's WordPieceTokenizer wraps
        # the same one, but returns Python lists when called eagerly).
        tf_text = _text_extra("tensorflow_text")
        self._tokenizer = tf_text.FastWordpieceTokenizer(
            vocab=vocabulary,
            suffix_indicator="##",
            unknown_token=RESERVED[3],
            no_pretokenization=True,
            support_detokenization=True,
            token_out_type=tf.int32,
        )

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    @classmethod
    def train(cls, texts, vocabulary_size):
        """Learns a WordPiece vocabulary of at most `vocabulary_size`
        tokens (the reserved four included) from `texts`: a list of
        strings, or a `tf.data.Dataset` of strings (e.g.
        `tf.data.TextLineDataset(path)`)."""
        vocabulary = learn_wordpiece(
            "SubwordTokenizer.train",
            texts,
            vocabulary_size,
            list(RESERVED),
            prepare=_words,
            split=False,
            lowercase=False,
            strip_accents=False,
        )
        return cls(vocabulary)

    def encode(self, strings, add_bos=False, add_eos=False):
        """Token ids of `strings` (batch,): an int32 `tf.RaggedTensor`
        (batch, None), with BOS / EOS added when asked. Graph ops."""
        check_strings("SubwordTokenizer.encode", "strings", strings)
        words = _words(tf.convert_to_tensor(strings, tf.string))
        return with_bos_eos(self._tokenizer.tokenize(words).merge_dims(1, 2), add_bos, add_eos)

    def decode(self, ids):
        """Strings (batch,) from ids (batch, time), dense or ragged: reads up
        to the first EOS and skips PAD and BOS. Graph ops."""
        ids, before_eos = ids_before_eos(ids, "SubwordTokenizer.decode")
        kept = tf.ragged.boolean_mask(ids, tf.logical_and(before_eos, ids > BOS))  # not PAD, BOS
        check_decoded_ids("SubwordTokenizer.decode", kept, self.vocabulary_size)
        return self._tokenizer.detokenize(kept)

    def save(self, directory):
        """Writes `directory/vocabulary.txt` (one token per line); returns
        its path."""
        return save_vocabulary(directory, self.vocabulary)

    @classmethod
    def load(cls, path):
        """The tokenizer saved at `path` (a `save` directory or its
        vocabulary file)."""
        return cls(load_vocabulary(path, "SubwordTokenizer.load"))
