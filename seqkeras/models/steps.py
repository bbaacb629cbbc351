"""Step functions the model classes share: one decoding step through
stacked recurrent cells or cached Transformer blocks, the logits head, and
one streamed step through a chain of per-step layers."""

import contextlib

import keras
from keras import ops

from seqkeras.layers import step_weights


def as_list(states):
    """A cell with one state returns it bare; make it a list."""
    return list(states) if isinstance(states, (list, tuple)) else [states]


def projection_step_weights(model, dtype):
    """`{id(layer): weights}` for `step_weights.prepared`: `model`'s output
    matrix (the tied embedding, or the Dense kernel and bias) cast to
    `dtype` once, which `step_logits` then reads instead of the float32
    variable at every decoding step.

    Prepared inside the traced decoding function but outside its loop, the
    cast is a loop invariant: each step reads the matrix once in `dtype`
    (bfloat16: half the bytes of float32 for the 50k x d matrix that
    dominates a small model's step).
    """
    parts = getattr(model, "part", None)
    dense = parts("logits") if parts else None
    embedding = parts("embedding") if parts else None
    if dense is not None:
        bias = None if dense.bias is None else ops.cast(dense.bias, dtype)
        return {id(dense): (ops.cast(dense.kernel, dtype), bias)}
    if embedding is not None:
        return {id(embedding): ops.cast(embedding.embeddings, dtype)}
    return {}


@contextlib.contextmanager
def projection_weights(model, dtype):
    """Inside: `step_logits` of `model` reads its output matrix cast to
    `dtype` once, here (`projection_step_weights`)."""
    with step_weights.prepared([], projection_step_weights(model, dtype)):
        yield


def step_logits(dense=None, embedding=None):
    """`h (batch, dim) -> float32 logits`: the dense output layer, or, with
    tied weights, `h @ E^T` without materialising `E^T` (the embedding's
    reverse call transposes the (vocab, dim) matrix at every step). Inside
    `projection_weights` (or `generate`), with the matrix cast there."""

    def head(h):
        if dense is not None:
            prepared = step_weights.get(dense)
            if prepared is None:
                return ops.cast(dense(h), "float32")
            kernel, bias = prepared
            y = ops.matmul(ops.cast(h, kernel.dtype), kernel)
            return ops.cast(y if bias is None else y + bias, "float32")
        w = step_weights.get(embedding)
        if w is None:
            w = ops.cast(embedding.embeddings, h.dtype)
        return ops.cast(ops.einsum("bd,vd->bv", ops.cast(h, w.dtype), w), "float32")

    return head


def recurrent_step(x, layers, cache):
    """One step through stacked `Recurrent` layers' cells: `(x, cache)`,
    the cache one list of states per layer."""
    new_cache = []
    for layer, states in zip(layers, cache):
        x, states = layer.cell(x, list(states))
        new_cache.append(as_list(states))
    return x, new_cache


def transformer_step(
    tokens,
    caches,
    index,
    embedding,
    positions,
    blocks,
    norm,
    head,
    memory=None,
    mask=None,
    cross=None,
):
    """One decoding step through causal blocks with key/value caches ->
    `(logits, caches)`; `memory`, `mask` and `cross` (the blocks' projected
    cross-attention keys and values) for encoder-decoders."""
    x = positions(embedding(ops.expand_dims(tokens, 1)), start_index=index)
    new_caches = []
    for i, (block, c) in enumerate(zip(blocks, caches)):
        if memory is None:
            x, c = block(x, self_attention_cache=c, self_attention_cache_index=index)
        else:
            x, c = block(
                x,
                memory,
                encoder_padding_mask=mask,
                self_attention_cache=c,
                self_attention_cache_index=index,
                cross_attention_cache=cross[i],
            )
        new_caches.append(c)
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

    def stream_start(self, inputs, batch_size):
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
