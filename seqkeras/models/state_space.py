"""Language models of blocks that generate with a fixed-size state:
`mamba_language_model` (Mamba, Mamba-2), `griffin_language_model`
(Griffin, Hawk: RG-LRU blocks, optionally mixed with local attention) and
`hybrid_language_model` (gated DeltaNet, mLSTM, sLSTM, Mamba and
attention blocks in a pattern).

Both are `StateSpaceLanguageModel`s: token embedding (scaled by a
constant for Griffin), residual blocks, a final RMSNorm and logits tied
to the embedding or not (soft-capped for Griffin). Each block follows the
one state contract (`seqkeras.layers.state`): `init_cache(batch,
max_length, layout)` and `block(x, cache=, cache_index=)`, so the model's
one cached step is `seqkeras.models.steps.decoder_step`, a prompt is
prefilled in one parallel pass, and `generate`, the SavedModel
signatures and the TFLite step model work unchanged. A recurrent block's
state does not grow: a step costs the same at every position.
"""

import keras
from keras import ops

from seqkeras import layers as sk
from seqkeras.layers import validation
from seqkeras.models import backbones as bb
from seqkeras.models import steps
from seqkeras.models.language_models import KeyValueLanguageModel


@keras.saving.register_keras_serializable(package="seqkeras")
class StateSpaceLanguageModel(KeyValueLanguageModel):
    """The class of `mamba_language_model` and `griffin_language_model`.
    Parts: `embedding`, `blocks`, `norm`, `logits` (a bias-free Dense, or
    None: tied).

    Args:
        *args: `SequenceModel`'s (`vocabulary_sizes`, `parts`) and Keras'.
        max_length: the longest sequence `generate` and the streamed step
            take when a block keeps key/value caches (Griffin's local
            attention); None (all-recurrent models): no bound.
        embedding_scale: the factor the token embedding is multiplied by
            (Griffin's sqrt(d)), or None.
        logit_soft_cap: logits become `cap * tanh(logits / cap)`, or None.
        **kwargs: `keras.Model`'s functional arguments.
    """

    def __init__(self, *args, max_length=None, embedding_scale=None, logit_soft_cap=None, **kwargs):
        super().__init__(*args, **kwargs)
        where = type(self).__name__
        if max_length is not None:
            max_length = validation.positive_int(where, "max_length", max_length)
        self.max_length = max_length
        self.embedding_scale = None if embedding_scale is None else float(embedding_scale)
        self.logit_soft_cap = (
            None
            if logit_soft_cap is None
            else validation.greater_than(where, "logit_soft_cap", logit_soft_cap, 0.0)
        )

    @property
    def max_generation_length(self):
        return self.max_length

    def get_config(self):
        config = super().get_config()
        config.update(
            max_length=self.max_length,
            embedding_scale=self.embedding_scale,
            logit_soft_cap=self.logit_soft_cap,
        )
        return config

    def stream_start(self, inputs, batch_size, max_length=None):
        """`[position, *states]` (`KeyValueLanguageModel.stream_start`); an
        all-recurrent model needs no `max_length` (its states do not grow)."""
        if steps.stream_length(self, max_length) is None:
            if any(_keeps_keys(b) for b in self.part("blocks")):
                raise ValueError(
                    f"model {self.name!r} has attention blocks: `stream_start` needs "
                    "`max_length` (the positions their key/value caches hold), or build the "
                    "model with `max_length`"
                )
            max_length = 1
        return super().stream_start(inputs, batch_size, max_length)

    def _scale(self, x, start_index=None):
        return x * ops.cast(self.embedding_scale, x.dtype)

    def _positions(self):
        """The step's hook after the embedding (`KeyValueLanguageModel`):
        Griffin's embedding scale (positions are rotary, in the attention)."""
        return self._scale if self.embedding_scale is not None else None

    def _head(self, step_weights=None):
        """The logits head of the step, soft-capped as the full pass is."""
        head = super()._head(step_weights)
        if self.logit_soft_cap is None:
            return head
        cap = self.logit_soft_cap
        return lambda h: ops.tanh(head(h) / cap) * cap


