"""`seqkeras.pretrained`: tiny checkpoints made in the test (random-weight
`transformers` BERT and GPT-2 saved with `save_pretrained`, keras-hub
backbones saved with `save_to_preset`) load into seqkeras models whose
hidden states and logits equal the originals; bad checkpoints fail with
errors that name the field or tensor; the models fine-tune and round-trip
through `.keras` with `safe_mode=True`."""

import json
import os

import keras
import numpy as np
import pytest

import seqkeras
import seqkeras.pretrained as sp

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("bert"))
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=40,
        layer_norm_eps=1e-7,
    )
    transformers.BertModel(config).eval().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("gpt2"))
    torch.manual_seed(1)
    config = transformers.GPT2Config(
        vocab_size=101,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=1,
        eos_token_id=2,
    )
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(path)
    return path


def _ids(rows, cols, vocab, seed, low=1):
    ids = np.random.RandomState(seed).randint(low, vocab, (rows, cols)).astype("int32")
    return ids


def test_bert_hidden_states_equal_transformers(bert_dir):
    model = transformers.BertModel.from_pretrained(bert_dir).eval()
    ckpt = sp.read_checkpoint(bert_dir)
    assert ckpt.architecture["layer_norm_epsilon"] == 1e-7
    assert ckpt.architecture["activation"] == "gelu"  # exact (erf)
    encoder = sp.bert_encoder(ckpt.architecture)
    assert sp.load_pretrained(encoder, ckpt) == []
    ids = _ids(3, 11, 99, 0)
    ids[1, 7:] = 0
    ids[2, 4:] = 0
    with torch.no_grad():
        ref = model(
            input_ids=torch.tensor(ids, dtype=torch.long),
            attention_mask=torch.tensor((ids != 0).astype("int64")),
        )
    out = encoder(ids)
    real = ids != 0
    hidden = np.asarray(out["sequence_output"])[real]
    np.testing.assert_allclose(hidden, ref.last_hidden_state.numpy()[real], atol=TOLERANCE)
    np.testing.assert_allclose(
        np.asarray(out["pooled_output"]), ref.pooler_output.numpy(), atol=TOLERANCE
    )
    # the prefix of a model saved with a head ("bert.") is read too
    assert not any(k.startswith("bert.") for k in ckpt.tensors)


def test_gpt2_logits_equal_transformers_and_generate_matches(gpt2_dir):
    model = transformers.GPT2LMHeadModel.from_pretrained(gpt2_dir).eval()
    ckpt = sp.read_checkpoint(gpt2_dir)
    lm = sp.gpt2_language_model(ckpt.architecture)
    assert sp.load_pretrained(lm, ckpt) == []
    ids = _ids(2, 9, 101, 1, low=0)
    ids[0, 3] = 0  # id 0 is a token in GPT-2, not padding
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(ids, dtype=torch.long)).logits.numpy()
    np.testing.assert_allclose(np.asarray(lm(ids)), ref, atol=TOLERANCE)
    path = os.path.join(gpt2_dir, "lm.keras")  # gelu_tanh and the unmasked id 0 survive
    lm.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(np.asarray(loaded(ids)), ref, atol=TOLERANCE)
    # greedy generation: the same tokens as transformers' greedy search
    with torch.no_grad():
        hf = model.generate(
            torch.tensor(ids[:1], dtype=torch.long),
            max_new_tokens=6,
            do_sample=False,
            pad_token_id=2,
            eos_token_id=None,
        ).numpy()
    ours = np.asarray(
        seqkeras.models.generate(lm, prompt=ids[:1], max_length=15, strategy="greedy", eos_id=None)
    )
    np.testing.assert_array_equal(ours[0, :15], hf[0, :15])


