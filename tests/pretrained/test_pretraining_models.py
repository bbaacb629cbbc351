"""The pretraining models against independent references: `bert_masked_lm`
and `gpt2_language_model` written by `save_checkpoint` and read by Hugging
Face `transformers` (BertForMaskedLM, GPT2LMHeadModel) with equal logits;
the masked-LM loss against NumPy; `gpt2_classifier` against the hidden
state it should read; `bilm`'s two directions against causality and
padding, and `elmo_features` against the layers it exposes."""

import os

import keras
import numpy as np
import pytest

import seqkeras
import seqkeras.pretrained as sp

ARCH = dict(
    vocab_size=50, hidden_dim=16, num_layers=2, num_heads=2, intermediate_dim=32, max_length=24
)


def _randomize(model, seed=0):
    """Every weight random (biases and LayerNorms too), so a mapping that
    drops or transposes a tensor shows."""
    rng = np.random.default_rng(seed)
    for v in model.weights:
        value = rng.normal(0, 0.3, v.shape) + (1.0 if "gamma" in v.path else 0.0)
        v.assign(value.astype("float32"))


def test_masked_lm_equals_transformers_bert_for_masked_lm(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = sp.bert_masked_lm(dict(ARCH, dropout=0.0))
    _randomize(model)
    path = sp.save_checkpoint(model, str(tmp_path / "bert"), ARCH)
    hf = transformers.BertForMaskedLM.from_pretrained(path).eval()
    ids = np.array([[1, 7, 4, 9, 12, 2, 0, 0], [1, 4, 33, 2, 0, 0, 0, 0]])
    positions = np.array([[2, 4, 0], [1, 2, 0]])
    ours = np.asarray(model({"token_ids": ids, "mask_positions": positions}))
    with torch.no_grad():
        ref = hf(input_ids=torch.tensor(ids), attention_mask=torch.tensor(ids != 0).long())
    ref = np.take_along_axis(ref.logits.numpy(), positions[..., None], axis=1)
    np.testing.assert_allclose(ours[:, :2], ref[:, :2], atol=2e-5)
    # and back: read_checkpoint + load_pretrained give the same model
    again = sp.bert_masked_lm(dict(ARCH, dropout=0.0))
    assert sp.load_pretrained(again, path) == []
    np.testing.assert_array_equal(
        np.asarray(again({"token_ids": ids, "mask_positions": positions})), ours
    )
    # a classifier over the written checkpoint takes all but the MLM head
    classifier = sp.bert_classifier(sp.read_checkpoint(path).architecture, 2, pooling="mean")
    unused = sp.load_pretrained(classifier, path)
    assert len(unused) == 5 and all(n.startswith("cls.predictions.") for n in unused)


def test_masked_lm_loss_is_cross_entropy_at_selected_positions():
    model = sp.bert_masked_lm(dict(ARCH, dropout=0.0))
    seqkeras.training.compile_model(model, jit_compile=False)
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 50, size=(4, 10))
    positions = np.array([[1, 3, 0], [2, 0, 0], [4, 5, 6], [7, 0, 0]])
    labels = np.where(positions > 0, rng.integers(5, 50, size=positions.shape), 0)
    x = {"token_ids": ids, "mask_positions": positions}
    loss = model.evaluate(x, labels, verbose=0, return_dict=True)["loss"]
    logits = np.asarray(model(x), "float64")
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
    logp -= logits.max(-1, keepdims=True)
    live = labels > 0
    nll = -np.take_along_axis(logp, labels[..., None], -1)[..., 0][live]
    assert loss == pytest.approx(nll.mean(), rel=1e-4)


