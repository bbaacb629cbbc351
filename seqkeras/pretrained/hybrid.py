"""Weights of the matrix-memory layers from their reference checkpoints'
tensors: `transformers`' Qwen3-Next gated DeltaNet and xLSTM-7B mLSTM
layers, and the `xlstm` package's sLSTM layer (its vanilla backend's
layout).

Each `copy_*` function takes the layer, `get(name)` (a tensor of the
checkpoint as a NumPy array), `put(variable, value)` (the caller checks
shapes and assigns) and the prefix of the layer's tensors.
"""

import numpy as np


class StagedCopy:
    """`put(variable, value)` for the `copy_*` functions and the checkpoint
    loaders: each value's shape checked against its variable (a ValueError
    naming `where`, the variable and both shapes), nothing assigned until
    `assign()`, so a checkpoint that does not fit changes no weight."""

    def __init__(self, where):
        self.where = where
        self.values = []

    def __call__(self, variable, value):
        value = np.asarray(value, "float32")
        if tuple(variable.shape) != value.shape:
            raise ValueError(
                f"`{self.where}`: {variable.path} has shape {tuple(variable.shape)}; "
                f"the checkpoint's is {value.shape}"
            )
        self.values.append((variable, value))

    def assign(self):
        for variable, value in self.values:
            variable.assign(value)


def copy_gated_deltanet(layer, get, put, prefix):
    """A `GatedDeltaNet` from `transformers`' `Qwen3NextGatedDeltaNet`.

    Qwen3-Next interleaves its projections per key head: `in_proj_qkvz`'s
    rows are, for each key head, its q, k, then the v and z of the value
    heads it serves; `in_proj_ba`'s the b then the a of those heads. They
    are re-laid into `qkv_kernel` (q of every head, k, v), `z_kernel`,
    `b_kernel`, `a_kernel`."""
    nk, nv = layer.num_key_heads, layer.num_value_heads
    dk, dv, r = layer.key_head_dim, layer.value_head_dim, nv // nk
    weight = np.asarray(get(prefix + "in_proj_qkvz.weight"))
    d = weight.shape[-1]
    groups = weight.reshape(nk, 2 * dk + 2 * r * dv, d)
    q, k = groups[:, :dk], groups[:, dk : 2 * dk]
    v, z = groups[:, 2 * dk : 2 * dk + r * dv], groups[:, 2 * dk + r * dv :]
    put(layer.qkv_kernel, np.concatenate([t.reshape(-1, d) for t in (q, k, v)]).T)
    put(layer.z_kernel, z.reshape(-1, d).T)
    ba = np.asarray(get(prefix + "in_proj_ba.weight")).reshape(nk, 2 * r, d)
    put(layer.b_kernel, ba[:, :r].reshape(-1, d).T)
    put(layer.a_kernel, ba[:, r:].reshape(-1, d).T)
    put(layer.dt_bias, get(prefix + "dt_bias"))
    put(layer.A_log, get(prefix + "A_log"))
    put(layer.conv_kernel_weights, np.asarray(get(prefix + "conv1d.weight"))[:, 0].T)
    put(layer.norm_scale, get(prefix + "norm.weight"))
    put(layer.out_kernel, np.asarray(get(prefix + "out_proj.weight")).T)


def copy_mlstm(layer, get, put, prefix):
    """An `MLSTMLayer` from `transformers`' `xLSTMLayer` (xLSTM-7B's,
    `weight_mode="single"`): torch `Linear` weights transposed."""
    pairs = (
        ("q", "q"),
        ("k", "k"),
        ("v", "v"),
        ("o", "ogate_preact"),
        ("i", "igate_preact"),
        ("f", "fgate_preact"),
        ("out", "out_proj"),
    )
    for ours, theirs in pairs:
        put(getattr(layer, ours + "_kernel"), np.asarray(get(f"{prefix}{theirs}.weight")).T)
        bias = getattr(layer, ours + "_bias", None)
        if bias is not None:
            put(bias, get(f"{prefix}{theirs}.bias"))
    put(layer.norm_scale, get(prefix + "multihead_norm.weight"))
    if layer.norm_bias is not None:
        put(layer.norm_bias, get(prefix + "multihead_norm.bias"))


def copy_short_convolution(layer, get, put, prefix):
    """A `ShortConvolution` from `transformers`' `Lfm2ShortConv`."""
    for ours, theirs in (("in", "in_proj"), ("out", "out_proj")):
        put(getattr(layer, ours + "_kernel"), np.asarray(get(f"{prefix}{theirs}.weight")).T)
        if layer.use_bias:
            put(getattr(layer, ours + "_bias"), get(f"{prefix}{theirs}.bias"))
    put(layer.conv_kernel_weights, np.asarray(get(prefix + "conv.weight"))[:, 0].T)
    if layer.use_bias:
        put(layer.conv_bias, get(prefix + "conv.bias"))


