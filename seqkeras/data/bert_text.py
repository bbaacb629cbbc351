"""BERT's WordPiece tokenizer as servable graph ops: `BertTokenizer` and,
for taggers, `BertWordFeatures`.

The steps are those of Hugging Face `tokenizers`' `BertNormalizer`,
`BertPreTokenizer` and `WordPiece` (the `tokenizer.json` of BERT-family
checkpoints), so the ids are the checkpoint's own:

1. clean: whitespace characters become spaces, then NUL, U+FFFD and
   control/format characters (Unicode category C) are dropped;
2. CJK ideographs are surrounded by spaces;
3. uncased checkpoints: NFD, combining marks (Mn) dropped, lowercase;
4. split on spaces and around each punctuation character (ASCII
   punctuation and Unicode category P);
5. WordPiece: greedy longest match, `##` continuations, `[UNK]` for a
   word that cannot be covered or is over 100 characters.

One deliberate difference: a special token spelled out in the text
("[SEP]") stays text here, where Hugging Face reads it as the token; a
served request cannot inject one.

Why not TF Text's `BertTokenizer` or `FastBertTokenizer`: the first case-
folds (ICU case folding turns "ß" into "ss"; the checkpoints lowercase),
and the second runs `FastBertNormalize`, an op the TF Serving binary does
not link (tensorflow/serving#2064). The ops here are core TensorFlow
string ops plus TF Text's `NormalizeUTF8`, `RegexSplitWithOffsets` and
`FastWordpieceTokenizeWithOffsets`, all in TF Serving's TF Text
(`seqkeras.export.audit_serving` checks a SavedModel for this).

Needs tensorflow-text (`pip install "seqkeras[text]"`).
"""

import json
import os

import tensorflow as tf

from seqkeras.data.subword import _text_extra
from seqkeras.data.subword import check_strings
from seqkeras.data.subword import check_decoded_ids
from seqkeras.data.subword import ids_before_eos
from seqkeras.data.subword import with_bos_eos
from seqkeras.data.tokenizer_files import read_tokenizer_json
from seqkeras.data.tokens import BOS, EOS, PAD, RESERVED, save_vocabulary
from seqkeras.data.word_features import WordFeatures
from seqkeras.data.word_features import casing
from seqkeras.layers import validation

#: The settings file `BertTokenizer.save` writes beside `vocab.txt`.
SETTINGS = "bert_tokenizer.json"
VOCABULARY = "vocab.txt"
SPECIAL = ("pad", "unk", "cls", "sep", "mask")
_DEFAULT_SPECIAL = {
    "pad": "[PAD]",
    "unk": "[UNK]",
    "cls": "[CLS]",
    "sep": "[SEP]",
    "mask": "[MASK]",
}
_CJK = (
    r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
    r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]"
)
_PUNCTUATION = r"[!-/:-@\[-`{-~]|\p{P}"
_MAX_WORD_CHARS = 100  # Hugging Face WordPiece's max_input_chars_per_word


