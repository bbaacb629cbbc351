"""The pretraining objectives' data against NumPy: BERT masking statistics
over 10^5 tokens, T5 span corruption (NumPy's sentinel replacement, the
noise statistics and the round trip), the causal and biLM shifts."""

import numpy as np
import pytest
import tensorflow as tf

from seqkeras.data import BertTokenizer
from seqkeras.data import pretraining as P

WORDS = "the a cat dog sat ran on under mat log big small red old".split()


def corpus(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(3, 30))) for _ in range(n)]


@pytest.fixture(scope="module")
def tokenizer():
    return P.pretraining_vocabulary(corpus(), 120, sentinels=8, max_length=64)


def test_vocabulary_starts_with_seqkeras_ids_and_sentinels(tokenizer, tmp_path):
    from seqkeras.data import tokens

    vocab = tokenizer.vocabulary
    assert vocab[tokens.PAD] == "[PAD]" and vocab[tokens.BOS] == "[CLS]"
    assert vocab[tokens.EOS] == "[SEP]" and vocab[tokens.UNK] == "[UNK]"
    assert vocab[P.MASK_ID] == "[MASK]"
    assert P.sentinel_ids(tokenizer) == list(range(5, 13))
    assert set(WORDS) <= set(vocab)
    ids = tokenizer.encode(["The cat sat"]).to_list()[0]
    assert [vocab[i] for i in ids] == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    loaded = BertTokenizer.load(tokenizer.save(str(tmp_path)))
    assert loaded.vocabulary == vocab and loaded.special_ids["mask"] == P.MASK_ID
    with pytest.raises(ValueError, match="pretraining_vocabulary.*vocabulary_size"):
        P.pretraining_vocabulary(corpus(5), 10, sentinels=8)
    with pytest.raises(ValueError, match="sentinel"):
        P.sentinel_ids(BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]))


def test_masking_statistics_over_1e5_tokens(tokenizer):
    texts = corpus(7000, seed=1)
    data = P.masked_lm_dataset(texts, tokenizer, batch_size=256, max_length=64, seed=2)
    special = tokenizer.special_ids
    eligible = selected = masked = randomized = kept = 0
    for x, y, w in data:
        ids, positions = x["token_ids"].numpy(), x["mask_positions"].numpy()
        labels, weights = y.numpy(), w.numpy()
        # the original sequence: the inputs with the labels put back
        original = ids.copy()
        rows = np.repeat(np.arange(len(ids))[:, None], positions.shape[1], 1)
        live = weights > 0
        original[rows[live], positions[live]] = labels[live]
        specials = np.isin(original, list(special.values()))
        eligible += int((~specials).sum())
        chosen = np.zeros_like(ids, bool)
        chosen[rows[live], positions[live]] = True
        assert not (chosen & specials).any()  # never a special token
        assert (ids[~chosen] == original[~chosen]).all()  # the rest is untouched
        assert (labels[~live] == 0).all()  # unused selection slots are PAD
        selected += int(chosen.sum())
        now, before = ids[chosen], original[chosen]
        masked += int((now == P.MASK_ID).sum())
        kept += int(((now == before) & (now != P.MASK_ID)).sum())
        randomized += int(((now != before) & (now != P.MASK_ID)).sum())
    assert eligible > 100_000
    assert abs(selected / eligible - 0.15) < 0.005
    assert abs(masked / selected - 0.8) < 0.012
    # a random token (an id above the specials) is the original one 1 time
    # in v: kept ~ 0.1 + 0.1 / v
    v = tokenizer.vocabulary_size - P.MASK_ID - 1
    assert abs(randomized / selected - 0.1 * (1 - 1 / v)) < 0.01
    assert abs(kept / selected - (0.1 + 0.1 / v)) < 0.01


def numpy_replace_spans(ids, noise, sentinels):
    out, k = [], 0
    for i, token in enumerate(ids):
        if noise[i]:
            if i == 0 or not noise[i - 1]:
                out.append(sentinels[k])
                k += 1
        else:
            out.append(token)
    return out


