"""Inference over sequences of different lengths and attention weights,
against the model run on one unpadded row at a time and against the
weighted sums the weights must produce."""

import keras
import numpy as np
import pytest

import seqkeras
from seqkeras.data import WordTokenizer

M = seqkeras.models


def test_predict_by_length_returns_each_row_in_order():
    rng = np.random.default_rng(0)
    rows = [list(rng.integers(1, 9, n)) for n in (3, 17, 1, 9, 8, 30, 2)]
    calls = []

    def predict(x):
        calls.append(x.shape)
        return {"sum": x.sum(-1), "width": np.full(len(x), x.shape[1])}

    out = M.predict_by_length(predict, rows, batch_size=3)
    assert [int(o["sum"]) for o in out] == [sum(r) for r in rows]
    assert all(o["width"] % 8 == 0 and o["width"] >= len(r) for o, r in zip(out, rows))
    assert len(calls) == 3  # ceil(7 / 3) batches
    with pytest.raises(ValueError, match="predict_by_length.*first axis"):
        M.predict_by_length(lambda x: np.zeros((1,)), rows, batch_size=3)
    with pytest.raises(TypeError, match="predict_by_length.*callable"):
        M.predict_by_length("model", rows)


def test_class_probabilities_equal_the_model_on_each_text_alone():
    texts = ["a good film", "bad", "a very very long and rather good film indeed", "film"]
    tok = WordTokenizer.train(texts)
    model = M.classifier(tok.vocabulary_size, 3, units=6, embedding_dim=4)
    probs = M.class_probabilities(model, tok, texts, max_length=16, batch_size=2)
    for text, p in zip(texts, probs):
        ids = tok.encode([text]).to_tensor().numpy()  # unpadded
        expected = np.asarray(keras.ops.softmax(model(ids)))[0]
        np.testing.assert_allclose(p, expected, atol=1e-5)
    cut = M.class_probabilities(model, tok, texts[2:3], max_length=2)
    ids = tok.encode(texts[2:3]).to_tensor().numpy()[:, :2]
    np.testing.assert_allclose(cut[0], np.asarray(keras.ops.softmax(model(ids)))[0], atol=1e-5)
    with pytest.raises(TypeError, match="class_probabilities.*not a str"):
        M.class_probabilities(model, tok, "one text", 16)


def test_predict_tags_equal_viterbi_on_each_sentence_alone():
    sentences = [["EU", "rejects", "German", "call"], ["Peter"], ["a", "b", "c", "d", "e", "f"]]
    features = seqkeras.data.WordFeatures.train(sentences, max_chars=6)
    vocabulary = ["<pad>", "O", "B-ORG", "B-PER", "I-PER"]
    model = M.tagger(
        features.sizes["token_ids"],
        len(vocabulary),
        char_vocab_size=features.sizes["char_ids"],
        units=8,
        embedding_dim=4,
        crf=True,
        casing=True,
        char_embedding_dim=4,
        char_filters=4,
    )
    tags = M.predict_tags(model, features, vocabulary, sentences, batch_size=2)
    for words, got in zip(sentences, tags):
        inputs = {k: v.numpy() for k, v in features(np.array([words], object)).items()}
        ids = np.asarray(model.predict_on_batch(inputs)["tags"])[0]
        assert got == [vocabulary[i] for i in ids] and len(got) == len(words)
    assert M.predict_tags(model, features, vocabulary, []) == []


def test_attention_weights_are_the_greedy_output_and_rows_that_sum_to_one():
    model = M.recurrent_seq2seq(12, 12, units=8, embedding_dim=4, attention="additive")
    source = np.array([4, 5, 6, 7, 2])
    out, weights = M.attention_weights(model, source, max_length=6)
    greedy = np.asarray(M.generate(model, source[None], max_length=6, eos_id=2))[0, 1:]
    stop = int(np.argmax(greedy == 2)) + 1 if (greedy == 2).any() else len(greedy)
    np.testing.assert_array_equal(out, greedy[:stop])
    assert weights.shape == (len(out), len(source))
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="attention_model.*with attention"):
        M.attention_weights(M.recurrent_seq2seq(12, 12, units=4), source, 6)
    with pytest.raises(ValueError, match="attention_weights.*integer ids"):
        M.attention_weights(model, source[None], 6)


def test_pooling_weights_give_the_pooled_vector():
    model = M.classifier(20, 2, units=4, embedding_dim=4, pooling="attention")
    ids = np.array([3, 4, 5, 9])
    weights, p = M.pooling_weights(model, ids)
    np.testing.assert_allclose(weights.sum(), 1.0, atol=1e-6)
    pooling = model.part("pooling")
    sequence = pooling.input[0] if isinstance(pooling.input, (list, tuple)) else pooling.input
    h = np.asarray(keras.Model(model.inputs, sequence)(ids[None]))[0]
    pooled = np.asarray(keras.Model(model.inputs, pooling.output)(ids[None]))[0]
    np.testing.assert_allclose(weights @ h, pooled, atol=1e-5)  # sum_t w_t h_t
    np.testing.assert_allclose(p, np.asarray(keras.ops.softmax(model(ids[None])))[0], atol=1e-6)
    with pytest.raises(ValueError, match="pooling_weights.*pooling='attention'"):
        M.pooling_weights(M.classifier(20, 2, units=4), ids)
