"""Step functions the model classes share: one decoding step through
stacked recurrent cells or cached Transformer blocks, the logits head, and
one streamed step through a chain of per-step layers."""

import contextlib
import threading

import keras
from keras import ops

from seqkeras.layers.pooling import SequencePooling
from seqkeras.layers.recurrent import Recurrent
from seqkeras.layers.token_dropout import TokenDropout


def as_list(states):
    """A cell with one state returns it bare; make it a list."""
    return list(states) if isinstance(states, (list, tuple)) else [states]


_HEAD = threading.local()


@contextlib.contextmanager
def projection_weights(model, dtype):
    """Inside: `logits_head` of `model` reads its output matrix (the tied
    embedding, or the Dense kernel and bias) cast to `dtype` once, here,
    instead of reading the float32 variable at every decoding step.

    Entered inside the traced decoding function but outside its loop, the
    cast is a loop invariant: each step reads the matrix once in `dtype`
    (bfloat16: half the bytes of float32 for the 50k x d matrix that
    dominates a small model's step).
    """
    store = {}
    parts = getattr(model, "part", None)
    dense = parts("logits") if parts else None
    embedding = parts("embedding") if parts else None
    if dense is not None:
        bias = None if dense.bias is None else ops.cast(dense.bias, dtype)
        store[id(dense)] = (ops.cast(dense.kernel, dtype), bias)
    elif embedding is not None:
        store[id(embedding)] = ops.cast(embedding.embeddings, dtype)
    previous = getattr(_HEAD, "store", None)
    _HEAD.store = store
    try:
        yield
    finally:
        _HEAD.store = previous


def logits_head(dense=None, embedding=None):
    """`h (batch, dim) -> float32 logits`: the dense output layer, or, with
    tied weights, `h @ E^T` without materialising `E^T` (the embedding's
    reverse call transposes the (vocab, dim) matrix at every step). Inside
    `projection_weights`, with the matrix cast there."""

    def head(h):
        store = getattr(_HEAD, "store", None) or {}
        if dense is not None:
            if id(dense) not in store:
                return ops.cast(dense(h), "float32")
            kernel, bias = store[id(dense)]
            y = ops.matmul(ops.cast(h, kernel.dtype), kernel)
            return ops.cast(y if bias is None else y + bias, "float32")
        w = store.get(id(embedding))
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


def _pooling_step(layer):
    """`(sizes, step(x, states) -> (pooled, states))`: the pooled value of
    the sequence so far, from running states that start at zeros."""
    mode = layer.mode
    d = layer.output.shape[-1]
    if mode == "last":
        return [], lambda x, states: (x, [])
    if mode == "mean":  # running sum, count

        def mean(x, states):
            total, count = states[0] + x, states[1] + 1.0
            return total / count, [total, count]

        return [d, 1], mean
    if mode == "max":  # running max, seen-anything flag

        def maximum(x, states):
            seen = states[1] > 0
            top = ops.where(seen, ops.maximum(states[0], x), x)
            return top, [top, ops.ones_like(states[1])]

        return [d, 1], maximum

    def attention(x, states):  # online softmax: running max score, sum, acc
        # With sum = acc = 0 (the start), the first step gives exactly x
        # whatever the running max holds.
        top, norm, acc = states
        score = layer.scores(x[:, None])  # (batch, 1)
        new_top = ops.maximum(top, score)
        old, new = ops.exp(top - new_top), ops.exp(score - new_top)
        norm = norm * old + new
        acc = acc * old + new * x
        return acc / norm, [new_top, norm, acc]

    return [1, 1, d], attention


def layer_chain(model):
    """`[(state sizes, step(x, states) -> (y, states))]`: `model`'s layers
    in order, each one step of a single-input, single-output layer. Raises
    a ValueError naming the first layer that needs the whole sequence."""
    chain = []
    for layer in model.layers:
        if isinstance(layer, (keras.layers.InputLayer, keras.layers.Dropout, TokenDropout)):
            continue  # no step work at inference
        if isinstance(layer, Recurrent):
            if layer.go_backwards:
                raise ValueError(f"layer {layer.name!r} runs backwards")

            def run(x, states, layer=layer):
                h, new = layer.cell(x, list(states))
                return h, as_list(new)

            chain.append((layer.state_sizes, run))
        elif isinstance(layer, SequencePooling):
            chain.append(_pooling_step(layer))
        elif isinstance(
            layer,
            (
                keras.layers.Embedding,
                keras.layers.Dense,
                keras.layers.Activation,
                keras.layers.Reshape,
            ),
        ):
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