def test_span_replacement_matches_numpy():
    rng = np.random.default_rng(3)
    sentinels = [5, 6, 7, 8, 9, 10, 11, 12]
    for _ in range(50):
        n = int(rng.integers(2, 40))
        ids = rng.integers(20, 100, size=n)
        noise = rng.random(n) < 0.3
        while noise.sum() == 0 or np.sum(noise[1:] & ~noise[:-1]) + noise[0] > len(sentinels):
            noise = rng.random(n) < 0.3
        ids = ids.astype("int32")
        got = P._replace_spans(tf.constant(ids), tf.constant(noise), tf.constant(sentinels))
        assert got.numpy().tolist() == numpy_replace_spans(ids, noise, sentinels)


def test_span_noise_statistics():
    lengths, noise_total, spans_total = 0, 0, 0
    for seed in range(300):
        mask = P.span_noise_mask(100, 0.15, 3.0, seed=seed).numpy()
        assert mask.sum() == 15  # round(100 * 0.15)
        assert not mask[0] and mask[-1]  # T5: starts with a gap, ends with noise
        runs = int(np.sum(mask[1:] & ~mask[:-1]))
        assert runs == 5  # round(15 / 3)
        lengths += 100
        noise_total += int(mask.sum())
        spans_total += runs
    assert noise_total / spans_total == pytest.approx(3.0)
    assert noise_total / lengths == pytest.approx(0.15)


def test_span_corruption_round_trip_and_sentinels():
    sentinels = list(range(5, 13))
    for n in [1, 2, 3, 7, 20, 61, 200]:
        for seed in range(5):
            ids = tf.range(100, 100 + n)
            x, y = P.span_corruption(ids, sentinels, seed=seed)
            x, y = x.numpy().tolist(), y.numpy().tolist()
            assert P.restore_spans(x, y, sentinels) == list(range(100, 100 + n))
            used = [t for t in x if t in sentinels]
            assert used == sentinels[: len(used)]  # in order, each once
            assert [t for t in y if t in sentinels] == used
    # more spans than sentinels: capped
    x, y = P.span_corruption(tf.range(100, 400), [5, 6], seed=0)
    assert P.restore_spans(x.numpy(), y.numpy(), [5, 6]) == list(range(100, 400))


def test_span_corruption_dataset_layout(tokenizer):
    texts = corpus(50, seed=4)
    sentinels = P.sentinel_ids(tokenizer)
    cls, sep = tokenizer.special_ids["cls"], tokenizer.special_ids["sep"]
    originals = {tuple(r) for r in tokenizer.encode(texts).to_list()}
    for x, labels in P.span_corruption_dataset(texts, tokenizer, batch_size=8, shuffle=False):
        for source, target, label in zip(
            x["source_ids"].numpy(), x["target_ids"].numpy(), labels.numpy()
        ):
            source, label = source[source > 0].tolist(), label[label > 0].tolist()
            target = target[target > 0].tolist()
            assert source[-1] == sep and label[-1] == sep and target[0] == cls
            assert target[1:] == label[:-1]  # teacher forcing
            restored = P.restore_spans(source[:-1], label[:-1], sentinels)
            assert tuple([cls] + restored + [sep]) in originals


def test_causal_and_bilm_shifts(tokenizer):
    texts = corpus(30, seed=5)
    rows = {tuple(r) for r in tokenizer.encode(texts).to_list()}
    for x, y in P.causal_lm_dataset(texts, tokenizer, batch_size=8, shuffle=False):
        for xi, yi in zip(x.numpy(), y.numpy()):
            n = int((yi > 0).sum())
            assert tuple(xi[:n].tolist() + [yi[n - 1]]) in rows
            np.testing.assert_array_equal(xi[1:n], yi[: n - 1])
    for x, y in P.bilm_dataset(texts, tokenizer, batch_size=8, shuffle=False):
        for xi, f, b in zip(x.numpy(), y["forward"].numpy(), y["backward"].numpy()):
            n = int((xi > 0).sum())
            np.testing.assert_array_equal(f[: n - 1], xi[1:n])  # next token
            np.testing.assert_array_equal(b[1:n], xi[: n - 1])  # previous token
            assert f[n - 1] == 0 and b[0] == 0
    with pytest.raises(TypeError, match="causal_lm_dataset.*BertTokenizer"):
        P.causal_lm_dataset(texts, object())
    with pytest.raises(ValueError, match="bilm_dataset.*no non-empty text"):
        P.bilm_dataset(["", " "], tokenizer)


