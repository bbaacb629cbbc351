"""keras-hub backbones (`BertBackbone`, `GPT2Backbone`) as Hugging Face-
named tensors, read through the public `Variable.path`s and
`get_config()` (no keras-hub internals)."""

import numpy as np


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
