"""`LlamaDecoderBlock`: the pre-norm decoder block of Llama, Qwen2,
Mistral and SmolLM.

    h   = x + Attention(RMSNorm(x))        (rotary, grouped-query, causal,
                                            optionally sliding-window)
    out = h + GatedFFN(RMSNorm(h))         (SwiGLU)

`RMSNorm` is Keras' own `keras.layers.RMSNormalization` (x / sqrt(mean(x^2)
+ eps) * scale, computed in float32 under mixed precision), which is what
Llama's norm computes; the attention is `seqkeras.layers.MultiHeadAttention`
(the one attention core and its cached step) and the feed-forward
`seqkeras.layers.GatedFeedForward`.
"""

import keras

from seqkeras.layers import lora
from seqkeras.layers import validation
from seqkeras.layers.attention import MultiHeadAttention
from seqkeras.layers.attention import key_value_heads
from seqkeras.layers.feedforward import GATE_ACTIVATIONS
from seqkeras.layers.feedforward import GatedFeedForward
from seqkeras.layers.feedforward import expert_feedforward
from seqkeras.layers.rotary import LAYOUTS
from seqkeras.layers.rotary import RotaryEmbedding
from seqkeras.layers.rotary import check_scaling

_PACKAGE = "seqkeras"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LlamaDecoderBlock(keras.layers.Layer):
    """A Llama-family decoder block (see the module docstring), with the
    cached decoding step of `MultiHeadAttention`.

    Sublayers: `attention_norm` and `feedforward_norm`
    (`keras.layers.RMSNormalization`), `attention`
    (`MultiHeadAttention`: `query_kernel` (d, heads, head_dim), `key_kernel`
    and `value_kernel` (d, key_value_heads, head_dim), `output_kernel`
    (heads, head_dim, d)), `feedforward` (`GatedFeedForward`).

    Args:
        num_heads: query heads.
        intermediate_dim: the gated feed-forward width.
        num_key_value_heads: key/value heads (grouped-query attention;
            default `num_heads`).
        head_dim: per-head size (default d // num_heads).
        rope_base, rope_layout, rope_scaling: the rotary embedding's
            `base`, `layout` and `scaling` (see `RotaryEmbedding`).
        window: sliding-window attention over the last `window` positions
            (None: full causal attention).
        norm_epsilon: the RMSNorms' epsilon.
        activation: the feed-forward gate's (`"silu"`: SwiGLU).
        attention_bias: biases on the query, key and value projections
            (Qwen2); the feed-forward has none.
        attention_output_bias: a bias on the attention's output projection
            (Llama configs with `attention_bias`; not Qwen2).
        lora_rank, lora_alpha: low-rank adapters on the attention's four
            projections and the feed-forward's three (`seqkeras.layers.lora`).
        dropout: rate of dropout on the attention weights and after each
            sublayer (training only).
        kernel_initializer: of every projection.
        rotary_dim: rotate only the first `rotary_dim` features of each
            head (Qwen3-Next's partial rotary positions; default all).
        query_key_norm, output_gate: `MultiHeadAttention`'s: an RMS norm
            of each head's queries and keys with this epsilon (Qwen3-Next,
            LFM2), a sigmoid gate on each head's output (Qwen3-Next).
        experts: a dict of `MixtureOfExperts` arguments (`num_experts`,
            `top_k`, `intermediate_dim`, ...): a mixture of experts as the
            feed-forward (Qwen3-Next's sparse MLP); `intermediate_dim` is
            then unused.

    Call arguments:
        inputs: (batch, time, d).
        padding_mask: optional bool (batch, time) (default: the input's
            Keras mask): padded keys are not attended to.
        cache, cache_index: a decoding step (the state contract,
            `seqkeras.layers.state`): `cache` from `init_cache`, the
            inputs' first position `cache_index` (one position, or a
            prompt's several at once); returns `(outputs, cache)`.
        step_weights: optional, with `cache`: `prepare_step_weights()`,
            made once per decoding request (fused projections).
        training: enables dropout.

    Examples:
        >>> import numpy as np, seqkeras
        >>> block = seqkeras.layers.LlamaDecoderBlock(4, 32, num_key_value_heads=2)
        >>> x = np.random.default_rng(0).normal(size=(1, 5, 16)).astype("float32")
        >>> full = np.asarray(block(x))
        >>> cache = block.init_cache(1, 5)
        >>> steps = []
        >>> for t in range(5):
        ...     y, cache = block(x[:, t : t + 1], cache=cache, cache_index=t)
        ...     steps.append(np.asarray(y))
        >>> bool(np.allclose(np.concatenate(steps, 1), full, atol=1e-5))
        True
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        num_key_value_heads=None,
        head_dim=None,
        rope_base=10000.0,
        rope_layout="half",
        rope_scaling=None,
        window=None,
        norm_epsilon=1e-5,
        activation="silu",
        attention_bias=False,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        attention_output_bias=False,
        lora_rank=None,
        lora_alpha=None,
        rotary_dim=None,
        query_key_norm=None,
        output_gate=False,
        experts=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "LlamaDecoderBlock"
        self.experts = None if experts is None else dict(experts)
        self.rotary_dim = (
            None if rotary_dim is None else validation.positive_int(name, "rotary_dim", rotary_dim)
        )
        self.query_key_norm = (
            None
            if query_key_norm is None
            else validation.greater_than(name, "query_key_norm", query_key_norm, 0.0)
        )
        self.output_gate = validation.boolean(name, "output_gate", output_gate)
        self.num_heads = validation.positive_int(name, "num_heads", num_heads)
        self.intermediate_dim = validation.positive_int(name, "intermediate_dim", intermediate_dim)
        self.num_key_value_heads = key_value_heads(name, self.num_heads, num_key_value_heads)
        self.head_dim = (
            None if head_dim is None else validation.positive_int(name, "head_dim", head_dim)
        )
        self.rope_base = validation.greater_than(name, "rope_base", rope_base, 1.0)
        self.rope_layout = validation.choice(name, "rope_layout", rope_layout, LAYOUTS)
        self.rope_scaling = check_scaling(name, rope_scaling, "rope_scaling")
        self.window = None if window is None else validation.positive_int(name, "window", window)
        self.norm_epsilon = validation.greater_than(name, "norm_epsilon", norm_epsilon, 0.0)
        self.activation = validation.choice(name, "activation", activation, GATE_ACTIVATIONS)
        self.attention_bias = validation.boolean(name, "attention_bias", attention_bias)
        self.attention_output_bias = validation.boolean(
            name, "attention_output_bias", attention_output_bias
        )
        self.lora_rank, self.lora_alpha = lora.check(name, lora_rank, lora_alpha)
        self.dropout = validation.rate(name, "dropout", dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def _initializer(self):
        return keras.initializers.get(keras.initializers.serialize(self.kernel_initializer))

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                "`LlamaDecoderBlock` expects inputs of rank 3 with known features, "
                f"(batch, time, d). Received: inputs.shape={tuple(input_shape)}"
            )
        d = input_shape[-1]
        head_dim = self.head_dim or d // self.num_heads
        if head_dim == 0:
            raise ValueError(
                f"`LlamaDecoderBlock` needs d >= num_heads. Received: d={d}, "
                f"num_heads={self.num_heads}"
            )
        policy = self.dtype_policy
        self.attention_norm = keras.layers.RMSNormalization(
            epsilon=self.norm_epsilon, dtype=policy, name="attention_norm"
        )
        self.feedforward_norm = keras.layers.RMSNormalization(
            epsilon=self.norm_epsilon, dtype=policy, name="feedforward_norm"
        )
        self.attention = MultiHeadAttention(
            self.num_heads,
            head_dim,
            num_key_value_heads=self.num_key_value_heads,
            use_bias=self.attention_bias,
            use_output_bias=self.attention_output_bias,
            output_dim=d,
            dropout=self.dropout,
            rotary_embedding=RotaryEmbedding(
                self.rope_base,
                self.rope_layout,
                self.rope_scaling,
                rotary_dim=self.rotary_dim,
                dtype=policy,
                name="rotary_embedding",
            ),
            query_key_norm=self.query_key_norm,
            output_gate=self.output_gate,
            window=self.window,
            kernel_initializer=self._initializer(),
            lora_rank=self.lora_rank,
            lora_alpha=self.lora_alpha,
            dtype=policy,
            name="attention",
        )
        if self.experts is not None:
            self.feedforward = expert_feedforward(
                "LlamaDecoderBlock",
                self.experts,
                self.activation,
                self._initializer(),
                policy,
                "feedforward",
            )
        else:
            self.feedforward = GatedFeedForward(
                self.intermediate_dim,
                activation=self.activation,
                kernel_initializer=self._initializer(),
                lora_rank=self.lora_rank,
                lora_alpha=self.lora_alpha,
                dtype=policy,
                name="feedforward",
            )
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=policy, name="dropout")
        for norm in (self.attention_norm, self.feedforward_norm):
            # per position: a padding mask passes through (Keras' RMSNorm
            # does not say so, and warns on a masked input)
            norm.supports_masking = True
        self.attention_norm.build(input_shape)
        self.feedforward_norm.build(input_shape)
        self.attention.build(input_shape)
        self.feedforward.build(input_shape)
        self._built_features = d

    def init_cache(self, batch_size, max_length, layout="fixed"):
        """An empty key/value cache of `layout`
        (`MultiHeadAttention.init_cache`): key/value heads only."""
        return self.attention.init_cache(batch_size, max_length, layout)

    def prepare_step_weights(self):
        """The decoding step's fused projections, `{"attention": ...,
        "feedforward": ...}` (pass them as `step_weights`)."""
        return {
            "attention": self.attention.prepare_step_weights(),
            "feedforward": self.feedforward.prepare_step_weights(),
        }

    def call(
        self,
        inputs,
        padding_mask=None,
        cache=None,
        cache_index=None,
        step_weights=None,
        training=None,
        mask=None,
    ):
        name = "LlamaDecoderBlock"
        validation.numeric(name, "inputs", inputs)
        validation.features(name, "inputs", inputs, self._built_features)
        shape = validation.static_shape(inputs)
        padding_mask = mask if padding_mask is None else padding_mask
        validation.same_dims(name, "padding_mask", padding_mask, shape[:2], "(batch, time)")
        keys = None if padding_mask is None else keras.ops.cast(padding_mask, "bool")
        h = self.attention_norm(inputs)
        new_cache = None
        weights = step_weights or {}
        if cache is not None:
            if cache_index is None:
                raise ValueError(f"`{name}` received a `cache` without a `cache_index`")
            h, new_cache = self.attention(
                h,
                value_mask=keys,
                cache=cache,
                cache_index=cache_index,
                step_weights=weights.get("attention"),
                training=training,
            )
        else:
            if cache_index is not None:
                raise ValueError(f"`{name}` received a `cache_index` without a `cache`")
            h = self.attention(h, value_mask=keys, use_causal_mask=True, training=training)
        x = inputs + self.dropout_layer(h, training=training)
        h = self.feedforward(self.feedforward_norm(x), step_weights=weights.get("feedforward"))
        x = x + self.dropout_layer(h, training=training)
        return (x, new_cache) if cache is not None else x

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, inputs, *args, cache=None, **kwargs):
        out = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if cache is not None:
            return out, tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache)
        return out

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "num_key_value_heads": self.num_key_value_heads,
                "head_dim": self.head_dim,
                "rope_base": self.rope_base,
                "rope_layout": self.rope_layout,
                "rope_scaling": self.rope_scaling,
                "window": self.window,
                "norm_epsilon": self.norm_epsilon,
                "activation": self.activation,
                "attention_bias": self.attention_bias,
                "attention_output_bias": self.attention_output_bias,
                "lora_rank": self.lora_rank,
                "lora_alpha": self.lora_alpha,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "rotary_dim": self.rotary_dim,
                "query_key_norm": self.query_key_norm,
                "output_gate": self.output_gate,
                "experts": self.experts,
            }
        )
        return config
