"""The special token ids every seqkeras vocabulary, model and export shares.

Id 0 is padding (embeddings mask it, losses skip it), 1 starts a decoded
sequence, 2 ends one, 3 stands for a symbol the vocabulary does not know;
real symbols start at `FIRST_ID`.

Examples:
    >>> from seqkeras.data import tokens
    >>> tokens.PAD, tokens.BOS, tokens.EOS, tokens.UNK, tokens.FIRST_ID
    (0, 1, 2, 3, 4)
    >>> tokens.RESERVED
    ('<pad>', '<bos>', '<eos>', '<unk>')
"""

#: Padding (masked everywhere).
PAD = 0
#: Beginning of a sequence.
BOS = 1
#: End of a sequence.
EOS = 2
#: An unknown symbol.
UNK = 3
#: The first id of a real symbol.
FIRST_ID = 4
#: The reserved tokens' strings, in id order (a vocabulary file's first
#: lines).
RESERVED = ("<pad>", "<bos>", "<eos>", "<unk>")
#: How decoded text shows an unknown symbol.
UNK_TEXT = "?"

#: The file a tokenizer's vocabulary is saved in, one token per line.
VOCABULARY_FILE = "vocabulary.txt"


def save_vocabulary(directory, tokens):
    """Writes `directory/vocabulary.txt` (one token per line); returns its
    path."""
    import os

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, VOCABULARY_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokens))
    return path


def load_vocabulary(path, who):
    """The tokens saved at `path` (a `save_vocabulary` directory or its
    file); a FileNotFoundError naming `who` when there is none."""
    import os

    if os.path.isdir(path):
        path = os.path.join(path, VOCABULARY_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"`{who}`: no vocabulary file at {path}")
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]
