"""`decoder_language_model`: the modern decoder-only language model
(Llama, Qwen2, Mistral, SmolLM): token embedding, `LlamaDecoderBlock`s
(rotary positions, grouped-query and optionally sliding-window attention,
RMSNorm, SwiGLU), a final RMSNorm and logits tied to the embedding or
not."""

import keras

from seqkeras import layers as sk
from seqkeras.layers import validation
from seqkeras.models import backbones as bb
from seqkeras.models.language_models import KeyValueLanguageModel


@keras.saving.register_keras_serializable(package="seqkeras")
class DecoderLanguageModel(KeyValueLanguageModel):
    """`decoder_language_model`'s class. Parts: `embedding`, `blocks`,
    `norm`, `logits` (a bias-free Dense, or None: tied). The cache is each
    block's key/value cache (key/value heads only); positions are rotary,
    inside the attention, so a step needs only the cache index.

    Streams one token per call over `max_length` cached positions
    (`KeyValueLanguageModel`).

    Args:
        *args: `SequenceModel`'s (`vocabulary_sizes`, `parts`) and Keras'.
        max_length: the longest sequence `generate` and the streamed step
            accept, its positions (the checkpoint's
            `max_position_embeddings`; `context_length` is its old name,
            deprecated).
        **kwargs: `keras.Model`'s functional arguments.
    """

    def __init__(self, *args, max_length=None, context_length=validation.UNSET, **kwargs):
        super().__init__(*args, **kwargs)
        max_length = validation.renamed(
            type(self).__name__, "max_length", max_length, "context_length", context_length
        )
        if max_length is not None:
            max_length = validation.positive_int(type(self).__name__, "max_length", max_length)
        self.max_length = max_length
        norm = self.part("norm") if "norm" in self._parts else None
        if norm is not None:  # per position: a padding mask passes through
            norm.supports_masking = True

    @property
    def context_length(self):
        """Deprecated: `max_length`."""
        validation.renamed(
            type(self).__name__, "max_length", None, "context_length", self.max_length
        )
        return self.max_length

    @property
    def max_generation_length(self):
        return self.max_length

    def get_config(self):
        config = super().get_config()
        config["max_length"] = self.max_length
        return config

    def _unbounded(self):
        return (
            f"model {self.name!r} streams over `max_length` cached positions; "
            "build it with `max_length`"
        )


