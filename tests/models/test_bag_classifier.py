"""`classifier(backbone="bag")` equals its NumPy definition (masked mean
of the embeddings, a ReLU layer, the logits); `word_dropout` puts a
`TokenDropout` before the embedding and changes nothing at inference."""

import numpy as np

import seqkeras


def test_bag_of_embeddings_matches_numpy():
    model = seqkeras.models.classifier(
        30, 3, backbone="bag", pooling="mean", embedding_dim=8, units=5
    )
    ids = np.array([[5, 6, 7, 0, 0], [9, 0, 0, 0, 0]], "int32")
    emb = model.get_layer("embedding").embeddings.numpy()
    hidden = model.get_layer("hidden")
    head = model.get_layer("logits_dense")
    expected = []
    for row in ids:
        mean = emb[row[row != 0]].mean(0)
        h = np.maximum(0, mean @ hidden.kernel.numpy() + hidden.bias.numpy())
        expected.append(h @ head.kernel.numpy() + head.bias.numpy())
    np.testing.assert_allclose(np.asarray(model(ids)), expected, atol=1e-5)


def test_word_dropout_only_while_training():
    model = seqkeras.models.classifier(30, 2, backbone="gru", word_dropout=0.5)
    assert isinstance(model.get_layer("word_dropout"), seqkeras.layers.TokenDropout)
    plain = seqkeras.models.classifier(30, 2, backbone="gru")
    plain.set_weights(model.get_weights())
    ids = np.array([[5, 6, 7, 8, 0]], "int32")
    np.testing.assert_allclose(np.asarray(model(ids)), np.asarray(plain(ids)), atol=1e-6)
    tagger = seqkeras.models.tagger(30, 4, word_dropout=0.2, crf=True)
    assert tagger.get_layer("word_dropout").rate == 0.2


def test_word_dropout_does_not_stop_streaming():
    """TokenDropout does nothing at inference: a one-direction classifier
    with word dropout still streams (its step model equals the full
    model)."""
    model = seqkeras.models.classifier(30, 2, backbone="gru", pooling="mean", word_dropout=0.3)
    ids = np.array([[5, 6, 7, 8]], "int32")
    states = model.stream_start({}, 1)
    for t in range(ids.shape[1]):
        y, states = model.stream_step(ids[:, t], states)
    np.testing.assert_allclose(np.asarray(y), np.asarray(model(ids)), atol=1e-5)
