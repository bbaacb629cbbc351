"""The layers and every model kind train on the JAX backend.

`tests/run.py` runs this directory with `KERAS_BACKEND=jax`; under any
other backend it is skipped. Gradients are checked against central finite
differences (float64 NumPy around the layer's float32 forward), forward
passes against the step-by-step cached decoding, and training by a falling
loss under `jit_compile=True` (XLA through JAX)."""

import keras
import numpy as np
import pytest

if keras.backend.backend() != "jax":
    pytest.skip(
        "JAX backend tests: run with KERAS_BACKEND=jax (tests/run.py does)", allow_module_level=True
    )

import jax  # noqa: E402

import seqkeras  # noqa: E402
from seqkeras import layers as sk  # noqa: E402

M = seqkeras.models
RNG = np.random.default_rng(0)


def _finite_difference(f, x, eps=1e-3, entries=8):
    """Central differences of the scalar `f` at `entries` random entries of
    `x`; returns (indices, estimates)."""
    flat = x.reshape(-1)
    picks = RNG.choice(flat.size, entries, replace=False)
    estimates = []
    for i in picks:
        plus, minus = flat.copy(), flat.copy()
        plus[i] += eps
        minus[i] -= eps
        estimates.append((f(plus.reshape(x.shape)) - f(minus.reshape(x.shape))) / (2 * eps))
    return picks, np.array(estimates)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_recurrent_gradient_matches_finite_differences(cell):
    """The time loop's hand-written gradient under JAX's calling
    convention: inputs and recurrent kernel, with padding."""
    make = {"rnn": sk.SimpleRNNCell, "gru": sk.GRUCell, "lstm": sk.LSTMCell}[cell]
    layer = sk.Recurrent(make(5), return_sequences=True)
    x = RNG.normal(size=(3, 6, 4)).astype("float32")
    mask = np.ones((3, 6), bool)
    mask[1, 4:] = False
    layer(x, mask=mask)
    probe = RNG.normal(size=(3, 6, 5)).astype("float32")
    k0 = np.asarray(layer.cell.recurrent_kernel.value)

    def loss(x, k):
        return _pure(layer, x, k, mask, probe)

    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, k0)
    # one compiled function for the 32 evaluations (op by op they took 17 s)
    pure = jax.jit(loss)
    for value, grad, which in ((x, grads[0], 0), (k0, grads[1], 1)):

        def f(v, which=which):
            args = (v, k0) if which == 0 else (x, v)
            return float(pure(*args))

        picks, expected = _finite_difference(f, value.astype("float64"))
        np.testing.assert_allclose(
            np.asarray(grad).reshape(-1)[picks], expected, rtol=2e-2, atol=2e-3
        )


@pytest.mark.parametrize("version", ["mamba", "mamba2"])
def test_mamba_gradient_matches_finite_differences(version):
    """The parallel scans' gradients (autodiff through the associative
    scan or the chunked SSD form) under JAX, with padding."""
    kwargs = {"head_dim": 4, "chunk_size": 3} if version == "mamba2" else {}
    mixer = (sk.MambaMixer if version == "mamba" else sk.Mamba2Mixer)(state_size=4, **kwargs)
    x = RNG.normal(size=(2, 7, 8)).astype("float32")
    mask = np.ones((2, 7), bool)
    mask[1, 5:] = False
    mixer(x, padding_mask=mask)
    probe = RNG.normal(size=(2, 7, 8)).astype("float32")

    def pure(x):
        values = [w.value for w in mixer.trainable_weights]
        out, _ = mixer.stateless_call(values, [], x.astype("float32"), padding_mask=mask)
        return jax.numpy.sum(out * probe)

    grad = jax.jit(jax.grad(pure))(x)
    compiled = jax.jit(pure)  # one compilation for the 16 evaluations
    picks, expected = _finite_difference(lambda v: float(compiled(v)), x.astype("float64"))
    np.testing.assert_allclose(np.asarray(grad).reshape(-1)[picks], expected, rtol=2e-2, atol=2e-3)


