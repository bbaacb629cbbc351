"""`RotaryEmbedding`: rotary position embeddings (RoPE; Su et al. 2021).

Each pair of features `(x_a, x_b)` of a query or key at position `p` is
rotated by the angle `p * theta_i`, `theta_i = base^(-2i / dim)`:

    x_a' = x_a cos(p theta_i) - x_b sin(p theta_i)
    x_b' = x_b cos(p theta_i) + x_a sin(p theta_i)

so that a query-key product depends on the positions only through their
difference. Two layouts pair the features differently: `"half"` pairs
feature i with i + dim/2 (Hugging Face's `rotate_half`: Llama, Qwen2,
Mistral, keras-hub), `"interleaved"` pairs 2i with 2i + 1 (GPT-J, the
original paper, llama.cpp's GGUF files before its converter permutes the
rows). The frequencies may be rescaled for longer contexts: `"linear"`
(positions divided by `factor`) and `"llama3"` (Llama 3.1's per-frequency
smoothing, as `transformers`' `_compute_llama3_parameters`).
"""

import math

import keras
import numpy as np
from keras import ops

from seqkeras.layers import validation

_PACKAGE = "seqkeras"
LAYOUTS = ("half", "interleaved")
SCALINGS = ("linear", "llama3")


def inverse_frequencies(dim, base=10000.0, scaling=None):
    """The rotation frequencies `theta_i` (float32 NumPy, dim / 2 of them),
    computed as `transformers` computes them (float32), then rescaled by
    `scaling` (None or a dict, see `RotaryEmbedding`)."""
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    inv = (1.0 / (np.float32(base) ** exponents)).astype(np.float32)
    if not scaling:
        return inv
    kind = scaling["type"]
    factor = float(scaling["factor"])
    if kind == "linear":
        return inv  # the positions are divided instead (as transformers does)
    # llama3: long wavelengths slowed by `factor`, short ones kept, the
    # band between interpolated.
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old = float(scaling["original_max_length"])
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def check_scaling(where, scaling, arg="scaling"):
    """`scaling` as a plain dict (or None); ValueError naming `where` and
    the argument `arg`."""
    if scaling is None:
        return None
    if not isinstance(scaling, dict) or scaling.get("type") not in SCALINGS:
        raise ValueError(
            f"`{where}` expects `{arg}` None or a dict with 'type' one of {SCALINGS}. "
            f"Received: {arg}={scaling!r}"
        )
    needed = ["factor"]
    if scaling["type"] == "llama3":
        needed += ["low_freq_factor", "high_freq_factor", "original_max_length"]
    for key in needed:
        value = scaling.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
            raise ValueError(
                f"`{where}` expects {arg}[{key!r}] a number > 0 for "
                f"{scaling['type']!r} scaling. Received: {arg}={scaling!r}"
            )
    if scaling["type"] == "llama3" and scaling["high_freq_factor"] <= scaling["low_freq_factor"]:
        raise ValueError(
            f"`{where}` expects high_freq_factor > low_freq_factor. Received: {arg}={scaling!r}"
        )
    return {"type": scaling["type"], **{k: float(scaling[k]) for k in needed}}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class RotaryEmbedding(keras.layers.Layer):
    """Rotary position embeddings of queries or keys (see the module
    docstring for the equations and layouts).

    Args:
        base: the frequencies' base (10,000 in the paper; Llama 3 500,000,
            SmolLM2 100,000).
        layout: `"half"` (Hugging Face) or `"interleaved"` (GPT-J).
        scaling: None, `{"type": "linear", "factor": f}` (positions / f) or
            `{"type": "llama3", "factor", "low_freq_factor",
            "high_freq_factor", "original_max_length"}`.
        rotary_dim: rotate the first `rotary_dim` features of each head
            and leave the rest (default: all; GPT-NeoX-style partial
            rotation).

    Call arguments:
        inputs: (batch, time, heads, dim) or, with `sequence_axis=2`,
            (batch, heads, time, dim); any float dtype (the angles are
            computed in float32).
        start_index: int scalar, the position of the first step (a
            decoding step's cache index).

    Examples:
        >>> import numpy as np, seqkeras
        >>> rope = seqkeras.layers.RotaryEmbedding(base=10000)
        >>> x = np.ones((1, 3, 2, 4), "float32")
        >>> y = np.asarray(rope(x))
        >>> y.shape, np.allclose(y[:, 0], x[:, 0])  # position 0 is unrotated
        ((1, 3, 2, 4), True)
        >>> bool(np.allclose(np.linalg.norm(y, axis=-1), 2.0))  # a rotation
        True
    """

    def __init__(self, base=10000.0, layout="half", scaling=None, rotary_dim=None, **kwargs):
        super().__init__(**kwargs)
        name = "RotaryEmbedding"
        self.base = validation.greater_than(name, "base", base, 1.0)
        self.layout = validation.choice(name, "layout", layout, LAYOUTS)
        self.scaling = check_scaling(name, scaling)
        self.rotary_dim = (
            None if rotary_dim is None else validation.positive_int(name, "rotary_dim", rotary_dim)
        )
        if self.rotary_dim is not None and self.rotary_dim % 2:
            raise ValueError(
                f"`{name}` needs an even `rotary_dim`. Received: rotary_dim={rotary_dim}"
            )
        self.supports_masking = True
        self._tables = {}

    def _dim(self, head_dim):
        dim = self.rotary_dim or head_dim
        if head_dim is not None and (dim > head_dim or dim % 2):
            raise ValueError(
                f"`RotaryEmbedding` needs an even number of rotated features <= the head "
                f"size. Received: head dim={head_dim}, rotary_dim={self.rotary_dim}"
            )
        return dim

    def angles(self, positions, head_dim):
        """`(cos, sin)`, each (len(positions), rotary_dim / 2) float32, for
        float `positions` (a 1-D tensor)."""
        dim = self._dim(head_dim)
        inv = inverse_frequencies(dim, self.base, self.scaling)
        positions = ops.cast(positions, "float32")
        if self.scaling is not None and self.scaling["type"] == "linear":
            positions = positions / self.scaling["factor"]
        theta = ops.expand_dims(positions, 1) * ops.expand_dims(ops.convert_to_tensor(inv), 0)
        return ops.cos(theta), ops.sin(theta)

    def rotate(self, x, cos, sin, sequence_axis=1):
        """`x` (..., time, [heads,] dim) rotated by the angles `(cos, sin)`
        (time, rotary_dim / 2), the time axis at `sequence_axis` (1 or 2 of a
        rank-4 tensor)."""
        dim = x.shape[-1]
        rot = self._dim(dim)
        if len(x.shape) == 4 and sequence_axis == 1:  # (batch, time, heads, dim)
            cos, sin = ops.expand_dims(cos, 1), ops.expand_dims(sin, 1)
        cos, sin = ops.cast(cos, x.dtype), ops.cast(sin, x.dtype)
        rest = None
        if rot != dim:
            x, rest = x[..., :rot], x[..., rot:]
        if self.layout == "half":
            a, b = x[..., : rot // 2], x[..., rot // 2 :]
            y = ops.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
        else:
            a, b = x[..., 0::2], x[..., 1::2]
            y = ops.stack([a * cos - b * sin, b * cos + a * sin], axis=-1)
            y = ops.reshape(y, ops.shape(x))
        return y if rest is None else ops.concatenate([y, rest], axis=-1)

    def call(self, inputs, start_index=0, sequence_axis=1):
        if len(inputs.shape) != 4 or sequence_axis not in (1, 2):
            raise ValueError(
                "`RotaryEmbedding` expects inputs of rank 4, (batch, time, heads, dim) "
                "(sequence_axis=1) or (batch, heads, time, dim) (sequence_axis=2). "
                f"Received: inputs.shape={tuple(inputs.shape)}, sequence_axis={sequence_axis!r}"
            )
        validation.numeric("RotaryEmbedding", "inputs", inputs)
        length = ops.shape(inputs)[sequence_axis]
        positions = ops.arange(length) + ops.cast(start_index, "int32")
        cos, sin = self.angles(positions, inputs.shape[-1])
        return self.rotate(inputs, cos, sin, sequence_axis)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "base": self.base,
                "layout": self.layout,
                "scaling": self.scaling,
                "rotary_dim": self.rotary_dim,
            }
        )
        return config
