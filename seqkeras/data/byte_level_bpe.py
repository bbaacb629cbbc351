"""Byte-level BPE (GPT-2's scheme: SmolLM2, GPT-2, RoBERTa, StarCoder and
other `tokenizer.ggml.model = "gpt2"` GGUF files) as servable graph ops:
`ByteLevelBPETokenizer`, with the checkpoint's chat template.

The steps are those of Hugging Face `tokenizers` (`ByteLevel` pre-tokenizer
and decoder, `BPE` model, the added tokens), which transformers runs, so
the ids are the checkpoint's own:

1. special tokens written in the text (`<|im_start|>`) are cut out whole,
   longest first, and become their ids; the text between them is
   tokenized piece by piece;
2. pre-tokenizer `"smollm"` only: every number character is a piece of
   its own (`tokenizers`' `Digits(individual_digits=True)`, llama.cpp's
   `smollm`);
3. GPT-2's split, `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+|
   ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`, with Oniguruma's Unicode `\\s`;
4. each piece's UTF-8 bytes spelled with GPT-2's byte-to-unicode map, then
   BPE: the adjacent pair of lowest merge rank, leftmost first, merged
   until no pair has a rank (the order of `tokenizers`' `Word::merge_all`).

RE2, TensorFlow's regex engine, has no lookahead (`\\s+(?!\\S)`), and its
`\\s` is ASCII: step 3 splits every whitespace character apart (a space
stays at the front of the word after it) and joins the runs again as
GPT-2's lookahead does: a run before a word loses its last character to
that word (a space) or to a piece of its own; a run at the end stays
whole. Letters and numbers are RE2's `\\p{L}` / `\\p{N}` plus the ones
Unicode 16 added, which `tokenizers`' Oniguruma knows and TensorFlow's
RE2 tables do not.

Why not keras-hub's `BytePairTokenizer` (installed with `seqkeras[text]`):
its split marks space boundaries with the character "६" (text containing
it is split wrongly), treats only four non-ASCII spaces as whitespace
(`\\x{85}`, `\\v`, U+2000-U+200A ... are not), and keeps a run of newlines
whole ("a\\n\\nb" gives "\\n\\n", GPT-2's regex "\\n", "\\n"), so its ids differ
from transformers' on ordinary multi-line text; and it has no
`smollm` digit split. The BPE loop here merges integer ids (a merge
table keyed by the id pair) over the distinct words of a batch.

The ops are core TensorFlow plus TF Text's `RegexSplitWithOffsets`, which
TF Serving's TF Text links (`seqkeras.export.assert_servable`).

Needs tensorflow-text (`pip install "seqkeras[text]"`); the chat template
needs jinja2 (>= 3.1.6, as transformers).
"""

import functools
import json
import os

import numpy as np
import tensorflow as tf

from seqkeras import _traced
from seqkeras.data.chat_templates import _compile_template, _plain

# bytes_to_unicode and read_gguf_metadata stay importable from here
from seqkeras.data.tokenizer_files import (  # noqa: F401
    _BYTE_CHARS,
    _CHAR_BYTES,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    _hf_tokenizer_json,
    bytes_to_unicode,
    read_gguf_metadata,
    read_settings,
)
from seqkeras.data.subword import check_decoded_ids
from seqkeras.data.tables import static_table

PRE_TOKENIZERS = ("gpt2", "smollm")

