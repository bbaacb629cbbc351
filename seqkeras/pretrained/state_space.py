"""Mamba, Mamba-2, RecurrentGemma (Griffin), xLSTM, Qwen3-Next (its
gated DeltaNet layers) and LFM2 (its short-convolution layers)
checkpoints in the Hugging
Face layout: a `config.json` and its tensors (`model.safetensors`, read
without torch, or any `{name: array}` such as a torch `state_dict()`
turned into NumPy) -> a seqkeras `StateSpaceLanguageModel` with those
weights.

    model = seqkeras.pretrained.read_state_space_directory("mamba-130m-hf/")

The architecture comes from `config.json` (`model_type` `"mamba"`,
`"mamba2"` or `"recurrent_gemma"`); `state_space_language_model(config)`
builds the model, `load_state_space_weights(model, tensors)` copies the
tensors (torch `Linear` weights transposed, depthwise convolutions
(channels, 1, K) as (K, channels), Gemma's RMSNorm `1 + w` as the scale).
Token id 0 is a token (no padding mask), as in the checkpoints.
"""

import json
import math
import os

import numpy as np

from seqkeras import layers as sk
from seqkeras.layers import validation
from seqkeras.models.state_space import griffin_language_model
from seqkeras.models.state_space import hybrid_language_model
from seqkeras.models.state_space import mamba_language_model
from seqkeras.pretrained.hybrid import StagedCopy
from seqkeras.pretrained.hybrid import copy_gated_deltanet
from seqkeras.pretrained.hybrid import copy_mlstm
from seqkeras.pretrained.hybrid import copy_short_convolution
from seqkeras.pretrained.llama_checkpoints import _llama_hf_tensors

#: The `model_type`s read.
MODEL_TYPES = ("mamba", "mamba2", "recurrent_gemma", "xlstm", "qwen3_next", "lfm2")


def _field_of(config, key, default=None, required=True, where="state_space_arguments"):
    if key in config and config[key] is not None:
        return config[key]
    if required and default is None:
        raise ValueError(
            f"`{where}`: the `config` has no {key!r} (model_type {config.get('model_type')!r})"
        )
    return default


def state_space_arguments(config, where="state_space_arguments"):
    """`(builder, kwargs)`: the seqkeras builder (`mamba_language_model`
    or `griffin_language_model`) and its arguments for a `transformers`
    config dict (`MambaConfig`, `Mamba2Config`, `RecurrentGemmaConfig`
    `.to_dict()`, or a checkpoint's `config.json`).

    Args:
        config: the config dict.
        where: the function named in error messages (a caller's own).

    Returns:
        `(builder, kwargs)`.

    Raises:
        TypeError: a `config` that is not a dict.
        ValueError: a model type or field it does not support, named.
    """
    if not isinstance(config, dict):
        raise TypeError(
            f"`{where}` expects `config` to be a config dict. Received: {type(config).__name__}"
        )
    kind = config.get("model_type")
    if kind not in MODEL_TYPES:
        raise ValueError(
            f"`{where}` reads a `config` of model_type one of {MODEL_TYPES}. "
            f"Received: model_type={kind!r}"
        )

    def _field(config, key, default=None, required=True):
        return _field_of(config, key, default, required, where)

    hidden = int(_field(config, "hidden_size"))
    common = dict(
        vocab_size=int(_field(config, "vocab_size")),
        hidden_dim=hidden,
        num_layers=int(_field(config, "num_hidden_layers")),
        mask_padding=False,
    )
    if kind in ("mamba", "mamba2"):
        expand = _field(config, "expand", 2)
        arguments = dict(
            common,
            version=kind,
            state_size=int(_field(config, "state_size", 16)),
            expand=expand,
            conv_kernel=int(_field(config, "conv_kernel", 4)),
            use_bias=bool(_field(config, "use_bias", False, required=False)),
            use_conv_bias=bool(_field(config, "use_conv_bias", True)),
            norm_epsilon=float(_field(config, "layer_norm_epsilon", 1e-5)),
            tie_weights=bool(config.get("tie_word_embeddings", kind == "mamba")),
        )
        if kind == "mamba":
            rank = config.get("time_step_rank", "auto")
            arguments["time_step_rank"] = (
                math.ceil(hidden / 16) if rank in (None, "auto") else int(rank)
            )
        else:
            arguments.update(
                head_dim=int(_field(config, "head_dim")),
                num_groups=int(_field(config, "n_groups", 1)),
                chunk_size=int(_field(config, "chunk_size", 256)),
            )
            inner = int(expand * hidden)
            heads = int(_field(config, "num_heads"))
            if heads * arguments["head_dim"] != inner:
                raise ValueError(
                    f"`{where}`: a Mamba-2 `config` needs num_heads * "
                    f"head_dim == expand * hidden_size. Received: {heads} * "
                    f"{arguments['head_dim']} != {inner}"
                )
        return mamba_language_model, arguments
    if kind == "xlstm":
        return hybrid_language_model, _xlstm_arguments(config, common, _field)
    if kind == "qwen3_next":
        return hybrid_language_model, _qwen3_next_arguments(config, common, _field, where)
    if kind == "lfm2":
        return hybrid_language_model, _lfm2_arguments(config, common, _field, where)
    heads = int(_field(config, "num_attention_heads"))
    head_dim = config.get("head_dim") or hidden // heads
    rope = config.get("rope_parameters") or {}
    arguments = dict(
        common,
        num_heads=heads,
        intermediate_dim=int(_field(config, "intermediate_size")) // 2,
        block_types=list(_field(config, "block_types")),
        lru_width=int(config.get("lru_width") or hidden),
        conv_kernel=int(_field(config, "conv1d_width", 4)),
        num_key_value_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(head_dim),
        window=int(_field(config, "attention_window_size")),
        rotary_fraction=float(
            rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 0.5))
        ),
        rope_base=float(rope.get("rope_theta", config.get("rope_theta", 10000.0))),
        norm_epsilon=float(_field(config, "rms_norm_eps", 1e-6)),
        logit_soft_cap=config.get("logits_soft_cap"),
        max_length=int(config.get("max_position_embeddings") or 8192),
    )
    return griffin_language_model, arguments


