"""Step functions the model classes share: one decoding step through
stacked recurrent cells or cached decoder blocks (one step for every
block kind), the logits head, and one streamed step through a chain of
per-step layers."""

import keras
from keras import ops

from seqkeras.layers import validation


def as_list(states):
    """A cell with one state returns it bare; make it a list."""
    return list(states) if isinstance(states, (list, tuple)) else [states]


def projection_step_weights(model, dtype):
    """The output matrix of `model` cast to `dtype` once, for its decoding
    step's head (`step_logits(..., weights=)`): `(kernel, bias)` of the
    Dense logits layer, or the tied embedding matrix; None for a model
    with neither.

    Made inside the traced decoding function but outside its loop, the
    cast is a loop invariant: each step reads the matrix once in `dtype`
    (bfloat16: half the bytes of float32 for the 50k x d matrix that
    dominates a small model's step).
    """
    parts = getattr(model, "part", None)
    dense = parts("logits") if parts else None
    embedding = parts("embedding") if parts else None
    if dense is not None:
        bias = None if dense.bias is None else ops.cast(dense.bias, dtype)
        return (ops.cast(dense.kernel, dtype), bias)
    if embedding is not None:
        return ops.cast(embedding.embeddings, dtype)
    return None


def model_step_weights(model, dtype):
    """A model's step weights, made once per decoding request and passed
    to its `call_with_cache(..., step_weights=)`: `{"head":
    projection_step_weights(model, dtype), "blocks": [each block's
    prepare_step_weights()]}` (blocks: the models with a `blocks` part)."""
    weights = {"head": projection_step_weights(model, dtype)}
    parts = getattr(model, "part", None)
    blocks = parts("blocks") if parts else None
    if blocks:
        weights["blocks"] = [
            b.prepare_step_weights() if hasattr(b, "prepare_step_weights") else None for b in blocks
        ]
    return weights


def step_logits(dense=None, embedding=None, weights=None):
    """`h (batch, dim) -> float32 logits`: the dense output layer, or, with
    tied weights, `h @ E^T` without materialising `E^T` (the embedding's
    reverse call transposes the (vocab, dim) matrix at every step).
    `weights`: the matrix `projection_step_weights` cast once (default the
    variables)."""

    def head(h):
        if dense is not None:
            if weights is None:
                return ops.cast(dense(h), "float32")
            kernel, bias = weights
            y = ops.matmul(ops.cast(h, kernel.dtype), kernel)
            return ops.cast(y if bias is None else y + bias, "float32")
        w = weights
        if w is None:
            w = ops.cast(embedding.embeddings, h.dtype)
        return ops.cast(ops.einsum("bd,vd->bv", ops.cast(h, w.dtype), w), "float32")

    return head


def head_weights(step_weights):
    """The head's part of a model's `step_weights` (None without)."""
    return None if step_weights is None else step_weights.get("head")


def stream_length(model, max_length):
    """The positions a streamed key/value cache holds: `max_length` (an
    argument of the export), else the model's deprecated
    `stream_max_length` (with a DeprecationWarning), else its
    `max_generation_length` (None: no length)."""
    if max_length is None and model.stream_max_length is not None:
        max_length = validation.renamed(
            type(model).__name__,
            "stream_start(max_length=)",
            validation.UNSET,
            "stream_max_length",
            model.stream_max_length,
            stacklevel=4,
        )
    return max_length or model.max_generation_length


def recurrent_step(x, layers, cache):
    """One step through stacked `Recurrent` layers' cells: `(x, cache)`,
    the cache one list of states per layer."""
    new_cache = []
    for layer, states in zip(layers, cache):
        x, states = layer.cell(x, list(states))
        new_cache.append(as_list(states))
    return x, new_cache


