"""GGUF files through the `gguf` package (llama.cpp's own reader), for
both readers of them: the tokenizer (`seqkeras.data.ByteLevelBPETokenizer`,
its vocabulary, merges and chat template) and the checkpoint
(`seqkeras.pretrained.read_gguf`, its architecture and tensors). One
reader, so that the two cannot disagree on a file."""

import numpy as np


def package():
    """The `gguf` package, with an error that says how to install it."""
    try:
        import gguf
    except ImportError as error:
        raise ImportError(
            "reading GGUF files needs the gguf package: pip install 'gguf>=0.10' "
            "(or seqkeras[checkpoints])"
        ) from error
    return gguf


def is_gguf(path):
    """A file whose first four bytes are GGUF's magic `GGUF`."""
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def reader(where, path):
    """The `gguf.GGUFReader` of `path`; a ValueError naming `where` when
    the file is not GGUF."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ValueError(
            f"`{where}` expects `path` to be a GGUF file. Received: {path!r} (a file that "
            f"is not GGUF: it starts with {magic!r})"
        )
    return package().GGUFReader(path)


def field_value(field):
    """The Python value of a `gguf.ReaderField` (str, int, float, bool or a
    list of them)."""
    gguf = package()

    def one(part, kind):
        if kind == gguf.GGUFValueType.STRING:
            return bytes(part).decode("utf-8")
        value = part[0].item() if hasattr(part[0], "item") else part[0]
        if kind == gguf.GGUFValueType.FLOAT32:
            # the shortest decimal that is this float32 (1e-05, not
            # 9.999999747378752e-06), as in the config it was written from
            return float(str(np.float32(value)))
        if kind == gguf.GGUFValueType.BOOL:
            return bool(value)
        return value

    if not field.types:
        return None
    if field.types[0] == gguf.GGUFValueType.ARRAY:
        kind = field.types[-1]
        return [one(field.parts[i], kind) for i in field.data]
    return one(field.parts[field.data[0]], field.types[0])


def metadata(gguf_reader, skip=()):
    """`{key: value}` of a reader's metadata (the `GGUF.*` header fields
    left out); each key in `skip` holds its number of items instead of
    its decoded value."""
    out = {}
    for key, field in gguf_reader.fields.items():
        if key.startswith("GGUF."):
            continue
        out[key] = len(field.data) if key in skip else field_value(field)
    return out
