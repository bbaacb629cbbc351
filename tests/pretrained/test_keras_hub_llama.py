"""keras-hub Llama-family presets (`LlamaBackbone`, `Llama3Backbone` with
llama3 RoPE scaling, `MistralBackbone` with a sliding window shorter than
the text and a head size other than hidden/heads, `QwenBackbone` with
query/key/value biases and tied embeddings; grouped-query attention in
all) saved with `save_to_preset`, read by `read_checkpoint`: logits equal
to keras-hub's `CausalLM` within 1e-4, and greedy generation of 32 tokens
identical to keras-hub's `generate` with its greedy sampler."""

import json
import os
import types

import keras
import numpy as np
import pytest

import seqkeras
import seqkeras.pretrained as sp
from seqkeras.pretrained import keras_hub_weights

keras_hub = pytest.importorskip("keras_hub")

SIZES = dict(
    vocabulary_size=96,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=64,
    intermediate_dim=96,
    rope_max_wavelength=1000,
    layer_norm_epsilon=1e-5,
)
FAMILIES = {
    "llama": ("LlamaBackbone", "LlamaCausalLM", dict(tie_word_embeddings=False)),
    # llama3 scaling with a short original context: all three frequency bands
    "llama3": (
        "Llama3Backbone",
        "Llama3CausalLM",
        dict(
            tie_word_embeddings=False,
            rope_frequency_adjustment_factor=4.0,
            rope_low_freq_factor=1.0,
            rope_high_freq_factor=2.0,
            rope_pretraining_sequence_length=16,
        ),
    ),
    "mistral": ("MistralBackbone", "MistralCausalLM", dict(sliding_window=6, head_dim=24)),
    "qwen": ("QwenBackbone", "QwenCausalLM", dict(tie_word_embeddings=True)),
}
PROMPTS = np.random.default_rng(0).integers(3, 96, (8, 12)).astype("int32")


def tiny_backbone(family):
    """A random keras-hub backbone of `family`, its weights redrawn wider
    than keras-hub's initializers (std 0.02) so that greedy decoding does
    not repeat one token."""
    name, _, extra = FAMILIES[family]
    keras.utils.set_random_seed(0)
    backbone = getattr(keras_hub.models, name)(**SIZES, **extra)
    rng = np.random.default_rng(1)
    for v in backbone.weights:
        scale = 1.0 if v.path.endswith("/scale") else 0.0
        v.assign(scale + rng.normal(0, 0.15, v.shape).astype("float32"))
    return backbone


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def pair(request, tmp_path_factory):
    path = str(tmp_path_factory.mktemp(request.param))
    backbone = tiny_backbone(request.param)
    backbone.save_to_preset(path)
    theirs = getattr(keras_hub.models, FAMILIES[request.param][1])(backbone, preprocessor=None)
    checkpoint = sp.read_checkpoint(path)
    ours = sp.llama_language_model(checkpoint.architecture)
    assert sp.load_pretrained(ours, checkpoint) == []
    return request.param, ours, theirs, checkpoint


def test_architecture(pair):
    family, _, _, checkpoint = pair
    arch = checkpoint.architecture
    assert checkpoint.model_type == "llama" and checkpoint.source == "keras_hub"
    assert sorted(arch) == sorted(sp.llama_architecture(_hf_config()))
    assert arch["num_key_value_heads"] == 2 and arch["norm_epsilon"] == 1e-5
    assert arch["head_dim"] == (24 if family == "mistral" else 16)
    assert arch["tie_weights"] == (family == "qwen")
    assert ("lm_head.weight" in checkpoint.tensors) == (family != "qwen")
    assert arch["attention_bias"] == (family == "qwen")
    assert arch["window"] == (6 if family == "mistral" else None)
    if family == "llama3":
        assert arch["rope_scaling"] == {
            "type": "llama3",
            "factor": 4.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 2.0,
            "original_max_length": 16,
        }
        assert arch["max_length"] == 131072
    else:
        assert arch["rope_scaling"] is None
    assert arch["bos_id"] is None and arch["eos_ids"] == []  # no tokenizer saved


def _hf_config():
    return dict(
        model_type="llama",
        hidden_size=64,
        num_attention_heads=4,
        num_hidden_layers=2,
        intermediate_size=96,
        max_position_embeddings=128,
        vocab_size=96,
    )


def test_logits_equal_keras_hub(pair):
    family, ours, theirs, _ = pair
    expected = theirs({"token_ids": PROMPTS, "padding_mask": np.ones_like(PROMPTS)})
    np.testing.assert_allclose(np.asarray(ours(PROMPTS)), np.asarray(expected), atol=1e-4)
    if family == "mistral":  # the window acts: full attention differs
        assert ours.part("blocks")[0].attention.window == 6


def test_greedy_generation_equals_keras_hub(pair):
    _, ours, theirs, _ = pair
    prompts, length = PROMPTS[:, :4], 36
    ids = np.asarray(
        seqkeras.models.generate(
            ours, prompt=prompts, max_length=length, eos_id=None, jit_compile=True
        )
    )
    buffer = np.zeros((len(prompts), length), "int32")
    buffer[:, :4] = prompts
    mask = np.zeros(buffer.shape, bool)
    mask[:, :4] = True
    theirs.compile(sampler="greedy")
    expected = theirs.generate({"token_ids": buffer, "padding_mask": mask}, stop_token_ids=None)
    np.testing.assert_array_equal(ids, np.asarray(expected["token_ids"]))
    assert len(np.unique(ids[:, 4:])) > 10  # not one repeated token


def test_tokenizer_ids_and_default_length():
    backbone = tiny_backbone("llama")
    tokenizer = types.SimpleNamespace(start_token_id=1, end_token_id=2, end_token2_id=5)
    arch = keras_hub_weights.llama_architecture(backbone, tokenizer=tokenizer)
    assert (arch["bos_id"], arch["eos_id"], arch["eos_ids"]) == (1, 2, [2, 5])
    assert arch["max_length"] == 8192
    assert keras_hub_weights.llama_architecture(backbone, max_length=64)["max_length"] == 64


def test_refuses_what_keras_hub_computes_otherwise(tmp_path):
    scaled = keras_hub.models.LlamaBackbone(**SIZES, rope_position_scaling_factor=2.0)
    with pytest.raises(ValueError, match="rope_position_scaling_factor=2.0"):
        keras_hub_weights.llama_architecture(scaled)
    sliding = keras_hub.models.QwenBackbone(**SIZES, use_sliding_window_attention=True)
    with pytest.raises(ValueError, match="use_sliding_window_attention"):
        keras_hub_weights.llama_architecture(sliding)
    backbone = tiny_backbone("llama")
    backbone.save_to_preset(str(tmp_path))
    with open(tmp_path / "config.json") as f:
        config = json.load(f)
    config["class_name"] = "GemmaBackbone"
    with open(tmp_path / "config.json", "w") as f:
        json.dump(config, f)
    with pytest.raises(ValueError, match="class_name='GemmaBackbone'"):
        sp.read_checkpoint(os.fspath(tmp_path))


def test_preset_tokenizer_gives_eos(tmp_path):
    vocabulary = {"<|endoftext|>": 0, "a": 1, "b": 2, "ab": 3}
    tokenizer = keras_hub.models.QwenTokenizer(vocabulary=vocabulary, merges=["a b"])
    tiny_backbone("qwen").save_to_preset(str(tmp_path))
    tokenizer.save_to_preset(str(tmp_path))
    arch = sp.read_checkpoint(str(tmp_path)).architecture
    assert (arch["bos_id"], arch["eos_id"], arch["eos_ids"]) == (None, 0, [0])