def decoder_step(
    tokens,
    caches,
    index,
    embedding,
    blocks,
    norm,
    head,
    positions=None,
    memory=None,
    mask=None,
    cross=None,
    step_weights=None,
):
    """The one cached step of every decoder-block model -> `(logits of the
    last position, caches)`.

    `tokens` (batch,) is one token at position `index`; (batch, T) is T
    tokens at `index`..`index + T - 1` in one pass (a prompt's prefill:
    each attends causally to the cache and to those before it). Every
    block takes the one block signature `block(x, cache=, cache_index=,
    step_weights=)` (`TransformerDecoderBlock`, `LlamaDecoderBlock`);
    `positions` (learned or sinusoidal, None for rotary blocks) is called
    with `start_index=index`; `memory`, `mask` and `cross` (the blocks'
    projected cross-attention keys and values) for encoder-decoders;
    `step_weights`: the model's (`model_step_weights`)."""
    several = len(tokens.shape) == 2
    x = embedding(tokens if several else ops.expand_dims(tokens, 1))
    if positions is not None:
        x = positions(x, start_index=index)
    block_weights = (step_weights or {}).get("blocks") or [None] * len(blocks)
    new_caches = []
    for i, (block, c) in enumerate(zip(blocks, caches)):
        if memory is None:
            x, c = block(x, cache=c, cache_index=index, step_weights=block_weights[i])
        else:
            x, c = block(
                x,
                memory,
                encoder_padding_mask=mask,
                cache=c,
                cache_index=index,
                cross_attention_cache=cross[i],
                step_weights=block_weights[i],
            )
        new_caches.append(c)
    if several:
        x = x[:, -1:]
    if norm is not None:
        x = norm(x)
    return head(x[:, 0]), new_caches


#: Keras' own layers that work on one step as on a sequence (they declare
#: no streaming step of their own).
PER_STEP_LAYERS = (
    keras.layers.Embedding,
    keras.layers.Dense,
    keras.layers.Activation,
    keras.layers.Reshape,
)
#: Keras' layers that do nothing at inference.
INFERENCE_IDENTITY = (keras.layers.InputLayer, keras.layers.Dropout)


def layer_chain(model):
    """`[(state sizes, step(x, states) -> (y, states))]`: `model`'s layers
    in order, each asked for its streaming step (`stream_state_sizes`,
    `stream_step`: `Recurrent`, `SequencePooling`, `TokenDropout`), Keras'
    per-step layers (embedding, dense, activation, reshape) applied to the
    step. Raises a ValueError naming the first layer that needs the whole
    sequence."""
    chain = []
    for layer in model.layers:
        if isinstance(layer, INFERENCE_IDENTITY):
            continue
        if hasattr(layer, "stream_step"):
            chain.append((list(layer.stream_state_sizes), layer.stream_step))
        elif isinstance(layer, PER_STEP_LAYERS):
            chain.append(([], lambda x, states, layer=layer: (layer(x), [])))
        else:
            raise ValueError(
                f"layer {layer.name!r} ({type(layer).__name__}) needs the "
                "whole sequence (a bidirectional or Transformer backbone); "
                "streaming works on one-direction recurrent backbones"
            )
    return chain


class ChainStreaming:
    """The streaming contract of a model that is a chain of per-step
    layers (embedding, one-direction recurrent layers, pooling, dense):
    states start at zeros (pooling keeps running sums and counts, attention
    pooling an online softmax)."""

    streamable = True

    @property
    def stream_input(self):
        spec = self.inputs[0]
        return (spec.name, tuple(spec.shape[2:]), keras.backend.standardize_dtype(spec.dtype))

    def _chain(self):
        return layer_chain(self)

    def stream_start(self, inputs, batch_size, max_length=None):
        dtype = keras.backend.standardize_dtype(self.compute_dtype)
        return [
            ops.zeros((batch_size, size), dtype) for sizes, _ in self._chain() for size in sizes
        ]

    def stream_step(self, x, states):
        new, i = [], 0
        for sizes, fn in self._chain():
            x, out = fn(x, states[i : i + len(sizes)])
            new += out
            i += len(sizes)
        return x, new
