"""`Attention`: global attention with any seed-notes score function."""

import math

import keras
from keras import ops

from seqkeras.layers import attention_core
from seqkeras.layers import lora
from seqkeras.layers import masking
from seqkeras.layers import scoring
from seqkeras.layers.rotary import RotaryEmbedding
from seqkeras.layers import state as state_values
from seqkeras.layers import validation

_PACKAGE = "seqkeras"


def check_attention_call(
    layer, query, value, key, query_mask=None, value_mask=None, attention_mask=None
):
    """Call-time checks shared by the attention layers: float inputs and
    masks shaped (batch, Tq), (batch, Tv) and (batch, Tq, Tv)."""
    for arg, x in (("query", query), ("value", value), ("key", key)):
        if x is not None:
            validation.floating(layer, arg, x)
    q = validation.static_shape(query)
    v = validation.static_shape(key if key is not None else value)
    if len(q) != 3 or len(v) != 3:
        return  # the rank check names the tensor
    validation.same_dims(layer, "query_mask", query_mask, q[:2], "(batch, query_time)")
    validation.same_dims(layer, "value_mask", value_mask, (v[0], v[1]), "(batch, value_time)")
    if attention_mask is not None and len(attention_mask.shape) == 4:
        expected = (q[0], None, q[1], v[1])
        described = "(batch, heads, query_time, value_time)"
    else:
        expected = (q[0], q[1], v[1])
        described = "(batch, query_time, value_time)"
    validation.same_dims(layer, "attention_mask", attention_mask, expected, described)


