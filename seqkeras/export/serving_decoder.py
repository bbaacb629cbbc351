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
- the layer norms written out (their scale and offset folded into the
  product that follows, pre-LN), the attention scale folded into the
  query weights, and every weight read once per request, not per step;
- a source leaves the loop at the step its answer is final (its rows are
  dropped from the state and its answer written out), so a batch does not
  run on the whole batch until its longest output ends; the loop stops
  when every source is final.

`dtype="bfloat16"` runs the products of the steps on more than
`SMALL_ROWS` rows in bfloat16 (close to, not equal to, the float32
outputs).
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


def _norm(norm):
    """`(gamma, beta, epsilon)` of a Keras `LayerNormalization` over the
    last axis, float64 (ones / zeros where it has no scale / offset)."""
    axis = norm.axis if isinstance(norm.axis, int) else tuple(norm.axis)
    if getattr(norm, "rms_scaling", False) or axis not in (-1, (-1,), 1, (1,), 2, (2,)):
        raise ValueError(
            "`TransformerServingDecoder` needs layer norms over the last axis without "
            f"rms_scaling. Received: {norm.name!r} (axis={norm.axis!r})"
        )
    d = norm.gamma.shape[-1] if norm.gamma is not None else norm.beta.shape[-1]
    gamma = np.ones(d) if norm.gamma is None else np.asarray(norm.gamma, "float64")
    beta = np.zeros(d) if norm.beta is None else np.asarray(norm.beta, "float64")
    return gamma, beta, float(norm.epsilon)


def _fold(norm, kernel, bias):
    """`(kernel, bias)` of `LayerNorm(x) @ kernel + bias` as
    `normalized(x) @ kernel' + bias'`: the norm's scale and offset folded
    into the product that follows it (pre-LN), in float64."""
    gamma, beta, _ = norm
    kernel = np.asarray(kernel, "float64")
    return gamma[:, None] * kernel, beta @ kernel + np.asarray(bias, "float64")


def _bias(dense, none=False):
    """A Keras `Dense`'s bias, or zeros (None with `none=True`) without one."""
    if dense.bias is not None:
        return np.asarray(dense.bias)
    return None if none else np.zeros(dense.kernel.shape[-1], "float32")


