"""A Transformer encoder-decoder's decoding loop laid out for serving
without XLA: the graph the `translate`, `generate` and `generate_beam`
signatures of a `transformer_seq2seq` model run by default.

`seqkeras.decoding` is written once for every backend and for XLA: fixed
shapes, a `max_length` key/value cache written with a scatter, and every
cache leaf (the cross-attention keys and values and the encoder outputs
too) reordered with a gather at every beam step. Under XLA those copies
fuse; in a plain TensorFlow graph each is an op of its own that copies
the whole buffer, and each op costs the executor's dispatch time. This
module is TensorFlow code (it lives in `seqkeras.export`) that decodes
the same way (the same beam search, scores and stopping rule; outputs
equal to `seqkeras.models.generate`) with fewer and smaller ops per step:

- one (d, 3d) matrix product for the self-attention queries, keys and
  values, and the cross-attention keys and values of all blocks
  projected by one product per request (the weights concatenated once,
  at export);
- caches that grow by one position per step (a `tf.while_loop` with a
  variable time axis), so attention and the beam reordering touch the
  `t` positions decoded so far, not `max_length`;
- the cross-attention keys and values and the source mask are computed
  once per request and never reordered (every beam of a sentence shares
  them);
- greedy decoding as its own loop, without beam bookkeeping;
- the loop stops when every row has ended.

The layer norms and the feed-forward layers are the model's own Keras
layers, called on (rows, d) tensors.
"""

import numpy as np
import tensorflow as tf
from keras import ops

from seqkeras.data.tokens import BOS, PAD

#: Up to this many rows (sentences x beams) per step, attention runs as
#: products and sums over (rows, heads, t, dim) tensors; above, as batched
#: matrix products. On 2 cores with oneDNN, per attention (scores, softmax,
#: context; t = 15): 35 us against 159 us at 4 rows, 76 against 223 at 16,
#: 1,048 against 605 at 128.
SMALL_ROWS = 32

_ACTIVATIONS = {
    "relu": tf.nn.relu,
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: tf.nn.gelu(x, approximate=True),
}


def supports(model):
    """Whether `model` is a `transformer_seq2seq` model this module
    decodes (its parts: embedding, positions, decoder blocks with
    cross-attention)."""
    from seqkeras.models.encoder_decoder import TransformerSeq2Seq

    if not isinstance(model, TransformerSeq2Seq):
        return False
    blocks = model.part("blocks") or []
    return bool(blocks) and all(getattr(b, "has_cross_attention", False) for b in blocks)


def _fused(attention, names):
    """`(kernel, bias)`: the attention layer's `names` projections
    ((d_in, heads, dim) kernels) side by side as one (d_in, len(names) *
    heads * dim) matrix product."""
    kernels, biases = [], []
    for name in names:
        kernel = np.asarray(getattr(attention, f"{name}_kernel"))
        kernels.append(kernel.reshape(kernel.shape[0], -1))
        bias = getattr(attention, f"{name}_bias")
        biases.append(
            np.zeros(kernels[-1].shape[1], "float32")
            if bias is None
            else np.asarray(bias).reshape(-1)
        )
    return np.concatenate(kernels, 1), np.concatenate(biases)


def _output(attention):
    """`(kernel, bias)`: the (heads, dim, d_out) output projection as
    (heads * dim, d_out)."""
    kernel = np.asarray(attention.output_kernel)
    kernel = kernel.reshape(-1, kernel.shape[-1])
    bias = attention.output_bias
    return kernel, np.zeros(kernel.shape[1], "float32") if bias is None else np.asarray(bias)


def _softmax(logits, dtype):
    """Softmax over the last axis in float32, written out (oneDNN's softmax
    kernel costs ~90 us a call on these shapes, its four ops ~15 us),
    cast to `dtype`."""
    logits = tf.cast(logits, tf.float32)
    e = tf.exp(logits - tf.reduce_max(logits, -1, keepdims=True))
    return tf.cast(e / tf.reduce_sum(e, -1, keepdims=True), dtype)


