"""Writing seqkeras' BERT and GPT-2 models as Hugging Face checkpoints
(`config.json` + `model.safetensors`, through the `safetensors` package:
no torch), the inverse of `read_checkpoint` + `load_pretrained`.

A model pretrained here (`apps/pretrain.py`) is then an ordinary
checkpoint: `sentiment.py train --init`, `ner.py train --init` and
Hugging Face `transformers` all read it.
"""

import json
import os

import numpy as np

from seqkeras.layers import validation

_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


def _array(variable):
    return np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable, "float32")


def _norm(tensors, layer, prefix):
    tensors[prefix + ".weight"] = _array(layer.gamma)
    tensors[prefix + ".bias"] = _array(layer.beta)


def _linear(tensors, layer, prefix, conv1d=False):
    """A Dense as a torch Linear ((out, in) weight) or a GPT-2 Conv1D
    ((in, out))."""
    kernel = _array(layer.kernel)
    tensors[prefix + ".weight"] = kernel if conv1d else np.ascontiguousarray(kernel.T)
    tensors[prefix + ".bias"] = _array(layer.bias)


def _projections(mha):
    """A `MultiHeadAttention`'s q, k, v, output as ((in, out) weight,
    bias) pairs."""
    h, k = mha.num_heads, mha.key_dim
    out = {}
    for role in ("query", "key", "value"):
        kernel = _array(getattr(mha, f"{role}_kernel"))
        out[role] = (kernel.reshape(kernel.shape[0], h * k), _array(getattr(mha, f"{role}_bias")))
    kernel = _array(mha.output_kernel)
    out["output"] = (kernel.reshape(h * k, kernel.shape[-1]), _array(mha.output_bias))
    for role, (weight, bias) in out.items():
        out[role] = (weight, bias.reshape(-1))
    return out


def _bert_tensors(model):
    tensors = {}
    embedding = model.part("embedding")
    e = "bert.embeddings."
    tensors[e + "word_embeddings.weight"] = _array(embedding.token_embeddings)
    tensors[e + "position_embeddings.weight"] = _array(embedding.position_embeddings)
    tensors[e + "token_type_embeddings.weight"] = _array(embedding.segment_embeddings)
    _norm(tensors, embedding.layer_norm, e + "LayerNorm")
    names = {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "output": "attention.output.dense",
    }
    for i, block in enumerate(model.part("blocks")):
        p = f"bert.encoder.layer.{i}."
        for role, (weight, bias) in _projections(block.self_attention_layer).items():
            tensors[p + names[role] + ".weight"] = np.ascontiguousarray(weight.T)
            tensors[p + names[role] + ".bias"] = bias
        _norm(tensors, block.self_attention_layer_norm, p + "attention.output.LayerNorm")
        _linear(tensors, block.feedforward_intermediate_dense, p + "intermediate.dense")
        _linear(tensors, block.feedforward_output_dense, p + "output.dense")
        _norm(tensors, block.feedforward_layer_norm, p + "output.LayerNorm")
    if model.part("pooler") is not None:
        _linear(tensors, model.part("pooler"), "bert.pooler.dense")
    if model.part("mlm_transform") is not None:
        head = "cls.predictions."
        _linear(tensors, model.part("mlm_transform"), head + "transform.dense")
        _norm(tensors, model.part("mlm_norm"), head + "transform.LayerNorm")
        tensors[head + "bias"] = _array(embedding.output_bias_weight)
    return tensors


def _gpt2_tensors(model):
    tensors = {"transformer.wte.weight": _array(model.part("embedding").embeddings)}
    tensors["transformer.wpe.weight"] = _array(model.part("positions").embeddings)
    for i, block in enumerate(model.part("blocks")):
        p = f"transformer.h.{i}."
        _norm(tensors, block.self_attention_layer_norm, p + "ln_1")
        parts = _projections(block.self_attention)
        roles = ("query", "key", "value")
        tensors[p + "attn.c_attn.weight"] = np.concatenate([parts[r][0] for r in roles], axis=1)
        tensors[p + "attn.c_attn.bias"] = np.concatenate([parts[r][1] for r in roles])
        tensors[p + "attn.c_proj.weight"], tensors[p + "attn.c_proj.bias"] = parts["output"]
        _norm(tensors, block.feedforward_layer_norm, p + "ln_2")
        _linear(tensors, block.feedforward_intermediate_dense, p + "mlp.c_fc", conv1d=True)
        _linear(tensors, block.feedforward_output_dense, p + "mlp.c_proj", conv1d=True)
    _norm(tensors, model.part("norm"), "transformer.ln_f")
    return tensors