class BertTokenizer(tf.Module):
    """A BERT-family checkpoint's WordPiece tokenizer, in graph ops.

    Args:
        vocabulary: the tokens in id order (`vocab.txt`).
        lowercase: uncased checkpoints (also strips accents by default).
        strip_accents: None (follow `lowercase`), True or False.
        chinese_chars: put spaces around CJK ideographs.
        max_length: ids per sequence, `[CLS]` and `[SEP]` included; longer
            text is cut before `[SEP]`.
        special_tokens: `{"pad", "unk", "cls", "sep", "mask"}` -> token
            (default `[PAD]`, `[UNK]`, ...); their ids are read from the
            vocabulary, not from `seqkeras.data.tokens`.

    Examples:
        >>> from seqkeras.data import BertTokenizer
        >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",
        ...          "sat", "!", "##s"]
        >>> tok = BertTokenizer(vocab)
        >>> tok.encode(["The cats sat!"]).to_list()
        [[2, 5, 6, 9, 7, 8, 3]]
    """

    def __init__(
        self,
        vocabulary,
        lowercase=True,
        strip_accents=None,
        chinese_chars=True,
        max_length=512,
        special_tokens=None,
    ):
        super().__init__(name="bert_tokenizer")
        vocabulary = [str(t) for t in vocabulary]
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("`BertTokenizer` received a vocabulary with duplicate tokens")
        special = dict(_DEFAULT_SPECIAL, **(special_tokens or {}))
        unknown = sorted(set(special) - set(SPECIAL))
        if unknown:
            raise ValueError(
                f"`BertTokenizer` expects `special_tokens` keys among {list(SPECIAL)}. "
                f"Received: {unknown}"
            )
        index = {t: i for i, t in enumerate(vocabulary)}
        self.special_ids = {}
        for role, token in special.items():
            if token not in index:
                raise ValueError(
                    f"`BertTokenizer`: the vocabulary has no {role} token {token!r} "
                    "(`special_tokens`)"
                )
            self.special_ids[role] = index[token]
        for arg, value in (("lowercase", lowercase), ("chinese_chars", chinese_chars)):
            if not isinstance(value, bool):
                raise TypeError(f"`BertTokenizer` expects a bool `{arg}`. Received: {value!r}")
        if strip_accents is not None and not isinstance(strip_accents, bool):
            raise TypeError(
                f"`BertTokenizer` expects `strip_accents` None or a bool. Received: "
                f"{strip_accents!r}"
            )
        if not isinstance(max_length, int) or max_length < 3:
            raise ValueError(
                f"`BertTokenizer` expects an int `max_length` >= 3. Received: {max_length!r}"
            )
        self.vocabulary = vocabulary
        self.special_tokens = special
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.chinese_chars = chinese_chars
        self.max_length = max_length
        tf_text = _text_extra("tensorflow_text")
        self._tf_text = tf_text
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=vocabulary,
            suffix_indicator="##",
            unknown_token=special["unk"],
            no_pretokenization=True,
            support_detokenization=False,
            max_bytes_per_word=4 * _MAX_WORD_CHARS,  # the 100-character cut is below
            token_out_type=tf.int32,
        )

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def get_config(self):
        return {
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "chinese_chars": self.chinese_chars,
            "max_length": self.max_length,
            "special_tokens": self.special_tokens,
        }

    # -- text -> pieces --------------------------------------------------

    def normalize(self, strings):
        """Steps 1-3 on strings (any shape). Graph ops."""
        x = tf.convert_to_tensor(strings, tf.string)
        x = tf.strings.regex_replace(x, r"[\t\n\r\p{Z}]", " ")
        x = tf.strings.regex_replace(x, r"[\x{0}\x{FFFD}\p{C}]", "")
        if self.chinese_chars:
            x = tf.strings.regex_replace(x, "(" + _CJK + ")", r" \1 ")
        if self.strip_accents:
            x = self._tf_text.normalize_utf8(x, "NFD")
            x = tf.strings.regex_replace(x, r"\p{Mn}", "")
        if self.lowercase:
            x = tf.strings.lower(x, encoding="utf-8")
        return x

    def split(self, strings):
        """Steps 1-4: the pre-tokens of strings (batch,), ragged (batch,
        None) strings."""
        x = self.normalize(strings)
        return self._tf_text.regex_split(x, " +|" + _PUNCTUATION, _PUNCTUATION)

    def _pieces(self, words):
        """Step 5 on a flat vector of pre-tokens: ragged (words, pieces)."""
        long = tf.strings.length(words, unit="UTF8_CHAR") > _MAX_WORD_CHARS
        words = tf.where(long, self.special_tokens["unk"], words)
        return self._wordpiece.tokenize(words)

    def tokenize(self, strings):
        """WordPiece tokens (strings) of strings (batch,), ragged, without
        `[CLS]` / `[SEP]`. Graph ops."""
        ids = self.encode(strings, special_tokens=False)
        return tf.gather(tf.constant(self.vocabulary), ids)

    def encode(self, strings, special_tokens=True, max_length=None):
        """int32 ids of strings (batch,), ragged (batch, None):
        `[CLS] pieces [SEP]`, cut to `max_length` (default the
        tokenizer's). Graph ops."""
        check_strings("BertTokenizer.encode", "strings", strings)
        if max_length is None:
            max_length = self.max_length
        low = 3 if special_tokens else 1
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < low:
            raise ValueError(
                f"`BertTokenizer.encode` expects an int `max_length` >= {low} (or None). "
                f"Received: {max_length!r}"
            )
        tokens = self.split(tf.reshape(tf.convert_to_tensor(strings, tf.string), [-1]))
        pieces = tokens.with_flat_values(self._pieces(tokens.flat_values)).merge_dims(1, 2)
        if not special_tokens:
            return pieces[:, :max_length]
        pieces = pieces[:, : max_length - 2]
        batch = pieces.nrows()
        cls = tf.fill([batch, 1], self.special_ids["cls"])
        sep = tf.fill([batch, 1], self.special_ids["sep"])
        return tf.concat([cls, pieces, sep], axis=1)

    def encode_words(self, words, max_length=None):
        """For taggers: words (batch, words) strings, dense with "" as
        padding or ragged -> `(token_ids, word_starts)`: int32 dense
        `[CLS] pieces [SEP]` ids (batch, time) padded with `[PAD]`, and
        each word's first-piece position (batch, words), 0 at padding. A
        word with no piece (only control characters) is `[UNK]`; words
        whose first piece falls past `max_length - 1` point at the last
        kept piece. Graph ops."""
        max_length = max_length or self.max_length
        width = None  # dense words: word_starts keeps their width
        if not isinstance(words, tf.RaggedTensor):
            words = tf.convert_to_tensor(words, tf.string)
            width = tf.shape(words)[1]
            words = tf.RaggedTensor.from_tensor(words, padding="")
        tokens = self.split(words.flat_values)  # (all words, pre-tokens)
        pieces = tokens.with_flat_values(self._pieces(tokens.flat_values)).merge_dims(1, 2)
        counts = tf.cast(pieces.row_lengths(), tf.int32)
        unk = tf.fill([pieces.nrows(), 1], self.special_ids["unk"])
        keep = tf.ragged.range(counts + 1) < tf.maximum(counts, 1)[:, None]
        pieces = tf.ragged.boolean_mask(tf.concat([pieces, unk], axis=1), keep)
        lengths = words.with_flat_values(tf.cast(pieces.row_lengths(), tf.int32))
        starts = 1 + tf.cumsum(lengths, axis=1, exclusive=True)
        starts = tf.minimum(starts, max_length - 2)
        per_sentence = words.with_flat_values(pieces).merge_dims(1, 2)[:, : max_length - 2]
        batch = per_sentence.nrows()
        ids = tf.concat(
            [
                tf.fill([batch, 1], self.special_ids["cls"]),
                per_sentence,
                tf.fill([batch, 1], self.special_ids["sep"]),
            ],
            axis=1,
        )
        pad = self.special_ids["pad"]
        starts = starts.to_tensor(0)
        if width is not None:  # pad (trailing "" words) up to the input's width
            starts = tf.pad(starts, [[0, 0], [0, width - tf.shape(starts)[1]]])
        return ids.to_tensor(pad), starts

    # -- files -----------------------------------------------------------

    def save(self, directory):
        """Writes `directory/vocab.txt` and `directory/bert_tokenizer.json`;
        returns the directory."""
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, VOCABULARY), "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in self.vocabulary))
        with open(os.path.join(directory, SETTINGS), "w", encoding="utf-8") as f:
            json.dump(self.get_config(), f, indent=2)
        return directory

    @classmethod
    def load(cls, directory, max_length=None):
        """The tokenizer of `directory`: one written by `save`, a Hugging
        Face checkpoint (`tokenizer.json`, or `vocab.txt` with
        `tokenizer_config.json`) or a keras-hub preset
        (`assets/tokenizer/vocabulary.txt` with `tokenizer.json`)."""
        path = os.path.join
        if os.path.isfile(path(directory, SETTINGS)):
            with open(path(directory, SETTINGS), encoding="utf-8") as f:
                config = json.load(f)
            if max_length:
                config["max_length"] = max_length
            return cls(_read_lines(path(directory, VOCABULARY)), **config)
        options = {"max_length": max_length} if max_length else {}
        hf = path(directory, "tokenizer.json")
        if os.path.isfile(hf) and _is_hf_tokenizer(hf):
            vocabulary, settings = _from_hf_tokenizer(hf)
            return cls(vocabulary, **settings, **options)
        if os.path.isfile(path(directory, VOCABULARY)):
            lowercase = True
            settings = path(directory, "tokenizer_config.json")
            if os.path.isfile(settings):
                with open(settings, encoding="utf-8") as f:
                    lowercase = bool(json.load(f).get("do_lower_case", True))
            return cls(_read_lines(path(directory, VOCABULARY)), lowercase=lowercase, **options)
        assets = path(directory, "assets", "tokenizer", "vocabulary.txt")
        if os.path.isfile(assets):
            lowercase = False
            if os.path.isfile(hf):
                with open(hf, encoding="utf-8") as f:
                    lowercase = bool(json.load(f).get("config", {}).get("lowercase", False))
            return cls(_read_lines(assets), lowercase=lowercase, **options)
        raise ValueError(
            f"`BertTokenizer.load`: {directory} has no tokenizer (expected {SETTINGS} + "
            f"{VOCABULARY}, a Hugging Face tokenizer.json or vocab.txt, or a keras-hub "
            "assets/tokenizer/vocabulary.txt)"
        )