def _xlstm_arguments(config, common, field):
    """xLSTM-7B (`xLSTMConfig`): mLSTM blocks, a SwiGLU feed-forward of
    width round_up(hidden * ffn_proj_factor, multiple), logits capped."""
    hidden = common["hidden_dim"]
    multiple = int(field(config, "ffn_round_up_to_multiple_of", 64))
    width = int(
        ((hidden * float(field(config, "ffn_proj_factor", 2.667)) + multiple - 1) // multiple)
        * multiple
    )
    eps = float(field(config, "norm_eps", 1e-6))
    mlstm = dict(
        qk_dim_factor=float(field(config, "qk_dim_factor", 0.5)),
        v_dim_factor=float(field(config, "v_dim_factor", 1.0)),
        gate_soft_cap=field(config, "gate_soft_cap", 15.0),
        chunk_size=int(field(config, "chunk_size", 64)),
        norm_epsilon=eps,
        epsilon=float(field(config, "eps", 1e-6)),
        use_bias=bool(field(config, "use_bias", False, required=False)),
    )
    return dict(
        common,
        num_heads=int(field(config, "num_heads")),
        block_types=["mlstm"],
        intermediate_dim=width,
        block_options={"mlstm": mlstm},
        norm_epsilon=eps,
        logit_soft_cap=field(config, "output_logit_soft_cap", None, required=False),
        tie_weights=bool(config.get("tie_word_embeddings", False)),
    )


def _layer_kinds(config, names, where, model):
    """The block kinds of a config's `layer_types` (`names`: theirs -> ours)."""
    kinds = config.get("layer_types") or []
    if not kinds or any(k not in names for k in kinds):
        raise ValueError(
            f"`{where}`: {model} layer types are one of {sorted(names)}. "
            f"Received: layer_types={kinds!r}"
        )
    return [names[k] for k in kinds]


def _attention_options(config, heads, head_dim, epsilon, **extra):
    """A Qwen3-Next / LFM2 full-attention layer as a `LlamaDecoderBlock`'s
    arguments: q/k RMS norms, rotary positions on `rotary_dim` features."""
    rope = config.get("rope_parameters") or {}
    kv = int(config.get("num_key_value_heads") or heads)
    return dict(
        num_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        rope_base=float(rope.get("rope_theta", config.get("rope_theta", 10000.0))),
        query_key_norm=epsilon,
        **extra,
    )


def _qwen3_next_arguments(config, common, field, where):
    """Qwen3-Next (`Qwen3NextConfig`): gated DeltaNet and gated full
    attention layers (q/k norms, an output gate, rotary positions on a
    `partial_rotary_factor` of each head), each with a dense MLP or, with
    `num_experts`, the sparse mixture of experts and its shared expert
    (in every layer: a config mixing dense and sparse layers is refused)."""
    kinds = _layer_kinds(
        config,
        {"linear_attention": "deltanet", "full_attention": "attention"},
        where,
        "Qwen3-Next's",
    )
    experts = None
    if int(config.get("num_experts") or 0) > 0:
        step, dense = int(config.get("decoder_sparse_step") or 1), config.get("mlp_only_layers")
        if step != 1 or dense:
            raise ValueError(
                f"`{where}`: Qwen3-Next's mixture of experts is read when every layer has it "
                f"(decoder_sparse_step=1, no mlp_only_layers). Received: decoder_sparse_step="
                f"{step}, mlp_only_layers={dense!r}"
            )
        experts = dict(
            num_experts=int(config["num_experts"]),
            top_k=int(field(config, "num_experts_per_tok")),
            intermediate_dim=int(field(config, "moe_intermediate_size")),
            shared_intermediate_dim=int(field(config, "shared_expert_intermediate_size")),
            normalize_top_k=bool(config.get("norm_topk_prob", True)),
        )
    eps = float(field(config, "rms_norm_eps", 1e-6))
    deltanet = dict(
        num_key_heads=int(field(config, "linear_num_key_heads")),
        key_head_dim=int(field(config, "linear_key_head_dim")),
        num_value_heads=int(field(config, "linear_num_value_heads")),
        value_head_dim=int(field(config, "linear_value_head_dim")),
        conv_kernel=int(field(config, "linear_conv_kernel_dim", 4)),
        norm_epsilon=eps,
    )
    options = {"deltanet": deltanet}
    arguments = dict(
        common,
        num_heads=deltanet["num_key_heads"],
        block_types=kinds,
        intermediate_dim=int(field(config, "intermediate_size")),
        norm_epsilon=eps,
        tie_weights=bool(config.get("tie_word_embeddings", False)),
    )
    if "attention" in kinds:
        head_dim = int(field(config, "head_dim"))
        rope = config.get("rope_parameters") or {}
        partial = float(
            rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 0.25))
        )
        rotary = int(head_dim * partial)
        bias = bool(config.get("attention_bias", False))
        options["attention"] = _attention_options(
            config,
            int(field(config, "num_attention_heads")),
            head_dim,
            eps,
            rotary_dim=rotary if rotary < head_dim else None,
            output_gate=True,
            attention_bias=bias,
            attention_output_bias=bias,
        )
        arguments["max_length"] = int(config.get("max_position_embeddings") or 32768)
    if experts is not None:
        for kind in options:
            options[kind]["experts"] = experts
    arguments["block_options"] = options
    return arguments