def _keeps_keys(block):
    """Whether a block's decoding state holds key/value caches (attention:
    it needs the positions it keeps)."""
    if isinstance(block, sk.LlamaDecoderBlock):
        return True
    return getattr(block, "kind", None) == "attention"


class _named:
    """Re-raises a block's argument error (ValueError, TypeError) with the
    builder's name in front, so the message names what the user called."""

    def __init__(self, where):
        self.where = where

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if isinstance(error, (ValueError, TypeError)) and f"`{self.where}`" not in str(error):
            raise type(error)(f"`{self.where}`: {error}") from None
        return False


def _block_kinds(where, block_types, choices, num_layers):
    """`block_types` (a non-empty list of `choices`) cycled over the
    `num_layers` blocks; a ValueError naming `where` otherwise."""
    if isinstance(block_types, str) or not block_types:
        raise ValueError(
            f"`{where}` received an invalid value for `block_types`: expected a non-empty "
            f"list of {choices}. Received: block_types={block_types!r}"
        )
    kinds = [bb.check(where, "block_types", k, "choice", choices) for k in block_types]
    return [kinds[i % len(kinds)] for i in range(num_layers)]


def _network(
    where,
    vocab_size,
    hidden_dim,
    blocks,
    norm_epsilon,
    tie_weights,
    mask_padding,
    name,
    max_length=None,
    embedding_scale=None,
    logit_soft_cap=None,
    final_norm="rms",
):
    """The model around `blocks` (built on the embedding's outputs);
    `final_norm`: `"rms"` (RMSNorm) or `"layer"` (LayerNorm, RWKV)."""
    tie_weights = bb.check(where, "tie_weights", tie_weights, "bool")
    mask_padding = bb.check(where, "mask_padding", mask_padding, "bool")
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
    if embedding_scale is not None:
        x = sk.Scale(embedding_scale, name="embedding_scale")(x)
    for block in blocks:
        x = block(x)
    if final_norm == "layer":
        norm = keras.layers.LayerNormalization(epsilon=norm_epsilon, name="final_norm")
    else:
        norm = keras.layers.RMSNormalization(epsilon=norm_epsilon, name="final_norm")
    norm.supports_masking = True
    x = norm(x)
    dense = None
    if tie_weights:
        x = embedding(x, reverse=True)
    else:
        dense = keras.layers.Dense(vocab_size, use_bias=False, name="logits_dense")
        x = dense(x)
    if logit_soft_cap is not None:
        x = sk.SoftCap(logit_soft_cap, name="soft_cap")(x)
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(x)
    return StateSpaceLanguageModel(
        token_ids,
        logits,
        name=name,
        vocabulary_sizes={"token_ids": vocab_size},
        parts={"embedding": embedding, "blocks": blocks, "norm": norm, "logits": dense},
        max_length=max_length,
        embedding_scale=embedding_scale,
        logit_soft_cap=logit_soft_cap,
    )