def test_bad_rates_are_named_errors():
    ids = tf.constant([[1, 9, 10, 2]])
    cases = [
        (dict(selection_rate=0.0), "selection_rate"),
        (dict(selection_rate=float("nan")), "selection_rate"),
        (dict(mask_rate=1.2), "mask_rate"),
        (dict(mask_rate=0.8, random_rate=0.3), r"mask_rate \+ random_rate"),
    ]
    for options, needle in cases:
        with pytest.raises(ValueError, match=f"mask_tokens.*{needle}"):
            P.mask_tokens(ids, 4, [0, 1, 2], (5, 20), 3, **options)
    for options, needle in (
        (dict(noise_density=1.0), "noise_density"),
        (dict(mean_span_length=0.5), "mean_span_length"),
    ):
        with pytest.raises(ValueError, match=f"span_corruption.*{needle}"):
            P.span_corruption(tf.range(10, 11), [5], **options)  # checked even for 1 token
        with pytest.raises(ValueError, match=f"span_noise_mask.*{needle}"):
            P.span_noise_mask(20, **options)


# -- a pretraining vocabulary on a seq2seq source side ------------------------


def test_bert_subword_tokenizer_reads_text_as_the_pretrained_encoder_did(tmp_path):
    from seqkeras.data import BertSubwordTokenizer, BertTokenizer, SubwordTokenizer

    texts = ["The cats sat on the mats.", "A dog's toys, unbelievably!", "Ünïcode words"]
    bert = P.pretraining_vocabulary(texts * 5, 80, sentinels=2)
    tok = BertSubwordTokenizer(bert)
    assert tok.vocabulary_size == bert.vocabulary_size
    pieces = bert.encode(texts, special_tokens=False).to_list()
    assert any("##" in bert.vocabulary[i] for row in pieces for i in row)  # pieces get joined
    # span corruption's source layout: pieces + [SEP] (EOS 2); BOS is [CLS] (1)
    assert tok.encode(texts, add_eos=True).to_list() == [row + [2] for row in pieces]
    assert tok.encode(texts, add_bos=True).to_list() == [[1] + row for row in pieces]
    long = " ".join(["cats"] * 300)  # not cut at the BertTokenizer's max_length
    per_word = len(bert.encode(["cats"], special_tokens=False).to_list()[0])
    assert len(tok.encode([long]).to_list()[0]) == 300 * per_word > bert.max_length
    # decode: up to the first EOS, no special tokens, ## joined
    ids = tok.encode(texts, add_bos=True, add_eos=True).to_tensor(0).numpy()
    ids = np.concatenate([ids, np.full((3, 2), 7)], axis=1)  # after EOS: ignored
    expected = [" ".join(w.decode() for w in bert.split([t]).to_list()[0]) for t in texts]
    assert [s.decode() for s in tok.decode(ids).numpy()] == expected
    for bad in (tok.vocabulary_size, -3):  # looked up before EOS: a named error
        with pytest.raises(ValueError, match=f"BertSubwordTokenizer.decode.*id {bad}, outside"):
            tok.decode([[1, 7, bad, 2]])
    assert tok.decode([[1, 7, 2, -3]]).numpy()[0] == tok.decode([[7]]).numpy()[0]
    # save / load: the same ids; vocabulary.txt beside as SubwordTokenizer's
    tok.save(str(tmp_path))
    again = BertSubwordTokenizer.load(str(tmp_path))
    assert again.encode(texts, add_eos=True).to_list() == tok.encode(texts, add_eos=True).to_list()
    assert (tmp_path / "vocabulary.txt").read_text().split("\n")[:-1] == bert.vocabulary
    with pytest.raises(TypeError, match="BertSubwordTokenizer.*BertTokenizer.*SubwordTokenizer"):
        BertSubwordTokenizer(SubwordTokenizer.train(texts, 40))
    standard = BertTokenizer(["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]", "cat"])
    with pytest.raises(ValueError, match="BertSubwordTokenizer.*special ids.*'pad': 1"):
        BertSubwordTokenizer(standard)