# Oniguruma's `\s` (Unicode White_Space), measured against `tokenizers`'
# ByteLevel split on every code point: RE2's `\s` is [\t\n\f\r ] only.
_SPACE_CHARS = r"\t\n\x{0B}\f\r\x{85}\p{Z}"
# Letters and numbers of Unicode 16 that TensorFlow's RE2 tables (older)
# class as neither; `tokenizers` (Oniguruma, Unicode 16) has them.
_NEW_LETTERS = (
    r"\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3}"
    r"\x{10D4A}-\x{10D65}\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{11380}-\x{11389}"
    r"\x{1138B}\x{1138E}\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3}"
    r"\x{11BC0}-\x{11BE0}\x{13460}-\x{143FA}\x{16100}-\x{1611D}\x{16D40}-\x{16D6C}"
    r"\x{18CFF}\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2EBF0}-\x{2EE5D}"
)
_NEW_NUMBERS = (
    r"\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{16130}-\x{16139}"
    r"\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1E5F1}-\x{1E5FA}"
)
_LETTER = r"[\p{L}" + _NEW_LETTERS + "]"
_NUMBER = r"[\p{N}" + _NEW_NUMBERS + "]"
_OTHER = r"[^" + _SPACE_CHARS + r"\p{L}" + _NEW_LETTERS + r"\p{N}" + _NEW_NUMBERS + "]"
_SPACE = "[" + _SPACE_CHARS + "]"
# GPT-2's alternatives, leftmost first, with one whitespace character per
# match in place of `\s+(?!\S)|\s+` (`_join_spaces` joins the runs).
_ATOMS = rf"'s|'t|'re|'ve|'m|'ll|'d| ?{_LETTER}+| ?{_NUMBER}+| ?{_OTHER}+|{_SPACE}"


def _no_autograph(method):
    """The graph methods are plain TensorFlow ops (the loop is a
    `tf.while_loop`): a caller's `tf.function` need not convert them."""
    return tf.autograph.experimental.do_not_convert(method)


def _tf_text():
    try:
        import tensorflow_text
    except ImportError as error:  # pragma: no cover - depends on extras
        raise ImportError(
            "`seqkeras.data.ByteLevelBPETokenizer` needs tensorflow-text: "
            'pip install "seqkeras[text]"'
        ) from error
    return tensorflow_text


def _re2_literal(text):
    """`text` as an RE2 pattern matching it literally."""
    return "".join(c if c.isascii() and c.isalnum() else rf"\x{{{ord(c):X}}}" for c in text)


def _token_bytes(token):
    """The bytes a token decodes to: its characters through GPT-2's map,
    or, when one is outside it (an added token spelled in plain text), its
    UTF-8 (`tokenizers`' ByteLevel decoder)."""
    if all(c in _CHAR_BYTES for c in token):
        return bytes(_CHAR_BYTES[c] for c in token)
    return token.encode("utf-8")