def _pad_width(ids, multiple, pad):
    """ids (batch, time) padded with `pad` to a width that is a multiple
    of `multiple`, so that a compiled model sees few shapes."""
    extra = (-tf.shape(ids)[1]) % multiple
    return tf.pad(ids, [[0, 0], [0, extra]], constant_values=pad)


def _read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").rstrip("\r") for line in f if line.rstrip("\n\r") != ""]


def _is_hf_tokenizer(path):
    with open(path, encoding="utf-8") as f:
        return "model" in json.load(f)


def _from_hf_tokenizer(path):
    """`(vocabulary, options)` of a Hugging Face `tokenizer.json` with a
    WordPiece model and a `BertNormalizer` (ValueError otherwise, naming
    the field)."""
    spec, model = read_tokenizer_json(path, "WordPiece", "`BertTokenizer.load`")
    if model.get("continuing_subword_prefix", "##") != "##":
        raise ValueError(
            f"`BertTokenizer.load`: {path} model.continuing_subword_prefix must be '##'. "
            f"Received: {model['continuing_subword_prefix']!r}"
        )
    normalizer = spec.get("normalizer") or {}
    if normalizer.get("type") != "BertNormalizer":
        raise ValueError(
            f"`BertTokenizer.load`: {path} normalizer.type must be 'BertNormalizer'. "
            f"Received: {normalizer.get('type')!r}"
        )
    pre = (spec.get("pre_tokenizer") or {}).get("type")
    if pre != "BertPreTokenizer":
        raise ValueError(
            f"`BertTokenizer.load`: {path} pre_tokenizer.type must be 'BertPreTokenizer'. "
            f"Received: {pre!r}"
        )
    vocab = model["vocab"]
    vocabulary = [None] * len(vocab)
    for token, i in vocab.items():
        vocabulary[i] = token
    options = {
        "lowercase": bool(normalizer.get("lowercase", True)),
        "strip_accents": normalizer.get("strip_accents"),
        "chinese_chars": bool(normalizer.get("handle_chinese_chars", True)),
        "special_tokens": {
            role: token
            for role, token in _DEFAULT_SPECIAL.items()
            if token in vocab or role in ("pad", "unk", "cls", "sep")
        },
    }
    if not normalizer.get("clean_text", True):
        raise ValueError(
            f"`BertTokenizer.load`: {path} normalizer.clean_text must be true. Received: false"
        )
    return vocabulary, options


