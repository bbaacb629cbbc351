"""Error inputs of `seqkeras.data`: tokenizers, word features, file
readers, `tf.data` pipelines, window helpers and token-id checks given
one plausible wrong input each (tiny inputs, nothing trained beyond a
few words)."""

import functools
import os
import tempfile

import numpy as np

import seqkeras
from tests.error_inputs import entry, opt_out

D = seqkeras.data
N = "seqkeras.data."
RESERVED = ["<pad>", "<bos>", "<eos>", "<unk>"]
BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "!", "##s"]
# a BertTokenizer vocabulary with seqkeras' special ids ([PAD] 0, [CLS] 1, [SEP] 2)
SEQ_BERT_VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]", "the", "cat", "sat"]
BPE_VOCAB = ["<s>", "</s>", "a", "b", "c", "Ġ", "ab", "Ġab", "Ġabc"]
BPE_MERGES = ["a b", "Ġ ab", "Ġab c"]


@functools.lru_cache(maxsize=None)
def _dir():
    return tempfile.mkdtemp(prefix="seqkeras_error_inputs_")


def _file(name, data):
    """A file `name` holding `data` (bytes) in a temporary directory."""
    path = os.path.join(_dir(), name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _missing(name="missing.txt"):
    return os.path.join(_dir(), "nowhere", name)


@functools.lru_cache(maxsize=None)
def _words():
    return D.WordTokenizer(RESERVED + ["a", "good", "film"])


@functools.lru_cache(maxsize=None)
def _chars():
    return D.WordTokenizer(RESERVED + list("abcdefg"), lowercase=False)


@functools.lru_cache(maxsize=None)
def _bert():
    return D.BertTokenizer(BERT_VOCAB)


@functools.lru_cache(maxsize=None)
def _seq_bert():
    return D.BertSubwordTokenizer(D.BertTokenizer(SEQ_BERT_VOCAB))


@functools.lru_cache(maxsize=None)
def _subword():
    return D.SubwordTokenizer(RESERVED + ["a", "b", "##b"])


@functools.lru_cache(maxsize=None)
def _bpe():
    return D.ByteLevelBPETokenizer(BPE_VOCAB, BPE_MERGES, bos_id=0, eos_id=1)


@functools.lru_cache(maxsize=None)
def _features():
    return D.WordFeatures(_words(), _chars(), max_chars=4)


@functools.lru_cache(maxsize=None)
def _model():
    import keras

    from seqkeras.models import SequenceModel

    x = keras.Input((None,), dtype="int32", name="token_ids")
    y = keras.layers.Embedding(10, 2)(x)
    return SequenceModel(x, y, vocabulary_sizes={"token_ids": 10})


def _dataset():
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((np.ones((2, 3), "int32"), np.zeros(2)))


# ---- special ids ---------------------------------------------------------------
for _name in ("BOS", "EOS", "PAD", "UNK"):
    opt_out(
        N + _name,
        f"{_name} is a plain int constant (a reserved token id): it takes no argument",
    )
opt_out(
    N + "tokens",
    "a module of the reserved token ids and strings (constants): it takes no argument",
)

# ---- BertTokenizer -------------------------------------------------------------
B = N + "BertTokenizer"
entry(B, "vocabulary", lambda: D.BertTokenizer(BERT_VOCAB + ["cat"]))
entry(B, "special_tokens", lambda: D.BertTokenizer(BERT_VOCAB, special_tokens={"bos": "[CLS]"}))
entry(B, "special_tokens", lambda: D.BertTokenizer(BERT_VOCAB[1:]))
entry(B, "max_length", lambda: D.BertTokenizer(BERT_VOCAB, max_length=2))
entry(B, "lowercase", lambda: D.BertTokenizer(BERT_VOCAB, lowercase="yes"))
entry(B, "strings", lambda: _bert().encode([5, 6]), graph=True)
entry(B, "max_length", lambda: _bert().encode(["the cat"], max_length=0), graph=True)
entry(B, "max_length", lambda: _bert().encode(["the cat"], max_length=2.5), graph=True)

# ---- BertSubwordTokenizer ------------------------------------------------------
BS = N + "BertSubwordTokenizer"
entry(BS, "tokenizer", lambda: D.BertSubwordTokenizer(_words()))
entry(BS, "tokenizer", lambda: D.BertSubwordTokenizer(_bert()))  # [PAD] is not id 0
entry(BS, "ids", lambda: _seq_bert().decode(np.array([[5, 40]])))
entry(BS, "ids", lambda: _seq_bert().decode(np.array([[5.5, 6.0]])))
entry(BS, "strings", lambda: _seq_bert().encode([[5, 6]]), graph=True)

# ---- BertWordFeatures ----------------------------------------------------------
BW = N + "BertWordFeatures"
entry(BW, "tokenizer", lambda: D.BertWordFeatures(_words()))
entry(BW, "pad_to_multiple", lambda: D.BertWordFeatures(_bert(), pad_to_multiple=0))
entry(BW, "max_chars", lambda: D.BertWordFeatures(_bert(), _chars(), max_chars=0))
entry(BW, "characters", lambda: D.BertWordFeatures(_bert(), characters="abc"))

# ---- ByteLevelBPETokenizer -----------------------------------------------------
BB = N + "ByteLevelBPETokenizer"
entry(BB, "pre_tokenizer", lambda: D.ByteLevelBPETokenizer(BPE_VOCAB, BPE_MERGES, "llama"))
entry(BB, "bos_id", lambda: D.ByteLevelBPETokenizer(BPE_VOCAB, BPE_MERGES, bos_id=99))
entry(BB, "merges", lambda: D.ByteLevelBPETokenizer(BPE_VOCAB, "a b"))
entry(BB, "vocabulary", lambda: D.ByteLevelBPETokenizer(BPE_VOCAB + ["a"], BPE_MERGES))
entry(BB, "add_bos", lambda: _bpe().encode(["ab"], add_bos="yes"))
entry(BB, "ids", lambda: _bpe().decode(np.array([[6.0, 8.0]])))
entry(BB, "ids", lambda: _bpe().decode(np.array([[6, 80]])))

# ---- SubwordTokenizer ----------------------------------------------------------
S = N + "SubwordTokenizer"
entry(S, "vocabulary", lambda: D.SubwordTokenizer(["a", "b"]))
entry(S, "vocabulary", lambda: D.SubwordTokenizer(RESERVED + ["a", "a"]))
entry(S, "vocabulary_size", lambda: D.SubwordTokenizer.train(["a b"], vocabulary_size=3))
entry(S, "texts", lambda: D.SubwordTokenizer.train([], vocabulary_size=40))
entry(S, "ids", lambda: _subword().decode(np.array([[4, 40]])))
entry(S, "strings", lambda: _subword().encode([4, 5]), graph=True)

# ---- WordTokenizer -------------------------------------------------------------
W = N + "WordTokenizer"
entry(W, "vocabulary", lambda: D.WordTokenizer(["a", "film"]))
entry(W, "vocabulary", lambda: D.WordTokenizer(RESERVED + ["a film"]))
entry(W, "lowercase", lambda: D.WordTokenizer(RESERVED + ["a"], lowercase="no"))
entry(W, "min_count", lambda: D.WordTokenizer.train(["a film"], min_count=0))
entry(W, "max_tokens", lambda: D.WordTokenizer.train(["a film"], max_tokens=2))
entry(W, "strings", lambda: _words().encode([4, 5]), graph=True)

# ---- WordFeatures --------------------------------------------------------------
WF = N + "WordFeatures"
entry(WF, "words", lambda: D.WordFeatures("a film", _chars()))
entry(WF, "characters", lambda: D.WordFeatures(_words(), _words()))  # lowercasing
entry(WF, "max_chars", lambda: D.WordFeatures(_words(), _chars(), max_chars=0))
entry(WF, "words", lambda: _features()(np.array([[4, 5]])), graph=True)

# ---- synthetic -----------------------------------------------------------------
AP = N + "adding_problem"
entry(AP, "n", lambda: D.adding_problem(0, 10))
entry(AP, "n", lambda: D.adding_problem(2.5, 10))
entry(AP, "steps", lambda: D.adding_problem(4, 1))
entry(AP, "steps", lambda: D.adding_problem(4, "10"))

# ---- token-id checks -----------------------------------------------------------
CI = N + "check_token_ids"
entry(
    CI,
    "token_ids",
    lambda: D.check_token_ids("predict", "token_ids", [["a"]], 10),
    named="predict",
    graph=True,
    xla=True,
)
entry(
    CI,
    "token_ids",
    lambda: D.check_token_ids("predict", "token_ids", [[1, 25]], 10),
    named="predict",
    graph=True,
    xla=True,
)
entry(
    CI,
    "token_ids",
    lambda: D.check_token_ids("predict", "token_ids", [[1.5]], 10),
    named="predict",
    graph=True,
    xla=True,
)
entry(CI, "vocab_size", lambda: D.check_token_ids("predict", "token_ids", [[1]], "10"))
entry(CI, "vocab_size", lambda: D.check_token_ids("predict", "token_ids", [[1]], 0))

CD = N + "check_token_dataset"
entry(CD, "dataset", lambda: D.check_token_dataset(np.ones((2, 3), "int32"), _model()))
entry(CD, "model", lambda: D.check_token_dataset(_dataset(), None))
entry(CD, "model", lambda: D.check_token_dataset(_dataset(), "model.keras"))

# ---- windows and batches -------------------------------------------------------
LW = N + "language_model_windows"
entry(LW, "block", lambda: D.language_model_windows([5, 6, 7], 0))
entry(LW, "ids", lambda: D.language_model_windows([[5, 6, 7]], 2))
entry(LW, "ids", lambda: D.language_model_windows([5.5, 6.0, 7.0], 2))
entry(LW, "ids", lambda: D.language_model_windows(["to", "be", "or"], 2))

LB = N + "length_batches"
entry(LB, "batch_size", lambda: next(D.length_batches([[4]], batch_size=0)))
entry(LB, "max_width", lambda: next(D.length_batches([[4]], 2, max_width=-8)))
entry(LB, "max_width", lambda: next(D.length_batches([[4] * 10], 2, max_width=8)))
entry(LB, "rows", lambda: next(D.length_batches([4, 5, 6], 2)))

RW = N + "random_windows_dataset"
entry(RW, "block", lambda: D.random_windows_dataset(np.arange(20), 0, 2))
entry(RW, "batch_size", lambda: D.random_windows_dataset(np.arange(20), 4, -1))
entry(RW, "ids", lambda: D.random_windows_dataset(np.arange(20).reshape(4, 5), 2, 2))
entry(RW, "ids", lambda: D.random_windows_dataset(np.linspace(0, 1, 20), 4, 2))

# ---- datasets ------------------------------------------------------------------
CL = N + "classification_dataset"
entry(CL, "labels", lambda: D.classification_dataset(["a film", "good"], [1], _words()))
entry(CL, "labels", lambda: D.classification_dataset(["a film"], ["pos"], _words()))
entry(CL, "batch_size", lambda: D.classification_dataset(["a film"], [1], _words(), batch_size=0))
entry(CL, "max_length", lambda: D.classification_dataset(["a film"], [1], _words(), max_length=0))
entry(CL, "tokenizer", lambda: D.classification_dataset(["a film"], [1], None))

TV = N + "tag_vocabulary"
entry(TV, "tags", lambda: D.tag_vocabulary(["B-PER", "O"]))
entry(TV, "tags", lambda: D.tag_vocabulary("B-PER O"))
entry(TV, "tags", lambda: D.tag_vocabulary([[1, 2]]))

TD = N + "tagging_dataset"
TAGS = ["<pad>", "O", "B-PER"]
entry(TD, "tags", lambda: D.tagging_dataset([["Peter"]], [], _features(), TAGS))
entry(TD, "tags", lambda: D.tagging_dataset([["Peter", "ran"]], [["B-PER"]], _features(), TAGS))
entry(TD, "tags", lambda: D.tagging_dataset([["Peter"]], [["B-LOC"]], _features(), TAGS))
entry(TD, "features", lambda: D.tagging_dataset([["Peter"]], [["B-PER"]], None, TAGS))
entry(TD, "batch_size", lambda: D.tagging_dataset([["a"]], [["O"]], _features(), TAGS, 0))

TR = N + "translation_dataset"
entry(TR, "targets", lambda: D.translation_dataset(["a", "b"], ["a"], _subword(), _subword()))
entry(TR, "source_tokenizer", lambda: D.translation_dataset(["a"], ["b"], None, _subword()))
entry(TR, "batch_size", lambda: D.translation_dataset(["a"], ["b"], _subword(), _subword(), 0))
entry(
    TR,
    "max_length",
    lambda: D.translation_dataset(["a"], ["b"], _subword(), _subword(), max_length=-1),
)

# ---- translation tokenizers ----------------------------------------------------
TT = N + "translation_tokenizers"
entry(TT, "vocabulary_size", lambda: D.translation_tokenizers(["a b"], ["c d"], 3))
entry(TT, "sources", lambda: D.translation_tokenizers([], ["c d"], 40))
entry(TT, "source_tokenizer", lambda: D.translation_tokenizers(["a"], ["c"], 40, "bert"))

ST = N + "save_translation_tokenizers"
entry(ST, "tokenizers", lambda: D.save_translation_tokenizers(_subword(), _dir()))
entry(ST, "tokenizers", lambda: D.save_translation_tokenizers((None, None), _dir()))
entry(ST, "directory", lambda: D.save_translation_tokenizers((_subword(), _subword()), None))

LT = N + "load_translation_tokenizers"
entry(LT, "directory", lambda: D.load_translation_tokenizers(_missing("pair")))
entry(LT, "directory", lambda: D.load_translation_tokenizers(None))

# ---- file readers --------------------------------------------------------------
RT = N + "read_text"
entry(RT, "path", lambda: D.read_text(_missing()), (FileNotFoundError,))
entry(RT, "path", lambda: D.read_text(_dir()))
entry(RT, "path", lambda: D.read_text(None))
entry(RT, "path", lambda: D.read_text(_file("latin1.txt", b"caf\xe9\n")))

RL = N + "read_lines"
entry(RL, "path", lambda: D.read_lines(_missing()), (FileNotFoundError,))
entry(RL, "path", lambda: D.read_lines(_file("blank.txt", b"one\n\nthree\n")))
entry(RL, "path", lambda: D.read_lines(_file("empty.txt", b"")))
entry(RL, "path", lambda: D.read_lines(3))

RP = N + "read_parallel"
entry(
    RP,
    "target_path",
    lambda: D.read_parallel(_file("src.txt", b"a\nb\n"), _file("tgt.txt", b"a\n")),
)
entry(
    RP,
    "source_path",
    lambda: D.read_parallel(_missing(), _file("tgt.txt", b"a\n")),
    (FileNotFoundError,),
)
entry(RP, "target_path", lambda: D.read_parallel(_file("src.txt", b"a\n"), None))

RC = N + "read_conll"
CONLL = b"EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
entry(RC, "path", lambda: D.read_conll(_missing()), (FileNotFoundError,))
entry(RC, "tag_column", lambda: D.read_conll(_file("a.conll", CONLL), tag_column=7))
entry(RC, "tag_column", lambda: D.read_conll(_file("a.conll", CONLL), tag_column="ner"))

SW = N + "split_words"
entry(SW, "line", lambda: D.split_words(["Peter", "ran"]))
entry(SW, "line", lambda: D.split_words(None))
entry(SW, "line", lambda: D.split_words(b"Peter ran"))

RLT = N + "read_labeled_tsv"
TSV = b"sentence\tlabel\na fine film\t1\ndull\t0\n"
entry(RLT, "path", lambda: D.read_labeled_tsv(_missing("dev.tsv")), (FileNotFoundError,))
entry(RLT, "text_column", lambda: D.read_labeled_tsv(_file("a.tsv", TSV), text_column="text"))
entry(RLT, "num_classes", lambda: D.read_labeled_tsv(_file("a.tsv", TSV), num_classes=0))
entry(RLT, "num_classes", lambda: D.read_labeled_tsv(_file("a.tsv", TSV), num_classes="2"))

RS = N + "read_series_csv"
entry(RS, "path", lambda: D.read_series_csv(_missing("s.csv")), (FileNotFoundError,))
entry(RS, "path", lambda: D.read_series_csv(_dir()))
entry(RS, "path", lambda: D.read_series_csv(["1949-01,112"]))

SA = N + "sarima_forecasts"
SERIES = np.arange(1.0, 25.0)
entry(SA, "values", lambda: D.sarima_forecasts(SERIES.reshape(4, 6), 12, [12], 2, 4))
entry(SA, "values", lambda: D.sarima_forecasts(np.r_[SERIES, np.nan], 12, [12], 2, 4))
entry(SA, "season", lambda: D.sarima_forecasts(SERIES, 12, [12], 2, 1))
entry(SA, "horizon", lambda: D.sarima_forecasts(SERIES, 12, [12], 0, 4))
entry(SA, "origins", lambda: D.sarima_forecasts(SERIES, 12, [23], 4, 4))
entry(SA, "level", lambda: D.sarima_forecasts(SERIES, 12, [12], 2, 4, level=80))