def check_attention_inputs(layer, query_shape, value_shape, key_shape):
    for arg, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
        if shape is not None and len(shape) != 3:
            raise ValueError(
                f"`{layer}` expects `{arg}` of rank 3, (batch, time, "
                f"features). Received: {arg}.shape={tuple(shape)}"
            )
    key_shape = value_shape if key_shape is None else key_shape
    tv, tk = value_shape[1], key_shape[1]
    if tv is not None and tk is not None and tv != tk:
        raise ValueError(
            f"`{layer}` needs `key` and `value` of the same length. "
            f"Received: key.shape={tuple(key_shape)}, "
            f"value.shape={tuple(value_shape)}"
        )
    return key_shape


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Attention(keras.layers.Layer):
    """Global attention: `softmax(score(query, key)) @ value`.

    Scores (see `seqkeras.layers.scoring`): `"dot"` (q . k), `"scaled_dot"`
    (q . k / sqrt(d_k)), `"general"` (q W k, Luong), `"additive"`
    (v . tanh(q W1 + k W2), Bahdanau) and `"cosine"` (cos(q, k) divided by a
    learnable temperature). The weights come from the shared dtype-safe
    masked softmax: masked keys get zero weight, and a query with no
    visible key gets zero weights and a zero context.

    Args:
        score: one of the names above (default `"scaled_dot"`).
        units: hidden size of the additive score (default: key features).
        dropout: rate in [0, 1) of dropout on the attention weights.
        temperature: initial temperature of the cosine score (learned as
            its logarithm, so it stays positive).
        seed: seed of the dropout.
        kernel_initializer: of the score's weights (`general`,
            `additive`).

    Call arguments:
        query: (batch, Tq, d_q).
        value: (batch, Tv, d_v).
        key: optional (batch, Tv, d_k); defaults to `value`.
        query_mask: optional bool (batch, Tq); masked queries get zero
            output (and the mask is propagated).
        value_mask: optional bool (batch, Tv); masked keys get zero weight.
        attention_mask: optional bool (batch, Tq, Tv).
        use_causal_mask: query i attends to keys j <= i.
        return_attention_scores: also return the weights (batch, Tq, Tv).
        training: enables dropout.

    Examples:
        >>> import numpy as np, seqkeras
        >>> attention = seqkeras.layers.Attention("additive", units=8)
        >>> q, v = np.ones((2, 3, 4), "float32"), np.ones((2, 5, 6), "float32")
        >>> context, weights = attention(q, v, return_attention_scores=True)
        >>> tuple(context.shape), tuple(weights.shape)
        ((2, 3, 6), (2, 3, 5))
    """

    def __init__(
        self,
        score="scaled_dot",
        units=None,
        dropout=0.0,
        temperature=0.1,
        seed=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.score = validation.choice("Attention", "score", score, scoring.SCORES)
        self.units = None if units is None else validation.positive_int("Attention", "units", units)
        self.dropout = validation.rate("Attention", "dropout", dropout)
        self.temperature = validation.greater_than("Attention", "temperature", temperature, 0)
        self.seed = validation.seed("Attention", "seed", seed)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = check_attention_inputs("Attention", query_shape, value_shape, key_shape)
        d_q, d_k = query_shape[-1], key_shape[-1]
        if self.score in ("dot", "scaled_dot", "cosine") and d_q != d_k:
            raise ValueError(
                f"`Attention` with score={self.score!r} needs query and key "
                f"of the same feature size. Received: query features={d_q}, "
                f"key features={d_k}"
            )
        if self.score == "general":
            self.kernel = self.add_weight(
                shape=(d_q, d_k), name="kernel", initializer=self.kernel_initializer
            )
        elif self.score == "additive":
            units = self.units or d_k
            self.query_kernel = self.add_weight(
                shape=(d_q, units), name="query_kernel", initializer=self.kernel_initializer
            )
            self.key_kernel = self.add_weight(
                shape=(d_k, units), name="key_kernel", initializer=self.kernel_initializer
            )
            self.v = self.add_weight(shape=(units,), name="v", initializer=self.kernel_initializer)
        elif self.score == "cosine":
            self.log_temperature = self.add_weight(
                shape=(),
                name="log_temperature",
                initializer=keras.initializers.Constant(math.log(self.temperature)),
            )

    def project_key(self, key):
        """The part of the score that depends on the keys alone (`key @
        W2` for `additive`, `key @ W^T` for `general`; None for the other
        scores): computed once, passed to every call as
        `projected_key`, it saves a (Tk x d) projection per query step."""
        if self.score == "additive":
            return scoring._project(key, self.key_kernel)
        if self.score == "general":
            return scoring._project(key, ops.transpose(self.kernel))
        return None

    def scores(self, query, key, projected_key=None):
        """Logits (batch, Tq, Tk) of the configured score function."""
        if self.score == "dot":
            return scoring.dot(query, key)
        if self.score == "scaled_dot":
            return scoring.scaled_dot(query, key)
        if self.score == "general":
            return scoring.general(query, key, self.kernel, projected_key)
        if self.score == "additive":
            return scoring.additive(
                query, key, self.query_kernel, self.key_kernel, self.v, projected_key
            )
        return scoring.cosine(query, key, self.log_temperature)

    def __call__(self, *args, **kwargs):
        # strings refused before Keras converts the arguments to backend
        # tensors (on JAX that conversion fails first, with a bare error)
        validation.numeric_arguments("Attention", ("query", "value", "key"), args, kwargs)
        return super().__call__(*args, **kwargs)

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        projected_key=None,
    ):
        key = value if key is None else key
        check_attention_call("Attention", query, value, key, query_mask, value_mask, attention_mask)
        check_attention_inputs("Attention", query.shape, value.shape, key.shape)
        if self.score == "general":
            validation.features("Attention", "query", query, self.kernel.shape[0])
            validation.features("Attention", "key", key, self.kernel.shape[1])
        elif self.score == "additive":
            validation.features("Attention", "query", query, self.query_kernel.shape[0])
            validation.features("Attention", "key", key, self.key_kernel.shape[0])
        logits = self.scores(query, key, projected_key)
        mask = masking.attention_mask(
            query_mask,
            value_mask,
            attention_mask,
            use_causal_mask,
            ops.shape(query)[1],
            ops.shape(key)[1],
        )
        context, weights = attention_core.attend(
            logits, value, mask, self.dropout, self.seed_generator, training
        )
        if return_attention_scores:
            return context, weights
        return context

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        out = (query_shape[0], query_shape[1], value_shape[-1])
        return out

    def compute_output_spec(
        self, query, value, key=None, *args, return_attention_scores=False, **kwargs
    ):
        out = keras.KerasTensor(
            self.compute_output_shape(query.shape, value.shape), dtype=self.compute_dtype
        )
        if return_attention_scores:
            weights = keras.KerasTensor(
                (query.shape[0], query.shape[1], value.shape[1]), dtype=self.compute_dtype
            )
            return out, weights
        return out

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "score": self.score,
                "units": self.units,
                "dropout": self.dropout,
                "temperature": self.temperature,
                "seed": self.seed,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


def key_value_heads(where, num_heads, num_key_value_heads):
    """`num_key_value_heads` (default `num_heads`), a positive divisor of
    `num_heads`; ValueError naming `where` otherwise."""
    if num_key_value_heads is None:
        return num_heads
    kv = validation.positive_int(where, "num_key_value_heads", num_key_value_heads)
    if num_heads % kv:
        raise ValueError(
            f"`{where}` needs num_key_value_heads dividing num_heads. Received: "
            f"num_heads={num_heads}, num_key_value_heads={num_key_value_heads}"
        )
    return kv


