"""`BertTokenizer` (graph-op WordPiece with BERT's normalisation) against
Hugging Face `tokenizers` (the reference implementation of the
checkpoints' `tokenizer.json`): identical ids on every sentence of SST-2
dev and CoNLL-2003 valid, uncased and cased, and identical first-subword
positions for pre-split words."""

import os

import numpy as np
import pytest
import tensorflow as tf

from seqkeras.data import BertTokenizer, BertWordFeatures, WordTokenizer
from seqkeras.data import read_conll, read_labeled_tsv
from seqkeras.data.text import shared_data_dir

tokenizers = pytest.importorskip("tokenizers")

EDGE_CASES = [
    "Héllo, WORLD!!  It's 3.5°C — naïve café.",
    "tab\there\nnew\rline\u00a0nbsp\u3000ideographic space",
    "control\u0007chars\u200bzero\ufeffwidth\x00nul\ufffd",
    "中文字符和English mixed",
    "ß straße İstanbul ǅ",
    "a" * 120 + " short",
    "",
    "   ",
]


def _hf_directory(path, texts, lowercase):
    """A `tokenizer.json` of a BERT WordPiece tokenizer trained by
    `tokenizers` on `texts` (its own normaliser and pre-tokeniser)."""
    from tokenizers import models, normalizers, pre_tokenizers, processors, trainers

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    hf = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.train_from_iterator(
        texts, trainers.WordPieceTrainer(vocab_size=3000, special_tokens=special)
    )
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[(t, hf.token_to_id(t)) for t in ("[CLS]", "[SEP]")],
    )
    os.makedirs(path, exist_ok=True)
    hf.save(os.path.join(path, "tokenizer.json"))
    return path


def _corpora():
    data = shared_data_dir()
    sst = os.path.join(data, "sst2", "dev.tsv")
    conll = os.path.join(data, "conll2003", "valid.txt")
    if not (os.path.isfile(sst) and os.path.isfile(conll)):
        pytest.skip(f"needs SST-2 dev and CoNLL-2003 valid under {data}")
    texts, _ = read_labeled_tsv(sst)
    sentences, _ = read_conll(conll)
    return list(texts), [list(s) for s in sentences]


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request, tmp_path_factory):
    texts, sentences = _corpora()
    corpus = texts + [" ".join(s) for s in sentences] + EDGE_CASES
    path = _hf_directory(str(tmp_path_factory.mktemp("tok")), corpus, request.param)
    hf = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    hf.no_truncation()
    hf.no_padding()
    return BertTokenizer.load(path), hf, texts, sentences


def test_ids_identical_to_hugging_face_on_sst2_and_conll(pair):
    ours, hf, texts, sentences = pair
    for name, batch in (
        ("SST-2 dev", texts),
        ("CoNLL valid", [" ".join(s) for s in sentences]),
        ("edge cases", EDGE_CASES),
    ):
        got = ours.encode(batch).to_list()
        want = [e.ids for e in hf.encode_batch(batch)]
        different = [i for i in range(len(batch)) if got[i] != want[i]]
        assert not different, (name, batch[different[0]], got[different[0]], want[different[0]])
    assert len(texts) == 872 and len(sentences) == 3250


def test_special_token_spelled_in_text_stays_text(pair):
    # Deliberate difference: Hugging Face reads "[SEP]" typed in a text
    # as the special token; served text here cannot inject one.
    ours, hf, _, _ = pair
    got = ours.encode(["a [SEP] b"]).to_list()[0]
    assert got.count(ours.special_ids["sep"]) == 1 and got[-1] == ours.special_ids["sep"]
    assert hf.encode("a [SEP] b").ids.count(ours.special_ids["sep"]) == 2