class BertWordFeatures(tf.Module):
    """Words -> the inputs of a pretrained tagger (`seqkeras.pretrained.
    bert_tagger`): `token_ids` and `word_starts` from the checkpoint's
    `BertTokenizer`, and, as `seqkeras.data.WordFeatures` gives them,
    `char_ids` (with a character `WordTokenizer`) and `casing_ids`.

    Args:
        tokenizer: a `BertTokenizer`.
        characters: a cased character `WordTokenizer`, or None (no
            `char_ids`).
        casing: add `casing_ids`.
        max_chars: characters kept per word.
        pad_to_multiple: `token_ids` are padded to a multiple of this
            width, so that a compiled model sees few shapes.
    """

    def __init__(self, tokenizer, characters=None, casing=True, max_chars=20, pad_to_multiple=16):
        super().__init__(name="bert_word_features")
        from seqkeras.data.words import WordTokenizer

        if not isinstance(tokenizer, BertTokenizer):
            raise TypeError(
                "`BertWordFeatures` expects `tokenizer` to be a `BertTokenizer`. Received: "
                f"{type(tokenizer).__name__}"
            )
        if characters is not None and not isinstance(characters, WordTokenizer):
            raise TypeError(
                "`BertWordFeatures` expects `characters` to be a character `WordTokenizer` or "
                f"None. Received: {type(characters).__name__}"
            )
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ValueError(
                f"`BertWordFeatures` expects an int `max_chars` >= 1. Received: {max_chars!r}"
            )
        self.tokenizer = tokenizer
        self.characters = characters
        self.casing = bool(casing)
        self.max_chars = max_chars
        if not isinstance(pad_to_multiple, int) or pad_to_multiple < 1:
            raise ValueError(
                "`BertWordFeatures` expects an int `pad_to_multiple` >= 1. Received: "
                f"{pad_to_multiple!r}"
            )
        self.pad_to_multiple = pad_to_multiple

    @property
    def sizes(self):
        sizes = {"token_ids": self.tokenizer.vocabulary_size}
        if self.characters is not None:
            sizes["char_ids"] = self.characters.vocabulary_size
        return sizes

    def __call__(self, words):
        """Features of words (batch, words), dense with "" padding or
        ragged. Graph ops."""
        if isinstance(words, tf.RaggedTensor):
            words = words.to_tensor("")
        words = tf.convert_to_tensor(words, tf.string)
        token_ids, starts = self.tokenizer.encode_words(words)
        token_ids = _pad_width(token_ids, self.pad_to_multiple, self.tokenizer.special_ids["pad"])
        out = {"token_ids": token_ids, "word_starts": starts}
        if self.characters is not None:
            chars = tf.strings.unicode_split(words, "UTF-8")
            out["char_ids"] = self.characters.lookup(chars).to_tensor(
                0, shape=[None, None, self.max_chars]
            )
        if self.casing:
            out["casing_ids"] = casing(words)
        return out

    def split(self, strings):
        """Whitespace words of raw sentences (batch,): ragged (batch,
        None)."""
        return tf.strings.split(tf.convert_to_tensor(strings, tf.string))

    def save(self, directory):
        """Writes the tokenizer (`vocab.txt`, `bert_tokenizer.json`) and the
        character vocabulary (`characters/vocabulary.txt`)."""
        from seqkeras.data.word_features import CHARS_DIR

        self.tokenizer.save(directory)
        if self.characters is not None:
            self.characters.save(os.path.join(directory, CHARS_DIR))
        return directory

    @classmethod
    def load(cls, directory, casing=True, max_chars=20):
        """The features `save` wrote to `directory`."""
        from seqkeras.data.word_features import CHARS_DIR
        from seqkeras.data.words import WordTokenizer

        chars = os.path.join(directory, CHARS_DIR)
        characters = WordTokenizer.load(chars, lowercase=False) if os.path.isdir(chars) else None
        return cls(BertTokenizer.load(directory), characters, casing, max_chars)


