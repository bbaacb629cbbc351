"""keras-hub backbones (`BertBackbone`, `GPT2Backbone`, and the Llama
family: `LlamaBackbone`, `Llama3Backbone`, `MistralBackbone`,
`QwenBackbone`) as Hugging Face-named tensors, read through the public
`Variable.path`s and `get_config()` (no keras-hub internals)."""

import numpy as np

from seqkeras.pretrained.checkpoint_base import _unsupported


def _by_path(backbone):
    return {
        v.path.split("/", 1)[1] if v.path.startswith(backbone.name + "/") else v.path: v
        for v in backbone.weights
    }


def _value(weights, path):
    if path not in weights:
        raise ValueError(f"keras-hub backbone: weight {path!r} is missing")
    return np.asarray(weights[path].numpy(), "float32")


def _heads_in(kernel):
    """(d, heads, head_dim) -> Hugging Face Linear (heads*head_dim, d)."""
    return kernel.reshape(kernel.shape[0], -1).T


def _heads_out(kernel):
    """(heads, head_dim, d) -> Linear (d, heads*head_dim)."""
    return kernel.reshape(-1, kernel.shape[-1]).T


def bert_architecture(backbone):
    c = backbone.get_config()
    return {
        "vocab_size": c["vocabulary_size"],
        "hidden_dim": c["hidden_dim"],
        "num_layers": c["num_layers"],
        "num_heads": c["num_heads"],
        "intermediate_dim": c["intermediate_dim"],
        "max_length": c["max_sequence_length"],
        "num_segments": c["num_segments"],
        "layer_norm_epsilon": 1e-12,
        "activation": "gelu_tanh",  # keras-hub's BERT uses the tanh approximation
        "dropout": c["dropout"],
        "pooler": True,
    }


def bert_tensors(backbone):
    w = _by_path(backbone)
    t = {
        "embeddings.word_embeddings.weight": _value(w, "token_embedding/embeddings"),
        "embeddings.position_embeddings.weight": _value(w, "position_embedding/embeddings"),
        "embeddings.token_type_embeddings.weight": _value(w, "segment_embedding/embeddings"),
        "embeddings.LayerNorm.weight": _value(w, "embeddings_layer_norm/gamma"),
        "embeddings.LayerNorm.bias": _value(w, "embeddings_layer_norm/beta"),
        "pooler.dense.weight": _value(w, "pooled_dense/kernel").T,
        "pooler.dense.bias": _value(w, "pooled_dense/bias"),
    }
    for i in range(backbone.get_config()["num_layers"]):
        src, dst = f"transformer_layer_{i}/", f"encoder.layer.{i}."
        att = src + "self_attention_layer/"
        for name in ("query", "key", "value"):
            t[dst + f"attention.self.{name}.weight"] = _heads_in(_value(w, att + name + "/kernel"))
            t[dst + f"attention.self.{name}.bias"] = _value(w, att + name + "/bias").reshape(-1)
        t[dst + "attention.output.dense.weight"] = _heads_out(
            _value(w, att + "attention_output/kernel")
        )
        t[dst + "attention.output.dense.bias"] = _value(w, att + "attention_output/bias")
        for ours, theirs in (
            ("self_attention_layer_norm", "attention.output.LayerNorm"),
            ("feedforward_layer_norm", "output.LayerNorm"),
        ):
            t[dst + theirs + ".weight"] = _value(w, src + ours + "/gamma")
            t[dst + theirs + ".bias"] = _value(w, src + ours + "/beta")
        for ours, theirs in (
            ("feedforward_intermediate_dense", "intermediate.dense"),
            ("feedforward_output_dense", "output.dense"),
        ):
            t[dst + theirs + ".weight"] = _value(w, src + ours + "/kernel").T
            t[dst + theirs + ".bias"] = _value(w, src + ours + "/bias")
    return t


def gpt2_architecture(backbone):
    c = backbone.get_config()
    return {
        "vocab_size": c["vocabulary_size"],
        "hidden_dim": c["hidden_dim"],
        "num_layers": c["num_layers"],
        "num_heads": c["num_heads"],
        "intermediate_dim": c["intermediate_dim"],
        "max_length": c["max_sequence_length"],
        "layer_norm_epsilon": 1e-5,
        "activation": "gelu_tanh",
        "dropout": c["dropout"],
    }


