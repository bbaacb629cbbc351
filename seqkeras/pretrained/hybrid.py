"""Weights of the matrix-memory layers from their reference checkpoints'
tensors: `transformers`' Qwen3-Next gated DeltaNet and xLSTM-7B mLSTM
layers, and the `xlstm` package's sLSTM layer (its vanilla backend's
layout).

Each `copy_*` function takes the layer, `get(name)` (a tensor of the
checkpoint as a NumPy array), `put(variable, value)` (the caller checks
shapes and assigns) and the prefix of the layer's tensors.
"""

import numpy as np


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
