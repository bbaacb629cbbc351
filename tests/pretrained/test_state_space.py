"""Mamba, Mamba-2 and RecurrentGemma (Griffin) against `transformers`'
own torch models on tiny random configurations (their pure-torch paths run
on this CPU): the checkpoint read by `seqkeras.pretrained` (config dict
and tensors, and a `config.json` + `model.safetensors` directory) gives
the same logits and the same gradients (float32), and `generate` (the
cached step) the same ids as greedy decoding by the reference."""

import json

import numpy as np
import pytest
import tensorflow as tf

import seqkeras
import seqkeras.pretrained

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
P = seqkeras.pretrained

CONFIGS = {
    "mamba": lambda: transformers.MambaConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=2, state_size=4, conv_kernel=3
    ),
    "mamba2": lambda: transformers.Mamba2Config(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=2,
        state_size=8,
        num_heads=4,
        head_dim=8,
        n_groups=2,
        chunk_size=4,
        conv_kernel=3,
    ),
    "recurrent_gemma": lambda: transformers.RecurrentGemmaConfig(
        vocab_size=40,
        hidden_size=32,
        lru_width=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        conv1d_width=3,
        attention_window_size=4,
        num_hidden_layers=3,
        block_types=["recurrent", "attention"],
        attn_implementation="eager",
    ),
}
MODELS = {
    "mamba": "MambaForCausalLM",
    "mamba2": "Mamba2ForCausalLM",
    "recurrent_gemma": "RecurrentGemmaForCausalLM",
}


def _reference(kind):
    torch.manual_seed(0)
    config = CONFIGS[kind]()
    model = getattr(transformers, MODELS[kind])(config).float().eval()
    with torch.no_grad():  # zero-initialised norms and biases: perturbed
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return config, model


def _tensors(model):
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_logits_and_gradients_equal_transformers(kind):
    config, ref = _reference(kind)
    model = P.state_space_language_model(config.to_dict())
    P.load_state_space_weights(model, _tensors(ref))
    ids = np.random.default_rng(1).integers(0, 40, (2, 9))
    probe = np.random.default_rng(2).normal(size=(2, 9, 40)).astype("float32")
    out = ref(torch.tensor(ids), use_cache=False).logits
    (out * torch.tensor(probe)).sum().backward()
    want = out.detach().numpy()
    with tf.GradientTape() as tape:
        logits = model(ids)
        loss = tf.reduce_sum(logits * probe)
    np.testing.assert_allclose(logits, want, atol=1e-5, rtol=1e-5)
    # gradients: the embedding (every path reaches it) and one block's
    # input projection (transposed torch weight)
    embedding = model.part("embedding").embeddings
    block = model.part("blocks")[0]
    if kind == "recurrent_gemma":
        kernel, name = block.temporal.linear_x_kernel, "model.layers.0.temporal_block.linear_x"
        embed_name = "model.embed_tokens.weight"
    else:
        kernel, name = block.mixer.in_proj_kernel, "backbone.layers.0.mixer.in_proj"
        embed_name = "backbone.embeddings.weight"
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, [embedding, kernel])]
    params = dict(ref.named_parameters())
    scale = max(1.0, float(np.abs(params[embed_name].grad.numpy()).max()))
    np.testing.assert_allclose(grads[0], params[embed_name].grad.numpy(), atol=1e-5 * scale)
    np.testing.assert_allclose(grads[1], params[name + ".weight"].grad.numpy().T, atol=1e-5 * scale)


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_generate_equals_greedy_decoding_by_the_reference(kind, tmp_path):
    """The cached step (a prompt prefilled, then one token per step) gives
    the ids that greedy decoding of the reference's full passes gives; the
    model read from a `config.json` + `model.safetensors` directory."""
    from safetensors.numpy import save_file

    config, ref = _reference(kind)
    tensors = {k: np.ascontiguousarray(v) for k, v in _tensors(ref).items()}
    if kind == "mamba":  # tied: the file keeps one copy
        tensors.pop("lm_head.weight")
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    model = P.read_state_space_directory(str(tmp_path))
    prompt = np.random.default_rng(3).integers(1, 40, (2, 4))
    ids = torch.tensor(prompt)
    with torch.no_grad():
        for _ in range(6):
            logits = ref(ids, use_cache=False).logits[:, -1]
            ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], 1)
    got = seqkeras.models.generate(model, prompt=prompt, max_length=10, eos_id=None)
    np.testing.assert_array_equal(np.asarray(got), ids.numpy())


def test_errors_name_the_field():
    with pytest.raises(ValueError, match="model_type"):
        P.state_space_language_model({"model_type": "llama"})
    config = CONFIGS["mamba"]().to_dict()
    model = P.state_space_language_model(config)
    with pytest.raises(ValueError, match="has no tensor .backbone.embeddings.weight."):
        P.load_state_space_weights(model, {})
    _, ref = _reference("mamba")
    tensors = _tensors(ref)
    tensors["backbone.layers.1.mixer.D"] = np.zeros(3, "float32")
    before = model.get_weights()
    with pytest.raises(ValueError, match="shape"):
        P.load_state_space_weights(model, tensors)
    for a, b in zip(before, model.get_weights()):  # nothing copied
        np.testing.assert_array_equal(a, b)