class ByteLevelBPETokenizer(tf.Module):
    """A byte-level BPE checkpoint's tokenizer (GPT-2's scheme), in graph
    ops: `encode` / `decode` can run in a `tf.function` and a SavedModel
    signature, and give transformers' ids.

    Args:
        vocabulary: the tokens in id order (a list), or `{token: id}` with
            ids 0..n-1, spelled in GPT-2's byte alphabet ("Ġthe").
        merges: the merges in rank order: `"a b"` strings or `(a, b)` pairs
            of vocabulary tokens whose join is in the vocabulary.
        pre_tokenizer: `"gpt2"` (GPT-2's split: `tokenizers`' ByteLevel,
            and what transformers builds from a GGUF file, SmolLM2's
            included) or `"smollm"` (each number character apart first,
            then GPT-2's split: SmolLM2's own `tokenizer.json` and
            llama.cpp).
        bos_id, eos_id: the BOS / EOS ids (None: none), added by `encode`
            when asked and in the chat template as `bos_token` /
            `eos_token`.
        special_tokens: the tokens cut out of the text whole (transformers'
            added tokens); default: the BOS and EOS tokens.
        add_bos, add_eos: what `encode` adds by default (transformers'
            default for the checkpoint: neither for SmolLM2).
        chat_template: the checkpoint's Jinja chat template, or None.
        pad_id, unk_id: ids transformers names `pad_token` / `unk_token`
            (chat-template variables only: byte-level BPE has no unknown
            input).

    A byte whose character the vocabulary lacks is dropped, as
    `tokenizers` drops it (SmolLM2 lacks 0x04, 0x06, 0x13, 0x14, 0x16,
    0x1D, 0xF1 and 0xF2: those controls and U+40000-U+BFFFF do not come
    back from `decode`).

    Examples:
        >>> from seqkeras.data import ByteLevelBPETokenizer
        >>> vocab = ["<s>", "</s>", "a", "b", "c", "Ġ", "ab", "Ġab", "Ġabc"]
        >>> tok = ByteLevelBPETokenizer(vocab, ["a b", "Ġ ab", "Ġab c"], bos_id=0, eos_id=1)
        >>> ids = tok.encode(["ab abc", "<s>ab"])
        >>> ids.to_list(), tok.encode("ab", add_bos=True, add_eos=True).to_list()
        ([[6, 8], [0, 6]], [[0, 6, 1]])
        >>> [s.decode() for s in tok.decode(ids).numpy()]
        ['ab abc', '<s>ab']
        >>> tok.chat_template = "{% for m in messages %}<s>{{ m['content'] }}</s>{% endfor %}"
        >>> tok.apply_chat_template([{"role": "user", "content": "abc"}])
        '<s>abc</s>'
    """

    def __init__(
        self,
        vocabulary,
        merges,
        pre_tokenizer="gpt2",
        bos_id=None,
        eos_id=None,
        special_tokens=None,
        add_bos=False,
        add_eos=False,
        chat_template=None,
        pad_id=None,
        unk_id=None,
    ):
        super().__init__(name="byte_level_bpe_tokenizer")
        where = "`ByteLevelBPETokenizer`"
        vocabulary = _vocabulary_list(vocabulary, where)
        size = len(vocabulary)
        index = {t: i for i, t in enumerate(vocabulary)}
        if pre_tokenizer not in PRE_TOKENIZERS:
            raise ValueError(
                f"{where} expects `pre_tokenizer` among {list(PRE_TOKENIZERS)}. "
                f"Received: {pre_tokenizer!r}"
            )
        ids = {}
        for arg, value in (
            ("bos_id", bos_id),
            ("eos_id", eos_id),
            ("pad_id", pad_id),
            ("unk_id", unk_id),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, np.integer))
            ):
                raise ValueError(f"{where} expects an int or None `{arg}`. Received: {value!r}")
            if value is not None and not 0 <= value < size:
                raise ValueError(
                    f"{where} expects `{arg}` in [0, {size}) (the vocabulary). Received: {value}"
                )
            ids[arg] = None if value is None else int(value)
        for arg, value in (("add_bos", add_bos), ("add_eos", add_eos)):
            if not isinstance(value, bool):
                raise ValueError(f"{where} expects a bool `{arg}`. Received: {value!r}")
        if add_bos and ids["bos_id"] is None:
            raise ValueError(f"{where}: `add_bos=True` needs a `bos_id`. Received: None")
        if add_eos and ids["eos_id"] is None:
            raise ValueError(f"{where}: `add_eos=True` needs an `eos_id`. Received: None")
        if chat_template is not None and not isinstance(chat_template, str):
            raise ValueError(
                f"{where} expects a str or None `chat_template`. Received: "
                f"{type(chat_template).__name__}"
            )
        if special_tokens is None:
            special_tokens = [
                vocabulary[i] for i in (ids["bos_id"], ids["eos_id"]) if i is not None
            ]
        if isinstance(special_tokens, str):
            raise ValueError(
                f"{where} expects `special_tokens` as a list of tokens. Received: the str "
                f"{special_tokens!r}"
            )
        special_tokens = list(dict.fromkeys(special_tokens))
        for token in special_tokens:
            if not isinstance(token, str) or token not in index or not token:
                raise ValueError(
                    f"{where} expects `special_tokens` from the vocabulary. Received: {token!r}"
                )
        pairs = _merge_pairs(merges, index, where)

        self.vocabulary = vocabulary
        self.merges = tuple(f"{a} {b}" for a, b in pairs)
        self.pre_tokenizer = pre_tokenizer
        self.bos_id, self.eos_id = ids["bos_id"], ids["eos_id"]
        self.pad_id, self.unk_id = ids["pad_id"], ids["unk_id"]
        self.special_tokens = tuple(special_tokens)
        self.add_bos, self.add_eos = add_bos, add_eos
        self.chat_template = chat_template
        self._tf_text = _tf_text()

        # merge table: (left id * size + right id) -> rank * size + merged id
        # (a later duplicate wins, as in `tokenizers`' merge map)
        table = {}
        for rank, (a, b) in enumerate(pairs):
            table[index[a] * size + index[b]] = rank * size + index[a + b]
        keys = np.fromiter(table.keys(), np.int64, len(table))
        values = np.fromiter(table.values(), np.int64, len(table))
        if not len(keys):  # StaticHashTable needs a key: one no pair reaches
            keys, values = np.array([-1], np.int64), np.array([-1], np.int64)
        self._merge_table = static_table(keys, values, -1)
        self._size = tf.constant(size, tf.int64)
        byte_ids = [index.get(_BYTE_CHARS[b], -1) for b in range(256)]
        self._byte_ids = tf.constant(byte_ids, tf.int32)
        self._tokens = tf.constant(vocabulary)
        self._bytes = tf.constant([_token_bytes(t) for t in vocabulary])
        special_ids = [index[t] for t in special_tokens]
        is_special = np.zeros(size, bool)
        is_special[special_ids] = True
        self._is_special = tf.constant(is_special)
        if special_tokens:
            by_length = sorted(special_tokens, key=len, reverse=True)  # leftmost-longest
            self._special_pattern = "|".join(_re2_literal(t) for t in by_length)
            self._special_table = static_table(
                tf.constant(special_tokens), tf.constant(special_ids, tf.int32), -1
            )
        else:
            self._special_pattern = None

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def get_config(self):
        return {
            "pre_tokenizer": self.pre_tokenizer,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
            "special_tokens": list(self.special_tokens),
            "add_bos": self.add_bos,
            "add_eos": self.add_eos,
            "chat_template": self.chat_template,
            "pad_id": self.pad_id,
            "unk_id": self.unk_id,
        }

    # -- text -> pieces --------------------------------------------------

    def _texts(self, texts, where):
        if isinstance(texts, tf.RaggedTensor):
            raise ValueError(f"`{where}` expects strings (batch,). Received: a RaggedTensor")
        if isinstance(texts, (tf.Tensor, tf.Variable)) and texts.dtype != tf.string:
            raise ValueError(f"`{where}` expects strings. Received: dtype {texts.dtype.name}")
        try:
            texts = tf.convert_to_tensor(texts, tf.string)
        except (TypeError, ValueError) as error:
            raise ValueError(f"`{where}` expects strings. Received: {texts!r}") from error
        if texts.shape.rank is not None and texts.shape.rank > 1:
            raise ValueError(
                f"`{where}` expects a string or strings (batch,). Received: shape {texts.shape}"
            )
        return tf.reshape(texts, [-1])

    def _split(self, texts, split_special_tokens):
        """`(pieces, special, parts, words)` of texts (batch,): the pieces
        between special tokens (batch, pieces), each piece's special id (-1
        for text), the `"smollm"` number split of the text pieces (pieces,
        parts) or None, and the pre-tokens of the parts (or pieces)."""
        if self._special_pattern is not None and not split_special_tokens:
            pieces = self._regex_split(texts, self._special_pattern)
            special = self._special_table.lookup(pieces.flat_values)
        else:
            pieces = tf.RaggedTensor.from_tensor(texts[:, None])
            special = tf.fill(tf.shape(texts), -1)
        text = tf.where(special >= 0, "", pieces.flat_values)
        parts = None
        if self.pre_tokenizer == "smollm":
            parts = self._regex_split(text, _NUMBER)
            text = parts.flat_values
        atoms = self._regex_split(text, _ATOMS)
        return pieces, special, parts, _join_spaces(atoms)

    def _regex_split(self, texts, pattern):
        """The matches of `pattern` in texts (n,) and the text between them:
        ragged (n, None). TF Text's split ends a string at its first NUL,
        so it runs on a copy with NUL as U+0001 (the same class in every
        pattern here) and the pieces are cut from the texts by offset."""
        safe = tf.strings.regex_replace(texts, "\\x00", "\x01")
        pieces, begins, ends = self._tf_text.regex_split_with_offsets(safe, pattern, pattern)
        rows = tf.gather(texts, pieces.value_rowids())
        begin = begins.flat_values
        return pieces.with_flat_values(tf.strings.substr(rows, begin, ends.flat_values - begin))

    @_no_autograph
    def pre_tokenize(self, texts, split_special_tokens=False):
        """The pieces BPE sees, as text: strings (batch,) -> ragged
        (batch, None) strings, special tokens included whole (compare
        `tokenizers`' `pre_tokenize_str`, which spells them in GPT-2's
        byte alphabet). Graph ops."""
        texts = self._texts(texts, "ByteLevelBPETokenizer.pre_tokenize")
        pieces, special, parts, words = self._split(texts, split_special_tokens)
        if parts is not None:
            words = parts.with_flat_values(words).merge_dims(1, 2)
        is_special = special[:, None] >= 0
        whole = tf.ragged.boolean_mask(pieces.flat_values[:, None], is_special)
        words = tf.concat([words, whole], axis=1)
        return pieces.with_flat_values(words).merge_dims(1, 2)

    # -- BPE -------------------------------------------------------------

    def _bpe(self, words):
        """Ids of distinct non-empty pre-tokens (words,): ragged (words,
        None) int32. Each step merges, in every word still merging, the
        leftmost pair of lowest rank; a word with no ranked pair leaves
        the loop (so a long word costs its own steps only)."""
        chars = tf.strings.bytes_split(words)
        byte_values = tf.reshape(tf.io.decode_raw(chars.flat_values, tf.uint8), [-1])
        ids = tf.gather(self._byte_ids, tf.cast(byte_values, tf.int32))
        known = ids >= 0  # a byte the vocabulary lacks is dropped (no unk)
        ids = tf.boolean_mask(ids, known)
        nrows = chars.nrows()
        lengths = tf.math.unsorted_segment_sum(
            tf.cast(known, tf.int64), chars.value_rowids(), nrows
        )
        size, table = self._size, self._merge_table
        never = tf.int64.max

        def merge(values, lengths, index, done_values, done_lengths, done_index):
            count = tf.size(lengths, out_type=tf.int64)
            rows = tf.repeat(tf.range(count), lengths)
            pair_rows = rows[:-1]
            same_word = tf.equal(rows[1:], pair_rows)
            keys = tf.cast(values[:-1], tf.int64) * size + tf.cast(values[1:], tf.int64)
            found = table.lookup(keys)
            found = tf.where(same_word & (found >= 0), found, never)
            best = tf.math.unsorted_segment_min(found, pair_rows, count)
            merging = best < never
            at_best = tf.equal(found, tf.gather(best, pair_rows)) & (found < never)
            positions = tf.range(tf.size(found, out_type=tf.int64), dtype=tf.int64)
            first = tf.math.unsorted_segment_min(
                tf.where(at_best, positions, never), pair_rows, count
            )
            at = tf.boolean_mask(first, merging)[:, None]
            merged = tf.cast(tf.boolean_mask(best, merging) % size, tf.int32)
            values = tf.tensor_scatter_nd_update(values, at, merged)
            keep = tf.tensor_scatter_nd_update(
                tf.ones_like(values, tf.bool), at + 1, tf.zeros_like(merged, tf.bool)
            )
            values = tf.boolean_mask(values, keep)
            lengths = lengths - tf.cast(merging, tf.int64)
            still = tf.repeat(merging, lengths)  # per value: its word merges on
            done_values = tf.concat([done_values, tf.boolean_mask(values, ~still)], axis=0)
            done_lengths = tf.concat([done_lengths, tf.boolean_mask(lengths, ~merging)], 0)
            done_index = tf.concat([done_index, tf.boolean_mask(index, ~merging)], axis=0)
            values = tf.boolean_mask(values, still)
            lengths = tf.boolean_mask(lengths, merging)
            index = tf.boolean_mask(index, merging)
            return values, lengths, index, done_values, done_lengths, done_index

        vector = tf.TensorShape([None])
        _, _, _, values, lengths, index = tf.while_loop(
            lambda values, lengths, index, *done: tf.size(index) > 0,
            merge,
            (
                ids,
                lengths,
                tf.range(nrows),
                tf.zeros([0], tf.int32),
                tf.zeros([0], tf.int64),
                tf.zeros([0], tf.int64),
            ),
            shape_invariants=(vector,) * 6,
        )
        finished = tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)
        return tf.gather(finished, tf.math.invert_permutation(index))

    @_no_autograph
    def encode(self, texts, add_bos=None, add_eos=None, split_special_tokens=False):
        """int32 ids of texts (batch,) (a str: batch 1): a `tf.RaggedTensor`
        (batch, None), as transformers' `tokenizer(texts)["input_ids"]`.
        Graph ops.

        Args:
            texts: UTF-8 strings.
            add_bos, add_eos: prepend BOS / append EOS (None: the
                tokenizer's `add_bos` / `add_eos`).
            split_special_tokens: read special tokens written in the text
                as plain text (transformers' `split_special_tokens`); by
                default each is its id.
        """
        where = "ByteLevelBPETokenizer.encode"
        texts = self._texts(texts, where)
        add_bos = self.add_bos if add_bos is None else add_bos
        add_eos = self.add_eos if add_eos is None else add_eos
        for arg, value, token_id in (
            ("add_bos", add_bos, self.bos_id),
            ("add_eos", add_eos, self.eos_id),
        ):
            if not isinstance(value, bool):
                raise ValueError(f"`{where}` expects a bool or None `{arg}`. Received: {value!r}")
            if value and token_id is None:
                raise ValueError(
                    f"`{where}`: `{arg}=True` needs the tokenizer's {arg[4:]}_id. Received: None"
                )
        if not isinstance(split_special_tokens, bool):
            raise ValueError(
                f"`{where}` expects a bool `split_special_tokens`. Received: "
                f"{split_special_tokens!r}"
            )
        options = (add_bos, add_eos, split_special_tokens)
        if tf.executing_eagerly():  # one traced graph per options: no eager while loop
            # kept off the tf.Module's tracked attributes (`seqkeras._traced`),
            # so that a SavedModel holds only the signatures its caller writes
            encode = _traced.cached(
                self,
                "encode",
                options,
                lambda: tf.function(
                    functools.partial(self._encode, options=options),
                    input_signature=[tf.TensorSpec([None], tf.string)],
                    autograph=False,
                ),
            )
            return encode(texts)
        return self._encode(texts, options)

    def _encode(self, texts, options):
        add_bos, add_eos, split_special_tokens = options
        pieces, special, parts, words = self._split(texts, split_special_tokens)
        distinct, index = tf.unique(words.flat_values)
        ids = tf.gather(self._bpe(distinct), index)
        ids = words.with_flat_values(ids).merge_dims(1, 2)
        if parts is not None:
            ids = parts.with_flat_values(ids).merge_dims(1, 2)
        special = special[:, None]
        ids = tf.concat([ids, tf.ragged.boolean_mask(special, special >= 0)], axis=1)
        ids = pieces.with_flat_values(ids).merge_dims(1, 2)
        batch = ids.nrows()
        if add_bos:
            ids = tf.concat([tf.fill([batch, 1], self.bos_id), ids], axis=1)
        if add_eos:
            ids = tf.concat([ids, tf.fill([batch, 1], self.eos_id)], axis=1)
        return ids

    @_no_autograph
    def tokenize(self, texts, split_special_tokens=False):
        """The tokens (strings, GPT-2's byte alphabet) of texts (batch,),
        ragged, without BOS / EOS. Graph ops."""
        ids = self.encode(texts, False, False, split_special_tokens)
        return tf.gather(self._tokens, ids)

    @_no_autograph
    def decode(self, ids, skip_special_tokens=False):
        """Strings from ids: (batch, time), dense or ragged -> (batch,), or
        one sequence (time,) -> a scalar string. Bytes that are not UTF-8
        (a sequence cut inside a character) become U+FFFD. Graph ops.

        Args:
            ids: int token ids.
            skip_special_tokens: leave out the special tokens (and BOS /
                EOS).
        """
        where = "ByteLevelBPETokenizer.decode"
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)
        if not ids.dtype.is_integer:
            raise ValueError(f"`{where}` expects int ids. Received: dtype {ids.dtype.name}")
        rank = ids.shape.rank
        if rank not in (1, 2):
            raise ValueError(
                f"`{where}` expects ids (batch, time) or (time,). Received: shape {ids.shape}"
            )
        one = rank == 1
        if one:
            ids = ids[None]
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.cast(ids, tf.int32)
        check_decoded_ids(where, ids, self.vocabulary_size)
        if skip_special_tokens:
            ids = tf.ragged.boolean_mask(ids, ~tf.gather(self._is_special, ids))
        text = tf.strings.reduce_join(tf.gather(self._bytes, ids), axis=1)
        text = tf.strings.unicode_transcode(
            text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        return text[0] if one else text

    # -- chat ------------------------------------------------------------

    @property
    def special_tokens_map(self):
        """The chat template's token variables, as transformers passes
        them: `bos_token`, `eos_token`, `unk_token`, `pad_token` (those
        set)."""
        names = {"bos_token": self.bos_id, "eos_token": self.eos_id}
        names.update(unk_token=self.unk_id, pad_token=self.pad_id)
        return {k: self.vocabulary[i] for k, i in names.items() if i is not None}

    def apply_chat_template(
        self, messages, add_generation_prompt=True, tools=None, documents=None, **kwargs
    ):
        """The prompt string of a conversation, rendered as transformers'
        `apply_chat_template(messages, tokenize=False, ...)` does (a
        sandboxed jinja2 environment with `trim_blocks` / `lstrip_blocks`,
        `raise_exception`, `strftime_now`, a `tojson` that keeps non-ASCII
        text, the special tokens as variables). `encode` the string
        (special tokens in it become their ids) for the model's prompt.

        Args:
            messages: `[{"role": ..., "content": ...}, ...]` (keys whose
                value is None are dropped, as transformers does).
            add_generation_prompt: end with the assistant turn's header.
            tools, documents: passed to the template.
            **kwargs: more template variables.
        """
        where = "ByteLevelBPETokenizer.apply_chat_template"
        if self.chat_template is None:
            raise ValueError(
                f"`{where}`: this tokenizer has no chat template (`chat_template` is None)"
            )
        if isinstance(messages, dict) or not isinstance(messages, (list, tuple)) or not messages:
            raise ValueError(
                f"`{where}` expects a non-empty list of message dicts. Received: {messages!r}"
            )
        for message in messages:
            if not isinstance(message, dict):
                raise ValueError(f"`{where}` expects each message as a dict. Received: {message!r}")
        messages = [{k: v for k, v in m.items() if v is not None} for m in messages]
        template = _compile_template(self.chat_template)
        variables = dict(self.special_tokens_map, **kwargs)
        return template.render(
            messages=_plain(messages),
            tools=_plain(tools),
            documents=_plain(documents),
            add_generation_prompt=add_generation_prompt,
            **_plain(variables),
        )

    # -- files -----------------------------------------------------------

    def save(self, directory):
        """Writes `directory/tokenizer.json` (Hugging Face's format: a BPE
        model with the ByteLevel pre-tokenizer and decoder, the special
        tokens as added tokens) and `tokenizer_config.json` (the chat
        template, the BOS / EOS / PAD / UNK tokens, `add_bos_token`,
        `add_eos_token`); returns the directory. `load` reads it, and so
        do `tokenizers` and transformers."""
        os.makedirs(directory, exist_ok=True)
        spec = _hf_tokenizer_json(self)
        with open(os.path.join(directory, TOKENIZER_JSON), "w", encoding="utf-8") as f:
            json.dump(spec, f, ensure_ascii=False)
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "add_bos_token": self.add_bos,
            "add_eos_token": self.add_eos,
            **self.special_tokens_map,
        }
        if self.chat_template is not None:
            config["chat_template"] = self.chat_template
        with open(os.path.join(directory, TOKENIZER_CONFIG), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=2)
        return directory

    @classmethod
    def load(cls, path, pre_tokenizer=None):
        """The tokenizer of `path`: a GGUF file (`tokenizer.ggml.model`
        "gpt2"; the vocabulary, merges, control tokens, BOS / EOS / PAD /
        UNK ids, `add_bos_token` / `add_eos_token` and
        `tokenizer.chat_template` of its metadata, read as transformers'
        GGUF loader reads them), or a directory (or file) with a Hugging
        Face `tokenizer.json` (a BPE model, the ByteLevel pre-tokenizer,
        optionally after `Digits(individual_digits=True)`), with its
        `tokenizer_config.json` / `chat_template.jinja` if present.

        Args:
            path: the file or directory.
            pre_tokenizer: None (the one transformers uses for the file:
                `"gpt2"` for every GGUF it does not give a split of its
                own, SmolLM2's `"smollm"` included), or a name from
                `PRE_TOKENIZERS` to use instead.
        """
        where = "`ByteLevelBPETokenizer.load`"
        if pre_tokenizer is not None and pre_tokenizer not in PRE_TOKENIZERS:
            raise ValueError(
                f"{where} expects `pre_tokenizer` None or among {list(PRE_TOKENIZERS)}. "
                f"Received: {pre_tokenizer!r}"
            )
        settings = read_settings(path, where)
        if pre_tokenizer is not None:
            settings["pre_tokenizer"] = pre_tokenizer
        return cls(**settings)


