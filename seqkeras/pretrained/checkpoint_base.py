"""The in-memory `Checkpoint` that every checkpoint reader returns
(`checkpoints` for BERT, GPT-2 and keras-hub presets, `llama_checkpoints`
for Llama-family directories and GGUF files), and the helpers they share."""

import hashlib

from seqkeras.layers import validation

#: The `Checkpoint.model_type` values.
MODEL_TYPES = ("bert", "gpt2", "llama")
#: The `Checkpoint.source` values.
SOURCES = ("huggingface", "keras_hub", "gguf")


class Checkpoint:
    """A pretrained checkpoint in memory.

    Attributes:
        model_type: `"bert"`, `"gpt2"` or `"llama"` (Llama, Qwen2 and
            Mistral: the architecture dict carries their differences).
        architecture: dict of the builder arguments (sizes, epsilon,
            activation) that rebuild the network without the checkpoint.
        tensors: `{Hugging Face name: float32 array}` (no `bert.` /
            `transformer.` / `model.` prefix).
        directory: where it was read from (a `.gguf` file for GGUF).
        source: `"huggingface"`, `"keras_hub"` or `"gguf"`.

    Args:
        model_type, architecture, tensors, directory, source: the
            attributes above.
    """

    def __init__(self, model_type, architecture, tensors, directory, source):
        if model_type not in MODEL_TYPES:
            raise ValueError(
                f"`Checkpoint` expects `model_type` to be one of {list(MODEL_TYPES)}. "
                f"Received: {model_type!r}"
            )
        for arg, value in (("architecture", architecture), ("tensors", tensors)):
            if not isinstance(value, dict):
                raise TypeError(
                    f"`Checkpoint` expects `{arg}` to be a dict. Received: {type(value).__name__}"
                )
        if source not in SOURCES:
            raise ValueError(
                f"`Checkpoint` expects `source` to be one of {list(SOURCES)}. Received: {source!r}"
            )
        self.model_type = model_type
        self.architecture = architecture
        self.tensors = tensors
        self.directory = directory
        self.source = source

    def tensor(self, name, shape=None):
        """The tensor `name`, checked to have `shape` when given
        (ValueError naming the tensor otherwise)."""
        if not isinstance(name, str):
            raise TypeError(f"`Checkpoint.tensor` expects `name` to be a str. Received: {name!r}")
        if name not in self.tensors:
            raise ValueError(
                f"checkpoint {self.directory}: tensor {name!r} is missing "
                f"(a {self.model_type} checkpoint needs it)"
            )
        value = self.tensors[name]
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise ValueError(
                f"checkpoint {self.directory}: tensor {name!r} has shape "
                f"{tuple(value.shape)}, expected {tuple(shape)}"
            )
        return value

    def __repr__(self):
        return (
            f"Checkpoint({self.model_type!r}, {self.source}, {len(self.tensors)} tensors, "
            f"{self.directory})"
        )


def _unsupported(path, key, value, expected):
    raise ValueError(
        f"{path}: unsupported config field {key}={value!r} (seqkeras.pretrained "
        f"supports {expected})"
    )


def _positive_int(where, key, value):
    """`value` as an int, or a ValueError naming `where` and the config
    field `key` unless it is a positive int."""
    if not validation.is_integer(value) or value < 1:
        raise ValueError(
            f"{where}: config field {key!r} must be a positive int. Received: {value!r}"
        )
    return int(value)


def _config_dict(builder, config):
    """A TypeError naming `builder` unless `config` is a dict."""
    if not isinstance(config, dict):
        raise TypeError(
            f"`{builder}` expects `config` to be a dict (a parsed config.json). "
            f"Received: {type(config).__name__}"
        )


def sha256(path):
    """The hex sha256 of the file at `path`, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
