"""The in-memory `Checkpoint` that every checkpoint reader returns
(`checkpoints` for BERT, GPT-2 and keras-hub presets, `llama_checkpoints`
for Llama-family directories and GGUF files), and the helpers they share."""

import hashlib


class Checkpoint:
    """A pretrained checkpoint in memory.

    Attributes:
        model_type: `"bert"`, `"gpt2"` or `"llama"` (Llama, Qwen2 and
            Mistral: the architecture dict carries their differences).
        architecture: dict of the builder arguments (sizes, epsilon,
            activation) that rebuild the network without the checkpoint.
        tensors: `{Hugging Face name: float32 array}` (no `bert.` /
            `transformer.` / `model.` prefix).
        directory: where it was read from (a `.gguf` file for GGUF);
            source: `"huggingface"`, `"keras_hub"` or `"gguf"`.
    """

    def __init__(self, model_type, architecture, tensors, directory, source):
        self.model_type = model_type
        self.architecture = architecture
        self.tensors = tensors
        self.directory = directory
        self.source = source

    def tensor(self, name, shape=None):
        """The tensor `name`, checked to have `shape` when given
        (ValueError naming the tensor otherwise)."""
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


def sha256(path):
    """The hex sha256 of the file at `path`, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