def test_keras_hub_presets_load_and_match(tmp_path):
    keras_hub = pytest.importorskip("keras_hub")
    rng = np.random.RandomState(0)
    bert = keras_hub.models.BertBackbone(
        vocabulary_size=50,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=12,
    )
    gpt2 = keras_hub.models.GPT2Backbone(
        vocabulary_size=50,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=12,
    )
    for backbone in (bert, gpt2):
        for v in backbone.weights:  # weights far from the initial ones
            v.assign(rng.normal(0, 0.5, v.shape))
    bert.save_to_preset(str(tmp_path / "bert"))
    gpt2.save_to_preset(str(tmp_path / "gpt2"))

    ckpt = sp.read_checkpoint(str(tmp_path / "bert"))
    assert ckpt.source == "keras_hub" and ckpt.architecture["activation"] == "gelu_tanh"
    encoder = sp.bert_encoder(ckpt.architecture)
    sp.load_pretrained(encoder, ckpt)
    ids = np.array([[2, 5, 7, 9, 3, 0], [2, 4, 3, 0, 0, 0]])
    ref = bert({"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": ids != 0})
    out = encoder(ids)
    real = ids != 0
    np.testing.assert_allclose(
        np.asarray(out["sequence_output"])[real],
        np.asarray(ref["sequence_output"])[real],
        atol=TOLERANCE,
    )
    np.testing.assert_allclose(
        np.asarray(out["pooled_output"]), np.asarray(ref["pooled_output"]), atol=TOLERANCE
    )

    ckpt = sp.read_checkpoint(str(tmp_path / "gpt2"))
    lm = sp.gpt2_language_model(ckpt.architecture)
    sp.load_pretrained(lm, ckpt)
    ids = np.array([[0, 5, 7, 9, 3, 1]])
    hidden = gpt2({"token_ids": ids, "padding_mask": np.ones_like(ids)})
    ref = np.asarray(hidden) @ np.asarray(gpt2.token_embedding.embeddings).T
    np.testing.assert_allclose(np.asarray(lm(ids)), ref, atol=TOLERANCE)


def _copy_config(src, dst, **changes):
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config.update(changes)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(config, f)


def test_unsupported_config_fields_are_named(bert_dir, tmp_path):
    bad = str(tmp_path / "relative")
    _copy_config(bert_dir, bad, position_embedding_type="relative_key")
    with pytest.raises(ValueError, match="position_embedding_type='relative_key'"):
        sp.read_checkpoint(bad)
    other = str(tmp_path / "t5")
    _copy_config(bert_dir, other, model_type="t5")
    with pytest.raises(ValueError, match="model_type='t5'"):
        sp.read_checkpoint(other)
    act = str(tmp_path / "act")
    _copy_config(bert_dir, act, hidden_act="silu")
    with pytest.raises(ValueError, match="hidden_act='silu'"):
        sp.read_checkpoint(act)
    with pytest.raises(ValueError, match="no such directory"):
        sp.read_checkpoint(str(tmp_path / "absent"))


def test_missing_or_mismatched_tensors_are_named(bert_dir, tmp_path):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(os.path.join(bert_dir, "model.safetensors"))
    name = "encoder.layer.1.attention.self.key.weight"
    missing = str(tmp_path / "missing")
    _copy_config(bert_dir, missing)
    save_file({k: v for k, v in tensors.items() if k != name}, missing + "/model.safetensors")
    ckpt = sp.read_checkpoint(missing)
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        sp.load_pretrained(sp.bert_encoder(ckpt.architecture), ckpt)
    # an architecture that does not fit the tensors (wider intermediate layer)
    ckpt = sp.read_checkpoint(bert_dir)
    arch = dict(ckpt.architecture, intermediate_dim=40)
    with pytest.raises(ValueError, match=r"intermediate\.dense\.weight.*shape"):
        sp.load_pretrained(sp.bert_encoder(arch), ckpt)