def gpt2_tensors(backbone):
    """Hugging Face GPT-2 names; its Conv1D weights are (in, out)."""
    w = _by_path(backbone)
    t = {
        "wte.weight": _value(w, "token_embedding/embeddings"),
        "wpe.weight": _value(w, "position_embedding/embeddings"),
        "ln_f.weight": _value(w, "layer_norm/gamma"),
        "ln_f.bias": _value(w, "layer_norm/beta"),
    }
    for i in range(backbone.get_config()["num_layers"]):
        src, dst = f"transformer_layer_{i}/", f"h.{i}."
        att = src + "self_attention/"
        qkv = [_value(w, att + n + "/kernel") for n in ("query", "key", "value")]
        t[dst + "attn.c_attn.weight"] = np.concatenate([k.reshape(k.shape[0], -1) for k in qkv], 1)
        t[dst + "attn.c_attn.bias"] = np.concatenate(
            [_value(w, att + n + "/bias").reshape(-1) for n in ("query", "key", "value")]
        )
        t[dst + "attn.c_proj.weight"] = _heads_out(_value(w, att + "attention_output/kernel")).T
        t[dst + "attn.c_proj.bias"] = _value(w, att + "attention_output/bias")
        for ours, theirs in (
            ("self_attention_layer_norm", "ln_1"),
            ("feedforward_layer_norm", "ln_2"),
        ):
            t[dst + theirs + ".weight"] = _value(w, src + ours + "/gamma")
            t[dst + theirs + ".bias"] = _value(w, src + ours + "/beta")
        for ours, theirs in (
            ("feedforward_intermediate_dense", "mlp.c_fc"),
            ("feedforward_output_dense", "mlp.c_proj"),
        ):
            t[dst + theirs + ".weight"] = _value(w, src + ours + "/kernel")
            t[dst + theirs + ".bias"] = _value(w, src + ours + "/bias")
    return t


# -- Llama family ---------------------------------------------------------------

#: keras-hub backbone classes read as Llama-family checkpoints, with the
#: Hugging Face family each is (a subclass, e.g. `Llama3Backbone`, is read as
#: its nearest listed base class).
LLAMA_BACKBONES = {
    "LlamaBackbone": "llama",
    "Llama3Backbone": "llama",
    "MistralBackbone": "mistral",
    "QwenBackbone": "qwen2",
}

#: The context length (`max_length`) given to a backbone whose config has
#: none: what keras-hub's own Hugging Face exporters write as
#: `max_position_embeddings` (Llama 3.1+ with llama3 RoPE scaling: 131072).
_DEFAULT_MAX_LENGTH = {"llama": 8192, "mistral": 32768, "qwen2": 32768}


def llama_family(backbone):
    """The Hugging Face family ("llama", "mistral", "qwen2") of a keras-hub
    backbone, or None when it is not one of `LLAMA_BACKBONES`."""
    for cls in type(backbone).__mro__:
        if cls.__name__ in LLAMA_BACKBONES:
            return LLAMA_BACKBONES[cls.__name__]
    return None


def _refuse(backbone, key, value, expected):
    _unsupported(f"keras-hub {type(backbone).__name__}", key, value, expected)


