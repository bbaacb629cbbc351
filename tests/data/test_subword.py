"""`SubwordTokenizer`: WordPiece trained on local text, graph ops, with
seqkeras' reserved ids; save/load and detokenization round trips."""

import numpy as np
import pytest
import tensorflow as tf

from seqkeras.data import SubwordTokenizer
from seqkeras.data.tokens import BOS, EOS, PAD, RESERVED, UNK

CORPUS = [
    "Ein Mann fährt Fahrrad.",
    "Eine Frau fährt ein rotes Auto.",
    "Zwei Hunde spielen im Schnee!",
    "Ein Kind spielt mit einem Ball, im Park.",
    "Männer arbeiten auf einer Baustelle.",
] * 4


@pytest.fixture(scope="module")
def tok():
    return SubwordTokenizer.train(CORPUS, vocabulary_size=120)


def test_vocabulary_starts_with_the_reserved_tokens(tok):
    assert tuple(tok.vocabulary[:4]) == RESERVED
    assert 4 < tok.vocabulary_size <= 120
    assert "##." in tok.vocabulary  # punctuation is a continuation piece


def test_decode_restores_spaces_and_punctuation(tok):
    texts = [
        "Ein Kind spielt mit einem Ball, im Park.",
        "  Zwei   Hunde spielen im Schnee! ",  # whitespace runs
        "Eine Frau fährt Fahrrad.",
    ]
    ids = tok.encode(texts, add_bos=True, add_eos=True)
    rows = ids.to_list()
    assert all(r[0] == BOS and r[-1] == EOS for r in rows)
    assert all(PAD not in r[1:-1] and BOS not in r[1:-1] for r in rows)
    back = [s.decode() for s in tok.decode(ids).numpy()]
    assert back == [" ".join(t.split()) for t in texts]
    # dense, padded input decodes the same; decoding stops at EOS
    padded = ids.to_tensor(PAD).numpy()
    tail = np.concatenate([padded, np.full((3, 2), 7, "int32")], 1)
    tail[np.arange(3), ids.row_lengths().numpy()] = EOS
    assert [s.decode() for s in tok.decode(tail).numpy()] == back


def test_decode_names_an_id_outside_the_vocabulary(tok):
    size = tok.vocabulary_size
    with pytest.raises(
        ValueError, match=rf"SubwordTokenizer.decode.*id {size}, outside \[0, {size}\)"
    ):
        tok.decode([[BOS, 5, size, EOS]])
    # what decode skips is not looked up: negative padding, ids after EOS
    assert tok.decode([[BOS, 5, EOS, size + 9, -1]]).numpy()[0] == tok.decode([[5]]).numpy()[0]
    # in a graph (a served signature) the ids are the model's: no check op
    graph = tf.function(tok.decode, input_signature=[tf.TensorSpec((None, None), tf.int32)])
    ops = {op.type for op in graph.get_concrete_function().graph.get_operations()}
    assert not ops & {"Assert", "CheckNumerics"}


def test_unknown_characters_become_unk(tok):
    ids = tok.encode(["Ein Qualle"])  # no "Q" in the corpus
    assert ids.to_list()[0][-1] == UNK
    assert UNK not in ids.to_list()[0][:-1]
    assert tok.decode(ids).numpy()[0].decode() == "Ein <unk>"


def test_save_load_round_trip(tok, tmp_path):
    path = tok.save(tmp_path / "de")
    assert path.endswith("vocabulary.txt")
    loaded = SubwordTokenizer.load(tmp_path / "de")
    assert loaded.vocabulary == tok.vocabulary
    loaded_file = SubwordTokenizer.load(path)
    texts = CORPUS[:5]
    for other in (loaded, loaded_file):
        assert other.encode(texts).to_list() == tok.encode(texts).to_list()


def test_graph_ops_in_tf_function_and_tf_data(tok):
    @tf.function(input_signature=[tf.TensorSpec((None,), tf.string)])
    def round_trip(strings):
        return tok.decode(tok.encode(strings, add_eos=True).to_tensor())

    out = round_trip(tf.constant(CORPUS[:3]))
    assert [s.decode() for s in out.numpy()] == CORPUS[:3]
    data = (
        tf.data.Dataset.from_tensor_slices(CORPUS[:4])
        .batch(2)
        .map(lambda s: tok.encode(s, add_bos=True).to_tensor())
    )
    first = next(iter(data)).numpy()
    assert first.shape[0] == 2 and (first[:, 0] == BOS).all()


def test_bad_vocabularies_and_arguments(tmp_path):
    with pytest.raises(ValueError, match="reserved tokens"):
        SubwordTokenizer(["a", "b", "c", "d", "e"])
    with pytest.raises(ValueError, match="duplicate"):
        SubwordTokenizer(list(RESERVED) + ["a", "a"])
    with pytest.raises(ValueError, match="vocabulary_size"):
        SubwordTokenizer.train(CORPUS, vocabulary_size=3)
    with pytest.raises(ValueError, match="no text"):
        SubwordTokenizer.train([], vocabulary_size=50)
    with pytest.raises(FileNotFoundError, match="no vocabulary file"):
        SubwordTokenizer.load(tmp_path / "missing")


