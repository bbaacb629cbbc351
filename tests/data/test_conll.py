"""`read_conll`: sentences and tags from CoNLL files, one-line errors."""

import os

import pytest

from seqkeras.data import read_conll
from seqkeras.data.text import shared_data_dir

GOOD = (
    "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
    "German JJ B-NP B-MISC\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP "
    "I-PER"
)


def test_reads_sentences_lf_and_crlf(tmp_path):
    for newline in ("\n", "\r\n"):
        path = tmp_path / "a.txt"
        path.write_bytes(GOOD.replace("\n", newline).encode())
        sentences, tags = read_conll(path)
        assert sentences == [["EU", "rejects", "German"], ["Peter", "Blackburn"]]
        assert tags == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]]
    assert read_conll(path, tag_column=1)[1][0] == ["NNP", "VBZ", "JJ"]


@pytest.mark.parametrize(
    "raw, message",
    [
        (GOOD.replace("rejects VBZ B-VP O", "rejects VBZ O"), "line 4: expected 4 columns"),
        ("EU\nrejects\n", "line 1: expected a token and its tag"),
        ("-DOCSTART- -X- -X- O\n\n\n", "has no tagged sentence"),
        ("", "has no tagged sentence"),
    ],
)
def test_malformed_files(tmp_path, raw, message):
    path = tmp_path / "bad.txt"
    path.write_text(raw, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_conll(path)


def test_bad_bytes_and_missing(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("EU NNP B-NP B-ORG\nMünchen NNP B-NP B-LOC\n".encode("latin-1"))
    with pytest.raises(ValueError, match="line 2 is not UTF-8"):
        read_conll(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_conll(tmp_path / "missing.txt")


def test_conll2003_counts():
    root = shared_data_dir()
    path = root and os.path.join(root, "conll2003", "train.txt")
    if not path or not os.path.isfile(path):
        pytest.skip("needs ../shared/data/conll2003/train.txt (the data directory is absent)")
    sentences, tags = read_conll(path)
    assert len(sentences) == 14041
    assert sum(len(s) for s in sentences) == 203621
    assert {t for row in tags for t in row} == {
        "O",
        "B-PER",
        "I-PER",
        "B-LOC",
        "I-LOC",
        "B-ORG",
        "I-ORG",
        "B-MISC",
        "I-MISC",
    }