def _vocabulary_list(vocabulary, where):
    if isinstance(vocabulary, dict):
        size = len(vocabulary)
        tokens = [None] * size
        for token, i in vocabulary.items():
            if not isinstance(i, (int, np.integer)) or not 0 <= i < size or tokens[i] is not None:
                raise ValueError(
                    f"{where} expects `vocabulary` ids 0..{size - 1}, once each. Received: "
                    f"{token!r}: {i!r}"
                )
            tokens[i] = token
        vocabulary = tokens
    if isinstance(vocabulary, str) or not hasattr(vocabulary, "__len__"):
        raise ValueError(
            f"{where} expects `vocabulary` as a list of tokens or a dict token -> id. "
            f"Received: {type(vocabulary).__name__}"
        )
    vocabulary = list(vocabulary)
    if not vocabulary or not all(isinstance(t, str) and t for t in vocabulary):
        raise ValueError(
            f"{where} expects `vocabulary` as non-empty strings (at least one). Received: "
            f"{vocabulary[:5]!r}..."
        )
    if len(set(vocabulary)) != len(vocabulary):
        seen, repeated = set(), None
        for token in vocabulary:
            if token in seen:
                repeated = token
                break
            seen.add(token)
        raise ValueError(
            f"{where} expects distinct `vocabulary` tokens. Received: {repeated!r} twice"
        )
    return vocabulary