class ElmoWordFeatures(tf.Module):
    """`WordFeatures` plus the subword ids an ELMo biLM reads: words ->
    `{"token_ids", "char_ids", "casing_ids", "elmo_ids", "word_starts"}`
    (`elmo_ids`: the biLM's `[CLS] pieces [SEP]` ids, padded with 0 to a
    multiple of 16;
    `word_starts`: each word's first piece, 0 at padding words; from
    `BertTokenizer.encode_words`).

    Args:
        word_features: a `WordFeatures`.
        tokenizer: the biLM's `BertTokenizer` (`pretraining_vocabulary`).

    Examples:
        >>> import tensorflow as tf
        >>> from seqkeras.data import WordFeatures, pretraining
        >>> from seqkeras.data.bert_text import ElmoWordFeatures
        >>> words = [["EU", "rejects", "German", "call"]]
        >>> tok = pretraining.pretraining_vocabulary([" ".join(words[0])], 200, sentinels=1)
        >>> f = ElmoWordFeatures(WordFeatures.train(words), tok)
        >>> out = f(tf.constant([["German", "call", ""]]))
        >>> starts = out["word_starts"].numpy()[0]  # [CLS] is 0; "" pads
        >>> int(starts[0]), bool(starts[1] > starts[0]), int(starts[2]), sorted(out)[1:3]
        (1, True, 0, ['char_ids', 'elmo_ids'])
    """

    def __init__(self, word_features, tokenizer):
        super().__init__(name="elmo_word_features")
        if not isinstance(word_features, WordFeatures):
            raise TypeError(
                "`ElmoWordFeatures` expects a `WordFeatures`. Received: "
                f"{type(word_features).__name__}"
            )
        if not isinstance(tokenizer, BertTokenizer):
            raise TypeError(
                "`ElmoWordFeatures` expects the biLM's `BertTokenizer`. Received: "
                f"{type(tokenizer).__name__}"
            )
        self.word_features, self.tokenizer = word_features, tokenizer
        self.max_chars = word_features.max_chars

    @property
    def sizes(self):
        return dict(self.word_features.sizes, elmo_ids=self.tokenizer.vocabulary_size)

    def __call__(self, words):
        out = self.word_features(words)
        elmo_ids, out["word_starts"] = self.tokenizer.encode_words(words)
        # a multiple of 16 as BertWordFeatures' (one XLA program per width)
        out["elmo_ids"] = _pad_width(elmo_ids, 16, self.tokenizer.special_ids["pad"])
        return out

    def split(self, strings):
        return self.word_features.split(strings)

    def save(self, directory):
        """The word features' vocabularies and the biLM's `vocab.txt`."""
        self.word_features.save(directory)
        self.tokenizer.save(directory)
        return directory

    @classmethod
    def load(cls, directory, max_chars=20):
        return cls(WordFeatures.load(directory, max_chars), BertTokenizer.load(directory))