def test_classifier_fine_tunes_and_round_trips_keras_file(bert_dir, tmp_path):
    ckpt = sp.read_checkpoint(bert_dir)
    model = sp.bert_classifier(ckpt.architecture, 2, pooling="cls")
    sp.load_pretrained(model, ckpt)
    # the label is whether token 7 occurs: learnable from the encoder
    ids = _ids(64, 8, 99, 3)
    ids[:, 0], ids[:, -1] = 2, 3
    labels = (ids == 7).any(1).astype("int32")
    ids[::2, 3] = 7
    labels = (ids == 7).any(1).astype("int32")
    seqkeras.training.compile_model(model, learning_rate=1e-3, weight_decay=0.01, jit_compile=False)
    before = model.evaluate(ids, labels, verbose=0)[0]
    model.fit(ids, labels, epochs=6, batch_size=16, verbose=0)
    after = model.evaluate(ids, labels, verbose=0)[0]
    assert after < before
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, sp.PretrainedClassifier)
    np.testing.assert_allclose(
        np.asarray(loaded.predict(ids, verbose=0)),
        np.asarray(model.predict(ids, verbose=0)),
        atol=1e-6,
    )


def test_crf_tagger_trains_on_word_positions_and_round_trips(bert_dir, tmp_path):
    ckpt = sp.read_checkpoint(bert_dir)
    model = sp.bert_tagger(ckpt.architecture, 4, crf=True, char_vocab_size=10, casing=True, units=6)
    sp.load_pretrained(model, ckpt)
    rng = np.random.RandomState(0)
    n, words = 32, 5
    token_ids = rng.randint(5, 99, (n, 12)).astype("int32")
    token_ids[:, 0] = 2
    starts = np.tile(np.array([1, 2, 4, 6, 0], "int32"), (n, 1))  # 4 words, 1 padding
    tags = np.where(token_ids[:, [1, 2, 4, 6, 0]] > 50, 2, 1).astype("int32")
    tags[:, 4] = 0
    x = {
        "token_ids": token_ids,
        "word_starts": starts,
        "char_ids": rng.randint(1, 10, (n, words, 6)).astype("int32"),
        "casing_ids": np.tile(np.array([3, 5, 5, 5, 0], "int32"), (n, 1)),
    }
    x["char_ids"][:, 4] = 0  # as BertWordFeatures gives a padding word
    seqkeras.training.compile_model(model, learning_rate=2e-3, jit_compile=False)
    history = model.fit(x, tags, epochs=8, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    out = model.predict(x, verbose=0)
    assert (out["tags"][:, 4] == 0).all()  # the padding word
    path = str(tmp_path / "tagger.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0)["tags"], out["tags"])


def test_builders_refuse_bad_arguments(bert_dir, gpt2_dir):
    arch = sp.read_checkpoint(bert_dir).architecture
    gpt2 = sp.gpt2_language_model(sp.read_checkpoint(gpt2_dir).architecture)
    with pytest.raises(ValueError, match="bert checkpoint loads into a model made by"):
        sp.load_pretrained(gpt2, bert_dir)
    with pytest.raises(ValueError, match="gpt2 checkpoint loads into a model made by"):
        sp.load_pretrained(sp.bert_encoder(arch), gpt2_dir)
    with pytest.raises(ValueError, match="bert_classifier.*pooling"):
        sp.bert_classifier(arch, 2, pooling="max")
    with pytest.raises(TypeError, match="bert_tagger.*architecture"):
        sp.bert_tagger("bert-base", 3)
    with pytest.raises(ValueError, match="gpt2_language_model.*model_type='bert'"):
        sp.gpt2_language_model(dict(arch, model_type="bert"))


def test_warmup_linear_decay_matches_the_formula():
    s = seqkeras.training.WarmupLinearDecay(2e-4, total_steps=100, warmup_steps=10)
    steps = np.array([0, 5, 10, 55, 100, 120])
    expected = 2e-4 * np.clip(np.where(steps < 10, steps / 10, (100 - steps) / 90), 0, 1)
    np.testing.assert_allclose([float(s(int(i))) for i in steps], expected, rtol=1e-6)
    with pytest.raises(ValueError, match="warmup_steps"):
        seqkeras.training.WarmupLinearDecay(1e-3, 10, 10)
    again = seqkeras.training.WarmupLinearDecay.from_config(s.get_config())
    assert float(again(40)) == float(s(40))