def _pure(layer, x, kernel, mask, probe):
    """sum(layer(x) * probe) with the recurrent kernel given, through
    `stateless_call` (a pure function JAX can differentiate)."""
    values = [
        kernel if w is layer.cell.recurrent_kernel else w.value for w in layer.trainable_weights
    ]
    fixed = [w.value for w in layer.non_trainable_variables]
    out, _ = layer.stateless_call(values, fixed, x.astype("float32"), mask=mask)
    return jax.numpy.sum(out * probe)


def _fit(model, x, y, epochs=3):
    M.compile_model(model, learning_rate=1e-2)
    history = model.fit(x, y, epochs=epochs, batch_size=8, verbose=0)
    loss = history.history["loss"]
    assert np.all(np.isfinite(loss)) and loss[-1] < loss[0], loss
    return model


def _ids(n, t, vocab=12):
    return RNG.integers(4, vocab, size=(n, t)).astype("int32")


LAYERS = {
    "recurrent": lambda: sk.Recurrent(
        sk.LSTMCell(8, dropout=0.1, recurrent_dropout=0.1), return_sequences=True
    ),
    "bidirectional": lambda: sk.Bidirectional(sk.Recurrent(sk.GRUCell(4), return_sequences=True)),
    "stacked": lambda: sk.StackedRecurrent(
        [
            sk.Recurrent(sk.GRUCell(8), return_sequences=True),
            sk.Recurrent(sk.GRUCell(8), return_sequences=True),
        ],
        residual=True,
    ),
    "encoder_block": lambda: sk.TransformerEncoderBlock(2, 16),
    "decoder_block": lambda: sk.TransformerDecoderBlock(2, 16),
    "mha": lambda: sk.MultiHeadAttention(2, 4),
    "gqa_rotary_window": lambda: sk.MultiHeadAttention(
        4, 4, num_key_value_heads=2, rotary_embedding=sk.RotaryEmbedding(), window=3
    ),
    "llama_block": lambda: sk.LlamaDecoderBlock(4, 16, num_key_value_heads=2, window=4),
    # Qwen3-Next's attention (q/k norms, output gate, partial rotary
    # positions) and its sparse MLP
    "gated_attention_experts": lambda: sk.LlamaDecoderBlock(
        2,
        16,
        rotary_dim=2,
        query_key_norm=1e-6,
        output_gate=True,
        experts={"num_experts": 3, "top_k": 2, "intermediate_dim": 8},
    ),
    "gated_feedforward": lambda: sk.GatedFeedForward(16),
    "positions": lambda: sk.PositionalEmbedding(16),
    "sinusoidal": lambda: sk.SinusoidalPositionalEncoding(),
    # the linear recurrences (their language models below train too)
    "min_lstm": lambda: sk.Bidirectional(sk.Recurrent(sk.MinLSTMCell(4), return_sequences=True)),
    "mamba2_block": lambda: sk.MambaBlock("mamba2", state_size=4, head_dim=4, chunk_size=4),
    "griffin_temporal": lambda: sk.GriffinTemporalBlock(num_heads=2, conv_kernel=3),
    # the matrix memories (run_layer_test leaves their jit fit to these)
    "gated_deltanet": lambda: sk.GatedDeltaNet(2, 4, chunk_size=4),
    "mlstm": lambda: sk.MLSTMLayer(2, chunk_size=4),
    "slstm": lambda: sk.SLSTMLayer(2),
    "rwkv7": lambda: sk.RWKV7Blocks(
        2, 16, head_size=4, decay_lora=4, aaa_lora=4, mv_lora=4, gate_lora=4
    ),
    "short_convolution": lambda: sk.MixerBlock("shortconv", intermediate_dim=16),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_trains_under_jit(name):
    inp = keras.Input((6, 8))
    layer = LAYERS[name]()
    if name == "mha":
        x = layer(inp, inp)
    elif name == "gqa_rotary_window":
        x = layer(inp, use_causal_mask=True)
    else:
        x = layer(inp)
    out = keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(x))
    model = keras.Model(inp, out)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", jit_compile=True)
    x = RNG.normal(size=(32, 6, 8)).astype("float32")
    y = x.mean(axis=(1, 2))[:, None] * 3
    loss = model.fit(x, y, epochs=4, batch_size=8, verbose=0).history["loss"]
    assert np.all(np.isfinite(loss)) and loss[-1] < loss[0], loss