def decoder_language_model(
    vocab_size,
    hidden_dim,
    num_layers,
    num_heads,
    intermediate_dim,
    num_key_value_heads=None,
    head_dim=None,
    max_length=2048,
    norm_epsilon=1e-5,
    activation="silu",
    rope_base=10000.0,
    rope_scaling=None,
    rope_layout="half",
    attention_bias=False,
    attention_output_bias=False,
    window=None,
    window_layers=None,
    tie_weights=True,
    dropout=0.0,
    mask_padding=True,
    name="decoder_language_model",
    tie_embeddings=validation.UNSET,
):
    """A Llama-family decoder-only language model.

    `x_0 = E[w]`, `x_l = LlamaDecoderBlock_l(x_{l-1})`, `logits =
    RMSNorm(x_L) E^T` (or a bias-free output matrix when not tied). The
    arguments are the keys of `seqkeras.pretrained`'s Llama/Qwen2/Mistral
    architecture dicts (`llama_language_model` builds from one).

    Args:
        vocab_size: token ids in [0, vocab_size).
        hidden_dim, num_layers, num_heads, intermediate_dim: width, blocks,
            query heads, gated feed-forward width.
        num_key_value_heads: grouped-query attention (default num_heads;
            1: multi-query).
        head_dim: per-head size (default hidden_dim // num_heads).
        max_length: the context length (`generate`'s bound).
        norm_epsilon: of every RMSNorm.
        activation: the feed-forward gate's (`"silu"`: SwiGLU; `"gelu_tanh"`:
            GeGLU).
        rope_base, rope_scaling, rope_layout: the rotary embedding's (see
            `seqkeras.layers.RotaryEmbedding`).
        attention_bias: biases on the query/key/value projections (Qwen2).
        attention_output_bias: a bias on the attention output projection
            (a Llama config's `attention_bias`).
        window: sliding-window attention over this many positions (None:
            full causal attention), in the blocks `window_layers` lists.
        window_layers: the indices of the blocks with the `window` (None,
            the default: every block).
        tie_weights: the output matrix is the token embedding
            (`tie_embeddings` is its old name, deprecated).
        dropout: in the blocks (training only).
        mask_padding: id 0 is padding (masked), the library's convention
            (as `transformer_language_model`). False: id 0 is a token
            (SmolLM2's `<|endoftext|>`; `llama_language_model` passes
            False); pad with any id and give `generate` the
            `prompt_lengths` of right-padded prompts.
        name: the model's name.

    Returns:
        A `DecoderLanguageModel`: `token_ids` (batch, time) -> float32
        `logits` (batch, time, vocab_size).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.decoder_language_model(
        ...     vocab_size=50, hidden_dim=16, num_layers=2, num_heads=4,
        ...     intermediate_dim=32, num_key_value_heads=2)
        >>> tuple(model(np.array([[4, 5, 6]])).shape)
        (1, 3, 50)
        >>> ids = seqkeras.models.generate(model, prompt=np.array([[4, 5]]),
        ...                                max_length=6, eos_id=None)
        >>> np.asarray(ids).shape
        (1, 6)
    """
    where = "decoder_language_model"
    vocab_size = bb.check(where, "vocab_size", vocab_size, "int")
    hidden_dim = bb.check(where, "hidden_dim", hidden_dim, "int")
    num_layers = bb.check(where, "num_layers", num_layers, "int")
    num_heads = bb.check(where, "num_heads", num_heads, "int")
    intermediate_dim = bb.check(where, "intermediate_dim", intermediate_dim, "int")
    max_length = bb.check(where, "max_length", max_length, "int")
    dropout = bb.check(where, "dropout", dropout, "rate")
    num_key_value_heads = bb.check(
        where, "num_key_value_heads", num_key_value_heads, "optional int"
    )
    head_dim = bb.check(where, "head_dim", head_dim, "optional int")
    norm_epsilon = bb.check(where, "norm_epsilon", norm_epsilon, "positive")
    rope_base = validation.greater_than(where, "rope_base", rope_base, 1.0)
    tie_weights = validation.renamed(
        where, "tie_weights", tie_weights, "tie_embeddings", tie_embeddings, True
    )
    tie_weights = bb.check(where, "tie_weights", tie_weights, "bool")
    mask_padding = bb.check(where, "mask_padding", mask_padding, "bool")
    if head_dim is None and hidden_dim % num_heads:
        raise ValueError(
            f"`{where}` needs hidden_dim divisible by num_heads (or a `head_dim`). "
            f"Received: hidden_dim={hidden_dim}, num_heads={num_heads}"
        )
    if window_layers is not None:
        window_layers = [int(i) for i in window_layers]
        bad = [i for i in window_layers if not 0 <= i < num_layers]
        if bad:
            raise ValueError(
                f"`{where}` expects `window_layers` block indices in [0, {num_layers}). "
                f"Received: {bad}"
            )
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    embedding = keras.layers.ReversibleEmbedding(
        vocab_size,
        hidden_dim,
        tie_weights=True,
        mask_zero=mask_padding,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02),
        name="embedding",
    )
    x = embedding(token_ids)
    blocks = []
    for i in range(num_layers):
        windowed = window is not None and (window_layers is None or i in window_layers)
        block = sk.LlamaDecoderBlock(
            num_heads,
            intermediate_dim,
            num_key_value_heads=num_key_value_heads,
            head_dim=head_dim,
            rope_base=rope_base,
            rope_layout=rope_layout,
            rope_scaling=rope_scaling,
            window=window if windowed else None,
            norm_epsilon=norm_epsilon,
            activation=activation,
            attention_bias=attention_bias,
            attention_output_bias=attention_output_bias,
            dropout=dropout,
            kernel_initializer=keras.initializers.RandomNormal(stddev=0.02),
            name=f"decoder_block_{i}",
        )
        x = block(x)
        blocks.append(block)
    norm = keras.layers.RMSNormalization(epsilon=norm_epsilon, name="decoder_norm")
    x = norm(x)
    dense = None
    if tie_weights:
        x = embedding(x, reverse=True)
    else:
        dense = keras.layers.Dense(vocab_size, use_bias=False, name="logits_dense")
        x = dense(x)
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(x)
    return DecoderLanguageModel(
        token_ids,
        logits,
        name=name,
        vocabulary_sizes={"token_ids": vocab_size},
        parts={"embedding": embedding, "blocks": blocks, "norm": norm, "logits": dense},
        max_length=max_length,
    )