def llama_architecture(backbone, max_length=None, tokenizer=None):
    """The builder arguments of a keras-hub `LlamaBackbone`,
    `Llama3Backbone`, `MistralBackbone` or `QwenBackbone` (Qwen2): the same
    dict as `seqkeras.pretrained.llama_architecture` returns for a Hugging
    Face config.

    keras-hub's rotary embedding rotates the two halves of each head (as
    Hugging Face does), its RMSNorm is Hugging Face's, the feed-forward is
    SwiGLU (`silu`) in all three, and Qwen has query/key/value biases.

    Args:
        backbone: the keras-hub backbone.
        max_length: the context length (`generate`'s bound); a keras-hub
            config has none. Default: what keras-hub's Hugging Face
            exporters write (Llama 8192, or 131072 with llama3 RoPE
            scaling; Mistral and Qwen 32768).
        tokenizer: the preset's keras-hub tokenizer, for `bos_id` /
            `eos_ids` (its `start_token_id`, `end_token_id` and Llama 3's
            `end_token2_id`); None leaves them unset.

    Raises:
        ValueError: naming the config field keras-hub's model computes
            differently from every seqkeras architecture: a Llama
            `rope_position_scaling_factor` other than 1 (keras-hub 0.32's
            Llama rotary embedding ignores it), Qwen's sliding window,
            a quantized backbone.
    """
    family = llama_family(backbone)
    if family is None:
        _refuse(backbone, "class_name", type(backbone).__name__, sorted(LLAMA_BACKBONES))
    c = backbone.get_config()
    quantized = getattr(backbone.dtype_policy, "quantization_mode", None)
    if quantized:
        _refuse(backbone, "dtype", backbone.dtype_policy.name, "unquantized weights")
    hidden, heads = int(c["hidden_dim"]), int(c["num_query_heads"])
    head_dim = c.get("head_dim") if family == "mistral" else None
    if head_dim is None:
        if hidden % heads:
            _refuse(backbone, "num_query_heads", heads, f"a divisor of hidden_dim={hidden}")
        head_dim = hidden // heads
    head_dim = int(head_dim)
    if head_dim % 2:
        _refuse(backbone, "head_dim", head_dim, "an even size (RoPE rotates pairs)")
    rope_scaling, window = None, None
    if family == "llama":
        position = c.get("rope_position_scaling_factor", 1.0)
        if position is not None and float(position) != 1.0:
            _refuse(
                backbone,
                "rope_position_scaling_factor",
                position,
                "1.0 (keras-hub's Llama rotary embedding does not apply it)",
            )
        if c.get("rope_frequency_adjustment_factor") is not None:
            rope_scaling = {
                "type": "llama3",
                "factor": float(c["rope_frequency_adjustment_factor"]),
                "low_freq_factor": float(c["rope_low_freq_factor"]),
                "high_freq_factor": float(c["rope_high_freq_factor"]),
                "original_max_length": int(c["rope_pretraining_sequence_length"]),
            }
    else:
        # Mistral's and Qwen's keras-hub RotaryEmbedding divides the
        # frequencies by the factor: Hugging Face's "linear" scaling
        factor = float(c.get("rope_scaling_factor", 1.0))
        if factor != 1.0:
            rope_scaling = {"type": "linear", "factor": factor}
        if family == "mistral" and c.get("sliding_window") is not None:
            window = int(c["sliding_window"])
        if family == "qwen2" and c.get("use_sliding_window_attention"):
            _refuse(backbone, "use_sliding_window_attention", True, "False")
    if max_length is None:
        max_length = _DEFAULT_MAX_LENGTH[family]
        if rope_scaling is not None and rope_scaling["type"] == "llama3":
            max_length = 131072
    names = _by_path(backbone)
    bos = getattr(tokenizer, "start_token_id", None)
    eos_ids = [
        int(i)
        for i in (
            getattr(tokenizer, "end_token_id", None),
            getattr(tokenizer, "end_token2_id", None),
        )
        if i is not None
    ]
    return {
        "vocab_size": int(c["vocabulary_size"]),
        "hidden_dim": hidden,
        "num_layers": int(c["num_layers"]),
        "num_heads": heads,
        "num_key_value_heads": int(c["num_key_value_heads"]),
        "head_dim": head_dim,
        "intermediate_dim": int(c["intermediate_dim"]),
        "max_length": int(max_length),
        "norm_epsilon": float(c["layer_norm_epsilon"]),
        "activation": "silu",
        "rope_base": float(c["rope_max_wavelength"]),
        "rope_scaling": rope_scaling,
        "attention_bias": family == "qwen2",
        "attention_output_bias": False,
        "window": window,
        "window_layers": None,
        # LlamaBackbone's config leaves `tie_word_embeddings` out: the
        # variables say it
        "tie_weights": "token_embedding/reverse_embeddings" not in names,
        "bos_id": None if bos is None else int(bos),
        "eos_id": eos_ids[0] if eos_ids else None,
        "eos_ids": eos_ids,
    }


def llama_tensors(backbone):
    """The weights of a keras-hub Llama, Mistral or Qwen backbone in
    Hugging Face's names without the `model.` prefix (`embed_tokens.weight`,
    `layers.N.self_attn.q_proj.weight` as (out, in), ..., `norm.weight`,
    `lm_head.weight` when untied)."""
    w = _by_path(backbone)
    t = {
        "embed_tokens.weight": _value(w, "token_embedding/embeddings"),
        "norm.weight": _value(w, "sequence_output_layernorm/scale"),
    }
    if "token_embedding/reverse_embeddings" in w:
        t["lm_head.weight"] = _value(w, "token_embedding/reverse_embeddings").T
    for i in range(backbone.get_config()["num_layers"]):
        src, dst = f"transformer_layer_{i}/", f"layers.{i}."
        att = src + "self_attention/"
        for ours, theirs in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj")):
            t[dst + f"self_attn.{theirs}.weight"] = _heads_in(_value(w, att + ours + "/kernel"))
            if att + ours + "/bias" in w:
                t[dst + f"self_attn.{theirs}.bias"] = _value(w, att + ours + "/bias").reshape(-1)
        t[dst + "self_attn.o_proj.weight"] = _heads_out(_value(w, att + "attention_output/kernel"))
        t[dst + "input_layernorm.weight"] = _value(w, src + "self_attention_layernorm/scale")
        t[dst + "post_attention_layernorm.weight"] = _value(w, src + "feedforward_layernorm/scale")
        for ours, theirs in (
            ("feedforward_gate_dense", "gate_proj"),
            ("feedforward_intermediate_dense", "up_proj"),
            ("feedforward_output_dense", "down_proj"),
        ):
            t[dst + f"mlp.{theirs}.weight"] = _value(w, src + ours + "/kernel").T
    return t
