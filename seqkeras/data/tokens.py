"""The special token ids every seqkeras vocabulary, model and export shares.

Id 0 is padding (embeddings mask it, losses skip it), 1 starts a decoded
sequence, 2 ends one, 3 stands for a symbol the vocabulary does not know;
real symbols start at `FIRST_ID`.

Example:

>>> from seqkeras.data import tokens
>>> tokens.PAD, tokens.BOS, tokens.EOS, tokens.UNK, tokens.FIRST_ID
(0, 1, 2, 3, 4)
>>> tokens.RESERVED
('<pad>', '<bos>', '<eos>', '<unk>')
"""

PAD, BOS, EOS, UNK = 0, 1, 2, 3
#: The first id of a real symbol.
FIRST_ID = 4
#: The reserved tokens' strings, in id order (a vocabulary file's first
#: lines).
RESERVED = ("<pad>", "<bos>", "<eos>", "<unk>")
#: How decoded text shows an unknown symbol.
UNK_TEXT = "?"
