"""`WordTokenizer` against a plain Python dictionary lookup, its saved
vocabulary, and its errors; `read_labeled_tsv` and
`classification_dataset` on small files made here."""

import numpy as np
import pytest

from seqkeras.data import PAD, UNK, WordTokenizer, classification_dataset, read_labeled_tsv

TEXTS = ["a good film .", "a bad , bad film", "the good , the bad", "Film NOIR at its best"]


def test_ids_equal_a_dictionary_lookup(tmp_path):
    tok = WordTokenizer.train(TEXTS)
    # counts: film 3 (Film lowercased), bad 3, then a, good, ",", the 2
    # each: by count, ties in first-seen order
    assert tok.vocabulary[:10] == [
        "<pad>",
        "<bos>",
        "<eos>",
        "<unk>",
        "film",
        "bad",
        "a",
        "good",
        ",",
        "the",
    ]
    index = {w: i for i, w in enumerate(tok.vocabulary)}
    queries = ["The BAD film", "unseen words here", "good"]
    expected = [[index.get(w.lower(), UNK) for w in q.split()] for q in queries]
    assert tok.encode(queries).to_list() == expected
    loaded = WordTokenizer.load(tok.save(str(tmp_path)))
    assert loaded.vocabulary == tok.vocabulary
    assert loaded.encode(queries).to_list() == expected


def test_cased_min_count_and_max_tokens():
    cased = WordTokenizer.train(TEXTS, lowercase=False)
    assert "NOIR" in cased.vocabulary and "noir" not in cased.vocabulary
    assert cased.encode(["noir"]).to_list() == [[UNK]]
    frequent = WordTokenizer.train(TEXTS, min_count=2)
    assert "noir" not in frequent.vocabulary and "bad" in frequent.vocabulary
    assert WordTokenizer.train(TEXTS, max_tokens=6).vocabulary_size == 6


def test_empty_strings_are_padding():
    tok = WordTokenizer.train(TEXTS)
    words = np.array([["good", ""], ["", ""]])
    np.testing.assert_array_equal(
        np.asarray(tok.lookup(words)), [[tok.vocabulary.index("good"), PAD], [PAD, PAD]]
    )


def test_errors():
    with pytest.raises(ValueError, match="reserved tokens"):
        WordTokenizer(["a", "b"])
    with pytest.raises(ValueError, match="no word"):
        WordTokenizer(["<pad>", "<bos>", "<eos>", "<unk>"])
    with pytest.raises(ValueError, match="duplicate"):
        WordTokenizer(["<pad>", "<bos>", "<eos>", "<unk>", "a", "a"])
    with pytest.raises(ValueError, match="no text"):
        WordTokenizer.train([])
    with pytest.raises(ValueError, match="min_count"):
        WordTokenizer.train(TEXTS, min_count=0)
    with pytest.raises(FileNotFoundError, match="no vocabulary"):
        WordTokenizer.load("/nonexistent/dir")


def _tsv(path, text, newline="\n"):
    path.write_bytes(text.replace("\n", newline).encode("utf-8") if isinstance(text, str) else text)
    return str(path)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_read_labeled_tsv(tmp_path, newline):
    path = _tsv(tmp_path / "x.tsv", 'sentence\tlabel\nit \'s " great " \t1\ndull\t0\n\n', newline)
    assert read_labeled_tsv(path) == (['it \'s " great "', "dull"], [1, 0])
    other = _tsv(tmp_path / "y.tsv", "idx\tlabel\tsentence\n0\t1\tfine\n")
    assert read_labeled_tsv(other) == (["fine"], [1])


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "is empty"),
        ("text\tlabel\nfine\t1\n", "no column 'sentence'"),
        ("sentence\tlabel\nfine 1\n", "line 2: expected 2 tab-separated"),
        (
            "sentence\tlabel\nfine\t2\n",
            r"line 2: the label must be an integer "
            r"in \[0, 2\)",
        ),
        ("sentence\tlabel\nfine\tpositive\n", "line 2: the label"),
        ("sentence\tlabel\n\t1\n", "line 2: the `sentence` column is empty"),
        ("sentence\tlabel\n", "no example"),
        (b"sentence\tlabel\ncaf\xe9\t1\n", "line 2 is not UTF-8"),
    ],
)
def test_read_labeled_tsv_errors(tmp_path, content, message):
    path = _tsv(tmp_path / "bad.tsv", content)
    with pytest.raises(ValueError, match=message) as info:
        read_labeled_tsv(path, num_classes=2, name="app")
    assert "\n" not in str(info.value) and str(info.value).startswith("`app`")


def test_classification_dataset_buckets_and_keeps_every_example():
    tok = WordTokenizer.train(TEXTS)
    texts = [" ".join(["good"] * n) for n in range(1, 41)]
    labels = [n % 2 for n in range(1, 41)]
    data = classification_dataset(
        texts, labels, tok, batch_size=4, max_length=32, boundaries=(8, 16), seed=3
    )
    seen = []
    for x, y in data:
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape[1] in (8, 16, 32)  # padded to the bucket edge
        lengths = (x != PAD).sum(1)
        seen += list(zip(lengths.tolist(), y.tolist()))
    # every example once, cut at max_length, its label kept
    assert sorted(seen) == sorted((min(n, 32), n % 2) for n in range(1, 41))
    with pytest.raises(ValueError, match="aligned"):
        classification_dataset(texts, labels[:3], tok)