def mamba_language_model(
    vocab_size,
    hidden_dim,
    num_layers,
    version="mamba",
    state_size=16,
    expand=2,
    conv_kernel=4,
    time_step_rank=None,
    head_dim=64,
    num_groups=1,
    chunk_size=64,
    use_bias=False,
    use_conv_bias=True,
    norm_epsilon=1e-5,
    tie_weights=True,
    mask_padding=True,
    name="mamba_language_model",
):
    """A Mamba (or Mamba-2) language model: `x_0 = E[w]`, `x_l = x_{l-1} +
    Mixer(RMSNorm(x_{l-1}))` (`seqkeras.layers.MambaBlock`), `logits =
    RMSNorm(x_L) E^T` (or a bias-free output matrix when not tied). The
    arguments are `transformers`' `MambaConfig` / `Mamba2Config` fields
    (`seqkeras.pretrained.mamba_language_model_from` builds from one).

    Args:
        vocab_size: token ids in [0, vocab_size).
        hidden_dim, num_layers: width and blocks.
        version: `"mamba"` (S6) or `"mamba2"` (SSD).
        state_size: N, the state per channel (Mamba) or per head (Mamba-2).
        expand: the mixer's inner width, `expand * hidden_dim`.
        conv_kernel: the causal convolution's taps.
        time_step_rank: Mamba: the dt projection's rank (default
            ceil(hidden_dim / 16)).
        head_dim, num_groups, chunk_size: Mamba-2's heads' width, groups
            sharing B and C, and the SSD chunk.
        use_bias, use_conv_bias: biases on the projections / convolution.
        norm_epsilon: of every RMSNorm.
        tie_weights: the output matrix is the token embedding.
        mask_padding: id 0 is padding (a padded step leaves every state
            unchanged). False: id 0 is a token.
        name: the model's name.

    Returns:
        A `StateSpaceLanguageModel`: `token_ids` (batch, time) -> float32
        `logits` (batch, time, vocab_size); its decoding state is each
        block's convolution window and SSM state (no key/value cache).

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.mamba_language_model(
        ...     vocab_size=50, hidden_dim=16, num_layers=2, state_size=4)
        >>> tuple(model(np.array([[4, 5, 6]])).shape)
        (1, 3, 50)
        >>> ids = seqkeras.models.generate(model, prompt=np.array([[4, 5]]),
        ...                                max_length=6, eos_id=None)
        >>> np.asarray(ids).shape
        (1, 6)
    """
    where = "mamba_language_model"
    vocab_size = bb.check(where, "vocab_size", vocab_size, "int")
    hidden_dim = bb.check(where, "hidden_dim", hidden_dim, "int")
    num_layers = bb.check(where, "num_layers", num_layers, "int")
    version = bb.check(where, "version", version, "choice", ("mamba", "mamba2"))
    # Mamba-2's arguments, checked whatever the version
    head_dim = bb.check(where, "head_dim", head_dim, "int")
    num_groups = bb.check(where, "num_groups", num_groups, "int")
    chunk_size = bb.check(where, "chunk_size", chunk_size, "int")
    mixer = dict(
        state_size=state_size,
        expand=expand,
        conv_kernel=conv_kernel,
        use_bias=use_bias,
        use_conv_bias=use_conv_bias,
        kernel_initializer=keras.initializers.RandomNormal(stddev=0.02),
    )
    if version == "mamba":
        mixer["time_step_rank"] = time_step_rank
    else:
        mixer.update(head_dim=head_dim, num_groups=num_groups, chunk_size=chunk_size)
    with _named(where):
        blocks = [
            sk.MambaBlock(version, norm_epsilon=norm_epsilon, name=f"block_{i}", **mixer)
            for i in range(num_layers)
        ]
        return _network(
            where, vocab_size, hidden_dim, blocks, norm_epsilon, tie_weights, mask_padding, name
        )