class BertSubwordTokenizer(tf.Module):
    """A `BertTokenizer` whose special ids are seqkeras' (a
    `pretraining_vocabulary`: `[PAD]` 0, `[CLS]` = BOS 1, `[SEP]` = EOS 2)
    behind `SubwordTokenizer`'s methods (`encode(strings, add_bos,
    add_eos)`, `decode`, `vocabulary_size`, `save`, `load`), so that a
    seq2seq model, its data pipelines and its `translate` signature can
    read text as a model pretrained on that vocabulary did (e.g. the
    encoder of a span-corruption run, `seqkeras.models.load_encoder`).

    Args:
        tokenizer: the `BertTokenizer`.

    Examples:
        >>> from seqkeras.data import pretraining
        >>> from seqkeras.data.bert_text import BertSubwordTokenizer
        >>> bert = pretraining.pretraining_vocabulary(["the cat sat.", "a dog sat."], 60)
        >>> tok = BertSubwordTokenizer(bert)
        >>> ids = tok.encode(["The cat sat."], add_eos=True)
        >>> ids.to_list()[0][-1] == 2, [t.decode() for t in tok.decode(ids).numpy()]
        (True, ['the cat sat .'])
    """

    def __init__(self, tokenizer):
        super().__init__(name="bert_subword_tokenizer")
        if not isinstance(tokenizer, BertTokenizer):
            raise TypeError(
                "`BertSubwordTokenizer` expects `tokenizer` to be a `BertTokenizer`. Received: "
                f"{type(tokenizer).__name__}"
            )
        ids = tokenizer.special_ids
        expected = {"pad": PAD, "cls": BOS, "sep": EOS}
        if any(ids[role] != i for role, i in expected.items()):
            raise ValueError(
                "`BertSubwordTokenizer` expects a `tokenizer` with seqkeras' special ids "
                f"({expected}, as `pretraining_vocabulary` writes). Received: "
                f"{ {role: ids[role] for role in expected} }"
            )
        self.tokenizer = tokenizer
        self.vocabulary = tokenizer.vocabulary

    @property
    def vocabulary_size(self):
        return self.tokenizer.vocabulary_size

    def encode(self, strings, add_bos=False, add_eos=False):
        """Token ids of `strings` (batch,): an int32 `tf.RaggedTensor`
        (batch, None), not cut, with BOS (`[CLS]`) / EOS (`[SEP]`) added
        when asked. Graph ops."""
        check_strings("BertSubwordTokenizer.encode", "strings", strings)
        strings = tf.reshape(tf.convert_to_tensor(strings, tf.string), [-1])
        ids = self.tokenizer.encode(strings, special_tokens=False, max_length=2**31 - 1)
        return with_bos_eos(ids, add_bos, add_eos)

    def decode(self, ids):
        """Strings (batch,) from ids (batch, time), dense or ragged: reads up
        to the first EOS, skips the special tokens and joins `##`
        continuations (the text comes back normalised: lowercased for an
        uncased vocabulary, punctuation spaced). Graph ops."""
        ids, before_eos = ids_before_eos(ids, "BertSubwordTokenizer.decode")
        special = tf.constant(sorted(self.tokenizer.special_ids.values()), tf.int32)
        not_special = tf.reduce_all(tf.not_equal(ids[..., None], special), axis=-1)
        kept = tf.ragged.boolean_mask(ids, tf.logical_and(before_eos, not_special))
        check_decoded_ids("BertSubwordTokenizer.decode", kept, self.vocabulary_size)
        pieces = tf.gather(tf.constant(self.vocabulary), kept)
        text = tf.strings.reduce_join(pieces, axis=1, separator=" ")
        return tf.strings.regex_replace(text, " ##", "")

    def save(self, directory):
        """Writes the `BertTokenizer` (`vocab.txt`, `bert_tokenizer.json`)
        and, as `SubwordTokenizer.save` does, `vocabulary.txt` (the same
        tokens, for on-device code); returns the directory."""
        save_vocabulary(directory, self.vocabulary)
        return self.tokenizer.save(directory)

    @classmethod
    def load(cls, path):
        """The tokenizer saved in directory `path`."""
        return cls(BertTokenizer.load(path))