def _as_4d(mask, axes):
    """A 2-D mask with new axes `axes`, by `expand_dims` (an indexing
    `[None]` is a StridedSlice with a new-axis mask, which the TFLite
    converter does not take as a builtin)."""
    for axis in axes:
        mask = ops.expand_dims(mask, axis)
    return mask


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention, with an incremental path.

    `head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(key_dim)) V W_i^V`,
    `MHA = concat(head_1 .. head_h) W^O` (seed notes; Vaswani et al.).
    Weights have the shapes and order of `keras.layers.MultiHeadAttention`
    (query, key, value and output kernels and biases), so weights copy
    across.

    Without attention weights requested and without training dropout, the
    heads may run through `keras.ops.dot_product_attention` (flash attention
    where the backend has it; see `fused`); otherwise through the explicit
    path. Both are `seqkeras.layers.attention_core.multi_head` and give
    zero output for a query with no visible key.

    Args:
        num_heads: positive int.
        key_dim: positive int, size of each query/key head.
        value_dim: size of each value head (default `key_dim`).
        dropout: rate in [0, 1) of dropout on the attention weights.
        use_bias: whether the projections have biases.
        use_output_bias: whether the output projection has one (default
            `use_bias`; Qwen2 has query/key/value biases and none here).
        lora_rank, lora_alpha: low-rank adapters on the four projections
            (`seqkeras.layers.lora`: the kernels frozen, `(alpha / rank)
            A B` added; alpha defaults to the rank).
        output_dim: size of the output (default: the query's features).
        seed: seed of the dropout.
        kernel_initializer, bias_initializer: of the projections.
        fused: run the heads through `keras.ops.dot_product_attention`
            (True) or the explicit path (False); None: Keras'
            flash-attention setting, else fused on every backend but
            TensorFlow (see `seqkeras.layers.attention_core`).
        num_key_value_heads: grouped-query attention (Ainslie et al.
            2023): this many key/value heads (a divisor of `num_heads`),
            query head i reading key/value head `i // (num_heads /
            num_key_value_heads)` (Hugging Face's `repeat_kv` order); 1 is
            multi-query attention. Caches hold only the key/value heads.
            Default `num_heads`.
        rotary_embedding: a `RotaryEmbedding` (or its config dict) applied
            to the queries and keys at their positions (0.. in a full
            pass, `cache_index`.. in a decoding step) before the product;
            cached keys are stored rotated.
        window: sliding-window causal attention: a query at position p
            sees the keys at p - window + 1 .. p (Mistral's
            `sliding_window`); needs `use_causal_mask` or a cache. A cache
            that grows (TF Serving graphs) keeps only the last `window`
            positions; a fixed buffer (XLA, TFLite) masks the rest.
        query_key_norm: None, or the epsilon of an RMS norm (with a learned
            scale per feature, `query_norm_scale` and `key_norm_scale`)
            of each head's queries and keys after their projection and
            before the rotary embedding (Qwen3's, Qwen3-Next's and LFM2's
            q/k norms).
        output_gate: multiply each head's output by `sigmoid(x W^G + b^G)`
            of the query input before the output projection (Qwen3-Next's
            gated attention; `gate_kernel` has the query kernel's shape
            with `value_dim` features).

    Call arguments:
        query: (batch, Tq, d_q); value: (batch, Tv, d_v), or None for
            self-attention (query = key = value; the input's padding mask
            masks both queries and keys); key: optional (batch, Tv, d_k),
            default `value`.
        query_mask, value_mask, attention_mask: as `Attention`.
        use_causal_mask, return_attention_scores, training: as
            `Attention`; returned weights are (batch, heads, Tq, Tk).
        cache: optional `(keys, values)`, each (batch, heads, length,
            head_dim): a decoding step. With `cache_index` (self-attention
            decoding): the new keys and values are written at
            `cache_index` (or appended, for a cache that grows:
            `init_cache`), queries attend to cache positions up to their
            own (causal); `init_cache(batch, max_length)` makes an empty
            one. Without `cache_index` (cross-attention decoding): the
            cache holds the encoder's keys and values, projected once by
            `compute_cache(encoder_outputs)`, and is used as is; its batch
            may divide the queries' (a source's beams share it). Either way
            the call returns `(output, cache)`, with no attention scores
            and no `attention_mask` (a ValueError says so). The cache's
            layout (`init_cache(..., layout=)`, `seqkeras.layers.state`)
            says how it is written; the returned cache has the same.
        cache_index: int scalar, position of the first query in the cache.
        step_weights: optional, with `cache`: this layer's
            `prepare_step_weights()`, made once per decoding request (the
            step then reads the fused projections); default the variables.

    Examples:
        >>> import numpy as np, seqkeras
        >>> mha = seqkeras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
        >>> x = np.ones((1, 5, 8), "float32")
        >>> tuple(mha(x, x, use_causal_mask=True).shape)
        (1, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_dim=None,
        seed=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        fused=None,
        num_key_value_heads=None,
        rotary_embedding=None,
        window=None,
        use_output_bias=None,
        lora_rank=None,
        lora_alpha=None,
        query_key_norm=None,
        output_gate=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "MultiHeadAttention"
        self.query_key_norm = (
            None
            if query_key_norm is None
            else validation.greater_than(name, "query_key_norm", query_key_norm, 0.0)
        )
        self.output_gate = validation.boolean(name, "output_gate", output_gate)
        self.lora_rank, self.lora_alpha = lora.check(name, lora_rank, lora_alpha)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        if fused is not None:
            fused = validation.boolean(name, "fused", fused)
        self.fused = fused
        self.num_heads = validation.positive_int(name, "num_heads", num_heads)
        self.key_dim = validation.positive_int(name, "key_dim", key_dim)
        self.value_dim = (
            self.key_dim
            if value_dim is None
            else validation.positive_int(name, "value_dim", value_dim)
        )
        self.dropout = validation.rate(name, "dropout", dropout)
        self.use_bias = validation.boolean(name, "use_bias", use_bias)
        self.output_dim = (
            None if output_dim is None else validation.positive_int(name, "output_dim", output_dim)
        )
        self.seed = validation.seed(name, "seed", seed)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self.num_key_value_heads = key_value_heads(name, self.num_heads, num_key_value_heads)
        if isinstance(rotary_embedding, dict):
            rotary_embedding = keras.saving.deserialize_keras_object(rotary_embedding)
        if rotary_embedding is not None and not isinstance(rotary_embedding, RotaryEmbedding):
            raise TypeError(
                f"`{name}` expects `rotary_embedding` None, a "
                "`seqkeras.layers.RotaryEmbedding` or its config. Received: "
                f"{type(rotary_embedding).__name__}"
            )
        self.rotary_embedding = rotary_embedding
        self.window = None if window is None else validation.positive_int(name, "window", window)
        self.use_output_bias = (
            self.use_bias
            if use_output_bias is None
            else validation.boolean(name, "use_output_bias", use_output_bias)
        )

    @property
    def _groups(self):
        """Query heads per key/value head."""
        return self.num_heads // self.num_key_value_heads

    def _head_norm(self, x, part):
        """Queries (`part="query"`) or keys RMS-normalised over each head's
        features (`query_key_norm`; unchanged without it)."""
        if self.query_key_norm is None:
            return x
        scale = getattr(self, f"{part}_norm_scale")
        return ops.rms_normalization(x, scale=scale, epsilon=self.query_key_norm)

    def _rotate(self, q, k, start, sequence_axis):
        """Queries and keys rotated at positions `start`.. (the rotary
        embedding; unchanged without one): one table of angles for both."""
        if self.rotary_embedding is None:
            return q, k
        rope = self.rotary_embedding
        positions = ops.arange(ops.shape(q)[sequence_axis]) + ops.cast(start, "int32")
        cos, sin = rope.angles(positions, q.shape[-1])
        return rope.rotate(q, cos, sin, sequence_axis), rope.rotate(k, cos, sin, sequence_axis)

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = check_attention_inputs(
            "MultiHeadAttention", query_shape, value_shape, key_shape
        )
        h = self.num_heads
        out_dim = self.output_dim or query_shape[-1]

        def dense(name, d_in, head_dim, heads=h):
            kernel = self.add_weight(
                shape=(d_in, heads, head_dim),
                name=f"{name}_kernel",
                initializer=self.kernel_initializer,
            )
            bias = (
                self.add_weight(
                    shape=(heads, head_dim), name=f"{name}_bias", initializer=self.bias_initializer
                )
                if self.use_bias
                else None
            )
            return kernel, bias

        kv = self.num_key_value_heads
        self.query_kernel, self.query_bias = dense("query", query_shape[-1], self.key_dim)
        if self.output_gate:
            self.gate_kernel, self.gate_bias = dense("gate", query_shape[-1], self.value_dim)
        if self.query_key_norm is not None:
            self.query_norm_scale, self.key_norm_scale = (
                self.add_weight(shape=(self.key_dim,), name=f"{n}_norm_scale", initializer="ones")
                for n in ("query", "key")
            )
        self.key_kernel, self.key_bias = dense("key", key_shape[-1], self.key_dim, kv)
        self.value_kernel, self.value_bias = dense("value", value_shape[-1], self.value_dim, kv)
        self.output_kernel = self.add_weight(
            shape=(h, self.value_dim, out_dim),
            name="output_kernel",
            initializer=self.kernel_initializer,
        )
        self.output_bias = (
            self.add_weight(shape=(out_dim,), name="output_bias", initializer=self.bias_initializer)
            if self.use_output_bias
            else None
        )
        if self.lora_rank:
            lora.add_adapters(
                self,
                [
                    ("query", self.query_kernel, 1),
                    ("key", self.key_kernel, 1),
                    ("value", self.value_kernel, 1),
                    ("output", self.output_kernel, 2),
                ],
            )

    def _kernel(self, name):
        """The `name` projection's kernel, its LoRA adapter added."""
        return lora.effective(self, name, getattr(self, f"{name}_kernel"))

    def _project(self, x, kernel, bias):
        y = ops.einsum("btd,dhk->bthk", x, kernel)  # (batch, time, heads, dim)
        return y if bias is None else y + bias

    def _project_qkv(self, query, key, value):
        """q, k, v, each (batch, time, heads, dim)."""
        return (
            self._project(query, self._kernel("query"), self.query_bias),
            self._project(key, self._kernel("key"), self.key_bias),
            self._project(value, self._kernel("value"), self.value_bias),
        )

    def _heads_first(self, x, kernel, bias):
        """x (batch, time, d) projected to (batch, heads, time, dim)."""
        y = ops.einsum("btd,dhk->bhtk", x, kernel)
        return y if bias is None else y + ops.expand_dims(bias, 1)

    def compute_cache(self, key, value=None):
        """Keys and values projected once, `(keys, values)` each (batch,
        heads, Tk, head_dim), for cross-attention while decoding: pass it
        as `cache` with no `cache_index`. Its batch may be a divisor of the
        queries' (the beams of a source share their source's cache: query
        rows `i * beams + j` read cache row `i`)."""
        value = key if value is None else value
        keys = self._head_norm(self._heads_first(key, self._kernel("key"), self.key_bias), "key")
        return keys, self._heads_first(value, self._kernel("value"), self.value_bias)

    def init_cache(self, batch_size, max_length, layout="fixed"):
        """An empty self-attention cache, a `KeyValueCache` whose `keys`
        and `values` are each (batch, key_value_heads, length, head_dim),
        laid out as `layout` asks (`seqkeras.layers.state`): `"fixed"`, a
        zero buffer of `max_length` positions written in place at
        `cache_index` (training graphs, XLA, TFLite); `"scatter"`, the same
        buffer written with standard scatter ops (TF Serving); `"growing"`,
        no positions at first, each call appending its queries' keys and
        values, so a step reads the positions decoded so far and not
        `max_length` (TF Serving's decoding loop)."""
        if self.key_dim != self.value_dim:
            raise ValueError(
                "`MultiHeadAttention` caches need key_dim == value_dim. "
                f"Received: key_dim={self.key_dim}, "
                f"value_dim={self.value_dim}"
            )
        state_values.check_layout("MultiHeadAttention.init_cache", layout)
        length = 0 if layout == "growing" else max_length
        shape = (batch_size, self.num_key_value_heads, length, self.key_dim)
        zeros = ops.zeros(shape, self.compute_dtype)
        return state_values.key_value_cache(zeros, zeros, layout)

    def prepare_step_weights(self):
        """This layer's projections laid out once per decoding request for
        the cached step (pass them as `step_weights`):
        the query, key and value kernels side by side as one (d, (heads +
        2 * key_value_heads) * dim) product, the attention scale 1/sqrt(key_dim) folded into
        the query columns (without q/k norms), the output gate's kernel and
        the output kernel as (d, heads * dim) and (heads * dim, d_out), all
        in the compute dtype."""
        dtype = self.compute_dtype
        # with q/k norms the scale comes after the queries' norm (a norm
        # would undo it folded into the projection)
        scale = 1.0 if self.query_key_norm is not None else 1.0 / math.sqrt(self.key_dim)

        def flat(kernel, factor=1.0):
            k = ops.cast(kernel, dtype)
            k = ops.reshape(k, (k.shape[0], -1))
            return k * ops.cast(factor, dtype) if factor != 1.0 else k

        def bias(b, width, factor=1.0):
            if b is None:
                return ops.zeros((width,), dtype)
            b = ops.reshape(ops.cast(b, dtype), (-1,))
            return b * ops.cast(factor, dtype) if factor != 1.0 else b

        hq, hv = self.num_heads * self.key_dim, self.num_heads * self.value_dim
        kv = self.num_key_value_heads
        query = (flat(self._kernel("query"), scale), bias(self.query_bias, hq, scale))
        weights = {"query": query}
        same_input = self.query_kernel.shape[0] == self.key_kernel.shape[0]
        if same_input and self.value_kernel.shape[0] == self.key_kernel.shape[0]:
            weights["qkv"] = (
                ops.concatenate(
                    [query[0], flat(self._kernel("key")), flat(self._kernel("value"))], axis=1
                ),
                ops.concatenate(
                    [
                        query[1],
                        bias(self.key_bias, kv * self.key_dim),
                        bias(self.value_bias, kv * self.value_dim),
                    ],
                    axis=0,
                ),
            )
        if self.output_gate:
            weights["gate"] = (flat(self.gate_kernel), bias(self.gate_bias, hv))
        out = ops.reshape(ops.cast(self._kernel("output"), dtype), (hv, -1))
        weights["output"] = (
            out,
            None if self.output_bias is None else ops.cast(self.output_bias, dtype),
        )
        return weights

    def _cached_call(
        self, query, value, key, query_mask, value_mask, cache, cache_index, prepared=None
    ):
        """The decoding step's attention: `(output, cache)`.

        Self-attention (`cache_index` given): the queries' keys and values
        (rotated at their positions with a rotary embedding) go into the
        cache (written at `cache_index`, or appended to a growing cache,
        which a `window` then cuts to its last `window` positions), and
        the queries attend causally. Cross-attention: the cache holds the
        projected keys and values; a cache of fewer rows than the queries
        is shared by consecutive query rows (beams). Grouped queries (the
        heads that share a key/value head, the beams that share a source)
        are one batched product against their shared keys. The
        projections are `prepared` (`prepare_step_weights`: fused, scale
        folded), else the variables. The cache's layout (its type,
        `seqkeras.layers.state`) says how it is written."""
        h, dk, dv = self.num_heads, self.key_dim, self.value_dim
        kv, g = self.num_key_value_heads, self._groups
        layout = state_values.layout_of(cache)
        batch, q_len = ops.shape(query)[0], ops.shape(query)[1]
        static_len = query.shape[1]

        def heads(x, dim, n=h):
            """(batch, Tq, n * dim) -> (batch, n, Tq, dim); one query per
            row (a decoding step): a reshape, no transpose."""
            if static_len == 1:
                return ops.reshape(x, (-1, n, 1, dim))
            return ops.transpose(ops.reshape(x, (batch, q_len, n, dim)), (0, 2, 1, 3))

        def rows(x):
            """(batch, Tq, d) as (batch * Tq, d): 2-D products (a 3-D one is a
            tensordot of about ten ops in a TensorFlow graph)."""
            return ops.reshape(x, (-1, x.shape[-1]))

        keys, values = cache
        self_attention = cache_index is not None
        if prepared is not None:
            if self_attention and key is query and value is query and "qkv" in prepared:
                w, b = prepared["qkv"]
                y = ops.matmul(rows(query), w) + b  # (batch * Tq, (h + 2 kv) * dim)
                q, k, v = y[:, : h * dk], y[:, h * dk : (h + kv) * dk], y[:, (h + kv) * dk :]
                k, v = heads(k, dk, kv), heads(v, dv, kv)
            else:
                w, b = prepared["query"]
                q = ops.matmul(rows(query), w) + b
                if self_attention:
                    k = self._heads_first(key, self._kernel("key"), self.key_bias)
                    v = self._heads_first(value, self._kernel("value"), self.value_bias)
            q = heads(q, dk)
        else:
            q = self._heads_first(query, self._kernel("query"), self.query_bias)
            if self_attention:
                k = self._heads_first(key, self._kernel("key"), self.key_bias)
                v = self._heads_first(value, self._kernel("value"), self.value_bias)
        q = self._head_norm(q, "query")
        if self_attention:
            k = self._head_norm(k, "key")
        if prepared is None or self.query_key_norm is not None:  # else folded in
            q = q * ops.cast(1.0 / math.sqrt(dk), q.dtype)
        q_mask = None if query_mask is None else ops.cast(query_mask, "bool")  # (batch, Tq)
        groups = None
        if self_attention:
            q, k = self._rotate(q, k, cache_index, 2)
            k, v = ops.cast(k, keys.dtype), ops.cast(v, values.dtype)
            if layout == "growing":
                keys = ops.concatenate([keys, k], axis=2)
                values = ops.concatenate([values, v], axis=2)
                k_len = ops.shape(keys)[2]
                if static_len == 1:
                    mask = None  # one query sees every cached key, its own last
                    if self.window is not None:  # ... of the last `window`
                        keys, values = keys[:, :, -self.window :], values[:, :, -self.window :]
                else:
                    offset = k_len - q_len
                    mask = masking.causal_mask(q_len, k_len, offset, self.window)
                    mask = _as_4d(mask, (0, 1))
                attend_keys, attend_values = keys, values
                if self.window is not None:  # what later steps may see
                    keys, values = keys[:, :, -self.window :], values[:, :, -self.window :]
            else:
                at = (0, 0, cache_index, 0)
                keys = state_values.write(keys, at, k, layout, depth=3)
                values = state_values.write(values, at, v, layout, depth=3)
                attend_keys, attend_values = keys, values
                mask = masking.causal_mask(q_len, ops.shape(keys)[2], cache_index, self.window)
                mask = _as_4d(mask, (0, 1))
            if value_mask is not None and static_len != 1:
                # the new keys' padding (the cached keys stay visible)
                new = ops.cast(value_mask, "bool")
                a_len = ops.shape(attend_keys)[2]
                if layout == "growing":
                    old = ops.ones((batch, a_len - q_len), "bool")
                    keys_mask = ops.concatenate([old, new], axis=1)
                else:
                    keys_mask = state_values.write(
                        ops.ones((batch, a_len), "bool"), (0, cache_index), new, layout
                    )
                mask = ops.logical_and(mask, _as_4d(keys_mask, (1, 2)))
            cache = state_values.like(cache, keys, values)
            if g > 1:
                # (batch, heads, Tq, dim) -> (batch, kv, groups * Tq, dim): a
                # key/value head's query heads are its queries
                q = ops.reshape(q, (-1, kv, g * q_len, dk))
                if mask is not None:
                    mask = ops.tile(mask, (1, 1, g, 1))
            context = attention_core.step_attend(
                q, ops.cast(attend_keys, q.dtype), attend_values, mask
            )
            if g > 1:
                context = ops.reshape(context, (-1, h, q_len, dv))
            if static_len != 1:
                context = ops.transpose(context, (0, 2, 1, 3))  # (batch, Tq, heads, dim)
        else:
            sources = ops.shape(keys)[0]
            groups = batch // sources  # query rows per cache row (beams)
            # (batch, heads, Tq, dim) -> (sources, kv, groups * g * Tq, dim):
            # a source's beams (and a key/value head's query heads) are its
            # queries
            q = ops.reshape(
                ops.transpose(
                    ops.reshape(q, (sources, groups, kv, g * q_len, dk)), (0, 2, 1, 3, 4)
                ),
                (sources, kv, groups * g * q_len, dk),
            )
            mask = None
            if value_mask is not None:
                mask = _as_4d(ops.cast(value_mask, "bool"), (1, 2))  # (sources, 1, 1, Tk)
            context = attention_core.step_attend(q, ops.cast(keys, q.dtype), values, mask)
            if g == 1:
                context = ops.transpose(
                    ops.reshape(context, (-1, h, groups, q_len, dv)), (0, 2, 3, 1, 4)
                )  # (sources, groups, Tq, heads, dim)
            else:
                context = ops.transpose(
                    ops.reshape(context, (-1, kv, groups, g, q_len, dv)), (0, 2, 4, 1, 3, 5)
                )  # (sources, groups, Tq, kv, g, dim)
        context = ops.reshape(context, (-1, h * dv))  # (batch * Tq, heads * dim)
        if self.output_gate:
            if prepared is not None:
                w, b = prepared["gate"]
                gate = ops.matmul(rows(query), w) + b
            else:
                gate = ops.matmul(rows(query), ops.reshape(self.gate_kernel, (-1, h * dv)))
                if self.gate_bias is not None:
                    gate = gate + ops.reshape(self.gate_bias, (-1,))
            context = context * ops.sigmoid(ops.cast(gate, context.dtype))
        if q_mask is not None:  # a masked query outputs zeros
            context = context * ops.cast(ops.reshape(q_mask, (-1, 1)), context.dtype)
        if prepared is not None:
            w, b = prepared["output"]
            output = ops.matmul(context, w)
        else:
            output = ops.matmul(context, ops.reshape(self._kernel("output"), (h * dv, -1)))
            b = self.output_bias
        if b is not None:
            output = output + b
        if static_len == 1:
            output = ops.reshape(output, (-1, 1, output.shape[-1]))
        else:
            output = ops.reshape(output, (batch, q_len, output.shape[-1]))
        return output, cache

    def call(
        self,
        query,
        value=None,
        key=None,
        query_mask=None,
        value_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_index=None,
        step_weights=None,
        mask=None,
    ):
        # `value=None` is self-attention: the input's Keras mask (filled
        # into `mask`) masks queries and keys. Its projections stay three
        # GEMMs in training: one fused (d, 3d) GEMM sliced into q, k, v
        # equals them under XLA and is 8% (float32) to 15% (mixed_bfloat16)
        # slower without it, where the slices' gradients are full-width
        # copies (benchmarks/attention.py, encoder block training). The
        # decoding step fuses them (`prepare_step_weights`).
        self_attention = value is None
        if self_attention:
            value = query
            query_mask = mask if query_mask is None else query_mask
            value_mask = query_mask if value_mask is None else value_mask
        key = value if key is None else key
        name = "MultiHeadAttention"
        check_attention_call(name, query, value, key, query_mask, value_mask, attention_mask)
        check_attention_inputs(name, query.shape, value.shape, key.shape)
        for arg, x, kernel in (
            ("query", query, self.query_kernel),
            ("key", key, self.key_kernel),
            ("value", value, self.value_kernel),
        ):
            if x.shape[-1] != kernel.shape[0]:
                raise ValueError(
                    f"`MultiHeadAttention` was built for `{arg}` with "
                    f"{kernel.shape[0]} features. Received: "
                    f"{arg}.shape={tuple(x.shape)}"
                )
        if cache is not None:
            self._check_cache(query, cache, cache_index)
            if attention_mask is not None or return_attention_scores:
                raise ValueError(
                    "`MultiHeadAttention` with a `cache` (a decoding step) takes no "
                    "`attention_mask` and returns no attention scores. Received: "
                    f"attention_mask={'given' if attention_mask is not None else None}, "
                    f"return_attention_scores={return_attention_scores}"
                )
            return self._cached_call(
                query, value, key, query_mask, value_mask, cache, cache_index, step_weights
            )
        if self.window is not None and not use_causal_mask:
            raise ValueError(
                f"`{name}` with window={self.window} is sliding-window causal attention: "
                "call it with use_causal_mask=True (or a cache). Received: "
                f"use_causal_mask={use_causal_mask}"
            )
        q, k, v = self._project_qkv(query, key, value)
        q, k = self._rotate(self._head_norm(q, "query"), self._head_norm(k, "key"), 0, 1)
        if self._groups > 1:  # each key/value head serves its query heads
            k = ops.repeat(k, self._groups, axis=2)
            v = ops.repeat(v, self._groups, axis=2)
        mask = masking.attention_mask(
            query_mask,
            value_mask,
            attention_mask,
            use_causal_mask,
            ops.shape(q)[1],
            ops.shape(k)[1],
            window=self.window,
        )
        if mask is not None:
            mask = ops.expand_dims(mask, 1)  # (batch, 1, Tq, Tk)
        context, weights = attention_core.multi_head(
            q,
            k,
            v,
            mask,
            1.0 / math.sqrt(self.key_dim),
            self.fused,
            return_attention_scores,
            self.dropout,
            self.seed_generator,
            training,
        )
        if self.output_gate:
            gate = self._project(query, self.gate_kernel, self.gate_bias)
            context = context * ops.sigmoid(ops.cast(gate, context.dtype))
        output = ops.einsum("bqhd,hdo->bqo", context, self._kernel("output"))
        if self.output_bias is not None:
            output = output + self.output_bias
        if return_attention_scores:
            return output, weights
        return output

    def _check_cache(self, query, cache, cache_index):
        """A `(keys, values)` pair of (batch, heads, length, dim) tensors;
        a self-attention cache has the queries' batch, a cross-attention
        one a divisor of it."""
        name = "MultiHeadAttention"
        if not isinstance(cache, (list, tuple)) or len(cache) != 2:
            raise ValueError(
                f"`{name}` expects `cache` to be a pair `(keys, values)` from `init_cache` "
                f"or `compute_cache`. Received: {type(cache).__name__}"
                + (f" of {len(cache)} items" if isinstance(cache, (list, tuple)) else "")
            )
        batch = validation.static_shape(query)[0]
        for arg, x, dim in (("keys", cache[0], self.key_dim), ("values", cache[1], self.value_dim)):
            rows = batch if cache_index is not None else None
            expected = (rows, self.num_key_value_heads, None, dim)
            validation.same_dims(
                name,
                f"cache ({arg})",
                x,
                expected,
                "(batch, num_key_value_heads, length, head_dim)",
            )
        rows = validation.static_shape(cache[0])[0]
        if cache_index is None and None not in (rows, batch) and (rows == 0 or batch % rows):
            raise ValueError(
                f"`{name}`: a cross-attention cache of {rows} rows cannot serve {batch} "
                "queries: expected a divisor of the query batch (the beams of a source "
                f"share its cache). Received: cache batch {rows}, query batch {batch}"
            )

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        return (query_shape[0], query_shape[1], self.output_dim or query_shape[-1])

    def compute_output_spec(
        self,
        query,
        value=None,
        key=None,
        *args,
        return_attention_scores=False,
        cache=None,
        **kwargs,
    ):
        value = query if value is None else value
        out = keras.KerasTensor(
            self.compute_output_shape(query.shape, value.shape), dtype=self.compute_dtype
        )
        if cache is not None:
            return out, tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache)
        if return_attention_scores:
            weights = keras.KerasTensor(
                (query.shape[0], self.num_heads, query.shape[1], value.shape[1]),
                dtype=self.compute_dtype,
            )
            return out, weights
        return out

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "seed": self.seed,
                "fused": self.fused,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "num_key_value_heads": self.num_key_value_heads,
                "rotary_embedding": (
                    None
                    if self.rotary_embedding is None
                    else keras.saving.serialize_keras_object(self.rotary_embedding)
                ),
                "window": self.window,
                "use_output_bias": self.use_output_bias,
                "lora_rank": self.lora_rank,
                "lora_alpha": self.lora_alpha,
                "query_key_norm": self.query_key_norm,
                "output_gate": self.output_gate,
            }
        )
        return config