def griffin_language_model(
    vocab_size,
    hidden_dim,
    num_layers,
    num_heads,
    intermediate_dim=None,
    block_types=("recurrent", "recurrent", "attention"),
    lru_width=None,
    conv_kernel=4,
    num_key_value_heads=1,
    head_dim=None,
    window=2048,
    rotary_fraction=0.5,
    rope_base=10000.0,
    norm_epsilon=1e-6,
    embedding_scale=None,
    logit_soft_cap=30.0,
    max_length=None,
    tie_weights=True,
    mask_padding=True,
    name="griffin_language_model",
):
    """A Griffin (or, with `block_types=("recurrent",)`, Hawk) language
    model: `x_0 = s E[w]`, residual `GriffinBlock`s whose temporal part is
    an RG-LRU block or local attention as `block_types` cycles, a final
    RMSNorm, tied logits soft-capped (RecurrentGemma's architecture; the
    arguments are its `transformers` config's, `intermediate_dim` being the
    MLP's width, half its `intermediate_size`).

    Args:
        vocab_size: token ids in [0, vocab_size).
        hidden_dim, num_layers: width and blocks.
        num_heads: the attention's query heads and the RG-LRU gates' blocks.
        intermediate_dim: the MLP's gated width (default 3 * hidden_dim).
        block_types: the temporal kinds, cycled over the blocks
            (`"recurrent"`, `"attention"`).
        lru_width: the RG-LRU width (default hidden_dim).
        conv_kernel: the RG-LRU blocks' convolution taps.
        num_key_value_heads, head_dim, window, rotary_fraction, rope_base:
            the local attention's (keys seen per query, itself included;
            the rotated part of each head).
        norm_epsilon: of every RMSNorm.
        embedding_scale: the embedding's factor (default sqrt(hidden_dim)
            rounded to bfloat16, as RecurrentGemma was trained).
        logit_soft_cap: logits become `cap * tanh(logits / cap)` (None: off).
        max_length: the longest sequence when there are attention blocks
            (their key/value caches); unused by Hawk.
        tie_weights: the output matrix is the token embedding.
        mask_padding: id 0 is padding. False: id 0 is a token.
        name: the model's name.

    Returns:
        A `StateSpaceLanguageModel`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.griffin_language_model(
        ...     vocab_size=50, hidden_dim=16, num_layers=3, num_heads=2,
        ...     window=4, max_length=32)
        >>> ids = seqkeras.models.generate(model, prompt=np.array([[4, 5]]),
        ...                                max_length=6, eos_id=None)
        >>> np.asarray(ids).shape
        (1, 6)
    """
    where = "griffin_language_model"
    vocab_size = bb.check(where, "vocab_size", vocab_size, "int")
    hidden_dim = bb.check(where, "hidden_dim", hidden_dim, "int")
    num_layers = bb.check(where, "num_layers", num_layers, "int")
    kinds = _block_kinds(where, block_types, ("recurrent", "attention"), num_layers)
    if "attention" in kinds and max_length is not None:
        max_length = bb.check(where, "max_length", max_length, "int")
    if embedding_scale is None:
        embedding_scale = float(
            ops.convert_to_numpy(ops.cast(ops.cast(hidden_dim**0.5, "bfloat16"), "float32"))
        )
    block = dict(
        num_heads=num_heads,
        intermediate_dim=intermediate_dim,
        width=lru_width,
        conv_kernel=conv_kernel,
        num_key_value_heads=num_key_value_heads,
        head_dim=head_dim,
        window=window,
        rotary_fraction=rotary_fraction,
        rope_base=rope_base,
        norm_epsilon=norm_epsilon,
        kernel_initializer=keras.initializers.RandomNormal(stddev=0.02),
    )
    with _named(where):
        blocks = [sk.GriffinBlock(kind, name=f"block_{i}", **block) for i, kind in enumerate(kinds)]
        return _network(
            where,
            vocab_size,
            hidden_dim,
            blocks,
            norm_epsilon,
            tie_weights,
            mask_padding,
            name,
            max_length=max_length if "attention" in kinds else None,
            embedding_scale=embedding_scale,
            logit_soft_cap=logit_soft_cap,
        )


#: The block kinds of `hybrid_language_model`.
HYBRID_KINDS = ("deltanet", "mlstm", "slstm", "shortconv", "mamba", "mamba2", "attention")