def test_attention_decoder_and_pooling_train_under_jit():
    # Luong's style here; Bahdanau's (additive) is the recurrent_seq2seq
    # of test_every_model_kind_trains_and_generates
    src, tgt = _ids(32, 7), _ids(32, 5)
    model = M.recurrent_seq2seq(
        12,
        12,
        embedding_dim=8,
        units=8,
        cell="gru",
        attention="general",
        style="luong",
        dropout=0.1,
    )
    _fit(model, {"source_ids": src, "target_ids": tgt}, tgt)
    _fit(M.classifier(12, 3, pooling="attention", units=8), _ids(32, 6), RNG.integers(0, 3, 32))


KINDS = {
    "recurrent_language_model": lambda: M.recurrent_language_model(12, 8, units=8, num_layers=2),
    "transformer_language_model": lambda: M.transformer_language_model(
        12, 8, num_layers=1, num_heads=2, hidden_dim=8
    ),
    "decoder_language_model": lambda: M.decoder_language_model(
        12, 8, 2, 4, 16, num_key_value_heads=2, window=4, window_layers=[1], max_length=8
    ),
    "lora_language_model": lambda: M.with_lora(
        M.decoder_language_model(12, 8, 1, 2, 16, max_length=8), rank=2
    ),
    "recurrent_seq2seq": lambda: M.recurrent_seq2seq(
        12, 12, embedding_dim=8, units=8, attention="additive"
    ),
    "transformer_seq2seq": lambda: M.transformer_seq2seq(
        12, 12, 8, num_layers=1, num_heads=2, hidden_dim=8
    ),
    # the fixed-state language models: Mamba (the S6 scan) and Griffin (the
    # RG-LRU with local attention); the other families' layers are in
    # the layer checks above and tests/jax/test_layer_equalities.py
    "mamba_language_model": lambda: M.mamba_language_model(12, 8, 2, state_size=4),
    "griffin_language_model": lambda: M.griffin_language_model(
        12, 8, 3, num_heads=2, window=3, max_length=8
    ),
    "conditioned_decoder": lambda: M.conditioned_decoder(5, 12, units=8, embedding_dim=8),
    "classifier": lambda: M.classifier(12, 3, units=8),
    "tagger": lambda: M.tagger(12, 3, units=8),
    "forecaster": lambda: M.forecaster(6, 2, units=8),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_model_kind_trains_and_generates(kind):
    model = KINDS[kind]()
    ids = _ids(32, 7)
    if kind.endswith("language_model"):
        _fit(model, ids[:, :-1], ids[:, 1:])
        prompt = ids[:2, :2]
        out = M.generate(model, prompt=prompt, max_length=6, eos_id=None)
        # greedy by recomputation, at one width (the model is causal: the
        # zeros after position n leave its logits alone), so that JAX
        # compiles the forward pass once (eager calls of every width took
        # three times as long)
        tokens = np.zeros((2, 6), "int32")
        tokens[:, :2] = prompt
        for n in range(2, 6):
            tokens[:, n] = np.argmax(np.asarray(model.predict_on_batch(tokens))[:, n - 1], -1)
        np.testing.assert_array_equal(np.asarray(out), tokens)
    elif kind in ("recurrent_seq2seq", "transformer_seq2seq", "conditioned_decoder"):
        cond = RNG.normal(size=(32, 5)).astype("float32") if kind == "conditioned_decoder" else ids
        key = model.conditioning_input
        _fit(model, {key: cond, "target_ids": ids[:, :-1]}, ids[:, 1:])
        out = np.asarray(M.generate(model, cond[:2], max_length=6))
        assert out.shape == (2, 6) and (out[:, 0] == 1).all()
    elif kind == "forecaster":
        x = RNG.normal(size=(32, 6, 1)).astype("float32")
        _fit(model, x, np.repeat(x[:, -1:], 2, axis=1))
    elif kind == "tagger":
        _fit(model, ids, ids % 3)
    else:
        _fit(model, ids, ids[:, 0] % 3)


def test_pretrained_builders_train_under_jit():
    # the BERT classifier and CRF tagger of seqkeras.pretrained (random
    # weights here: the checkpoint mapping is backend-independent NumPy)
    import seqkeras.pretrained as sp

    arch = dict(
        vocab_size=12, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16, max_length=16
    )
    ids = _ids(32, 7)
    _fit(sp.bert_classifier(arch, 3, pooling="cls"), ids, ids[:, 0] % 3)
    tagger = sp.bert_tagger(arch, 4, crf=True, casing=True)
    starts = np.tile(np.arange(1, 6, dtype="int32"), (32, 1))
    x = {"token_ids": ids, "word_starts": starts, "casing_ids": np.full((32, 5), 5, "int32")}
    _fit(tagger, x, 1 + ids[:, 1:6] % 3)


def test_pretraining_models_train_under_jit():
    # issue 28's model side: the masked LM, the GPT classifier, the biLM
    # (both directions, ReverseSequence) and the ELMo classifier (ScalarMix)
    import seqkeras.pretrained as sp

    arch = dict(
        vocab_size=12, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16, max_length=16
    )
    ids = _ids(32, 7)
    positions = np.tile(np.array([[1, 3, 0]], "int32"), (32, 1))
    labels = np.where(positions > 0, ids[:, :3], 0)
    _fit(sp.bert_masked_lm(arch), {"token_ids": ids, "mask_positions": positions}, labels)
    _fit(sp.gpt2_classifier(dict(arch, model_type="gpt2"), 2, dropout=0.0), ids, ids[:, -1] % 2)
    lm = seqkeras.models.bi_language_model(12, embedding_dim=8, units=8, num_layers=1)
    zero = np.zeros((32, 1), "int32")
    y = {
        "forward": np.concatenate([ids[:, 1:], zero], 1),
        "backward": np.concatenate([zero, ids[:, :-1]], 1),
    }
    _fit(lm, ids, y)
    # the backward direction ignores right padding on this backend too
    padded = np.concatenate([ids[:2], np.zeros((2, 3), "int32")], 1)
    np.testing.assert_allclose(
        np.asarray(lm(padded)["backward"])[:, :7], np.asarray(lm(ids[:2])["backward"]), atol=1e-5
    )
    classifier = seqkeras.models.elmo_classifier(
        12,
        2,
        {"embedding_dim": 8, "units": 8, "num_layers": 1},
        embedding_dim=8,
        units=8,
        dropout=0.0,
    )
    seqkeras.models.load_bilm(classifier, lm)
    _fit(classifier, ids, ids[:, 0] % 2)


def test_a_span_runs_encoder_starts_a_translation_model():
    # load_encoder on this backend: the copied encoder gives the same memory
    import keras

    shape = dict(max_length=16, num_layers=1, num_heads=2, hidden_dim=8, norm_first=True)
    pretrained = seqkeras.models.transformer_seq2seq(12, 12, **shape)
    model = seqkeras.models.transformer_seq2seq(12, 9, **shape)
    seqkeras.models.load_encoder(model, pretrained)
    ids = _ids(4, 7)

    def memory(m):
        return keras.Model(m.get_layer("source_ids").output, m.get_layer("memory").output)(ids)

    np.testing.assert_allclose(np.asarray(memory(model)), np.asarray(memory(pretrained)), atol=1e-6)
    _fit(model, {"source_ids": ids, "target_ids": ids % 9}, ids % 9)