def translation_tokenizers(sources, targets, vocabulary_size, source_tokenizer=None):
    """The two WordPiece tokenizers of a translation model, learned from a
    parallel corpus: `SubwordTokenizer.train` on each side, or, with
    `source_tokenizer` given (e.g. a pretrained encoder's
    `BertSubwordTokenizer`), that one on the source side.

    Args:
        sources, targets: the training texts of each side.
        vocabulary_size: the size of each learned vocabulary.
        source_tokenizer: a tokenizer to keep on the source side, or None.

    Returns:
        `(source_tokenizer, target_tokenizer)`; save them with
        `save_translation_tokenizers`.
    """
    from seqkeras.data.subword import SubwordTokenizer

    name = "translation_tokenizers"
    if isinstance(vocabulary_size, bool) or not isinstance(vocabulary_size, int):
        raise TypeError(f"`{name}` expects an int `vocabulary_size`. Received: {vocabulary_size!r}")
    if vocabulary_size <= len(RESERVED):
        raise ValueError(
            f"`{name}` expects `vocabulary_size` above the {len(RESERVED)} reserved tokens. "
            f"Received: {vocabulary_size!r}"
        )
    sides = []
    for arg, texts in (("sources", sources), ("targets", targets)):
        if isinstance(texts, str):
            raise TypeError(f"`{name}` expects `{arg}` as a list of strings. Received: a str")
        if not isinstance(texts, tf.data.Dataset):
            texts = list(texts)
            if not texts:
                raise ValueError(f"`{name}` received no text in `{arg}`")
        sides.append(texts)
    sources, targets = sides
    if source_tokenizer is not None and not all(
        callable(getattr(source_tokenizer, m, None)) for m in ("encode", "decode", "save")
    ):
        raise TypeError(
            f"`{name}` expects `source_tokenizer` to be a tokenizer (e.g. a "
            f"`BertSubwordTokenizer`) or None. Received: {type(source_tokenizer).__name__}"
        )
    source = source_tokenizer or SubwordTokenizer.train(sources, vocabulary_size)
    return source, SubwordTokenizer.train(targets, vocabulary_size)


