"""Low-rank adapters (LoRA; Hu et al. 2021) on seqkeras' own projections.

A kernel `W` (its leading axes the inputs, the rest the outputs) is used
as `W + (alpha / rank) * reshape(A @ B)`, with `A` (inputs, rank) drawn
He-uniform and `B` (rank, outputs) zeros (so an adapted layer starts equal
to the plain one), `W` frozen and only `A` and `B` trained: Keras'
`Dense.enable_lora` semantics. Keras' own `enable_lora` adds the variables
to a built layer through a private tracker; here they are created in
`build` when the layer's `lora_rank` (a constructor argument, so it
survives `get_config` and `.keras` files) is set.
`seqkeras.models.with_lora` rebuilds a model with adapters from its config
and copies the weights, `merge_lora` folds them back.
"""

import math

import keras
from keras import ops

from seqkeras.layers import validation


def check(where, lora_rank, lora_alpha):
    """`(rank or None, alpha)`, validated (alpha defaults to rank)."""
    if lora_rank is None:
        return None, None
    rank = validation.positive_int(where, "lora_rank", lora_rank)
    alpha = lora_alpha if lora_alpha is not None else rank
    alpha = validation.greater_than(where, "lora_alpha", alpha, 0)
    return rank, float(alpha)


def add_adapters(layer, kernels):
    """In `layer.build`: for each `(name, kernel, input_axes)`, adds the
    attributes `{name}_lora_a` (inputs, rank) and `{name}_lora_b` (rank,
    outputs), float32 variables, and freezes the kernel."""
    rank = layer.lora_rank
    for name, kernel, axes in kernels:
        shape = tuple(kernel.shape)
        inputs, outputs = math.prod(shape[:axes]), math.prod(shape[axes:])
        a = layer.add_weight(
            shape=(inputs, rank),
            name=f"{name}_lora_a",
            initializer=keras.initializers.HeUniform(),
            dtype="float32",
        )
        b = layer.add_weight(
            shape=(rank, outputs), name=f"{name}_lora_b", initializer="zeros", dtype="float32"
        )
        kernel.trainable = False
        setattr(layer, f"{name}_lora_a", a)
        setattr(layer, f"{name}_lora_b", b)


def effective(layer, name, kernel):
    """`kernel` with its adapter added (the kernel itself without one), in
    the layer's compute dtype."""
    a = getattr(layer, f"{name}_lora_a", None) if layer.lora_rank else None
    if a is None:
        return kernel
    b = getattr(layer, f"{name}_lora_b")
    delta = ops.matmul(ops.cast(a, "float32"), ops.cast(b, "float32"))
    delta = ops.reshape(delta * (layer.lora_alpha / layer.lora_rank), tuple(kernel.shape))
    return ops.cast(ops.cast(kernel, "float32") + delta, layer.compute_dtype)