def _merge_pairs(merges, index, where):
    if isinstance(merges, str) or not hasattr(merges, "__iter__"):
        raise ValueError(
            f"{where} expects `merges` as a list of 'a b' strings or (a, b) pairs. Received: "
            f"{type(merges).__name__}"
        )
    pairs = []
    for merge in merges:
        pair = merge.split(" ") if isinstance(merge, str) else merge
        if (
            isinstance(pair, str)
            or len(pair) != 2
            or not all(isinstance(p, str) and p for p in pair)
        ):
            raise ValueError(f"{where} expects each merge as 'a b' or (a, b). Received: {merge!r}")
        a, b = pair
        for token in (a, b, a + b):
            if token not in index:
                raise ValueError(
                    f"{where} expects merges of vocabulary tokens into a vocabulary token. "
                    f"Received: {merge!r} ({token!r} is not in the vocabulary)"
                )
        pairs.append((a, b))
    return pairs


def _join_spaces(atoms):
    """GPT-2's whitespace pieces from single-whitespace atoms: ragged
    (rows, atoms) -> (rows, pieces). A run of whitespace atoms is one
    piece, except that before a piece that does not start with a space
    (the run's last character is not a space) its last atom is a piece of
    its own: `\\s+(?!\\S)|\\s+` (a space before a word is already that
    word's first character)."""
    values = atoms.flat_values
    rows = atoms.value_rowids()
    n = tf.size(values)
    space = tf.strings.regex_full_match(values, _SPACE)
    spaced = (tf.strings.substr(values, 0, 1) == " ") & (tf.strings.length(values) > 1)
    same_row = tf.equal(rows[1:], rows[:-1])
    next_ok = tf.concat([~same_row | space[1:] | spaced[1:], [True]], axis=0)[:n]
    after_space = tf.concat([[False], same_row & space[:-1]], axis=0)[:n]
    starts = ~(space & after_space & next_ok)
    segments = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    count = tf.reduce_sum(tf.cast(starts, tf.int64))
    joined = tf.strings.unsorted_segment_join(values, segments, count)
    lengths = tf.math.unsorted_segment_sum(tf.cast(starts, tf.int64), rows, atoms.nrows())
    return tf.RaggedTensor.from_row_lengths(joined, lengths, validate=False)