def save_translation_tokenizers(tokenizers, directory):
    """Saves `(source_tokenizer, target_tokenizer)` in `directory/source`
    and `directory/target`; returns the two paths.

    Args:
        tokenizers: the `(source, target)` pair, each with a `save` method.
        directory: the directory to write.

    Returns:
        The two paths.
    """
    if not isinstance(tokenizers, (tuple, list)) or len(tokenizers) != 2:
        raise ValueError(
            "`save_translation_tokenizers` expects `tokenizers` as a (source, target) pair. "
            f"Received: {type(tokenizers).__name__}"
        )
    for side, tokenizer in zip(_SIDES, tokenizers):
        if not callable(getattr(tokenizer, "save", None)):
            raise TypeError(
                "`save_translation_tokenizers` expects `tokenizers` with a `save` method. "
                f"Received: a {type(tokenizer).__name__} as the {side} tokenizer"
            )
    directory = validation.path("save_translation_tokenizers", "directory", directory)
    return tuple(t.save(os.path.join(directory, side)) for t, side in zip(tokenizers, _SIDES))


def load_translation_tokenizers(directory):
    """The `(source_tokenizer, target_tokenizer)` saved in `directory` by
    `save_translation_tokenizers`: a `BertSubwordTokenizer` where the side
    holds a pretrained encoder's vocabulary, else a `SubwordTokenizer`.

    Args:
        directory: the directory `save_translation_tokenizers` wrote.

    Returns:
        `(source_tokenizer, target_tokenizer)`.

    Raises:
        ValueError: a side is missing or unreadable.

    Examples:
        >>> import tempfile
        >>> from seqkeras.data import (load_translation_tokenizers,
        ...     save_translation_tokenizers, translation_tokenizers)
        >>> pair = translation_tokenizers(["ein Hund", "eine Katze"], ["a dog", "a cat"], 40)
        >>> d = tempfile.mkdtemp()
        >>> _ = save_translation_tokenizers(pair, d)
        >>> [type(t).__name__ for t in load_translation_tokenizers(d)]
        ['SubwordTokenizer', 'SubwordTokenizer']
    """
    from seqkeras.data.subword import SubwordTokenizer

    directory = validation.path("load_translation_tokenizers", "directory", directory)
    found = []
    for side in _SIDES:
        path = os.path.join(directory, side)
        if not os.path.isdir(path):
            raise ValueError(
                f"`load_translation_tokenizers`: no {side} vocabulary in directory={directory}"
            )
        bert = os.path.isfile(os.path.join(path, SETTINGS))
        found.append((BertSubwordTokenizer if bert else SubwordTokenizer).load(path))
    return tuple(found)


_SIDES = ("source", "target")