def test_gpt2_checkpoint_equals_transformers_and_classifier_reads_last_token(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    arch = dict(ARCH, model_type="gpt2")
    lm = sp.gpt2_language_model(arch, dropout=0.0)
    _randomize(lm, 2)
    path = sp.save_checkpoint(lm, str(tmp_path / "gpt2"), arch)
    hf = transformers.GPT2LMHeadModel.from_pretrained(path).eval()
    ids = np.array([[1, 7, 9, 12, 2]])
    with torch.no_grad():
        ref = hf(input_ids=torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(np.asarray(lm(ids)), ref, atol=2e-5)

    classifier = sp.gpt2_classifier(arch, 3, dropout=0.0)
    assert sp.load_pretrained(classifier, path) == []
    padded = np.array([[1, 7, 9, 12, 2, 0, 0], [1, 7, 2, 0, 0, 0, 0]])
    logits = np.asarray(classifier(padded))
    # the hidden state at the last non-pad token, through the output layer
    hidden = keras.Model(classifier.input, classifier.get_layer("decoder_norm").output)
    states = np.asarray(hidden(padded))
    dense = classifier.get_layer("logits_dense")
    kernel, bias = (np.asarray(w) for w in dense.weights)
    want = np.stack([states[0, 4], states[1, 2]]) @ kernel + bias
    np.testing.assert_allclose(logits, want, atol=1e-5)
    # padding changes nothing
    np.testing.assert_allclose(np.asarray(classifier(padded[:1, :5])), logits[:1], atol=1e-5)


def test_save_checkpoint_errors(tmp_path):
    model = seqkeras.models.classifier(30, 2, embedding_dim=4, units=4)
    with pytest.raises(ValueError, match="save_checkpoint.*bert"):
        sp.save_checkpoint(model, str(tmp_path), ARCH)
    with pytest.raises(ValueError, match="save_checkpoint.*model_type"):
        sp.save_checkpoint(model, str(tmp_path), dict(ARCH, model_type="t5"))
    bert = sp.bert_masked_lm(ARCH)
    with pytest.raises(ValueError, match="load_pretrained.*gpt2"):
        sp.load_pretrained(
            sp.bert_classifier(ARCH, 2),
            sp.save_checkpoint(
                sp.gpt2_language_model(dict(ARCH, model_type="gpt2")),
                str(tmp_path / "g"),
                dict(ARCH, model_type="gpt2"),
            ),
        )
    assert os.path.isfile(sp.save_checkpoint(bert, str(tmp_path / "b"), ARCH) + "/config.json")


def test_bilm_directions_are_causal_and_ignore_padding():
    lm = seqkeras.models.bi_language_model(40, embedding_dim=8, units=8, num_layers=2, dropout=0.0)
    x = np.array([[1, 10, 11, 12, 13, 2, 0, 0]])
    out = {k: np.asarray(v) for k, v in lm(x).items()}
    changed = x.copy()
    changed[0, 3] = 30
    after = {k: np.asarray(v) for k, v in lm(changed).items()}
    # forward at t sees tokens <= t; backward at t sees tokens >= t
    np.testing.assert_array_equal(after["forward"][0, :3], out["forward"][0, :3])
    np.testing.assert_array_equal(after["backward"][0, 4:6], out["backward"][0, 4:6])
    assert np.abs(after["forward"][0, 3] - out["forward"][0, 3]).max() > 1e-4
    assert np.abs(after["backward"][0, 3] - out["backward"][0, 3]).max() > 1e-4
    # right padding changes nothing, in either direction
    short = {k: np.asarray(v) for k, v in lm(x[:, :6]).items()}
    for k in ("forward", "backward"):
        np.testing.assert_allclose(short[k][0], out[k][0, :6], atol=1e-5)
    # the backward model is the forward recurrence over the reversed row
    emb = np.asarray(lm.part("embedding")(x[:, :6]))
    h = emb[:, ::-1]
    for recurrent, projection in zip(lm.part("backward"), lm.part("backward_projection")):
        h = np.asarray(projection(recurrent(h))) + h
    table = np.asarray(lm.part("embedding").embeddings)
    np.testing.assert_allclose(short["backward"], (h @ table.T)[:, ::-1], atol=1e-4)


def test_bilm_trains_saves_and_gives_elmo_features(tmp_path):
    lm = seqkeras.models.bi_language_model(40, embedding_dim=8, units=8, num_layers=2, dropout=0.0)
    seqkeras.training.compile_model(lm, jit_compile=True)
    rng = np.random.default_rng(3)
    x = np.concatenate(
        [np.ones((32, 1)), rng.integers(5, 40, size=(32, 8)), np.full((32, 1), 2)], 1
    )
    y = {"forward": np.concatenate([x[:, 1:], np.zeros((32, 1))], 1)}
    y["backward"] = np.concatenate([np.zeros((32, 1)), x[:, :-1]], 1)
    history = lm.fit(x, y, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    # the summed loss is the two directions' losses
    last = {k: history.history[k][-1] for k in ("loss", "forward_loss", "backward_loss")}
    assert last["loss"] == pytest.approx(last["forward_loss"] + last["backward_loss"], rel=1e-3)
    path = str(tmp_path / "bilm.keras")
    lm.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(
        np.asarray(loaded(x[:2])["forward"]), np.asarray(lm(x[:2])["forward"]), atol=1e-6
    )
    features = seqkeras.models.elmo_features(loaded)
    assert not features.trainable_weights  # frozen, as ELMo
    layers = [np.asarray(f) for f in features(x[:2])]
    assert len(layers) == 3 and all(f.shape == (2, 10, 16) for f in layers)
    emb = np.asarray(loaded.part("embedding")(x[:2]))
    np.testing.assert_allclose(layers[0], np.concatenate([emb, emb], -1), atol=1e-6)
    h = emb
    for recurrent, projection in zip(loaded.part("forward"), loaded.part("forward_projection")):
        h = np.asarray(projection(recurrent(h))) + h
    np.testing.assert_allclose(layers[2][..., :8], h, atol=1e-5)
    mixed = seqkeras.layers.ScalarMix(3)(features(x[:2]))
    np.testing.assert_allclose(np.asarray(mixed), sum(layers) / 3, atol=1e-5)
    with pytest.raises(TypeError, match="elmo_features.*bi_language_model"):
        seqkeras.models.elmo_features(seqkeras.models.classifier(30, 2, units=4))


def test_gpt2_tagger_reads_each_words_last_subword(tmp_path):
    arch = dict(ARCH, model_type="gpt2")
    lm = sp.gpt2_language_model(arch, dropout=0.0)
    _randomize(lm, 4)
    path = sp.save_checkpoint(lm, str(tmp_path / "gpt2"), arch)
    tagger = sp.gpt2_tagger(arch, 4, dropout=0.0)
    assert sp.load_pretrained(tagger, path) == []
    # words: [5 6] [7] [8 9 10]; then padding
    ids = np.array([[1, 5, 6, 7, 8, 9, 10, 2, 0, 0]])
    starts = np.array([[1, 3, 4, 0]])
    logits = np.asarray(tagger({"token_ids": ids, "word_starts": starts}))
    hidden = keras.Model(tagger.input, tagger.get_layer("decoder_norm").output)
    states = np.asarray(hidden({"token_ids": ids, "word_starts": starts}))[0]
    kernel, bias = (np.asarray(w) for w in tagger.get_layer("logits_dense").weights)
    np.testing.assert_allclose(logits[0, :3], states[[2, 3, 6]] @ kernel + bias, atol=1e-5)
    # the lm's hidden states are the tagger's (same weights, causal)
    lm_hidden = keras.Model(lm.input, lm.get_layer("decoder_norm").output)
    np.testing.assert_allclose(np.asarray(lm_hidden(ids))[0], states, atol=1e-5)


@pytest.mark.parametrize("norm_first", [True, False])
def test_load_encoder_copies_the_source_side_only(norm_first):
    shape = dict(max_length=12, num_layers=2, num_heads=2, hidden_dim=16, norm_first=norm_first)
    keras.utils.set_random_seed(1)
    pretrained = seqkeras.models.transformer_seq2seq(40, 40, positional="learned", **shape)
    model = seqkeras.models.transformer_seq2seq(40, 25, positional="learned", **shape)
    decoder_before = [w.copy() for w in model.get_layer("decoder_block_0").get_weights()]
    names = seqkeras.models.load_encoder(model, pretrained)
    expected = ["source_embedding", "source_positions", "encoder_block_0", "encoder_block_1"]
    assert names == expected + (["encoder_norm"] if norm_first else [])

    def encoder(m):  # source ids -> the memory the decoder attends to
        return keras.Model(m.get_layer("source_ids").output, m.get_layer("memory").output)

    ids = np.array([[5, 9, 3, 2, 0, 0], [7, 7, 1, 30, 39, 2]], "int32")
    np.testing.assert_allclose(encoder(model)(ids), encoder(pretrained)(ids), atol=1e-6)
    for a, b in zip(decoder_before, model.get_layer("decoder_block_0").get_weights()):
        np.testing.assert_array_equal(a, b)  # the target side is untouched


def test_load_encoder_errors_name_the_layer():
    small = dict(max_length=8, num_heads=2, hidden_dim=16)
    source = seqkeras.models.transformer_seq2seq(40, 40, num_layers=2, **small)
    other_vocab = seqkeras.models.transformer_seq2seq(30, 40, num_layers=2, **small)
    before = other_vocab.get_weights()
    with pytest.raises(ValueError, match="load_encoder.*'source_embedding'.*same encoder"):
        seqkeras.models.load_encoder(other_vocab, source)
    for a, b in zip(before, other_vocab.get_weights()):  # nothing copied
        np.testing.assert_array_equal(a, b)
    fewer = seqkeras.models.transformer_seq2seq(40, 40, num_layers=1, **small)
    with pytest.raises(ValueError, match="load_encoder.*no layer 'encoder_block_1'"):
        seqkeras.models.load_encoder(fewer, source)
    lm = seqkeras.models.transformer_language_model(40, 8, num_heads=2, hidden_dim=16)
    with pytest.raises(TypeError, match="load_encoder.*`source`.*transformer_seq2seq"):
        seqkeras.models.load_encoder(source, lm)
