"""xLSTM-7B, Qwen3-Next (its gated DeltaNet layers and gated full
attention with q/k norms and partial rotary positions, a dense MLP) and
LFM2 (its short-convolution layers and full attention with q/k norms)
checkpoints: tiny random `transformers` models, their tensors read by
`seqkeras.pretrained` (`state_space_language_model`,
`load_state_space_weights`); the logits equal the reference's, and the
cached step continues the prompt as the full pass does."""

import numpy as np
import pytest

from seqkeras.layers import MixtureOfExperts
from seqkeras.pretrained import load_state_space_weights, state_space_language_model


def _tensors(model):
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def _check(reference, config, vocab):
    import torch

    ours = load_state_space_weights(state_space_language_model(config), _tensors(reference))
    ids = np.random.default_rng(0).integers(0, vocab, (2, 21)).astype("int32")
    with torch.no_grad():
        want = reference(torch.tensor(ids, dtype=torch.long), use_cache=False).logits.numpy()
    got = np.asarray(ours(ids))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)
    caches = ours.init_cache(None, 2, 21)
    logits, caches = ours.call_with_cache(ids[:, :15], caches, 0)
    steps = [np.asarray(logits)]
    for t in range(15, 21):
        logits, caches = ours.call_with_cache(ids[:, t], caches, t)
        steps.append(np.asarray(logits))
    np.testing.assert_allclose(np.stack(steps, 1), want[:, 14:], rtol=1e-5, atol=2e-5)


def test_xlstm_checkpoint_matches_transformers():
    torch = pytest.importorskip("torch")
    from transformers import xLSTMConfig, xLSTMForCausalLM

    torch.manual_seed(0)
    config = xLSTMConfig(
        vocab_size=60, hidden_size=64, num_hidden_layers=2, num_heads=2, chunk_size=8
    )
    reference = xLSTMForCausalLM(config).eval()
    with torch.no_grad():  # its initialisation zeroes every gate's weights
        for name, p in reference.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif "gate_preact.bias" in name:
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
    _check(reference, config.to_dict(), 60)


def _qwen3_next(seed, **experts):
    """A tiny Qwen3-Next (a gated DeltaNet layer, a full-attention layer)
    and its config dict; its RMSNorms' weights (1 + w) and the MLPs'
    random, not their zero or empty initial values."""
    torch = pytest.importorskip("torch")
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    torch.manual_seed(seed)
    config = Qwen3NextConfig(
        vocab_size=60,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        layer_types=["linear_attention", "full_attention"],
        **(experts or {"num_experts": 0}),
    )
    reference = Qwen3NextForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if "norm" in name and "linear_attn" not in name:
                p.normal_(0.0, 0.1)
            elif "mlp" in name:
                p.normal_(0.0, 0.3)
    return reference, config.to_dict()


def test_qwen3_next_checkpoint_matches_transformers():
    reference, config = _qwen3_next(0)
    ours = state_space_language_model(config)
    attention = ours.get_layer("block_1").attention
    assert attention.output_gate and attention.rotary_embedding.rotary_dim == 2  # 8 * 0.25
    _check(reference, config, 60)
    with pytest.raises(ValueError, match="layer types"):
        state_space_language_model(
            dict(config, layer_types=["linear_attention", "sliding_attention"])
        )


def test_qwen3_next_mixture_of_experts_checkpoint_matches_transformers():
    reference, config = _qwen3_next(
        1,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=24,
    )
    ours = state_space_language_model(config)
    assert all(
        isinstance(getattr(b, "ffn", None) or b.feedforward, MixtureOfExperts)
        for b in ours.part("blocks")
    )
    _check(reference, config, 60)
    with pytest.raises(ValueError, match="every layer"):
        state_space_language_model(dict(config, mlp_only_layers=[0]))


def test_lfm2_checkpoint_matches_transformers():
    torch = pytest.importorskip("torch")
    from transformers import Lfm2Config, Lfm2ForCausalLM

    torch.manual_seed(0)
    config = Lfm2Config(
        vocab_size=60,
        hidden_size=32,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        layer_types=["conv", "full_attention"],
        conv_L_cache=3,
        block_multiple_of=16,
    )
    reference = Lfm2ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.1)
    _check(reference, config.to_dict(), 60)
    with pytest.raises(ValueError, match="layer types"):
        state_space_language_model(dict(config.to_dict(), layer_types=["conv", "sliding"]))