def _bert_config(arch, has_head):
    return {
        "architectures": ["BertForMaskedLM" if has_head else "BertModel"],
        "model_type": "bert",
        "vocab_size": arch["vocab_size"],
        "hidden_size": arch["hidden_dim"],
        "num_hidden_layers": arch["num_layers"],
        "num_attention_heads": arch["num_heads"],
        "intermediate_size": arch["intermediate_dim"],
        "max_position_embeddings": arch["max_length"],
        "type_vocab_size": arch.get("num_segments", 2),
        "layer_norm_eps": arch.get("layer_norm_epsilon", 1e-12),
        "hidden_act": _HF_ACTIVATIONS[arch.get("activation", "gelu")],
        "hidden_dropout_prob": arch.get("dropout", 0.1),
        "attention_probs_dropout_prob": arch.get("dropout", 0.1),
        "pad_token_id": 0,
    }


def _gpt2_config(arch):
    activation = arch.get("activation", "gelu_tanh")
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": arch["vocab_size"],
        "n_embd": arch["hidden_dim"],
        "n_layer": arch["num_layers"],
        "n_head": arch["num_heads"],
        "n_inner": arch["intermediate_dim"],
        "n_positions": arch["max_length"],
        "layer_norm_epsilon": arch.get("layer_norm_epsilon", 1e-5),
        "activation_function": "gelu" if activation == "gelu" else "gelu_new",
        "resid_pdrop": arch.get("dropout", 0.1),
        "embd_pdrop": arch.get("dropout", 0.1),
        "attn_pdrop": arch.get("dropout", 0.1),
        "tie_word_embeddings": True,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }


def save_checkpoint(model, directory, architecture, tokenizer=None):
    """Writes `model` (made by `bert_encoder`, `bert_masked_lm`,
    `bert_classifier`'s network, `gpt2_language_model` or
    `gpt2_classifier`'s network, with `architecture`) as a Hugging Face
    checkpoint in `directory`: `config.json` and `model.safetensors`,
    plus the tokenizer's files (`BertTokenizer.save`) when given. Only the
    pretrained network and the masked-LM head are written (not a task
    head).

    Args:
        model: the model (see above).
        directory: the directory to write.
        architecture: the `architecture` the model was built with.
        tokenizer: an optional `BertTokenizer` saved beside it.

    Returns:
        `directory`.

    Examples:
        >>> import tempfile, numpy as np, seqkeras.pretrained as sp
        >>> arch = dict(vocab_size=40, hidden_dim=8, num_layers=1, num_heads=2,
        ...             intermediate_dim=16, max_length=16)
        >>> model = sp.bert_masked_lm(arch)
        >>> path = sp.save_checkpoint(model, tempfile.mkdtemp(), arch)
        >>> sp.read_checkpoint(path).model_type
        'bert'
    """
    from safetensors.numpy import save_file

    from seqkeras.pretrained.models import _architecture

    if not isinstance(architecture, dict):
        raise TypeError(
            "`save_checkpoint` expects `architecture` to be a dict (the builder's "
            f"`architecture`). Received: {type(architecture).__name__}"
        )
    directory = validation.path("save_checkpoint", "directory", directory)
    model_type = architecture.get("model_type", "bert")
    if model_type not in ("bert", "gpt2"):
        raise ValueError(
            "`save_checkpoint` writes bert and gpt2 models. Received: "
            f"architecture model_type={model_type!r}"
        )
    arch = _architecture("save_checkpoint", architecture, model_type)
    part = getattr(model, "part", lambda role: None)
    if model_type == "bert":
        if part("embedding") is None or not part("blocks"):
            raise ValueError(
                "`save_checkpoint`: a bert architecture needs a model made by "
                f"`seqkeras.pretrained`'s BERT builders. Received: {type(model).__name__}"
            )
        tensors = _bert_tensors(model)
        config = _bert_config(arch, part("mlm_transform") is not None)
    else:
        if part("positions") is None or not part("blocks"):
            raise ValueError(
                "`save_checkpoint`: a gpt2 architecture needs a model made by "
                f"`gpt2_language_model` or `gpt2_classifier`. Received: {type(model).__name__}"
            )
        tensors = _gpt2_tensors(model)
        config = _gpt2_config(arch)
    os.makedirs(directory, exist_ok=True)
    tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    if tokenizer is not None:
        tokenizer.save(directory)
    return directory