class TransformerServingDecoder(tf.Module):
    """The decoding loop of a `transformer_seq2seq` model in plain
    TensorFlow ops (see the module docstring).

    Args:
        model: a `TransformerSeq2Seq` (`supports(model)`).
        compiled: the loop will be compiled by XLA (`saved_model(...,
            jit_compile=True)`), which needs fixed shapes: caches of
            `max_length` positions written in place (dynamic-update-slice)
            and attended under a causal bias, the tokens in a fixed buffer,
            the k best candidates by k rounds of argmax (XLA on CPU sorts
            for `top_k`).

    Call `decode(source_ids, max_length, beam_width=1,
    length_penalty_alpha=0.0, eos_id=EOS)` inside a traced function: int32
    (batch, max_length) ids, BOS first (beam search: also the scores), as
    `seqkeras.models.generate`.
    """

    def __init__(self, model, compiled=False):
        super().__init__(name="serving_decoder")
        self.compiled = bool(compiled)
        if not supports(model):
            raise ValueError(
                "`TransformerServingDecoder` decodes `transformer_seq2seq` "
                f"models. Received: {getattr(model, 'name', model)!r} ({type(model).__name__})"
            )
        self._model = [model]  # a list: not tracked twice (the writer tracks the model)
        blocks = model.part("blocks")
        attention = blocks[0].self_attention
        self.num_heads, self.head_dim = attention.num_heads, attention.key_dim
        self.width = self.num_heads * self.head_dim
        self.norm_first = blocks[0].norm_first
        self.activation = blocks[0].activation
        self.scale = 1.0 / float(np.sqrt(self.head_dim))
        qkv, self_out, cross_q, cross_kv, cross_out = [], [], [], [], []
        for block in blocks:
            sa, ca = block.self_attention, block.cross_attention
            for layer in (sa, ca):
                if layer.key_dim != layer.value_dim:
                    raise ValueError(
                        "`TransformerServingDecoder` needs key_dim == value_dim. "
                        f"Received: {layer.key_dim} and {layer.value_dim} in {block.name!r}"
                    )
            qkv.append(_fused(sa, ("query", "key", "value")))
            self_out.append(_output(sa))
            cross_q.append(_fused(ca, ("query",)))
            cross_kv.append(_fused(ca, ("key", "value")))
            cross_out.append(_output(ca))

        def variables(pairs, name):
            return [
                (
                    tf.Variable(k.astype("float32"), trainable=False, name=f"{name}_{i}_kernel"),
                    tf.Variable(b.astype("float32"), trainable=False, name=f"{name}_{i}_bias"),
                )
                for i, (k, b) in enumerate(pairs)
            ]

        self._encoder_blocks = _encoder_blocks(model)
        encoder_qkv, encoder_out = [], []
        for block in self._encoder_blocks or []:
            sa = block.self_attention_layer
            encoder_qkv.append(_fused(sa, ("query", "key", "value")))
            encoder_out.append(_output(sa))
        self.encoder_qkv = variables(encoder_qkv, "encoder_qkv")
        self.encoder_output = variables(encoder_out, "encoder_output")
        self.self_qkv = variables(qkv, "self_qkv")
        self.self_output = variables(self_out, "self_output")
        self.cross_query = variables(cross_q, "cross_query")
        self.cross_output = variables(cross_out, "cross_output")
        # every block's cross-attention keys and values: one product per request
        self.cross_kv_kernel = tf.Variable(
            np.concatenate([k for k, _ in cross_kv], 1).astype("float32"),
            trainable=False,
            name="cross_kv_kernel",
        )
        self.cross_kv_bias = tf.Variable(
            np.concatenate([b for _, b in cross_kv]).astype("float32"),
            trainable=False,
            name="cross_kv_bias",
        )
        dense = model.part("logits")
        embedding = model.part("embedding")
        if dense is None:  # tied: h @ E^T, E^T laid out once
            self.output_kernel = tf.Variable(
                np.asarray(embedding.embeddings).T.copy(), trainable=False, name="output_kernel"
            )
            self.output_bias = None
        else:
            self.output_kernel = tf.Variable(
                np.asarray(dense.kernel), trainable=False, name="output_kernel"
            )
            self.output_bias = (
                None
                if dense.bias is None
                else tf.Variable(np.asarray(dense.bias), trainable=False, name="output_bias")
            )
        positions = model.part("positions")
        limit = getattr(positions, "max_length", None)
        self.max_positions = limit
        if hasattr(positions, "encoding"):  # sinusoidal: a table of the code
            self.scale_inputs = positions.scale_inputs
            self.position_table = None
        else:
            self.scale_inputs = False
            self.position_table = positions.embeddings

    @property
    def model(self):
        return self._model[0]

    # -- pieces ------------------------------------------------------------

    def _positions(self, max_length):
        """(max_length, d) position code (compute dtype)."""
        model = self.model
        positions = model.part("positions")
        d = self.output_kernel.shape[0]
        if self.position_table is not None:
            return tf.convert_to_tensor(self.position_table)[:max_length]
        return tf.convert_to_tensor(positions.encoding(max_length, d))

    def _heads(self, x):
        """(rows, heads * dim) -> (rows, heads, 1, dim)."""
        return tf.reshape(x, [-1, self.num_heads, 1, self.head_dim])

    def _attend(self, q, k, v, bias, small):
        """q (rows, heads, 1, dim) over k, v (rows, heads, t, dim) ->
        (rows, heads * dim). `small`: products and sums instead of batched
        matrix products (see `SMALL_ROWS`); the softmax is written out
        (the oneDNN softmax kernel costs ~90 us per call on these shapes,
        its four ops ~15 us)."""
        q = q * self.scale
        if small:
            logits = tf.reduce_sum(q * k, -1)[:, :, None, :]  # (rows, heads, 1, t)
        else:
            logits = tf.matmul(q, k, transpose_b=True)
        if bias is not None:
            logits = logits + bias
        weights = _softmax(logits, v.dtype)
        if small:
            context = tf.reduce_sum(tf.transpose(weights, [0, 1, 3, 2]) * v, 2)
        else:
            context = tf.matmul(weights, v)
        return tf.reshape(context, [-1, self.width])

    def _cross_attend(self, q, k, v, bias, beams, small):
        """The queries of each source's `beams` rows, q (rows, heads * dim),
        over that source's keys and values k, v (batch, heads, S, dim),
        never repeated per beam -> (rows, heads * dim)."""
        q = tf.reshape(q * self.scale, [-1, beams, self.num_heads, self.head_dim])
        q = tf.transpose(q, [0, 2, 1, 3])  # (batch, heads, beams, dim)
        if small:
            logits = tf.reduce_sum(q[:, :, :, None, :] * k[:, :, None], -1)
        else:
            logits = tf.matmul(q, k, transpose_b=True)  # (batch, heads, beams, S)
        weights = _softmax(logits + bias, v.dtype)
        if small:
            context = tf.reduce_sum(weights[..., None] * v[:, :, None], 3)
        else:
            context = tf.matmul(weights, v)  # (batch, heads, beams, dim)
        return tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, self.width])

    def _sublayer(self, x, norm, fn):
        if self.norm_first:
            return x + fn(norm(x))
        return norm(x + fn(x))

    def _step(self, tokens, index, caches, cross, bias, table, weights, beams, small):
        """One decoding step for (rows,) tokens at position `index`:
        `(float32 logits (rows, vocab), caches)`."""
        model = self.model
        x = tf.gather(weights["embedding"], tokens)
        masked_now = tf.equal(tokens, 0)[:, None]
        if self.scale_inputs:
            x = x * tf.cast(tf.sqrt(float(x.shape[-1])), x.dtype)
        x = x + tf.cast(table[index], x.dtype)
        new_caches = []
        for i, block in enumerate(model.part("blocks")):
            (k_cache, v_cache), (k_cross, v_cross) = caches[i], cross[i]
            qkv_w, qkv_b = weights["self_qkv"][i]
            out_w, out_b = weights["self_output"][i]

            def self_attend(h, qkv_w=qkv_w, qkv_b=qkv_b, out_w=out_w, out_b=out_b, i=i):
                q, k, v = tf.split(tf.matmul(h, qkv_w) + qkv_b, 3, axis=1)
                if self.compiled:  # written in place at `index`; later positions masked
                    at = [0, 0, index, 0]
                    k_all = ops.slice_update(k_cache, at, self._heads(k))
                    v_all = ops.slice_update(v_cache, at, self._heads(v))
                    visible = tf.range(tf.shape(k_cache)[2]) <= index
                    causal = tf.cast(tf.where(visible, 0.0, -1e9), k_all.dtype)
                else:
                    k_all = tf.concat([k_cache, self._heads(k)], axis=2)
                    v_all = tf.concat([v_cache, self._heads(v)], axis=2)
                    causal = None
                new_caches.append((k_all, v_all))
                context = self._attend(self._heads(q), k_all, v_all, causal, small)
                # a generated PAD token (id 0, which the embedding masks) is
                # a masked query in Keras' step: its self-attention context
                # is zero (its key stays visible to later steps)
                context = tf.where(masked_now, tf.zeros_like(context), context)
                return tf.matmul(context, out_w) + out_b

            x = self._sublayer(x, block.self_attention_layer_norm, self_attend)
            cq_w, cq_b = weights["cross_query"][i]
            co_w, co_b = weights["cross_output"][i]

            def cross_attend(h, cq_w=cq_w, cq_b=cq_b, co_w=co_w, co_b=co_b, kc=k_cross, vc=v_cross):
                q = tf.matmul(h, cq_w) + cq_b
                context = self._cross_attend(q, kc, vc, bias, beams, small)
                return tf.matmul(context, co_w) + co_b

            x = self._sublayer(x, block.cross_attention_layer_norm, cross_attend)

            def feedforward(h, block=block):
                return block.feedforward_output_dense(block.feedforward_intermediate_dense(h))

            x = self._sublayer(x, block.feedforward_layer_norm, feedforward)
        norm = model.part("norm")
        if norm is not None:
            x = norm(x)
        logits = tf.matmul(x, weights["output_kernel"])
        if weights["output_bias"] is not None:
            logits = logits + weights["output_bias"]
        return tf.cast(logits, tf.float32), new_caches

    def _weights(self):
        """The fused weights cast to the compute dtype once per request
        (outside the loop)."""
        dtype = self.model.dtype_policy.compute_dtype

        def cast(v):
            return None if v is None else tf.cast(v, dtype)

        return {
            "embedding": cast(self.model.part("embedding").embeddings),
            "self_qkv": [(cast(k), cast(b)) for k, b in self.self_qkv],
            "self_output": [(cast(k), cast(b)) for k, b in self.self_output],
            "cross_query": [(cast(k), cast(b)) for k, b in self.cross_query],
            "cross_output": [(cast(k), cast(b)) for k, b in self.cross_output],
            "encoder_qkv": [(cast(k), cast(b)) for k, b in self.encoder_qkv],
            "encoder_output": [(cast(k), cast(b)) for k, b in self.encoder_output],
            "output_kernel": cast(self.output_kernel),
            "output_bias": cast(self.output_bias),
        }

    def _start(self, source_ids, rows_per_source, weights, max_length=None):
        """The per-request state: empty self-attention caches, the cross-
        attention keys and values of every block (computed once, repeated
        for the beams), the source mask as an additive bias."""
        model = self.model
        memory = self._encode(source_ids, weights)
        batch, length = tf.shape(memory)[0], tf.shape(memory)[1]
        dtype = self.model.dtype_policy.compute_dtype
        flat = tf.reshape(memory, [-1, memory.shape[-1]])
        kv = tf.matmul(flat, tf.cast(self.cross_kv_kernel, dtype)) + tf.cast(
            self.cross_kv_bias, dtype
        )
        blocks = len(model.part("blocks"))
        # (batch, S, blocks * 2 * heads * dim) -> (2 * blocks, batch, heads, S, dim)
        kv = tf.reshape(kv, [batch, length, 2 * blocks, self.num_heads, self.head_dim])
        kv = tf.transpose(kv, [2, 0, 3, 1, 4])
        # (batch, heads, S, dim) each: the beams of a source share them
        cross = [(kv[2 * i], kv[2 * i + 1]) for i in range(blocks)]
        visible = tf.not_equal(source_ids, PAD)
        bias = tf.where(visible, 0.0, -1e9)[:, None, None, :]  # (batch, 1, 1, S)
        rows = batch * rows_per_source
        empty = tf.zeros(
            [
                rows,
                self.num_heads,
                _capacities(max_length)[0] if self.compiled else 0,
                self.head_dim,
            ],
            dtype,
        )
        caches = [(empty, empty) for _ in range(blocks)]
        return caches, cross, tf.cast(bias, dtype), rows

    def _encode(self, source_ids, weights):
        """The encoder outputs (batch, S, d): the model's own layers for the
        embedding, positions, norms and feed-forward layers, the attention
        with one (d, 3d) product and its softmax written out. Padded
        positions are masked as keys (their own outputs differ from Keras'
        zeroed ones and are never read: the decoder masks them too).
        Models whose encoder layers are not named as `transformer_seq2seq`
        names them run their Keras encoder."""
        model = self.model
        if self._encoder_blocks is None:
            return model._encode("memory", source_ids)[0]
        x = model.get_layer("source_positions")(model.get_layer("source_embedding")(source_ids))
        batch, length, d = tf.shape(x)[0], tf.shape(x)[1], x.shape[-1]
        x = tf.reshape(x, [-1, d])
        bias = tf.where(tf.not_equal(source_ids, PAD), 0.0, -1e9)[:, None, None, :]
        bias = tf.cast(bias, x.dtype)
        heads = self._encoder_blocks[0].self_attention_layer.num_heads
        for i, block in enumerate(self._encoder_blocks):
            qkv_w, qkv_b = weights["encoder_qkv"][i]
            out_w, out_b = weights["encoder_output"][i]
            dim = qkv_w.shape[1] // (3 * heads)
            scale = 1.0 / float(np.sqrt(dim))

            def attend(h, qkv_w=qkv_w, qkv_b=qkv_b, out_w=out_w, out_b=out_b):
                qkv = tf.reshape(tf.matmul(h, qkv_w) + qkv_b, [batch, length, 3, heads, dim])
                q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # (batch, heads, S, dim)
                weights = _softmax(tf.matmul(q * scale, k, transpose_b=True) + bias, v.dtype)
                context = tf.transpose(tf.matmul(weights, v), [0, 2, 1, 3])
                return tf.matmul(tf.reshape(context, [-1, heads * dim]), out_w) + out_b

            x = self._sublayer(x, block.self_attention_layer_norm, attend)

            def feedforward(h, block=block):
                return block.feedforward_output_dense(block.feedforward_intermediate_dense(h))

            x = self._sublayer(x, block.feedforward_layer_norm, feedforward)
        if block.norm_first:
            x = model.get_layer("encoder_norm")(x)
        return tf.reshape(x, [batch, length, d])

    def _invariants(self, caches):
        shape = tf.TensorShape([None, self.num_heads, None, self.head_dim])
        return [(shape, shape) for _ in caches]

    # -- decoding ----------------------------------------------------------

    def decode(
        self,
        source_ids,
        max_length,
        beam_width=1,
        length_penalty_alpha=0.0,
        eos_id=None,
        pad_id=PAD,
        bos_id=BOS,
    ):
        """Greedy decoding (`beam_width=1`: ids (batch, max_length)) or
        beam search (ids (batch, max_length), float32 scores (batch,)), as
        `seqkeras.models.generate` with the default prompt `[[bos_id]]`."""
        if self.max_positions is not None and max_length > self.max_positions:
            raise ValueError(
                f"`TransformerServingDecoder`: max_length={max_length} is more than the "
                f"model's {self.max_positions} learned positions"
            )
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
        weights = self._weights()
        table = self._positions(max_length)
        if beam_width == 1:
            return self._greedy(source_ids, max_length, eos_id, pad_id, bos_id, weights, table)
        return self._beam(
            source_ids,
            max_length,
            beam_width,
            length_penalty_alpha,
            eos_id,
            pad_id,
            bos_id,
            weights,
            table,
        )

    def _finish(self, tokens, max_length, pad_id):
        """Right-pads (rows, t) tokens with `pad_id` to `max_length`."""
        short = max_length - tf.shape(tokens)[1]
        return tf.pad(tokens, [[0, 0], [0, short]], constant_values=pad_id)

    def _top_k(self, x, k):
        """`(values, indices)` of the k largest of each row of `x`: `top_k`,
        or, compiled, k rounds of argmax (the same order; ties: the lower
        index first)."""
        if not self.compiled:
            return tf.math.top_k(x, k)
        values, indices = [], []
        columns = tf.range(tf.shape(x)[-1])[None]
        for _ in range(k):
            i = tf.argmax(x, -1, output_type=tf.int32)
            values.append(tf.gather(x, i, batch_dims=1))
            indices.append(i)
            x = tf.where(columns == i[:, None], -np.inf, x)
        return tf.stack(values, 1), tf.stack(indices, 1)

    def _tokens(self, rows, max_length, bos_id, pad_id):
        """The output buffer: BOS, then (rows, 0) more columns that grow, or
        compiled, `max_length - 1` columns of padding written in place."""
        first = tf.fill([rows, 1], tf.constant(bos_id, tf.int32))
        if not self.compiled:
            return first
        return tf.concat([first, tf.fill([rows, max_length - 1], tf.constant(pad_id))], 1)

    def _current(self, tokens, index):
        return tf.gather(tokens, index, axis=1) if self.compiled else tokens[:, -1]

    def _append(self, tokens, index, nxt):
        if self.compiled:
            return ops.slice_update(tokens, [0, index + 1], nxt[:, None])
        return tf.concat([tokens, nxt[:, None]], 1)

    def _loop(self, rows, cond, body, state, invariants, max_length):
        """`tf.while_loop` over `body(small)`: the products-and-sums
        attention up to `SMALL_ROWS` rows, batched products above. Compiled:
        batched products, and one loop per cache capacity (16, 32, ...,
        `max_length` positions; the caches padded between them), so that a
        step reorders and attends over a cache about as long as the output
        so far, not `max_length` (state 2 is the caches)."""

        def run(small):
            return tf.while_loop(
                cond,
                lambda *args: body(small, *args),
                state,
                shape_invariants=invariants,
            )

        if not self.compiled:
            return tf.cond(rows <= SMALL_ROWS, lambda: run(True), lambda: run(False))
        capacities = _capacities(max_length)
        for i, capacity in enumerate(capacities):
            if i:
                grow = [[0, 0], [0, 0], [0, capacity - capacities[i - 1]], [0, 0]]
                caches = [(tf.pad(k, grow), tf.pad(v, grow)) for k, v in state[2]]
                state = state[:2] + (caches,) + state[3:]
            state = tf.while_loop(
                lambda *args, capacity=capacity: tf.logical_and(cond(*args), args[0] < capacity),
                lambda *args: body(False, *args),
                state,
            )
        return state

    def _greedy(self, source_ids, max_length, eos_id, pad_id, bos_id, weights, table):
        beams = 1
        caches, cross, bias, rows = self._start(source_ids, 1, weights, max_length)
        tokens = self._tokens(rows, max_length, bos_id, pad_id)
        done = tf.zeros([rows], tf.bool)
        if max_length == 1:
            return tokens

        def cond(index, tokens, caches, done):
            return tf.logical_and(index < max_length - 1, tf.logical_not(tf.reduce_all(done)))

        def body(small, index, tokens, caches, done):
            current = self._current(tokens, index)
            logits, caches = self._step(
                current, index, caches, cross, bias, table, weights, beams, small
            )
            chosen = tf.argmax(logits, axis=-1, output_type=tf.int32)
            nxt = tf.where(done, pad_id, chosen)
            # no eos_id: an id no token has (a loop whose `done` never
            # changes trips TensorFlow's loop optimizer under XLA)
            done = tf.logical_or(done, tf.equal(nxt, -1 if eos_id is None else eos_id))
            return index + 1, self._append(tokens, index, nxt), caches, done

        invariants = (
            tf.TensorShape([]),
            tf.TensorShape([None, None]),
            self._invariants(caches),
            tf.TensorShape([None]),
        )
        state = (tf.constant(0), tokens, caches, done)
        tokens = self._loop(rows, cond, body, state, invariants, max_length)[1]
        return self._finish(tokens, max_length, pad_id)

    def _beam(self, source_ids, max_length, k, alpha, eos_id, pad_id, bos_id, weights, table):
        from seqkeras.decoding import length_penalty

        batch = tf.shape(source_ids)[0]
        caches, cross, bias, rows = self._start(source_ids, k, weights, max_length)
        tokens = self._tokens(rows, max_length, bos_id, pad_id)
        # only beam 0 is live at first (seqkeras.decoding.beam_search)
        scores = tf.tile(tf.constant([0.0] + [-1e9] * (k - 1), tf.float32), [batch])
        done = tf.zeros([rows], tf.bool)
        lengths = tf.zeros([rows], tf.int32)
        beams = k
        vocab = self.output_kernel.shape[1]
        # a finished beam extends with padding only, at no cost: its k
        # candidates, as `top_k` over (0 at pad_id, -1e9 elsewhere) orders them
        ended_ids = [pad_id] + [i for i in range(k + 1) if i != pad_id][: k - 1]
        ended_ids = tf.constant(ended_ids, tf.int32)[None]
        ended_values = tf.constant([0.0] + [-1e9] * (k - 1), tf.float32)[None]
        offsets = (tf.range(batch) * k)[:, None]
        within = tf.tile(tf.range(k)[None, :, None] * vocab, [1, 1, k])  # beam j's flat offset

        def cond(index, tokens, caches, scores, done, lengths):
            if not alpha:  # see seqkeras.decoding.beam_search: the best beam ended
                done = tf.reshape(done, [batch, k])[:, 0]
            return tf.logical_and(index < max_length - 1, tf.logical_not(tf.reduce_all(done)))

        def body(small, index, tokens, caches, scores, done, lengths):
            current = self._current(tokens, index)
            logits, caches = self._step(
                current, index, caches, cross, bias, table, weights, beams, small
            )
            # each beam's k best tokens by logit (the same as by
            # log-probability: log_softmax shifts a row by a constant),
            # log-probabilities for those only, then the k best of the
            # k * k: the candidates of one top_k over all k * vocab
            peak = tf.reduce_max(logits, -1, keepdims=True)
            norm = tf.math.log(tf.reduce_sum(tf.exp(logits - peak), -1, keepdims=True))
            values, ids = self._top_k(logits, k)
            logp = values - peak - norm
            logp = tf.where(done[:, None], ended_values, logp)
            ids = tf.where(done[:, None], ended_ids, ids)
            total = tf.reshape(scores[:, None] + logp, [batch, k * k])
            flat_ids = tf.reshape(tf.reshape(ids, [batch, k, k]) + within, [batch, k * k])
            best, pick = self._top_k(total, k)
            flat = tf.gather(flat_ids, pick, batch_dims=1)
            parent = tf.reshape(flat // vocab + offsets, [-1])
            chosen = tf.reshape(flat % vocab, [-1])
            tokens = tf.gather(tokens, parent)
            caches = [(tf.gather(c, parent), tf.gather(v, parent)) for c, v in caches]
            done = tf.gather(done, parent)
            lengths = tf.gather(lengths, parent) + tf.cast(tf.logical_not(done), tf.int32)
            nxt = tf.where(done, pad_id, chosen)
            # no eos_id: an id no token has (a loop whose `done` never
            # changes trips TensorFlow's loop optimizer under XLA)
            done = tf.logical_or(done, tf.equal(nxt, -1 if eos_id is None else eos_id))
            tokens = self._append(tokens, index, nxt)
            return index + 1, tokens, caches, tf.reshape(best, [-1]), done, lengths

        if max_length > 1:
            invariants = (
                tf.TensorShape([]),
                tf.TensorShape([None, None]),
                self._invariants(caches),
                tf.TensorShape([None]),
                tf.TensorShape([None]),
                tf.TensorShape([None]),
            )
            state = (tf.constant(0), tokens, caches, scores, done, lengths)
            _, tokens, _, scores, _, lengths = self._loop(
                rows, cond, body, state, invariants, max_length
            )
        final = scores
        if alpha:
            final = scores / length_penalty(tf.maximum(lengths, 1), alpha)
        final = tf.reshape(final, [batch, k])
        order = tf.argsort(-final, axis=-1)  # best first, as keras.ops.argsort
        tokens = tf.reshape(self._finish(tokens, max_length, pad_id), [batch, k, max_length])
        best = order[:, 0]
        return (
            tf.gather(tokens, best, axis=1, batch_dims=1),
            tf.gather(final, best, axis=1, batch_dims=1),
        )


def _capacities(max_length, first=16):
    """The compiled loop's cache capacities: 16, 32, ... up to `max_length`."""
    capacities = [min(first, max_length)]
    while capacities[-1] < max_length:
        capacities.append(min(2 * capacities[-1], max_length))
    return capacities


def _encoder_blocks(model):
    """The encoder blocks of a `transformer_seq2seq` (`encoder_block_i`,
    with `source_embedding`, `source_positions` and, pre-LN,
    `encoder_norm`), or None for a model laid out otherwise."""
    from seqkeras.layers import TransformerEncoderBlock

    names = {layer.name: layer for layer in model.layers}
    blocks = []
    while f"encoder_block_{len(blocks)}" in names:
        blocks.append(names[f"encoder_block_{len(blocks)}"])
    needed = ["source_embedding", "source_positions"]
    if blocks and blocks[0].norm_first:
        needed.append("encoder_norm")
    if (
        not blocks
        or not all(isinstance(b, TransformerEncoderBlock) for b in blocks)
        or not all(n in names for n in needed)
        or any(b.self_attention_layer.key_dim != b.self_attention_layer.value_dim for b in blocks)
    ):
        return None
    return blocks


__all__ = ["TransformerServingDecoder", "supports"]
