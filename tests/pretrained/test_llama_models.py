"""Llama-family models read from tiny random `transformers` checkpoints
(Llama with tied embeddings, Qwen2 with query/key/value biases, Mistral
with a sliding window shorter than the text; grouped-query attention in
all): logits equal to `transformers`' within 1e-4, greedy generation of 64
tokens identical to `transformers`' `generate`, fine-tuning moves the
loss, and the `.keras` round trip."""

import os

import keras
import numpy as np
import pytest

import seqkeras
import seqkeras.pretrained as sp

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(tie_word_embeddings=True)),
    # biases on q/k/v and o_proj, a tanh-GELU gate, llama3 rope scaling
    "llama_bias": (
        "LlamaConfig",
        "LlamaForCausalLM",
        dict(
            tie_word_embeddings=False,
            attention_bias=True,
            hidden_act="gelu_pytorch_tanh",
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 1000.0,
                "factor": 4.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 2.0,
                "original_max_position_embeddings": 16,
            },
        ),
    ),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=False)),
    "mistral": (
        "MistralConfig",
        "MistralForCausalLM",
        dict(tie_word_embeddings=False, sliding_window=6),
    ),
}
PROMPTS = np.random.default_rng(0).integers(3, 96, (16, 12)).astype("int32")


def tiny_llama_directory(path, family="llama"):
    """A random `transformers` checkpoint of `family`, saved as a Hugging
    Face directory; returns the torch model. Weights drawn wider than
    transformers' default (std 0.02) so that greedy decoding does not
    repeat one token."""
    config_name, model_name, extra = FAMILIES[family]
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(
        vocab_size=96,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        initializer_range=0.15,
        **{"rope_theta": 1000.0, **extra},
    )
    model = getattr(transformers, model_name)(config).eval()
    model.save_pretrained(path, safe_serialization=True)
    return model


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def pair(request, tmp_path_factory):
    path = str(tmp_path_factory.mktemp(request.param))
    theirs = tiny_llama_directory(path, request.param)
    checkpoint = sp.read_checkpoint(path)
    ours = sp.llama_language_model(checkpoint.architecture)
    assert sp.load_pretrained(ours, checkpoint) == []
    return request.param, ours, theirs, path


def test_logits_equal_transformers(pair):
    family, ours, theirs, _ = pair
    with torch.no_grad():
        expected = theirs(torch.tensor(PROMPTS, dtype=torch.long)).logits.numpy()
    np.testing.assert_allclose(np.asarray(ours(PROMPTS)), expected, atol=1e-4)
    if family == "mistral":  # the window acts: full attention differs
        assert ours.part("blocks")[0].attention.window == 6


def test_greedy_generation_equals_transformers(pair):
    family, ours, theirs, path = pair
    prompts = PROMPTS[:, :4]
    eos = sp.read_checkpoint(path).architecture["eos_id"]  # stops as transformers' does
    ids = seqkeras.models.generate(ours, prompt=prompts, max_length=68, eos_id=eos, pad_id=0)
    ids = np.asarray(ids)
    with torch.no_grad():
        expected = theirs.generate(
            torch.tensor(prompts, dtype=torch.long),
            attention_mask=torch.ones(prompts.shape, dtype=torch.long),
            max_new_tokens=64,
            do_sample=False,
            pad_token_id=0,
        ).numpy()
    np.testing.assert_array_equal(ids, expected)
    assert len(np.unique(ids[:, 4:])) > 10  # not one repeated token


def test_fine_tunes_and_round_trips(pair, tmp_path):
    family, ours, _, _ = pair
    if family != "qwen2":
        pytest.skip("one family is enough for the training path")
    checkpoint = sp.read_checkpoint(pair[3])
    model = sp.llama_language_model(checkpoint.architecture)
    sp.load_pretrained(model, checkpoint)
    before = np.asarray(model(PROMPTS[:2]))
    path = os.path.join(tmp_path, "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(PROMPTS[:2])), before, atol=1e-6)
    assert loaded.max_generation_length == 128
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x, y = PROMPTS[:, :-1], PROMPTS[:, 1:]
    history = model.fit(x, y, epochs=3, batch_size=8, verbose=0).history["loss"]
    assert history[-1] < history[0]


def test_errors_name_the_problem(pair):
    _, ours, _, path = pair
    checkpoint = sp.read_checkpoint(path)
    with pytest.raises(ValueError, match="llama_language_model"):
        sp.load_pretrained(seqkeras.models.transformer_language_model(96, 8), checkpoint)
    broken = sp.Checkpoint(
        "llama",
        checkpoint.architecture,
        {k: v for k, v in checkpoint.tensors.items() if "layers.1.mlp.up_proj" not in k},
        path,
        "huggingface",
    )
    with pytest.raises(ValueError, match="layers.1.mlp.up_proj.weight"):
        sp.load_pretrained(sp.llama_language_model(checkpoint.architecture), broken)
    with pytest.raises(TypeError, match="architecture"):
        sp.llama_language_model([1, 2])