def copy_slstm(layer, get, put, prefix):
    """An `SLSTMLayer` from the `xlstm` package's `sLSTMLayer` (its vanilla
    backend's tensors). The package's module `fgate` computes the input
    gate and `igate` the forget gate; its recurrent kernel is stored
    (heads, 4 d_h, d_h) and its bias (4 d,) gate-major."""
    heads, width = layer.num_heads, layer.units // layer.num_heads
    if layer.conv_kernel:
        put(layer.conv_kernel_weights, np.asarray(get(prefix + "conv1d.conv.weight"))[:, 0].T)
        put(layer.conv_bias, get(prefix + "conv1d.conv.bias"))
    for ours, theirs in (("i", "fgate"), ("f", "igate"), ("z", "zgate"), ("o", "ogate")):
        put(
            getattr(layer, ours + "_kernel"),
            np.asarray(get(f"{prefix}{theirs}.weight")).transpose(0, 2, 1),
        )
    recurrent = np.asarray(get(prefix + "slstm_cell._recurrent_kernel_"))
    put(layer.recurrent_kernel, recurrent.reshape(heads, 4, width, width).transpose(0, 3, 1, 2))
    bias = np.asarray(get(prefix + "slstm_cell._bias_"))
    put(layer.bias, bias.reshape(4, heads, width).transpose(1, 0, 2))
    put(layer.norm_scale, 1.0 + np.asarray(get(prefix + "group_norm.weight")))


def copy_rwkv7(model, tensors):
    """An `rwkv7_language_model` from keras-hub's `RWKV7Backbone` weights,
    `tensors` `{variable path: array}` (`{w.path: w.numpy() for w in
    backbone.weights}`): the same variables under other names. Every shape
    is checked before any copy (ValueError naming the variable)."""
    put = StagedCopy("copy_rwkv7")

    def get(name):
        if name not in tensors:
            raise ValueError(f"`copy_rwkv7`: `tensors` has no tensor {name!r}")
        return np.asarray(tensors[name])

    def find(prefix, part):
        names = sorted(k for k in tensors if k.startswith(prefix) and part in k)
        if not names:
            raise ValueError(f"`copy_rwkv7`: `tensors` has no tensor {prefix}*{part}*")
        return get(names[0])

    stack = model.part("blocks")[0]
    put(model.part("embedding").embeddings, get("token_embedding/embeddings"))
    put(stack.initial_norm.gamma, get("rwkv_layer_0/init_norm/gamma"))
    put(stack.initial_norm.beta, get("rwkv_layer_0/init_norm/beta"))
    for i, ((ln1, ln2), tm, cm) in enumerate(
        zip(stack.norms, stack.time_mixing, stack.channel_mixing)
    ):
        p = f"rwkv_layer_{i}/"
        for norm, theirs in ((ln1, "att_norm"), (ln2, "ffn_norm")):
            put(norm.gamma, get(f"{p}{theirs}/gamma"))
            put(norm.beta, get(f"{p}{theirs}/beta"))
        t = p + "RWKV_TIME_MIX/"
        names = ["x_" + c for c in "rwkvag"] + ["w0", "w1", "w2", "a0", "a1", "a2", "g1", "g2"]
        names += ["k_k", "k_a", "r_k"] + (["v0", "v1", "v2"] if tm.value_residual else [])
        for name in names:
            put(getattr(tm, name), get(t + name))
        for ours, theirs in (
            ("receptance", "receptance"),
            ("key", "key"),
            ("value", "value"),
            ("output", "output_layer"),
        ):
            put(getattr(tm, ours + "_kernel"), get(f"{t}{theirs}/kernel"))
        put(tm.norm_gamma, find(t + "group_normalization", "gamma"))
        put(tm.norm_beta, find(t + "group_normalization", "beta"))
        c = p + "RWKV_CMIX/"
        put(cm.x_k, get(c + "time_mix_k"))
        put(cm.key_kernel, get(c + "dense_k/kernel"))
        put(cm.value_kernel, get(c + "dense_v/kernel"))
    put(model.part("norm").gamma, get("output_norm/gamma"))
    put(model.part("norm").beta, get("output_norm/beta"))
    dense = model.part("logits")
    put(
        dense.kernel if dense is not None else model.part("embedding").embeddings,
        get("head/kernel") if dense is not None else get("head/kernel").T,
    )
    put.assign()
    return model