def test_word_first_pieces_identical_to_hugging_face(pair):
    ours, hf, _, sentences = pair
    ids, starts = ours.encode_words(tf.ragged.constant(sentences))
    ids, starts = ids.numpy(), starts.numpy()
    for i, words in enumerate(sentences):
        e = hf.encode(words, is_pretokenized=True)
        first = {}
        for position, w in enumerate(e.word_ids):
            if w is not None:
                first.setdefault(w, position)
        assert list(ids[i, : len(e.ids)]) == e.ids
        assert (ids[i, len(e.ids) :] == 0).all()
        assert list(starts[i, : len(words)]) == [first[w] for w in range(len(words))]
        assert (starts[i, len(words) :] == 0).all()


def _tiny():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "!", "##s"]
    return BertTokenizer(vocab, max_length=6)


def test_truncation_keeps_cls_and_sep_and_special_ids_come_from_the_vocabulary():
    tok = _tiny()
    assert tok.special_ids == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    assert tok.encode(["the cat sat the cat sat"]).to_list() == [[2, 5, 6, 7, 5, 3]]
    assert tok.encode(["dog"]).to_list() == [[2, 1, 3]]
    ids, starts = tok.encode_words(np.array([["The", "cats", ""], ["\u0007", "sat", "!"]]))
    # a word with no piece (a control character) is one [UNK]
    assert ids.numpy().tolist() == [[2, 5, 6, 9, 3], [2, 1, 7, 8, 3]]
    assert starts.numpy().tolist() == [[1, 2, 0], [1, 2, 3]]


def test_save_load_and_features(tmp_path):
    tok = _tiny()
    tok.save(str(tmp_path))
    again = BertTokenizer.load(str(tmp_path))
    assert again.vocabulary == tok.vocabulary and again.get_config() == tok.get_config()
    chars = WordTokenizer(["<pad>", "<bos>", "<eos>", "<unk>", "T", "h", "e"], lowercase=False)
    features = BertWordFeatures(tok, chars, casing=True, max_chars=4, pad_to_multiple=4)
    out = features(tf.ragged.constant([["The", "cat"], ["sat"]]))
    assert out["token_ids"].numpy().tolist() == [[2, 5, 6, 3], [2, 7, 3, 0]]
    wide = BertWordFeatures(tok, chars, pad_to_multiple=8)(tf.ragged.constant([["The", "cat"]]))
    assert wide["token_ids"].numpy().tolist() == [[2, 5, 6, 3, 0, 0, 0, 0]]
    assert out["word_starts"].numpy().tolist() == [[1, 2], [1, 0]]
    assert out["casing_ids"].numpy().tolist() == [[3, 5], [5, 0]]
    assert out["char_ids"].shape == (2, 2, 4)


def test_bad_arguments_are_named():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    with pytest.raises(ValueError, match="no cls token '<s>'"):
        BertTokenizer(vocab, special_tokens={"cls": "<s>"})
    with pytest.raises(ValueError, match="duplicate"):
        BertTokenizer(vocab + ["[PAD]"])
    with pytest.raises(ValueError, match="max_length"):
        BertTokenizer(vocab, max_length=2)
    with pytest.raises(TypeError, match="BertWordFeatures.*BertTokenizer"):
        BertWordFeatures(vocab)
    with pytest.raises(ValueError, match="has no tokenizer"):
        BertTokenizer.load("/")


def test_elmo_word_features_pad_the_biLM_ids_to_a_multiple_of_16():
    from seqkeras.data import WordFeatures, pretraining
    from seqkeras.data.bert_text import ElmoWordFeatures

    words = [
        ["EU", "rejects", "German", "call", "to", "boycott"],
        ["Peter", "Blackburn", "", "", "", ""],
    ]
    tok = pretraining.pretraining_vocabulary([" ".join(w) for w in words], 200, sentinels=1)
    features = ElmoWordFeatures(WordFeatures.train([[w for w in s if w] for s in words]), tok)
    out = features(tf.constant(words))
    ids, starts = tok.encode_words(tf.constant(words))
    width = ids.shape[1]
    assert out["elmo_ids"].shape[1] == 16 * -(-width // 16) > width
    np.testing.assert_array_equal(out["elmo_ids"][:, :width], ids)
    assert (out["elmo_ids"].numpy()[:, width:] == 0).all()
    np.testing.assert_array_equal(out["word_starts"], starts)
