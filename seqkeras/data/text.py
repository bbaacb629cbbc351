"""Character vocabularies and local text readers.

Why not a keras-hub tokenizer here: keras-hub's character-level tokenizer
(`UnicodeCodepointTokenizer`) maps characters to code points (a vocabulary
as large as the largest code point, no reserved BOS/EOS ids), and its
`WordPieceTokenizer` needs a word-piece vocabulary. The tasks here want a
compact vocabulary built from the corpus with fixed PAD/BOS/EOS/UNK ids
shared with the synthetic tasks, as NumPy arrays for `fit`. The vocabulary
list is all a graph tokenizer needs (`keras.layers.StringLookup` over
`tf.strings.unicode_split`), which is what the export code builds from it.
"""

import os

import numpy as np

from seqkeras.data.tokens import BOS, EOS, PAD, RESERVED, UNK, UNK_TEXT
from seqkeras.layers import validation


class CharVocabulary:
    """A character vocabulary with PAD=0, BOS=1, EOS=2, UNK=3.

    Args:
        characters: the characters, in id order from 4; duplicates and
            order of first appearance are kept as given.

    Examples:
        >>> from seqkeras.data import CharVocabulary
        >>> vocab = CharVocabulary.from_texts(["abc", "cab"])
        >>> ids = vocab.encode(["cab"], add_eos=True)
        >>> ids.tolist(), vocab.decode(ids), len(vocab)
        ([[6, 4, 5, 2]], ['cab'], 7)
    """

    def __init__(self, characters):
        characters = list(characters)
        if len(set(characters)) != len(characters):
            raise ValueError("`CharVocabulary` received duplicate characters")
        if any(len(c) != 1 for c in characters):
            raise ValueError("`CharVocabulary` expects single characters")
        self.characters = characters
        self.tokens = list(RESERVED) + characters
        self._ids = {c: i + len(RESERVED) for i, c in enumerate(characters)}

    @classmethod
    def from_texts(cls, texts):
        """The sorted set of characters in `texts`."""
        return cls(sorted(set("".join(texts))))

    def __len__(self):
        return len(self.tokens)

    def encode(self, texts, max_length=None, add_bos=False, add_eos=False):
        """Strings (a list, or one string: one row) to an int32 array (n,
        max_length), right-padded with 0; unknown characters become UNK. A
        text longer than `max_length` raises (nothing is cut silently)."""
        if isinstance(texts, str):
            texts = [texts]
        rows = []
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(
                    "`CharVocabulary.encode` expects `texts` to be strings. Received: "
                    f"{text!r} ({type(text).__name__}) in texts"
                )
            ids = [self._ids.get(c, UNK) for c in text]
            rows.append(([BOS] if add_bos else []) + ids + ([EOS] if add_eos else []))
        longest = max((len(r) for r in rows), default=0)
        max_length = longest if max_length is None else max_length
        if longest > max_length:
            raise ValueError(
                f"`CharVocabulary.encode`: a text needs {longest} ids, more "
                f"than max_length={max_length}"
            )
        out = np.full((len(rows), max_length), PAD, "int32")
        for i, r in enumerate(rows):
            out[i, : len(r)] = r
        return out

    def encode_text(self, text):
        """One string to a 1-D int32 array (no padding, BOS or EOS)."""
        return np.array([self._ids.get(c, UNK) for c in text], "int32")

    def decode(self, ids):
        """Rows of ids to strings; stops at EOS, skips PAD and BOS. An id
        outside the vocabulary raises a ValueError."""
        validation.numeric("CharVocabulary.decode", "ids", np.asarray(ids))
        validation.whole_numbers("CharVocabulary.decode", "ids", np.asarray(ids))
        validation.ids_in_range("CharVocabulary.decode", "ids", np.asarray(ids), len(self.tokens))
        out = []
        for row in np.asarray(ids).reshape(-1, np.shape(ids)[-1]):
            chars = []
            for i in row.tolist():
                if i == EOS:
                    break
                if i in (PAD, BOS):
                    continue
                chars.append(self.tokens[i] if i != UNK else UNK_TEXT)
            out.append("".join(chars))
        return out

    def decode_table(self):
        """The text of each id, as `decode` shows it (PAD, BOS, EOS -> "",
        UNK -> "?"): the table a graph decoder gathers from."""
        return ["", "", "", UNK_TEXT] + list(self.characters)

    def get_config(self):
        return {"characters": "".join(self.characters)}

    @classmethod
    def from_config(cls, config):
        return cls(config["characters"])

    def save(self, directory, name="vocabulary.json"):
        """Writes `directory/<name>`: the characters in id order (JSON, as
        `get_config`); returns its path.

        Examples:
            >>> import tempfile
            >>> from seqkeras.data import CharVocabulary
            >>> path = CharVocabulary("abc!").save(tempfile.mkdtemp())
            >>> CharVocabulary.load(path).characters == list("abc!")
            True
        """
        import json

        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.get_config(), f)
        return path

    @classmethod
    def load(cls, path):
        """The vocabulary `save` wrote at `path` (the file, or its
        directory). Raises a ValueError naming the file when it is
        missing or not a saved vocabulary."""
        import json

        if os.path.isdir(path):
            path = os.path.join(path, "vocabulary.json")
        try:
            with open(path, encoding="utf-8") as f:
                return cls(json.load(f)["characters"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"`CharVocabulary.load`: {path} is not a saved character vocabulary ({error})"
            ) from None


def _candidates():
    """Where `shared_data_dir` looks, in order."""
    found = []
    if os.environ.get("SEQKERAS_DATA"):
        found.append(os.environ["SEQKERAS_DATA"])
    found.append(os.path.join(os.getcwd(), "..", "shared", "data"))
    # a source checkout placed next to the data (not an installed package)
    found.append(os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data"))
    return [os.path.abspath(p) for p in found]


def shared_data_dir():
    """The local data directory: `$SEQKERAS_DATA` if set, else
    `../shared/data` from the working directory (or from a source
    checkout); None when none exists. Nothing is downloaded.

    Examples:
        >>> from seqkeras.data.text import shared_data_dir
        >>> path = shared_data_dir()  # None where no data directory exists
    """
    if os.environ.get("SEQKERAS_DATA"):
        path = os.path.abspath(os.environ["SEQKERAS_DATA"])
        return path if os.path.isdir(path) else None
    for path in _candidates():
        if os.path.isdir(path):
            return path
    return None


def read_tinyshakespeare(path=None):
    """tiny-shakespeare as `(train_text, val_text)`: first 90% / last 10% of
    the characters (nanoGPT's split).

    Args:
        path: the `input.txt` file; default: `tinyshakespeare/input.txt`
            under `shared_data_dir()` (`$SEQKERAS_DATA`, or
            `../shared/data` from the working directory).

    Raises:
        FileNotFoundError: naming both ways to give the file, and where it
            looked.
    """
    if path is None:
        root = shared_data_dir()
        path = None if root is None else os.path.join(root, "tinyshakespeare", "input.txt")
        if path is None or not os.path.isfile(path):
            looked = [os.path.join(p, "tinyshakespeare", "input.txt") for p in _candidates()]
            raise FileNotFoundError(
                "`read_tinyshakespeare`: tiny-shakespeare not found. Pass "
                "`path` (the input.txt file; `--data` in the scripts) or set "
                "the SEQKERAS_DATA environment variable to the data "
                "directory that holds tinyshakespeare/input.txt. Looked "
                f"in: {', '.join(looked)}"
            )
    elif not os.path.isfile(path):
        raise FileNotFoundError(
            f"`read_tinyshakespeare`: no file at path={path!r}; pass the "
            "input.txt file or set SEQKERAS_DATA to the data directory"
        )
    with open(path, encoding="utf-8") as f:
        text = f.read()
    split = int(0.9 * len(text))
    return text[:split], text[split:]