def _hybrid_block(kind, i, hidden_dim, num_heads, intermediate_dim, norm_epsilon, options):
    """Block i of `hybrid_language_model`: its kind's defaults, then the
    caller's `block_options[kind]`."""
    init = keras.initializers.RandomNormal(stddev=0.02)
    name = f"block_{i}"
    if kind == "attention":
        args = dict(num_heads=num_heads, intermediate_dim=intermediate_dim)
        args.update(norm_epsilon=norm_epsilon, kernel_initializer=init)
        args.update(options)
        return sk.LlamaDecoderBlock(name=name, **args)
    if kind in ("mamba", "mamba2"):
        args = dict(norm_epsilon=norm_epsilon, kernel_initializer=init)
        if kind == "mamba2":
            args["head_dim"] = max(1, 2 * hidden_dim // num_heads)
        args.update(options)
        return sk.MambaBlock(kind, name=name, **args)
    args = dict(intermediate_dim=intermediate_dim, norm_epsilon=norm_epsilon)
    if kind == "deltanet":
        args.update(num_key_heads=num_heads, key_head_dim=max(1, hidden_dim // num_heads))
    elif kind != "shortconv":
        args.update(num_heads=num_heads)
    args["kernel_initializer"] = init
    args.update(options)
    return sk.MixerBlock(kind, name=name, **args)


def hybrid_language_model(
    vocab_size,
    hidden_dim,
    num_layers,
    num_heads,
    block_types=("deltanet", "deltanet", "deltanet", "attention"),
    intermediate_dim=None,
    block_options=None,
    norm_epsilon=1e-6,
    logit_soft_cap=None,
    max_length=None,
    tie_weights=True,
    mask_padding=True,
    name="hybrid_language_model",
):
    """A language model of recurrent blocks and attention blocks in a
    pattern (Qwen3-Next: three gated DeltaNet blocks to one attention
    block; xLSTM: mLSTM blocks, with sLSTM blocks among them; Jamba: Mamba
    and attention): `x_0 = E[w]`, the blocks as `block_types` cycles, a
    final RMSNorm, logits tied to the embedding or not.

    Block kinds: `"deltanet"`, `"mlstm"`, `"slstm"`, `"shortconv"`
    (`seqkeras.layers.MixerBlock`: the mixer and a gated feed-forward;
    `"shortconv"` is LFM2's gated short convolution), `"mamba"`,
    `"mamba2"` (`MambaBlock`), `"attention"` (`LlamaDecoderBlock`: rotary,
    grouped-query, causal attention and a gated feed-forward).

    Args:
        vocab_size: token ids in [0, vocab_size).
        hidden_dim, num_layers: width and blocks.
        num_heads: every block's heads (DeltaNet's key heads of width
            hidden_dim / num_heads; Mamba-2 heads of twice that).
        block_types: the kinds, cycled over the blocks.
        intermediate_dim: the feed-forward width (default 3 * hidden_dim
            rounded to a multiple of 8; 0: no feed-forward in the mixer
            blocks).
        block_options: `{kind: {argument: value}}`: arguments for the
            blocks of a kind (e.g. `{"deltanet": {"num_value_heads": 8},
            "attention": {"num_key_value_heads": 2}}`).
        norm_epsilon: of every norm.
        logit_soft_cap: logits become `cap * tanh(logits / cap)` (xLSTM-7B:
            30), or None.
        max_length: the longest sequence when there are attention blocks
            (their key/value caches); unused otherwise.
        tie_weights: the output matrix is the token embedding.
        mask_padding: id 0 is padding (a padded step leaves every state
            unchanged). False: id 0 is a token.
        name: the model's name.

    Returns:
        A `StateSpaceLanguageModel`: its decoding state is each recurrent
        block's fixed-size state and each attention block's key/value cache.

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.hybrid_language_model(
        ...     vocab_size=50, hidden_dim=16, num_layers=4, num_heads=2,
        ...     block_types=("deltanet", "mlstm", "slstm", "attention"), max_length=32)
        >>> ids = seqkeras.models.generate(model, prompt=np.array([[4, 5]]),
        ...                                max_length=6, eos_id=None)
        >>> np.asarray(ids).shape
        (1, 6)
    """
    where = "hybrid_language_model"
    vocab_size = bb.check(where, "vocab_size", vocab_size, "int")
    hidden_dim = bb.check(where, "hidden_dim", hidden_dim, "int")
    num_layers = bb.check(where, "num_layers", num_layers, "int")
    num_heads = bb.check(where, "num_heads", num_heads, "int")
    kinds = _block_kinds(where, block_types, HYBRID_KINDS, num_layers)
    intermediate_dim = bb.check(where, "intermediate_dim", intermediate_dim, "optional int")
    max_length = bb.check(where, "max_length", max_length, "optional int")
    if intermediate_dim is None:
        intermediate_dim = -(-3 * hidden_dim // 8) * 8
    options = {} if block_options is None else block_options
    if not isinstance(options, dict) or any(
        k not in HYBRID_KINDS or not isinstance(v, dict) for k, v in options.items()
    ):
        raise ValueError(
            f"`{where}` received an invalid value for `block_options`: expected a dict from "
            f"block kinds {HYBRID_KINDS} to dicts of arguments. Received: {block_options!r}"
        )
    attention = "attention" in kinds
    if attention and max_length is not None:
        max_length = bb.check(where, "max_length", max_length, "int")
    with _named(where):
        blocks = [
            _hybrid_block(
                kind,
                i,
                hidden_dim,
                num_heads,
                intermediate_dim,
                norm_epsilon,
                dict(options.get(kind, {})),
            )
            for i, kind in enumerate(kinds)
        ]
        return _network(
            where,
            vocab_size,
            hidden_dim,
            blocks,
            norm_epsilon,
            tie_weights,
            mask_padding,
            name,
            max_length=max_length if attention else None,
            logit_soft_cap=logit_soft_cap,
        )


def rwkv7_language_model(
    vocab_size,
    hidden_dim,
    num_layers,
    intermediate_dim=None,
    head_size=64,
    decay_lora=64,
    aaa_lora=64,
    mv_lora=32,
    gate_lora=128,
    chunk_size=64,
    norm_epsilon=1e-5,
    tie_weights=False,
    mask_padding=True,
    name="rwkv7_language_model",
):
    """An RWKV-7 language model (keras-hub's `RWKV7Backbone`): `x_0 = E[w]`,
    the blocks of `seqkeras.layers.RWKV7Blocks` (time mixing with the
    generalized delta rule, channel mixing), a final LayerNorm, logits.
    Its decoding state is each block's token shifts and (heads, N, N)
    memories: a step costs the same at every position.

    Args:
        vocab_size: token ids in [0, vocab_size).
        hidden_dim, num_layers: width and blocks.
        intermediate_dim: the channel mixing's width (default 4 *
            hidden_dim).
        head_size: N, each head's width.
        decay_lora, aaa_lora, mv_lora, gate_lora: the time mixing's
            low-rank widths.
        chunk_size: the chunked form's chunk.
        norm_epsilon: of every LayerNorm.
        tie_weights: the output matrix is the token embedding (RWKV-7:
            not).
        mask_padding: id 0 is padding. False: id 0 is a token.
        name: the model's name.

    Returns:
        A `StateSpaceLanguageModel`.

    Examples:
        >>> import numpy as np, seqkeras
        >>> model = seqkeras.models.rwkv7_language_model(
        ...     vocab_size=50, hidden_dim=16, num_layers=2, head_size=8,
        ...     decay_lora=4, aaa_lora=4, mv_lora=4, gate_lora=4)
        >>> ids = seqkeras.models.generate(model, prompt=np.array([[4, 5]]),
        ...                                max_length=6, eos_id=None)
        >>> np.asarray(ids).shape
        (1, 6)
    """
    where = "rwkv7_language_model"
    vocab_size = bb.check(where, "vocab_size", vocab_size, "int")
    hidden_dim = bb.check(where, "hidden_dim", hidden_dim, "int")
    num_layers = bb.check(where, "num_layers", num_layers, "int")
    if intermediate_dim is None:
        intermediate_dim = 4 * hidden_dim
    with _named(where):
        stack = sk.RWKV7Blocks(
            num_layers,
            intermediate_dim,
            head_size=head_size,
            decay_lora=decay_lora,
            aaa_lora=aaa_lora,
            mv_lora=mv_lora,
            gate_lora=gate_lora,
            chunk_size=chunk_size,
            norm_epsilon=norm_epsilon,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            name="blocks",
        )
        return _network(
            where,
            vocab_size,
            hidden_dim,
            [stack],
            norm_epsilon,
            tie_weights,
            mask_padding,
            name,
            final_norm="layer",
        )