def _lfm2_arguments(config, common, field, where):
    """LFM2 (`Lfm2Config`): gated short-convolution layers and full
    attention layers (q/k norms)."""
    kinds = _layer_kinds(
        config, {"conv": "shortconv", "full_attention": "attention"}, where, "LFM2's"
    )
    width = int(field(config, "intermediate_size"))
    if config.get("block_auto_adjust_ff_dim", True):
        width = int(2 * width / 3)
        multiplier = config.get("block_ffn_dim_multiplier")
        if multiplier is not None:
            multiple = int(field(config, "block_multiple_of", 256))
            width = int(multiplier * width)
            width = multiple * ((width + multiple - 1) // multiple)
    conv = dict(
        conv_kernel=int(field(config, "conv_L_cache", 3)),
        use_bias=bool(field(config, "conv_bias", False, required=False)),
    )
    eps = float(field(config, "norm_eps", 1e-5))
    options = {"shortconv": conv}
    arguments = dict(
        common,
        num_heads=1,
        block_types=kinds,
        intermediate_dim=width,
        norm_epsilon=eps,
        tie_weights=bool(config.get("tie_word_embeddings", True)),
    )
    if "attention" in kinds:
        heads = int(field(config, "num_attention_heads"))
        head_dim = int(config.get("head_dim") or common["hidden_dim"] // heads)
        options["attention"] = _attention_options(config, heads, head_dim, eps)
        arguments["max_length"] = int(config.get("max_position_embeddings") or 128000)
    arguments["block_options"] = options
    return arguments


def state_space_language_model(config, **overrides):
    """The seqkeras model of a Mamba / Mamba-2 / RecurrentGemma config dict
    (random weights; `load_state_space_weights` copies a checkpoint's).

    Args:
        config: the config dict (see `state_space_arguments`).
        **overrides: builder arguments to change (e.g. `max_length`).

    Returns:
        The model.
    """
    builder, arguments = state_space_arguments(config, "state_space_language_model")
    arguments.update(overrides)
    return builder(**arguments)


def _mixer(block, get, put, p, version):
    m = block.mixer
    put(block.norm.scale, get(p + "norm.weight"))
    put(m.in_proj_kernel, get(p + "mixer.in_proj.weight").T)
    if m.in_proj_bias is not None:
        put(m.in_proj_bias, get(p + "mixer.in_proj.bias"))
    put(m.conv_kernel_weights, get(p + "mixer.conv1d.weight")[:, 0, :].T)
    if m.conv_bias is not None:
        put(m.conv_bias, get(p + "mixer.conv1d.bias"))
    put(m.A_log, get(p + "mixer.A_log"))
    put(m.D, get(p + "mixer.D"))
    put(m.out_proj_kernel, get(p + "mixer.out_proj.weight").T)
    if m.out_proj_bias is not None:
        put(m.out_proj_bias, get(p + "mixer.out_proj.bias"))
    if version == "mamba":
        put(m.x_proj_kernel, get(p + "mixer.x_proj.weight").T)
        put(m.dt_proj_kernel, get(p + "mixer.dt_proj.weight").T)
        put(m.dt_proj_bias, get(p + "mixer.dt_proj.bias"))
    else:
        put(m.dt_bias, get(p + "mixer.dt_bias"))
        put(m.norm_scale, get(p + "mixer.norm.weight"))


def _griffin(block, get, put, p):
    put(block.temporal_norm.scale, 1.0 + get(p + "temporal_pre_norm.weight"))
    put(block.channel_norm.scale, 1.0 + get(p + "channel_pre_norm.weight"))
    mlp = block.mlp
    for name in ("gate", "up", "down"):
        put(getattr(mlp, name + "_kernel"), get(f"{p}mlp_block.{name}_proj.weight").T)
        put(getattr(mlp, name + "_bias"), get(f"{p}mlp_block.{name}_proj.bias"))
    t, q = block.temporal, p + "temporal_block."
    if block.kind == "recurrent":
        for name in ("linear_y", "linear_x", "linear_out"):
            put(getattr(t, name + "_kernel"), get(q + name + ".weight").T)
            put(getattr(t, name + "_bias"), get(q + name + ".bias"))
        put(t.conv_kernel_weights, get(q + "conv_1d.weight")[:, 0, :].T)
        put(t.conv_bias, get(q + "conv_1d.bias"))
        lru = t.rg_lru
        put(lru.recurrent_param, get(q + "rg_lru.recurrent_param"))
        for gate in ("input_gate", "recurrent_gate"):
            put(getattr(lru, gate + "_kernel"), get(f"{q}rg_lru.{gate}_weight"))
            put(getattr(lru, gate + "_bias"), get(f"{q}rg_lru.{gate}_bias"))
        return
    d = t.query_kernel.shape[0]
    for name, var in (("q", t.query_kernel), ("k", t.key_kernel), ("v", t.value_kernel)):
        put(var, get(f"{q}{name}_proj.weight").T.reshape(var.shape))
    put(t.output_kernel, get(q + "o_proj.weight").T.reshape(t.output_kernel.shape))
    put(t.output_bias, get(q + "o_proj.bias").reshape(d))


def load_state_space_weights(model, tensors):
    """Copies a Hugging Face Mamba / Mamba-2 / RecurrentGemma checkpoint's
    tensors (`{name: array}`; with or without the `model.` prefix) into
    `model` (built by `state_space_language_model` from its config).

    Args:
        model: the model `state_space_language_model` built.
        tensors: `{name: array}`.

    Returns:
        `model`.

    Raises:
        ValueError: a missing tensor or a shape that differs, named.
    """
    tensors = {
        (k[len("model.") :] if k.startswith("model.") else k): np.asarray(v)
        for k, v in tensors.items()
    }

    def get(name):
        if name not in tensors:
            raise ValueError(f"`load_state_space_weights`: `tensors` has no tensor {name!r}")
        return tensors[name]

    blocks = model.part("blocks")
    put = StagedCopy("load_state_space_weights")
    kinds = {getattr(b, "kind", None) for b in blocks}
    if kinds & {"mlstm", "deltanet", "shortconv"}:
        _load_hybrid(model, blocks, get, put)
        put.assign()
        return model
    griffin = model.embedding_scale is not None
    if griffin:
        embedding, prefix, final = "embed_tokens.weight", "layers.", "final_norm.weight"
    else:
        embedding, prefix = "backbone.embeddings.weight", "backbone.layers."
        final = "backbone.norm_f.weight"
    put(model.part("embedding").embeddings, get(embedding))
    for i, block in enumerate(blocks):
        if griffin:
            _griffin(block, get, put, f"{prefix}{i}.")
        else:
            _mixer(block, get, put, f"{prefix}{i}.", block.version)
    norm = get(final)
    put(model.part("norm").scale, 1.0 + norm if griffin else norm)
    dense = model.part("logits")
    if dense is not None:
        put(dense.kernel, get("lm_head.weight").T)
    put.assign()  # every shape checked before any copy
    return model


#: the gated feed-forward's tensors: LFM2's (True) and Qwen3-Next's
_FFN_NAMES = {
    True: dict(gate="feed_forward.w1", up="feed_forward.w3", down="feed_forward.w2"),
    False: dict(gate="mlp.gate_proj", up="mlp.up_proj", down="mlp.down_proj"),
}


def _copy_attention(mha, get, put, p, lfm2, one):
    """A full-attention layer's tensors into a `MultiHeadAttention`:
    Qwen3-Next's query projection holds each head's queries and then its
    output gate's rows (`head_dim * 2` per head); LFM2's norms are
    `q_layernorm` / `k_layernorm` and its output `out_proj`."""
    d, h, hd = mha.query_kernel.shape
    query = get(p + "q_proj.weight")
    if mha.output_gate:
        query = query.reshape(h, 2, hd, d)
        put(mha.gate_kernel, query[:, 1].reshape(h * hd, d).T.reshape(d, h, hd))
        query = query[:, 0].reshape(h * hd, d)
    put(mha.query_kernel, query.T.reshape(d, h, hd))
    for name, var in (("k", mha.key_kernel), ("v", mha.value_kernel)):
        put(var, get(f"{p}{name}_proj.weight").T.reshape(var.shape))
    out = "out_proj" if lfm2 else "o_proj"
    put(mha.output_kernel, get(f"{p}{out}.weight").T.reshape(mha.output_kernel.shape))
    if mha.use_bias:
        bias = get(p + "q_proj.bias")
        if mha.output_gate:
            bias = bias.reshape(h, 2, hd)
            put(mha.gate_bias, bias[:, 1])
            bias = bias[:, 0]
        put(mha.query_bias, bias.reshape(h, hd))
        for name, var in (("k", mha.key_bias), ("v", mha.value_bias)):
            put(var, get(f"{p}{name}_proj.bias").reshape(var.shape))
    if mha.output_bias is not None:
        put(mha.output_bias, get(f"{p}{out}.bias"))
    norms = ("q_layernorm", "k_layernorm") if lfm2 else ("q_norm", "k_norm")
    put(mha.query_norm_scale, one + get(f"{p}{norms[0]}.weight"))
    put(mha.key_norm_scale, one + get(f"{p}{norms[1]}.weight"))


def _copy_feedforward(ffn, get, put, p, lfm2):
    """A layer's MLP: a `GatedFeedForward`'s three kernels, or Qwen3-Next's
    sparse mixture of experts (`mlp.gate`, `mlp.experts.gate_up_proj`
    (experts, 2 * width, d) and `down_proj` (experts, d, width), the
    shared expert and its gate) into a `MixtureOfExperts`."""
    if not isinstance(ffn, sk.MixtureOfExperts):
        for ours, theirs in _FFN_NAMES[lfm2].items():
            put(getattr(ffn, ours + "_kernel"), get(f"{p}{theirs}.weight").T)
        return
    width = ffn.intermediate_dim
    put(ffn.router_kernel, get(p + "mlp.gate.weight").T)
    gate_up = get(p + "mlp.experts.gate_up_proj")
    put(ffn.expert_gate_kernel, np.transpose(gate_up[:, :width], (0, 2, 1)))
    put(ffn.expert_up_kernel, np.transpose(gate_up[:, width:], (0, 2, 1)))
    put(ffn.expert_down_kernel, np.transpose(get(p + "mlp.experts.down_proj"), (0, 2, 1)))
    for name in ("gate", "up", "down"):
        put(
            getattr(ffn.shared_expert, name + "_kernel"),
            get(f"{p}mlp.shared_expert.{name}_proj.weight").T,
        )
    put(ffn.shared_gate_kernel, get(p + "mlp.shared_expert_gate.weight").T)


def _load_hybrid(model, blocks, get, put):
    """xLSTM-7B (`backbone.blocks.i.`), Qwen3-Next (`layers.i.`, its
    RMSNorms' `1 + w`) and LFM2 tensors into a `hybrid_language_model`,
    staged in `put`."""
    kinds = {getattr(block, "kind", "attention") for block in blocks}
    xlstm, lfm2 = "mlstm" in kinds, "shortconv" in kinds
    one = 0.0 if xlstm or lfm2 else 1.0  # Qwen3-Next's RMSNorm scales by 1 + w
    if xlstm:
        names = dict(embedding="backbone.embeddings.weight", final="backbone.out_norm.weight")
    elif lfm2:
        names = dict(embedding="embed_tokens.weight", final="embedding_norm.weight")
    else:
        names = dict(embedding="embed_tokens.weight", final="norm.weight")
    put(model.part("embedding").embeddings, get(names["embedding"]))
    layer_norms = (
        ("operator_norm", "ffn_norm") if lfm2 else ("input_layernorm", "post_attention_layernorm")
    )
    for i, block in enumerate(blocks):
        if xlstm:
            p = f"backbone.blocks.{i}."
            put(block.mixer_norm.scale, get(p + "norm_mlstm.weight"))
            put(block.ffn_norm.scale, get(p + "norm_ffn.weight"))
            copy_mlstm(block.mixer, get, put, p + "mlstm_layer.")
            ffn = dict(gate="ffn.proj_up_gate", up="ffn.proj_up", down="ffn.proj_down")
            for ours, theirs in ffn.items():
                put(getattr(block.ffn, ours + "_kernel"), get(f"{p}{theirs}.weight").T)
            continue
        p = f"layers.{i}."
        attention = isinstance(block, sk.LlamaDecoderBlock)  # a full-attention layer
        norms = (
            (block.attention_norm, block.feedforward_norm)
            if attention
            else (block.mixer_norm, block.ffn_norm)
        )
        for norm, name in zip(norms, layer_norms):
            put(norm.scale, one + get(f"{p}{name}.weight"))
        if attention:
            _copy_attention(block.attention, get, put, p + "self_attn.", lfm2, one)
        elif lfm2:
            copy_short_convolution(block.mixer, get, put, p + "conv.")
        else:
            copy_gated_deltanet(block.mixer, get, put, p + "linear_attn.")
        _copy_feedforward(block.feedforward if attention else block.ffn, get, put, p, lfm2)
    put(model.part("norm").scale, one + get(names["final"]))
    dense = model.part("logits")
    if dense is not None:
        put(dense.kernel, get("lm_head.weight").T)


def read_state_space_directory(directory, **overrides):
    """The model of a Hugging Face Mamba / Mamba-2 / RecurrentGemma
    directory (`config.json` and `model.safetensors` or its shards), its
    weights loaded.

    Args:
        directory: the checkpoint's directory.
        **overrides: builder arguments to change (e.g. `max_length`).

    Returns:
        The model.

    Raises:
        ValueError: a directory without `config.json` (or as
            `load_state_space_weights`).
    """
    directory = validation.path(
        "read_state_space_directory", "directory", directory, "a checkpoint directory"
    )
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        raise ValueError(
            f"`read_state_space_directory`: `directory` {directory} has no config.json"
        )
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    model = state_space_language_model(config, **overrides)
    return load_state_space_weights(model, _llama_hf_tensors(directory))
