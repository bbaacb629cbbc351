"""Raw-string signatures of word-level models, called in a process where
seqkeras is not importable: a classifier's `serve_text` (sentences in,
probabilities out, `WordTokenizer` in the graph) and a CRF tagger's `tag`
(sentences in, words, Viterbi tags and entity spans out, `WordFeatures`
in the graph) equal Keras."""

import numpy as np
import pytest

import seqkeras
from seqkeras.data import WordFeatures, WordTokenizer
from seqkeras.data.entities import entity_spans
from seqkeras.export import signatures as S
from seqkeras.export import audit_serving, fresh_signature, saved_model

TEXTS = ["a good film", "a BAD , dull plot", "unseen"]


def test_classifier_serve_text(tmp_path):
    tok = WordTokenizer.train(["a good film", "a bad , dull plot ."])
    model = seqkeras.models.classifier(tok.vocabulary_size, 2, backbone="gru", pooling="attention")
    path = saved_model(model, str(tmp_path / "m" / "1"), signatures=[S.ServeText(tokenizer=tok)])
    served, _ = fresh_signature(path, "serve_text", text=TEXTS)
    ids = tok.encode(TEXTS).to_tensor(0).numpy()
    logits = np.asarray(model(ids))
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    assert not audit_serving(path)["xla"]
    # a text of no words: refused, not answered from padding alone
    with pytest.raises(RuntimeError, match="`serve_text`: input `text` has an empty text"):
        fresh_signature(path, "serve_text", text=["a good film", " "])


def test_crf_tagger_tag_signature(tmp_path):
    sentences = [["EU", "rejects", "German", "call"], ["Peter", "Blackburn", "visits", "Paris"]]
    features = WordFeatures.train(sentences)
    tags = ["<pad>", "O", "B-ORG", "B-MISC", "B-PER", "I-PER", "B-LOC"]
    model = seqkeras.models.tagger(
        features.sizes["token_ids"],
        len(tags),
        crf=True,
        units=8,
        embedding_dim=8,
        char_vocab_size=features.sizes["char_ids"],
        char_filters=4,
        casing=True,
    )
    crf = model.get_layer("crf")  # transitions that make spans likely
    rng = np.random.default_rng(0)
    crf.set_weights([rng.normal(0, 2, w.shape) for w in crf.get_weights()])
    texts = ["EU rejects German call", "Peter Blackburn visits Paris now", "x"]
    path = saved_model(model, str(tmp_path / "t" / "1"), signatures=[S.Tag(features, tags)])
    served, _ = fresh_signature(path, "tag", text=texts)
    for i, text in enumerate(texts):
        words = text.split()
        feats = {k: v.numpy() for k, v in features(np.array([words], object)).items()}
        ids = np.asarray(model(feats)["tags"])[0]
        expected = [tags[k] for k in ids]
        assert served["words"][i][: len(words)] == words
        assert served["tags"][i][: len(words)] == expected
        spans = [
            (k, a, b)
            for k, a, b in zip(
                served["entity_types"][i], served["entity_starts"][i], served["entity_ends"][i]
            )
            if a >= 0
        ]
        assert spans == entity_spans(expected)
    assert not audit_serving(path)["xla"]
    with pytest.raises(RuntimeError, match="`tag`: input `text` has an empty text"):
        fresh_signature(path, "tag", text=["EU rejects", ""])
