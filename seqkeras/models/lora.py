"""LoRA fine-tuning of a whole model: `with_lora` rebuilds it with low-rank
adapters in every layer that takes them (`lora_rank` in its config:
`MultiHeadAttention`, `GatedFeedForward`, `LlamaDecoderBlock`) and freezes
everything else; `save_lora` / `load_lora` keep the adapters on their own
(a small `.npz`); `merge_lora` folds them into the kernels of a plain
copy for export."""

import math
import os

import keras
import numpy as np

from seqkeras.layers import validation
from seqkeras.layers.walk import all_layers

#: The kernels `seqkeras.layers.lora` adapts, by layer attribute prefix.
_ADAPTED = ("query", "key", "value", "output", "gate", "up", "down")


def _set_rank(config, rank, alpha):
    """Sets `lora_rank`/`lora_alpha` in every layer config (nested dicts)
    that has them; returns how many."""
    found = 0
    if isinstance(config, dict):
        if "lora_rank" in config:
            config["lora_rank"], config["lora_alpha"] = rank, alpha
            found += 1
        for value in config.values():
            found += _set_rank(value, rank, alpha)
    elif isinstance(config, list):
        for value in config:
            found += _set_rank(value, rank, alpha)
    return found


def _model(where, model):
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"`{where}` expects `model` to be a keras.Model. Received: {type(model).__name__}"
        )
    return model


def _path(where, path):
    return os.path.abspath(validation.path(where, "path", path, "a file path"))


def _rebuilt(model, rank, alpha, where):
    _model(where, model)
    config = model.get_config()
    if not _set_rank(config, rank, alpha):
        raise ValueError(
            f"`{where}`: model {model.name!r} has no layer that takes adapters (a "
            "`lora_rank` argument: MultiHeadAttention, GatedFeedForward, LlamaDecoderBlock)"
        )
    return type(model).from_config(config)


def lora_variables(model):
    """The model's adapter variables (`*_lora_a`, `*_lora_b`), in order.

    Args:
        model: a Keras model (a `with_lora` copy has adapters; any other
            model gives an empty list).

    Returns:
        A list of `keras.Variable`s.
    """
    return _adapters("lora_variables", model)


def _adapters(where, model):
    return [v for v in _model(where, model).weights if v.name.endswith(("_lora_a", "_lora_b"))]


def with_lora(model, rank, alpha=None):
    """A copy of `model` with rank-`rank` adapters (scaled by `alpha /
    rank`; alpha defaults to the rank) on every attention and gated
    feed-forward projection, the model's weights copied in and frozen: only
    the adapters train. The adapters start at zero (`B = 0`), so the copy
    computes what `model` computes.

    Args:
        model: a model of `seqkeras.models` or `seqkeras.pretrained` whose
            layers take `lora_rank` (attention, `GatedFeedForward`,
            `LlamaDecoderBlock`, ...).
        rank: the adapters' rank, a positive int.
        alpha: the scale's numerator, > 0 (default: `rank`, a scale of 1).

    Returns:
        The new model (`model` is left as it was).

    Raises:
        ValueError: a `rank` that is not a positive int, an `alpha` <= 0,
            or a model whose weights the copy cannot find.

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.decoder_language_model(
        ...     vocab_size=40, hidden_dim=16, num_layers=1, num_heads=2,
        ...     intermediate_dim=32)
        >>> tuned = seqkeras.models.with_lora(model, rank=4)
        >>> x = np.array([[3, 4, 5]])
        >>> bool(np.allclose(tuned(x), model(x), atol=1e-6))
        True
        >>> [v.name for v in tuned.trainable_weights][:2]
        ['query_lora_a', 'query_lora_b']
    """
    rank = validation.positive_int("with_lora", "rank", rank)
    if alpha is not None:
        validation.greater_than("with_lora", "alpha", alpha, 0)
    new = _rebuilt(model, rank, alpha, "with_lora")
    old = {v.path: v for v in model.weights}
    for v in new.weights:
        if v.path in old:
            v.assign(old[v.path])
            v.trainable = False
        elif not v.name.endswith(("_lora_a", "_lora_b")):
            raise ValueError(f"`with_lora`: no weight {v.path!r} in model {model.name!r}")
    return new


def merge_lora(model):
    """A plain copy of a `with_lora` model (no adapters) whose kernels are
    `W + (alpha / rank) A B`: the same outputs, for export.

    Args:
        model: a `with_lora` model.

    Returns:
        The merged model, of the architecture `with_lora` was given.

    Raises:
        ValueError: a model without adapters.
    """
    merged = {}
    for layer in all_layers(_model("merge_lora", model)):
        rank = getattr(layer, "lora_rank", None)
        if not rank:
            continue
        for name in _ADAPTED:
            a = getattr(layer, f"{name}_lora_a", None)
            if a is None:
                continue
            kernel = getattr(layer, f"{name}_kernel")
            b = getattr(layer, f"{name}_lora_b")
            delta = (np.asarray(a) @ np.asarray(b)) * (layer.lora_alpha / rank)
            merged[kernel.path] = np.asarray(kernel) + delta.reshape(tuple(kernel.shape))
    if not merged:
        raise ValueError(f"`merge_lora`: model {model.name!r} has no adapters")
    new = _rebuilt(model, None, None, "merge_lora")
    old = {v.path: v for v in model.weights}
    for v in new.weights:
        v.assign(merged[v.path] if v.path in merged else old[v.path])
    return new


def save_lora(model, path):
    """Writes the model's adapters alone to `path` (`.npz`, by variable
    path) through a temporary file and one rename: a kill while writing
    leaves the previous adapters or the new ones.

    Args:
        model: a `with_lora` model.
        path: the `.npz` file to write (replaced if it exists).

    Returns:
        `path`.

    Raises:
        ValueError: a model without adapters.
    """
    from seqkeras._atomic import place_file, recover, temporary_file

    variables = _adapters("save_lora", model)
    if not variables:
        raise ValueError(f"`save_lora`: model {model.name!r} has no adapters")
    path = _path("save_lora", path)
    recover(path)  # what a killed earlier save left beside it
    tmp = temporary_file(path)
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **{v.path: np.asarray(v) for v in variables})
        place_file(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def load_lora(model, path):
    """Reads adapters written by `save_lora` into a `with_lora` model of
    the same shape.

    Args:
        model: a `with_lora` model of the saved one's architecture and rank.
        path: the `.npz` file `save_lora` wrote.

    Returns:
        `model`, its adapters assigned.

    Raises:
        ValueError: a model without adapters, or an adapter missing from
            the file or of another shape (a different rank or model).
        FileNotFoundError: no file at `path`.
    """
    variables = _adapters("load_lora", model)
    if not variables:
        raise ValueError(f"`load_lora`: model {model.name!r} has no adapters (use `with_lora`)")
    path = _path("load_lora", path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"`load_lora`: no adapters file at `path` {path!r}")
    with np.load(path) as stored:
        for v in variables:
            if v.path not in stored.files:
                raise ValueError(f"`load_lora`: {path} has no adapter {v.path!r}")
            value = stored[v.path]
            if tuple(value.shape) != tuple(v.shape):
                raise ValueError(
                    f"`load_lora`: adapter {v.path!r} in {path} has shape {value.shape}, "
                    f"the model's {tuple(v.shape)} (a different rank or model)"
                )
            v.assign(value)
    return model


def adapter_size(model):
    """Float32 bytes of the model's adapters.

    Args:
        model: a `with_lora` model.

    Returns:
        An int: 4 bytes per adapter entry.
    """
    return 4 * sum(math.prod(v.shape) for v in _adapters("adapter_size", model))