def _scale_columns(pair, width, scale):
    """`(kernel, bias)` with the first `width` columns (the queries)
    multiplied by `scale`."""
    kernel, bias = (np.array(a, "float64") for a in pair)
    kernel[:, :width] *= scale
    bias[:width] *= scale
    return kernel, bias


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
        dtype: None (the model's compute dtype throughout) or
            `"bfloat16"`: the decoding steps on more than `SMALL_ROWS`
            rows (sources x beams) run their products in bfloat16, where
            oneDNN's bfloat16 kernels pay (on this machine the step's
            products on 128 rows take 0.81 ms against 2.85 ms in
            float32), and the rest in the model's dtype (on 4 rows
            bfloat16 is no faster: 0.51 against 0.49 ms). Layer norms,
            softmax and scores stay in float32. Such outputs are those of
            a bfloat16 model on large requests, close to the float32
            model's, not equal; a request of up to `SMALL_ROWS` rows
            decodes exactly as the float32 model. With `compiled` (one
            XLA loop of fixed shapes) every step runs in bfloat16.

    Call `decode(source_ids, max_length, beam_width=1,
    length_penalty_alpha=0.0, eos_id=EOS)` inside a traced function: int32
    (batch, max_length) ids, BOS first (beam search: also the scores), as
    `seqkeras.models.generate`.
    """

    def __init__(self, model, compiled=False, dtype=None):
        super().__init__(name="serving_decoder")
        self.compiled = bool(compiled)
        if not supports(model):
            raise ValueError(
                "`TransformerServingDecoder` decodes `transformer_seq2seq` "
                f"models. Received: {getattr(model, 'name', model)!r} ({type(model).__name__})"
            )
        if dtype not in (None, "float32", "bfloat16"):
            raise ValueError(
                "`TransformerServingDecoder`: `dtype` must be None, 'float32' or 'bfloat16'. "
                f"Received: dtype={dtype!r}"
            )
        # the model's compute dtype: the encoder, and the decoding steps on
        # up to SMALL_ROWS rows; `large_dtype`: the steps on more rows
        self.dtype = model.dtype_policy.compute_dtype
        self.large_dtype = dtype or self.dtype
        self._model = [model]  # a list: not tracked twice (the writer tracks the model)
        blocks = model.part("blocks")
        attention = blocks[0].self_attention
        self.num_heads, self.head_dim = attention.num_heads, attention.key_dim
        self.width = self.num_heads * self.head_dim
        self.norm_first = blocks[0].norm_first
        self.activation = blocks[0].activation
        self.scale = 1.0 / float(np.sqrt(self.head_dim))
        qkv, self_out, cross_q, cross_kv, cross_out, inner, outer = ([] for _ in range(7))
        self.epsilons, norms = [], []
        for block in blocks:
            sa, ca = block.self_attention, block.cross_attention
            for layer in (sa, ca):
                if layer.key_dim != layer.value_dim:
                    raise ValueError(
                        "`TransformerServingDecoder` needs key_dim == value_dim. "
                        f"Received: {layer.key_dim} and {layer.value_dim} in {block.name!r}"
                    )
            block_norms = [
                _norm(n)
                for n in (
                    block.self_attention_layer_norm,
                    block.cross_attention_layer_norm,
                    block.feedforward_layer_norm,
                )
            ]
            dense_in = block.feedforward_intermediate_dense
            dense_out = block.feedforward_output_dense
            q, cq = _fused(sa, ("query", "key", "value")), _fused(ca, ("query",))
            ffn_in = (np.asarray(dense_in.kernel), _bias(dense_in))
            if self.norm_first:  # each norm feeds one product: its scale and offset go in it
                q, cq, ffn_in = (_fold(n, *w) for n, w in zip(block_norms, (q, cq, ffn_in)))
            else:  # post-LN: the norms' outputs are the residual stream
                norms.append([(g, b) for g, b, _ in block_norms])
            self.epsilons.append([e for _, _, e in block_norms])
            # the attention scale 1/sqrt(dim) goes in the query columns
            qkv.append(_scale_columns(q, self.width, self.scale))
            cross_q.append(_scale_columns(cq, self.width, self.scale))
            self_out.append(_output(sa))
            cross_kv.append(_fused(ca, ("key", "value")))
            cross_out.append(_output(ca))
            inner.append(ffn_in)
            outer.append((np.asarray(dense_out.kernel), _bias(dense_out)))

        def variable(array, name):
            return tf.Variable(np.asarray(array, "float32"), trainable=False, name=name)

        def variables(pairs, name):
            return [
                (variable(k, f"{name}_{i}_kernel"), variable(b, f"{name}_{i}_bias"))
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
        self.ffn_inner = variables(inner, "ffn_inner")
        self.ffn_outer = variables(outer, "ffn_outer")
        self.norms = [variables(pairs, f"norm_{i}") for i, pairs in enumerate(norms)]
        # every block's cross-attention keys and values: one product per request
        self.cross_kv_kernel = variable(
            np.concatenate([k for k, _ in cross_kv], 1), "cross_kv_kernel"
        )
        self.cross_kv_bias = variable(np.concatenate([b for _, b in cross_kv]), "cross_kv_bias")
        dense = model.part("logits")
        embedding = model.part("embedding")
        if dense is None:  # tied: h @ E^T, E^T laid out once
            kernel, bias = np.asarray(embedding.embeddings).T, None
        else:
            kernel, bias = np.asarray(dense.kernel), _bias(dense, none=True)
        final = model.part("norm")
        if final is not None:  # the final norm's scale and offset go in the logits' product
            kernel, bias = _fold(_norm(final), kernel, 0.0 if bias is None else bias)
        self.final_epsilon = None if final is None else float(final.epsilon)
        self.output_kernel = variable(kernel, "output_kernel")
        self.output_bias = None if bias is None else variable(bias, "output_bias")
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
        """q (rows, heads, 1, dim), already scaled, over k, v (rows, heads,
        t, dim) -> (rows, heads * dim). `small`: products and sums instead
        of batched matrix products (see `SMALL_ROWS`); the softmax is
        written out (the oneDNN softmax kernel costs ~90 us per call on
        these shapes, its four ops ~15 us)."""
        if small:
            logits = tf.reduce_sum(q * k, -1)  # (rows, heads, t)
        else:
            logits = tf.matmul(q, k, transpose_b=True)  # (rows, heads, 1, t)
        if bias is not None:  # (t,): the compiled loop's causal mask
            logits = logits + bias
        weights = _softmax(logits, v.dtype)
        if small:
            context = tf.reduce_sum(tf.expand_dims(weights, -1) * v, 2)
        else:
            context = tf.matmul(weights, v)
        return tf.reshape(context, [-1, self.width])

    def _cross_attend(self, q, k, v, bias, beams, small):
        """The queries of each source's `beams` rows, q (rows, heads * dim),
        already scaled, over that source's keys and values (`_cross`:
        never repeated per beam) -> (rows, heads * dim)."""
        q = tf.reshape(q, [-1, beams, self.num_heads, self.head_dim])
        if small:  # k, v: (batch, 1, heads, S, dim); q (batch, beams, heads, 1, dim)
            weights = _softmax(tf.reduce_sum(q[:, :, :, None] * k, -1) + bias, v.dtype)
            context = tf.reduce_sum(weights[..., None] * v, 3)  # (batch, beams, heads, dim)
            return tf.reshape(context, [-1, self.width])
        # k, v: (batch, heads, S, dim)
        q = tf.transpose(q, [0, 2, 1, 3])  # (batch, heads, beams, dim)
        weights = _softmax(tf.matmul(q, k, transpose_b=True) + bias, v.dtype)
        context = tf.matmul(weights, v)  # (batch, heads, beams, dim)
        return tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, self.width])

    def _cross(self, cross, bias, small):
        """The cross-attention keys and values and the source bias laid out
        once per request for `_cross_attend`: (batch, 1, heads, S, dim) and
        (batch, 1, 1, S) for the products and sums, as they are for the
        batched products."""
        if not small:
            return cross, bias
        return [(k[:, None], v[:, None]) for k, v in cross], bias

    def _normalize(self, x, epsilon, scale=None):
        """Layer norm of (rows, d) over d in float32 (as Keras computes it),
        cast back; `scale`: (gamma, beta), or None where they were folded
        into the product that follows (pre-LN)."""
        dtype = x.dtype
        x = tf.cast(x, tf.float32)
        centred = x - tf.reduce_mean(x, -1, keepdims=True)
        variance = tf.reduce_mean(tf.square(centred), -1, keepdims=True)
        y = tf.cast(centred * tf.math.rsqrt(variance + epsilon), dtype)
        if scale is not None:
            y = y * scale[0] + scale[1]
        return y

    def _sublayer(self, x, i, j, fn, weights):
        """Block i's sublayer j (self-attention, cross-attention,
        feed-forward) with its residual and norm."""
        epsilon = self.epsilons[i][j]
        if self.norm_first:
            return x + fn(self._normalize(x, epsilon))
        return self._normalize(x + fn(x), epsilon, weights["norms"][i][j])

    def _feedforward(self, h, i, weights):
        (w1, b1), (w2, b2) = weights["ffn_inner"][i], weights["ffn_outer"][i]
        h = _ACTIVATIONS[self.activation](tf.nn.bias_add(tf.matmul(h, w1), b1))
        return tf.nn.bias_add(tf.matmul(h, w2), b2)

    def _step(self, tokens, index, caches, cross, bias, table, weights, beams, small):
        """One decoding step for (rows,) tokens at position `index`:
        `(float32 logits (rows, vocab), caches)`; `cross` and `bias` as
        `_cross` lays them out."""
        x = tf.cast(tf.gather(weights["embedding"], tokens), weights["dtype"])
        # a generated PAD token (id 0, which the embedding masks) is a
        # masked query in Keras' step: its self-attention context is zero
        # (its key stays visible to later steps)
        live = tf.cast(tf.not_equal(tokens, 0), x.dtype)[:, None]
        if self.scale_inputs:
            x = x * tf.cast(tf.sqrt(float(x.shape[-1])), x.dtype)
        x = x + tf.cast(table[index], x.dtype)
        new_caches = []
        for i in range(len(caches)):
            (k_cache, v_cache), (k_cross, v_cross) = caches[i], cross[i]
            qkv_w, qkv_b = weights["self_qkv"][i]
            out_w, out_b = weights["self_output"][i]

            def self_attend(h, qkv_w=qkv_w, qkv_b=qkv_b, out_w=out_w, out_b=out_b, i=i):
                q, k, v = tf.split(tf.nn.bias_add(tf.matmul(h, qkv_w), qkv_b), 3, axis=1)
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
                context = self._attend(self._heads(q), k_all, v_all, causal, small) * live
                return tf.nn.bias_add(tf.matmul(context, out_w), out_b)

            x = self._sublayer(x, i, 0, self_attend, weights)
            cq_w, cq_b = weights["cross_query"][i]
            co_w, co_b = weights["cross_output"][i]

            def cross_attend(h, cq_w=cq_w, cq_b=cq_b, co_w=co_w, co_b=co_b, kc=k_cross, vc=v_cross):
                q = tf.nn.bias_add(tf.matmul(h, cq_w), cq_b)
                context = self._cross_attend(q, kc, vc, bias, beams, small)
                return tf.nn.bias_add(tf.matmul(context, co_w), co_b)

            x = self._sublayer(x, i, 1, cross_attend, weights)
            x = self._sublayer(x, i, 2, lambda h, i=i: self._feedforward(h, i, weights), weights)
        if self.final_epsilon is not None:  # its scale and offset are in the output kernel
            x = self._normalize(x, self.final_epsilon)
        logits = tf.matmul(x, weights["output_kernel"])
        if weights["output_bias"] is not None:
            logits = tf.nn.bias_add(logits, weights["output_bias"])
        return tf.cast(logits, tf.float32), new_caches

    def _weights(self, dtype=None):
        """The weights, read and cast once per request (outside the loop: a
        variable the loop captures is read at every step): the decoder's to
        `dtype` (default `self.dtype`), the encoder's to the model's (the
        target embedding as stored: its rows are cast per step)."""
        model_dtype = self.dtype
        dtype = dtype or self.dtype

        def cast(v, dtype=dtype):
            return None if v is None else tf.cast(tf.convert_to_tensor(v), dtype)

        return {
            "dtype": tf.as_dtype(dtype),
            "embedding": tf.convert_to_tensor(self.model.part("embedding").embeddings),
            "self_qkv": [(cast(k), cast(b)) for k, b in self.self_qkv],
            "self_output": [(cast(k), cast(b)) for k, b in self.self_output],
            "cross_query": [(cast(k), cast(b)) for k, b in self.cross_query],
            "cross_output": [(cast(k), cast(b)) for k, b in self.cross_output],
            "encoder_qkv": [
                (cast(k, model_dtype), cast(b, model_dtype)) for k, b in self.encoder_qkv
            ],
            "encoder_output": [
                (cast(k, model_dtype), cast(b, model_dtype)) for k, b in self.encoder_output
            ],
            "ffn_inner": [(cast(k), cast(b)) for k, b in self.ffn_inner],
            "ffn_outer": [(cast(k), cast(b)) for k, b in self.ffn_outer],
            "norms": [[(cast(g), cast(b)) for g, b in pairs] for pairs in self.norms],
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
        dtype = self.dtype
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

        def sublayer(x, norm, fn):
            return x + fn(norm(x)) if self.norm_first else norm(x + fn(x))

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

            x = sublayer(x, block.self_attention_layer_norm, attend)

            def feedforward(h, block=block):
                return block.feedforward_output_dense(block.feedforward_intermediate_dense(h))

            x = sublayer(x, block.feedforward_layer_norm, feedforward)
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

    def _phase(self, small, weights, caches, cross, bias):
        """`(weights, caches, cross, bias)` in the dtype of the steps on up
        to `SMALL_ROWS` rows (`small`: the model's) or on more
        (`large_dtype`)."""
        dtype = self.dtype if small else self.large_dtype
        if dtype == self.dtype:
            return weights, caches, cross, bias
        return (self._weights(dtype),) + _cast_state(dtype, caches, cross, bias)

    def _loop(
        self, rows, cond, body, state, invariants, max_length, weights, cross, bias, small=None
    ):
        """`tf.while_loop` over `body(small, weights, cross, bias, *state)`:
        the products-and-sums attention up to `SMALL_ROWS` rows, batched
        products above (`small`: that choice made already). Compiled:
        batched products, and one loop per cache capacity (16, 32, ...,
        `max_length` positions; the caches padded between them), so that a
        step reorders and attends over a cache about as long as the output
        so far, not `max_length` (state 2 is the caches). Returns the final
        state without the caches."""

        def run(small):
            w, caches, c, b = self._phase(small, weights, state[2], cross, bias)
            layout = self._cross(c, b, small)  # once per request, outside the loop
            out = tf.while_loop(
                cond,
                lambda *args: body(small, w, *layout, *args),
                state[:2] + (caches,) + state[3:],
                shape_invariants=invariants,
            )
            return out[:2] + out[3:]

        if not self.compiled:
            if small is not None:
                return run(small)
            return tf.cond(rows <= SMALL_ROWS, lambda: run(True), lambda: run(False))
        weights, caches, cross, bias = self._phase(False, weights, state[2], cross, bias)
        state = state[:2] + (caches,) + state[3:]
        capacities = _capacities(max_length)
        for i, capacity in enumerate(capacities):
            if i:
                grow = [[0, 0], [0, 0], [0, capacity - capacities[i - 1]], [0, 0]]
                caches = [(tf.pad(k, grow), tf.pad(v, grow)) for k, v in state[2]]
                state = state[:2] + (caches,) + state[3:]
            state = tf.while_loop(
                lambda *args, capacity=capacity: tf.logical_and(cond(*args), args[0] < capacity),
                lambda *args: body(False, weights, cross, bias, *args),
                state,
            )
        return state[:2] + state[3:]

    def _compacting(self, rows, body, state, invariants, weights, cross, bias, max_length):
        """The loop of a request of several sources (not compiled): a
        source's rows leave the state at the step its answer is final
        (`body` writes it out), so later steps run on the sources still
        decoding, not on the whole batch until its longest output ends.
        While more than `SMALL_ROWS` rows decode, the steps use batched
        products (in `large_dtype`); then the products-and-sums path.
        `body(small, weights, index, alive, tokens, caches, cross, bias,
        ...)`; `state` is without the cross-attention layout, which follows
        the caches (state 3)."""

        def cond(index, alive, *rest):
            return tf.logical_and(index < max_length - 1, tf.size(alive) > 0)

        def run(small, state, cross, bias, more=None):
            w, caches, c, b = self._phase(small, weights, state[3], cross, bias)
            layout = self._cross(c, b, small)
            width = [None, 1] if small else [None]
            cross_shape = tf.TensorShape(width + [self.num_heads, None, self.head_dim])
            shapes = (
                invariants[:4]
                + (
                    [(cross_shape, cross_shape) for _ in layout[0]],
                    tf.TensorShape([None, 1, 1, None]),
                )
                + invariants[4:]
            )
            start = state[:3] + (caches, layout[0], layout[1]) + state[4:]
            go = cond if more is None else lambda *a: tf.logical_and(cond(*a), more(*a))
            return tf.while_loop(
                go, lambda *args: body(small, w, *args), start, shape_invariants=shapes
            )

        def large():
            out = run(False, state, cross, bias, lambda *a: tf.shape(a[2])[0] > SMALL_ROWS)
            # back to the model's dtype, for the steps on fewer rows
            caches, c, b = _cast_state(self.dtype, out[3], out[4], out[5])
            return out[:3] + (caches,) + out[6:], c, b

        state, cross, bias = tf.cond(rows > SMALL_ROWS, large, lambda: (state, cross, bias))
        return run(True, state, cross, bias)

    @staticmethod
    def _rows(sources, k):
        """The rows (sources x k beams, source-major) of (n,) sources."""
        return tf.reshape(sources[:, None] * k + tf.range(k)[None], [-1])

    def _greedy(self, source_ids, max_length, eos_id, pad_id, bos_id, weights, table):
        caches, cross, bias, rows = self._start(source_ids, 1, weights, max_length)
        tokens = self._tokens(rows, max_length, bos_id, pad_id)
        if max_length == 1:
            return tokens
        eos = -1 if eos_id is None else eos_id  # an id no token has: see `_advance`

        def cond(index, tokens, caches, done):
            return tf.logical_and(index < max_length - 1, tf.logical_not(tf.reduce_all(done)))

        def body(small, w, cross, bias, index, tokens, caches, done):
            current = self._current(tokens, index)
            logits, caches = self._step(current, index, caches, cross, bias, table, w, 1, small)
            nxt = tf.where(done, pad_id, tf.argmax(logits, axis=-1, output_type=tf.int32))
            done = tf.logical_or(done, tf.equal(nxt, eos))
            return index + 1, self._append(tokens, index, nxt), caches, done

        invariants = (
            tf.TensorShape([]),
            tf.TensorShape([None, None]),
            self._invariants(caches),
            tf.TensorShape([None]),
        )

        def plain(small=None):
            state = (tf.constant(0), tokens, caches, tf.zeros([rows], tf.bool))
            out = self._loop(
                rows, cond, body, state, invariants, max_length, weights, cross, bias, small
            )
            return self._finish(out[1], max_length, pad_id)

        if self.compiled or eos_id is None:
            return plain()

        def compacting_body(small, w, index, alive, tokens, caches, cross, bias, out):
            logits, caches = self._step(
                tokens[:, -1], index, caches, cross, bias, table, w, 1, small
            )
            tokens = tf.concat([tokens, tf.argmax(logits, -1, output_type=tf.int32)[:, None]], 1)
            ended = tf.equal(tokens[:, -1], eos)

            def compact():
                kept = tf.cast(tf.where(tf.logical_not(ended))[:, 0], tf.int32)
                gone = tf.cast(tf.where(ended)[:, 0], tf.int32)
                done = self._finish(tf.gather(tokens, gone), max_length, pad_id)
                at = tf.gather(alive, gone)[:, None]

                def keep(x):
                    return tf.gather(x, kept)

                return (
                    keep(alive),
                    keep(tokens),
                    [(keep(a), keep(b)) for a, b in caches],
                    [(keep(a), keep(b)) for a, b in cross],
                    keep(bias),
                    tf.tensor_scatter_nd_update(out, at, done),
                )

            state = (alive, tokens, caches, cross, bias, out)
            state = tf.cond(tf.reduce_any(ended), compact, lambda: state)
            return (index + 1,) + tuple(state)

        def compacting():
            batch = tf.shape(source_ids)[0]
            out = tf.fill([batch, max_length], tf.constant(pad_id, tf.int32))
            state = (tf.constant(0), tf.range(batch), tokens, caches, out)
            shapes = (
                tf.TensorShape([]),
                tf.TensorShape([None]),
                tf.TensorShape([None, None]),
                self._invariants(caches),
                tf.TensorShape([None, max_length]),
            )
            _, alive, left, _, _, _, out = self._compacting(
                rows, compacting_body, state, shapes, weights, cross, bias, max_length
            )
            return tf.tensor_scatter_nd_update(
                out, alive[:, None], self._finish(left, max_length, pad_id)
            )

        return tf.cond(tf.shape(source_ids)[0] > 1, compacting, lambda: plain(small=True))

    def _advance(self, logits, index, tokens, scores, done, lengths, k, eos_id, pad_id):
        """One beam-search step from the (n * k, vocab) logits: `(parent,
        tokens, scores, done, lengths)`, `parent` the row each new row
        continues (the caches are reordered by it)."""
        vocab = self.output_kernel.shape[1]
        n = tf.shape(logits)[0] // k
        # a finished beam extends with padding only, at no cost: its k
        # candidates, as `top_k` over (0 at pad_id, -1e9 elsewhere) orders them
        ended_ids = [pad_id] + [i for i in range(k + 1) if i != pad_id][: k - 1]
        ended_ids = tf.constant(ended_ids, tf.int32)[None]
        ended_values = tf.constant([0.0] + [-1e9] * (k - 1), tf.float32)[None]
        # each beam's k best tokens by logit (the same as by
        # log-probability: log_softmax shifts a row by a constant),
        # log-probabilities for those only, then the k best of the k * k:
        # the candidates of one top_k over all k * vocab
        peak = tf.reduce_max(logits, -1, keepdims=True)
        norm = tf.math.log(tf.reduce_sum(tf.exp(logits - peak), -1, keepdims=True))
        values, ids = self._top_k(logits, k)
        logp = tf.where(done[:, None], ended_values, values - peak - norm)
        ids = tf.where(done[:, None], ended_ids, ids)
        total = tf.reshape(scores[:, None] + logp, [n, k * k])
        within = tf.range(k)[None, :, None] * vocab  # beam j's flat offset
        flat_ids = tf.reshape(tf.reshape(ids, [n, k, k]) + within, [n, k * k])
        best, pick = self._top_k(total, k)
        flat = tf.gather(flat_ids, pick, batch_dims=1)
        parent = tf.reshape(flat // vocab + (tf.range(n) * k)[:, None], [-1])
        chosen = tf.reshape(flat % vocab, [-1])
        done = tf.gather(done, parent)
        lengths = tf.gather(lengths, parent) + tf.cast(tf.logical_not(done), tf.int32)
        nxt = tf.where(done, pad_id, chosen)
        # no eos_id: an id no token has (a loop whose `done` never
        # changes trips TensorFlow's loop optimizer under XLA)
        done = tf.logical_or(done, tf.equal(nxt, -1 if eos_id is None else eos_id))
        tokens = self._append(tf.gather(tokens, parent), index, nxt)
        return parent, tokens, tf.reshape(best, [-1]), done, lengths

    def _beam(self, source_ids, max_length, k, alpha, eos_id, pad_id, bos_id, weights, table):
        from seqkeras.decoding import length_penalty

        batch = tf.shape(source_ids)[0]
        caches, cross, bias, rows = self._start(source_ids, k, weights, max_length)
        tokens = self._tokens(rows, max_length, bos_id, pad_id)
        # only beam 0 is live at first (seqkeras.decoding.beam_search)
        scores = tf.tile(tf.constant([0.0] + [-1e9] * (k - 1), tf.float32), [batch])
        done = tf.zeros([rows], tf.bool)
        lengths = tf.zeros([rows], tf.int32)

        def final(done):
            """Per source: its answer can no longer change. Without a length
            penalty, its best beam ended (see
            `seqkeras.decoding.beam_search`: later tokens only lower the
            other beams' scores); with one, all its beams ended."""
            done = tf.reshape(done, [-1, k])
            return tf.reduce_all(done, 1) if alpha else done[:, 0]

        def cond(index, tokens, caches, scores, done, lengths):
            return tf.logical_and(
                index < max_length - 1, tf.logical_not(tf.reduce_all(final(done)))
            )

        def body(small, w, cross, bias, index, tokens, caches, scores, done, lengths):
            current = self._current(tokens, index)
            logits, caches = self._step(current, index, caches, cross, bias, table, w, k, small)
            parent, tokens, scores, done, lengths = self._advance(
                logits, index, tokens, scores, done, lengths, k, eos_id, pad_id
            )
            caches = [(tf.gather(c, parent), tf.gather(v, parent)) for c, v in caches]
            return index + 1, tokens, caches, scores, done, lengths

        vector = tf.TensorShape([None])
        invariants = (tf.TensorShape([]), tf.TensorShape([None, None]), self._invariants(caches))

        def plain(small=None):
            state = (tf.constant(0), tokens, caches, scores, done, lengths)
            shapes = invariants + (vector, vector, vector)
            out = self._loop(
                rows, cond, body, state, shapes, max_length, weights, cross, bias, small
            )
            return self._finish(out[1], max_length, pad_id), out[2], out[4]

        def compacting_body(small, w, index, alive, tokens, caches, cross, bias, *rest):
            scores, done, lengths, out_tokens, out_scores, out_lengths = rest
            logits, caches = self._step(
                tokens[:, -1], index, caches, cross, bias, table, w, k, small
            )
            parent, tokens, scores, done, lengths = self._advance(
                logits, index, tokens, scores, done, lengths, k, eos_id, pad_id
            )
            ended = final(done)
            kept = tf.cast(tf.where(tf.logical_not(ended))[:, 0], tf.int32)
            kept_rows = self._rows(kept, k)
            # the beam reorder and the compaction in one gather per cache leaf
            order = tf.gather(parent, kept_rows)
            caches = [(tf.gather(c, order), tf.gather(v, order)) for c, v in caches]

            def compact():
                sources = tf.cast(tf.where(ended)[:, 0], tf.int32)
                gone = self._rows(sources, k)
                at = self._rows(tf.gather(alive, sources), k)[:, None]
                written = self._finish(tf.gather(tokens, gone), max_length, pad_id)
                return (
                    tf.gather(alive, kept),
                    [(tf.gather(a, kept), tf.gather(b, kept)) for a, b in cross],
                    tf.gather(bias, kept),
                    tf.tensor_scatter_nd_update(out_tokens, at, written),
                    tf.tensor_scatter_nd_update(out_scores, at, tf.gather(scores, gone)),
                    tf.tensor_scatter_nd_update(out_lengths, at, tf.gather(lengths, gone)),
                )

            same = (alive, cross, bias, out_tokens, out_scores, out_lengths)
            alive, cross, bias, out_tokens, out_scores, out_lengths = tf.cond(
                tf.reduce_any(ended), compact, lambda: same
            )
            tokens, scores, done, lengths = (
                tf.gather(x, kept_rows) for x in (tokens, scores, done, lengths)
            )
            return (index + 1, alive, tokens, caches, cross, bias, scores, done, lengths) + (
                out_tokens,
                out_scores,
                out_lengths,
            )

        def compacting():
            state = (tf.constant(0), tf.range(batch), tokens, caches, scores, done, lengths) + (
                tf.fill([rows, max_length], tf.constant(pad_id, tf.int32)),
                tf.zeros([rows], tf.float32),
                tf.zeros([rows], tf.int32),
            )
            shapes = (tf.TensorShape([]), vector, tf.TensorShape([None, None])) + (
                self._invariants(caches),
                vector,
                vector,
                vector,
                tf.TensorShape([None, max_length]),
                vector,
                vector,
            )
            out = self._compacting(
                rows, compacting_body, state, shapes, weights, cross, bias, max_length
            )
            _, alive, left, _, _, _, left_scores, _, left_lengths = out[:9]
            at = self._rows(alive, k)[:, None]
            return (
                tf.tensor_scatter_nd_update(out[9], at, self._finish(left, max_length, pad_id)),
                tf.tensor_scatter_nd_update(out[10], at, left_scores),
                tf.tensor_scatter_nd_update(out[11], at, left_lengths),
            )

        if max_length == 1:
            tokens = self._finish(tokens, max_length, pad_id)
        elif self.compiled:
            tokens, scores, lengths = plain()
        else:
            tokens, scores, lengths = tf.cond(
                batch > 1, compacting, lambda: plain(small=k <= SMALL_ROWS)
            )
        final_scores = scores
        if alpha:
            final_scores = scores / length_penalty(tf.maximum(lengths, 1), alpha)
        final_scores = tf.reshape(final_scores, [batch, k])
        order = tf.argsort(-final_scores, axis=-1)  # best first, as keras.ops.argsort
        tokens = tf.reshape(tokens, [batch, k, max_length])
        best = order[:, 0]
        return (
            tf.gather(tokens, best, axis=1, batch_dims=1),
            tf.gather(final_scores, best, axis=1, batch_dims=1),
        )


def _cast_state(dtype, caches, cross, bias):
    """`(caches, cross, bias)` cast to `dtype`: the per-block (key, value)
    pairs of the self-attention caches and of the cross-attention, and the
    source bias (no-ops where they have it already)."""
    caches, cross = (
        [(tf.cast(k, dtype), tf.cast(v, dtype)) for k, v in c] for c in (caches, cross)
    )
    return caches, cross, tf.cast(bias, dtype)


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
