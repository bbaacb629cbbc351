"""`WordFeatures` and `casing` against Python rules written out here, and
`tagging_dataset` batches."""

import numpy as np
import pytest
import tensorflow as tf

from seqkeras.data import PAD, UNK, WordFeatures, tagging_dataset
from seqkeras.data.word_features import CASINGS, casing

SENTENCES = [
    ["EU", "rejects", "German", "call"],
    ["Peter", "Blackburn", "1996-08-22", "3.5", ",", "McDonald"],
]
TAGS = [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER", "O", "O", "O", "B-PER"]]


def _casing(word):
    if word == "":
        return "<pad>"
    if all(c.isdigit() or c in ".," for c in word) and word[0].isdigit():
        return "numeric"
    if any(c.isdigit() for c in word):
        return "has_digit"
    if word[0].isupper() and word[1:] == word[1:].lower():
        return "title"
    letters = any(c.isalpha() for c in word)
    if letters and word == word.upper():
        return "upper"
    if letters and word == word.lower():
        return "lower"
    return "mixed" if letters else "other"


def test_casing_matches_the_python_rules():
    words = [
        "EU",
        "rejects",
        "German",
        "I",
        "1996",
        "3.5",
        "1996-08-22",
        "McDonald",
        ",",
        "(",
        "",
        "Élan",
        "ÉTÉ",
        "été",
        "x-ray",
    ]
    got = casing(tf.constant(words)).numpy()
    assert [CASINGS[k] for k in got] == [_casing(w) for w in words]


def test_features_match_the_vocabularies():
    f = WordFeatures.train(SENTENCES, max_chars=5)
    words = [["german", "Unseen", ""], ["EU", "", ""]]
    out = {k: v.numpy() for k, v in f(np.array(words, object)).items()}
    index = {w: i for i, w in enumerate(f.words.vocabulary)}
    chars = {c: i for i, c in enumerate(f.characters.vocabulary)}
    for b, row in enumerate(words):
        for t, w in enumerate(row):
            want = PAD if w == "" else index.get(w.lower(), UNK)
            assert out["token_ids"][b, t] == want
            ids = [chars.get(c, UNK) for c in w[:5]]
            assert out["char_ids"][b, t].tolist() == ids + [0] * (5 - len(ids))
            assert CASINGS[out["casing_ids"][b, t]] == _casing(w)
    ragged = f(tf.ragged.constant([["EU"], ["German", "call"]]))
    assert ragged["token_ids"].shape == (2, 2)


def test_tagging_dataset(tmp_path):
    f = WordFeatures.train(SENTENCES)
    vocabulary = ["<pad>", "O", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    data = tagging_dataset(
        SENTENCES * 3,
        TAGS * 3,
        f,
        vocabulary,
        batch_size=2,
        boundaries=(4,),
        max_length=8,
        shuffle=False,
    )
    rows = []
    for x, y in data:
        y = y.numpy()
        assert y.shape[1] in (4, 8)
        assert x["char_ids"].shape[1] == y.shape[1]
        assert np.array_equal(x["token_ids"].numpy() != PAD, y != 0)
        rows += [[vocabulary[k] for k in r if k] for r in y]
    assert sorted(map(tuple, rows)) == sorted(map(tuple, TAGS * 3))
    with pytest.raises(ValueError, match="'B-XYZ'"):
        tagging_dataset(SENTENCES, [TAGS[0], ["B-XYZ"] * 6], f, vocabulary)
    with pytest.raises(ValueError, match="4 words and 3 tags"):
        tagging_dataset(SENTENCES, [TAGS[0][:3], TAGS[1]], f, vocabulary)
    f.save(str(tmp_path))
    loaded = WordFeatures.load(str(tmp_path))
    assert loaded.sizes == f.sizes