# --- the translation pipeline -----------------------------------------------
def _random_pairs(n, seed):
    """n (source, target) lines of 1-13 random corpus words each."""
    rng = np.random.default_rng(seed)
    words = " ".join(CORPUS).split()
    sources = [" ".join(rng.choice(words, rng.integers(1, 14))) for _ in range(n)]
    targets = [" ".join(rng.choice(words, rng.integers(1, 14))) for _ in range(n)]
    return sources, targets


def _bucket(n, bounds):
    return sum(n > b for b in bounds)


def test_translation_batches_are_padded_only_to_their_bucket(tok, capsys):
    from seqkeras.data import translation_dataset

    sources, targets = _random_pairs(200, seed=0)
    bounds = (8, 16)
    data, kept = translation_dataset(
        sources, targets, tok, tok, batch_size=16, max_length=24, boundaries=bounds, seed=1
    )
    too_long = sum(
        len(tok.encode([s]).to_list()[0]) + 1 > 24 or len(tok.encode([t]).to_list()[0]) + 2 > 24
        for s, t in zip(sources, targets)
    )
    assert kept == 200 - too_long
    assert f"{too_long} dropped" in capsys.readouterr().out
    seen = 0
    for x, y in data:
        src, tin, y = (np.asarray(a) for a in (x["source_ids"], x["target_ids"], y))
        src_len = (src != PAD).sum(1)
        tgt_len = (y != PAD).sum(1)
        # padded only to the batch's longest row, not to a global length
        assert src.shape[1] == src_len.max()
        assert y.shape[1] == tgt_len.max() == tin.shape[1]
        longer = np.maximum(src_len, tgt_len)
        assert len({_bucket(n, bounds) for n in longer}) == 1
        # teacher forcing: BOS + target in, target + EOS out
        assert (tin[:, 0] == BOS).all()
        assert (y[np.arange(len(y)), tgt_len - 1] == EOS).all()
        body = (y[:, :-1] != PAD) & (y[:, :-1] != EOS)
        np.testing.assert_array_equal(tin[:, 1:][body], y[:, :-1][body])
        seen += len(src)
    assert seen == kept


def test_pad_to_bucket_gives_one_shape_per_bucket(tok):
    """With `pad_to_bucket` (what XLA training wants) every batch is
    padded to its bucket's edge, so there are at most len(bounds) + 1
    shapes; with `drop_remainder` every batch is full."""
    from seqkeras.data import translation_dataset

    sources, targets = _random_pairs(300, seed=2)
    bounds, limit = (8, 16), 24
    data, kept = translation_dataset(
        sources,
        targets,
        tok,
        tok,
        batch_size=8,
        max_length=limit,
        boundaries=bounds,
        pad_to_bucket=True,
        drop_remainder=True,
        verbose=False,
    )
    shapes, seen = set(), 0
    for x, y in data:
        src, tin, y = (np.asarray(a) for a in (x["source_ids"], x["target_ids"], y))
        assert src.shape[0] == tin.shape[0] == y.shape[0] == 8
        longer = np.maximum((src != PAD).sum(1), (y != PAD).sum(1))
        edge = (bounds + (limit,))[_bucket(longer.max(), bounds)]
        assert src.shape[1] == y.shape[1] == tin.shape[1] == edge
        assert len({_bucket(n, bounds) for n in longer}) == 1
        shapes.add(src.shape)
        seen += 8
    assert len(shapes) <= len(bounds) + 1
    assert kept - 8 * (len(bounds) + 1) < seen <= kept


def test_read_parallel_errors(tmp_path):
    from seqkeras.data import read_parallel

    good = tmp_path / "a.de"
    good.write_text("Ein Hund.\nZwei Katzen.\n", encoding="utf-8")
    short = tmp_path / "b.en"
    short.write_text("A dog.\n", encoding="utf-8")
    empty = tmp_path / "c.en"
    empty.write_text("A dog.\n\n", encoding="utf-8")
    latin = tmp_path / "d.en"
    latin.write_bytes("A dog.\nTwo caf\xe9s.\n".encode("latin-1"))
    crlf = tmp_path / "e.en"
    crlf.write_bytes(b"A dog.\r\nTwo cats.\r\n")
    assert read_parallel(good, crlf) == (["Ein Hund.", "Zwei Katzen."], ["A dog.", "Two cats."])
    with pytest.raises(ValueError, match="not line-aligned: .* 2 lines"):
        read_parallel(good, short)
    with pytest.raises(ValueError, match="line 2 is empty"):
        read_parallel(good, empty)
    with pytest.raises(ValueError, match="line 2 is not UTF-8"):
        read_parallel(good, latin)
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_parallel(good, tmp_path / "missing.en")
