"""Transformer blocks against keras-hub with copied weights, incremental
decoding against the full pass, masks, serialization and export."""

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from seqkeras.layers import (
    Attention,
    MultiHeadAttention,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from tests.export.export_checks import check_export
from tests.layer_checks import mask_of, run_layer_test

RNG = np.random.default_rng(0)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def copy_by_sublayer(ours, theirs):
    """Randomizes `ours` and copies into `theirs`, sublayer by sublayer
    (same sublayer names; weights in the same order and shapes)."""

    def groups(layer):
        out = {}
        for w in layer.weights:
            out.setdefault(w.path.split("/")[1], []).append(w)
        return out

    a, b = groups(ours), groups(theirs)
    assert sorted(a) == sorted(b)
    for name in a:
        assert len(a[name]) == len(b[name])
        for wa, wb in zip(a[name], b[name]):
            assert wa.shape == wb.shape, (wa.path, wb.path)
            wa.assign(RNG.normal(size=wa.shape).astype("float32") * 0.3)
            wb.assign(wa.numpy())


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_matches_keras_hub(norm_first, activation):
    ours = TransformerEncoderBlock(2, 16, activation=activation, norm_first=norm_first)
    theirs = keras_hub.layers.TransformerEncoder(
        16, 2, activation=activation, normalize_first=norm_first
    )
    x = _x(2, 6, 8)
    ours(x), theirs(x)
    copy_by_sublayer(ours, theirs)
    mask = np.ones((2, 6), bool)
    mask[1, 4:] = False
    np.testing.assert_allclose(ours(x, padding_mask=mask), theirs(x, padding_mask=mask), atol=1e-5)
    causal = np.tril(np.ones((2, 6, 6), bool))
    np.testing.assert_allclose(
        ours(x, use_causal_mask=True), theirs(x, attention_mask=causal), atol=1e-5
    )


@pytest.mark.parametrize("cross", [True, False])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_matches_keras_hub(cross, norm_first):
    ours = TransformerDecoderBlock(2, 16, norm_first=norm_first)
    theirs = keras_hub.layers.TransformerDecoder(16, 2, normalize_first=norm_first)
    y, h = _x(2, 6, 8), _x(2, 5, 8, seed=1)
    enc = h if cross else None
    ours(y, enc), theirs(y, enc)
    copy_by_sublayer(ours, theirs)
    dec_mask = np.array([[True] * 6, [True] * 4 + [False] * 2])
    enc_mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    kwargs = {"decoder_padding_mask": dec_mask}
    if cross:
        kwargs["encoder_padding_mask"] = enc_mask
    np.testing.assert_allclose(ours(y, enc, **kwargs), theirs(y, enc, **kwargs), atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("cross", [True, False])
def test_decoder_incremental_equals_full_pass(cross, norm_first):
    block = TransformerDecoderBlock(2, 16, norm_first=norm_first)
    y, h = _x(2, 6, 8), _x(2, 5, 8, seed=1)
    enc = h if cross else None
    block(y, enc)
    for w in block.weights:
        w.assign(RNG.normal(size=w.shape).astype("float32") * 0.3)
    full = np.asarray(block(y, enc))
    cache = block.init_cache(2, 6)
    # Encoder keys and values projected once for the whole decode.
    cross = block.compute_cross_attention_cache(h) if cross else None
    step = tf.function(
        lambda t, c, i: block(
            t,
            enc,
            self_attention_cache=c,
            self_attention_cache_index=i,
            cross_attention_cache=cross,
        ),
        jit_compile=True,
    )
    for i in range(6):
        out, cache = step(y[:, i : i + 1], cache, tf.constant(i))
        np.testing.assert_allclose(out[:, 0], full[:, i], atol=1e-5)


def test_decoder_is_causal():
    block = TransformerDecoderBlock(2, 16)
    y = _x(1, 6, 8)
    base = np.asarray(block(y))
    y2 = y.copy()
    y2[0, 4] += 3.0
    out = np.asarray(block(y2))
    np.testing.assert_allclose(out[0, :4], base[0, :4], atol=1e-6)


def test_masks_flow_through_blocks():
    inp = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(20, 8, mask_zero=True)(inp)
    x = TransformerEncoderBlock(2, 16)(x)
    x = TransformerDecoderBlock(2, 16)(x)
    assert mask_of(x) is not None
    y = MultiHeadAttention(2, 4)(x, x)
    assert mask_of(y) is not None
    z = Attention()(y, x)
    assert mask_of(z) is not None
    model = keras.Model(inp, z)
    ids = np.array([[3, 4, 5, 0, 0]])
    # Padding never changes the real positions' outputs.
    np.testing.assert_allclose(
        np.asarray(model(ids))[:, :3], np.asarray(model(ids[:, :3])), atol=1e-5
    )


def test_encoder_layer_contract():
    # self-attention (4 kernels, 4 biases), 2 feed-forward Dense (kernel,
    # bias), 2 LayerNorms (gamma, beta)
    run_layer_test(
        lambda: TransformerEncoderBlock(2, 16, dropout=0.1), _x(2, 5, 8), num_weights=(16, 0)
    )


def test_decoder_layer_contract():
    run_layer_test(
        lambda: TransformerDecoderBlock(2, 16, activation="gelu"), _x(2, 5, 8), num_weights=(16, 0)
    )
    # with cross-attention: 8 more attention weights and a third LayerNorm
    run_layer_test(
        lambda: TransformerDecoderBlock(2, 16, dropout=0.1),
        (_x(2, 5, 8), _x(2, 4, 6, seed=1)),
        num_weights=(26, 0),
    )


def test_blocks_export_builtin_tflite(tmp_path):
    inp = keras.Input((None, 8))
    enc = TransformerEncoderBlock(2, 16)(inp)
    out = TransformerDecoderBlock(2, 16)(inp, enc)
    model = keras.Model(inp, out)
    check_export(model, tmp_path / "saved", 8, RNG, shapes=[(1, 3), (2, 9)])


def test_block_bad_input():
    with pytest.raises(ValueError, match="`activation`: expected one of"):
        TransformerEncoderBlock(2, 16, activation="tanh")
    with pytest.raises(ValueError, match="`intermediate_dim`"):
        TransformerEncoderBlock(2, 0)
    with pytest.raises(ValueError, match="rank 3"):
        TransformerEncoderBlock(2, 8)(np.zeros((2, 8), "float32"))
    with pytest.raises(ValueError, match="d >= num_heads"):
        TransformerEncoderBlock(8, 8)(np.zeros((1, 2, 4), "float32"))
    block = TransformerDecoderBlock(2, 16)
    block(_x(1, 3, 8))
    with pytest.raises(ValueError, match="built without cross-attention"):
        block(_x(1, 3, 8), _x(1, 2, 8))
