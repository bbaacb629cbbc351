"""Every builder trains briefly under jit_compile=True on a synthetic task
and clears a bar well above chance; shapes, masks, `.keras` round trips and
bad arguments."""

import os
import tempfile

import keras
import numpy as np
import pytest

import seqkeras
from seqkeras.data import copy_task, teacher_forcing
from seqkeras.training import compile_model
from tests.layer_checks import mask_of

SLOW_SECONDS = 100  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 1722  # (2 cores; the summed memory of its processes)

M = seqkeras.models
#: the learning tests train as TensorFlow graphs: under the tests' XLA flags
#: (LLVM's optimisation off, tests/run.py) a compiled GRU seq2seq step ran
#: 6x slower than the graph's, and these tests took 126 s instead of 205 s.
#: Training under XLA is checked where it is the subject: every layer's
#: contract (tests/layer_checks.py), the truncated-BPTT and `compile_model`
#: tests below and the main job (tests/test_release.py)
LEARN = dict(jit_compile=False)


def roundtrip(model, inputs):
    before = np.asarray(model(inputs))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)  # SequenceModel, with its checks
    assert loaded.vocabulary_sizes == model.vocabulary_sizes
    np.testing.assert_allclose(np.asarray(loaded(inputs)), before, atol=1e-5)


def masked_accuracy(logits, targets):
    """Token accuracy over non-padding targets, in NumPy."""
    keep = targets != 0
    return np.mean((np.argmax(logits, -1) == targets)[keep])


def contains_task(n, length=10, seed=0):
    """Label 1 iff symbol 4 occurs among the unpadded tokens; lengths vary."""
    rng = np.random.default_rng(seed)
    x = rng.integers(5, 12, size=(n, length))
    y = rng.integers(0, 2, size=n)
    lengths = rng.integers(3, length + 1, size=n)
    for i in range(n):
        if y[i]:
            x[i, rng.integers(0, lengths[i])] = 4
        x[i, lengths[i] :] = 0
    return x.astype("int32"), y


@pytest.mark.parametrize(
    "backbone,pooling,bidirectional",
    [("lstm", "last", False), ("gru", "attention", True), ("transformer", "mean", False)],
)
def test_classifier_learns_and_round_trips(backbone, pooling, bidirectional):
    x, y = contains_task(1200)
    model = M.classifier(
        12,
        2,
        backbone=backbone,
        pooling=pooling,
        embedding_dim=16,
        units=16,
        num_heads=2,
        bidirectional=bidirectional,
    )
    assert [i.name for i in model.inputs] == ["token_ids"]
    compile_model(model, **LEARN, learning_rate=1e-2)  # the task from the model
    model.fit(x[:1000], y[:1000], epochs=6, batch_size=50, verbose=0)
    acc = model.evaluate(x[1000:], y[1000:], verbose=0, return_dict=True)["accuracy"]
    true_acc = np.mean(np.argmax(model.predict(x[1000:], verbose=0), -1) == y[1000:])
    assert abs(acc - true_acc) < 1e-6, (acc, true_acc)
    assert acc >= 0.9, acc  # chance: 0.5
    # Padding does not change the prediction.
    padded = np.pad(x[:4], ((0, 0), (0, 5)))
    np.testing.assert_allclose(np.asarray(model(padded)), np.asarray(model(x[:4])), atol=1e-5)
    roundtrip(model, x[:4])


def test_tagger_learns_context_dependent_tags():
    # Tag = parity of the *previous* token (needs context, not the token).
    rng = np.random.default_rng(1)
    x = rng.integers(4, 12, size=(1200, 12)).astype("int32")
    tags = np.zeros_like(x)
    tags[:, 1:] = 1 + x[:, :-1] % 2
    tags[:, 0] = 3
    x[600:, 9:] = 0
    tags[x == 0] = 0
    model = M.tagger(12, 4, backbone="gru", embedding_dim=16, units=16)
    compile_model(model, **LEARN, learning_rate=1e-2)
    model.fit(x[:1000], tags[:1000], epochs=5, batch_size=50, verbose=0)
    acc = model.evaluate(x[1000:], tags[1000:], verbose=0, return_dict=True)["accuracy"]
    assert abs(acc - masked_accuracy(model.predict(x[1000:], verbose=0), tags[1000:])) < 1e-6
    assert acc >= 0.95, acc  # chance: 0.5
    out = model(x[1000:1002])
    assert tuple(out.shape) == (2, 12, 4)
    roundtrip(model, x[:2])


def periodic_corpus(n, length, seed=0):
    """Rows of a repeating random 3-symbol cycle: next token predictable
    from the previous two."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        cycle = rng.choice(np.arange(4, 12), 3, replace=False)
        start = rng.integers(0, 3)
        rows.append(np.resize(np.roll(cycle, start), length + 1))
    data = np.array(rows, "int32")
    return data[:, :-1], data[:, 1:]


@pytest.mark.parametrize("kind", ["rnn", "transformer"])
def test_language_models_learn_and_tie_weights(kind):
    x, y = periodic_corpus(2200, 16)
    if kind == "rnn":
        model = M.recurrent_language_model(12, 16, units=32, cell="gru")
    else:
        model = M.transformer_language_model(12, 16, num_layers=1, num_heads=2, hidden_dim=16)
    compile_model(model, **LEARN, learning_rate=1e-2)
    model.fit(x[:2000], y[:2000], epochs=8, batch_size=32, verbose=0)
    # positions >= 3 are predictable (the first three show the cycle)
    pred = np.argmax(model.predict(x[2000:], verbose=0), -1)
    acc = np.mean(pred[:, 3:] == y[2000:, 3:])
    assert acc >= 0.9, acc  # chance: 1/8
    evaluated = model.evaluate(x[2000:], y[2000:], verbose=0, return_dict=True)["accuracy"]
    assert abs(evaluated - masked_accuracy(model.predict(x[2000:], verbose=0), y[2000:])) < 1e-6
    # Weight tying: one (vocab, dim) matrix, used by the output layer.
    matrices = [v for v in model.trainable_variables if tuple(v.shape) in ((12, 16), (16, 12))]
    assert len(matrices) == 1, [v.path for v in matrices]
    emb = model.get_layer("embedding")
    hidden = "projection" if kind == "rnn" else "decoder_norm"
    h = keras.Model(model.input, model.get_layer(hidden).output)(x[:2])
    np.testing.assert_allclose(
        np.asarray(model(x[:2])), np.asarray(h) @ np.asarray(emb.embeddings).T, atol=1e-4
    )
    roundtrip(model, x[:2])


def test_truncated_bptt_carries_state_between_windows():
    ids = np.random.default_rng(2).integers(4, 12, size=401)
    x, _ = seqkeras.data.tbptt_windows(ids, batch_size=2, window=10)
    stateful = M.recurrent_language_model(12, 8, cell="gru", stateful=True, batch_size=2)
    plain = M.recurrent_language_model(12, 8, cell="gru")
    for a, b in zip(plain.trainable_variables, stateful.trainable_variables):
        a.assign(b)
    windows = [np.asarray(stateful.predict_on_batch(x[i : i + 2])) for i in range(0, len(x), 2)]
    carried = np.concatenate(windows, axis=1)  # (2 lanes, all steps, vocab)
    lanes = np.concatenate([x[i : i + 2] for i in range(0, len(x), 2)], 1)
    np.testing.assert_allclose(carried, np.asarray(plain(lanes)), atol=1e-5)
    M.reset_states(stateful)
    np.testing.assert_allclose(np.asarray(stateful.predict_on_batch(x[:2])), windows[0], atol=1e-6)


def test_conditioned_decoder_generates_from_the_vector():
    rng = np.random.default_rng(3)
    classes = rng.integers(0, 6, size=1200)
    features = np.eye(6, dtype="float32")[classes]
    sequences = rng.integers(4, 12, size=(6, 8))  # one sentence per class
    targets = np.concatenate([sequences[classes], np.full((1200, 1), 2)], 1).astype("int32")
    model = M.conditioned_decoder(6, 12, embedding_dim=8, units=32, cell="gru")
    inputs = {"features": features, "target_ids": teacher_forcing(targets)}
    compile_model(model, **LEARN, learning_rate=1e-2)
    model.fit(inputs, targets, epochs=4, batch_size=50, verbose=0)
    acc = evaluated_accuracy(model, inputs, targets)
    assert acc >= 0.95, acc  # chance: 1/8 per token
    roundtrip(model, {k: v[:2] for k, v in inputs.items()})


def evaluated_accuracy(model, inputs, targets):
    """`evaluate`'s masked accuracy, checked against the accuracy of
    `predict`'s argmax computed in NumPy."""
    acc = model.evaluate(inputs, targets, verbose=0, return_dict=True)["accuracy"]
    assert abs(acc - masked_accuracy(model.predict(inputs, verbose=0), targets)) < 1e-6
    return acc


def reversal(n, seed):
    src, tgt = copy_task(n, 3, 7, num_symbols=8, reverse=True, seed=seed)
    return {"source_ids": src, "target_ids": teacher_forcing(tgt)}, tgt


def test_seq2seq_overfits_one_batch():
    """The fast check (the full learning runs are `slow`): an attention
    seq2seq fits one batch of reversals, its weights skip padding, and it
    round-trips."""
    inputs, tgt = reversal(64, 4)
    model = M.recurrent_seq2seq(
        12, 12, embedding_dim=16, units=32, cell="gru", attention="additive"
    )
    compile_model(model, **LEARN, learning_rate=1e-2)
    model.fit(inputs, tgt, epochs=60, batch_size=64, verbose=0)
    acc = evaluated_accuracy(model, inputs, tgt)
    assert acc >= 0.95, acc  # chance: ~1/8 per token
    _, weights = M.attention_model(model)({k: v[:2] for k, v in inputs.items()})
    pad = inputs["source_ids"][:2] == 0
    assert np.all(np.asarray(weights)[np.broadcast_to(pad[:, None], weights.shape)] == 0)
    roundtrip(model, {k: v[:2] for k, v in inputs.items()})


@pytest.mark.slow
@pytest.mark.parametrize(
    "attention,style", [(None, None), ("additive", "bahdanau"), ("general", "luong")]
)
def test_seq2seq_learns_reversal(attention, style):
    inputs, tgt = reversal(3000, 4)
    model = M.recurrent_seq2seq(
        12,
        12,
        embedding_dim=16,
        units=32,
        cell="gru",
        attention=attention,
        style=style or "bahdanau",
    )
    compile_model(model, **LEARN, learning_rate=1e-2)
    model.fit(inputs, tgt, epochs=6, batch_size=64, verbose=0)
    val_inputs, val_tgt = reversal(300, 5)
    acc = evaluated_accuracy(model, val_inputs, val_tgt)
    # chance: ~1/8 per token; the fixed-context model learns more slowly
    assert acc >= (0.95 if attention else 0.8), acc
    if attention:
        logits, weights = M.attention_model(model)({k: v[:2] for k, v in val_inputs.items()})
        assert tuple(weights.shape) == (2, 8, 7)
        # padding in the source gets no attention
        pad = val_inputs["source_ids"][:2] == 0
        assert np.all(np.asarray(weights)[np.broadcast_to(pad[:, None], weights.shape)] == 0)
    roundtrip(model, {k: v[:2] for k, v in val_inputs.items()})


def test_transformer_seq2seq_learns_reversal():
    # one block, 2,000 pairs, 6 epochs: 99.8% here in 15 s (two blocks, 3,000
    # pairs, 8 epochs: 99.9% in 26 s)
    inputs, tgt = reversal(2000, 6)
    model = M.transformer_seq2seq(12, 12, max_length=8, num_layers=1, num_heads=4, hidden_dim=32)
    compile_model(model, **LEARN, learning_rate=3e-3)
    model.fit(inputs, tgt, epochs=6, batch_size=64, verbose=0)
    val_inputs, val_tgt = reversal(300, 7)
    acc = evaluated_accuracy(model, val_inputs, val_tgt)
    assert acc >= 0.85, acc
    roundtrip(model, {k: v[:2] for k, v in val_inputs.items()})


@pytest.mark.parametrize("backbone", ["gru", "transformer"])
def test_forecaster_beats_the_seasonal_naive_baseline(backbone):
    series = seqkeras.data.multi_seasonal_series(
        3000, periods=(12, 30), amplitudes=(1.0, 0.6), noise=0.05, seed=0
    )
    x, y = seqkeras.data.forecast_windows(series, 48, 6, stride=2)
    n = int(0.8 * len(x))
    model = M.forecaster(48, 6, backbone=backbone, units=32, num_heads=2)
    compile_model(model, **LEARN, learning_rate=3e-3)  # the task from the model
    model.fit(x[:n], y[:n], epochs=8, batch_size=32, verbose=0)
    mse = np.mean((model.predict(x[n:], verbose=0) - y[n:]) ** 2)
    loss = model.evaluate(x[n:], y[n:], verbose=0, return_dict=True)["loss"]
    assert abs(loss - mse) <= 1e-4 * mse, (loss, mse)
    naive = np.mean((x[n:, -1:, :] - y[n:]) ** 2)  # repeat the last value
    assert mse < 0.3 * naive, (mse, naive)
    roundtrip(model, x[:2])


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: M.classifier(10, 2, backbone="cnn"), "classifier.*backbone"),
        (lambda: M.classifier(10, 2, pooling="median"), "classifier.*pooling"),
        (lambda: M.classifier(0, 2), "classifier.*vocab_size"),
        (lambda: M.tagger(10, -1), "tagger.*num_tags"),
        (lambda: M.recurrent_language_model(0), "recurrent_language_model.*vocab_size"),
        (lambda: M.recurrent_language_model(10, stateful=True), "batch_size"),
        (lambda: M.transformer_language_model(10, 8, num_heads=3, hidden_dim=16), "divisible"),
        (lambda: M.recurrent_seq2seq(10, 10, attention="bilinear"), "seq2seq.*attention"),
        (lambda: M.recurrent_seq2seq(10, 10, units=16, bridge=False), "bridge"),
        (
            lambda: M.recurrent_seq2seq(10, 10, units=16, attention="dot"),
            "attention='dot'.*features",
        ),
        (lambda: M.recurrent_seq2seq(10, 0), "seq2seq.*target_vocab_size"),
        (lambda: M.transformer_seq2seq(10, 10, 8, positional="rotary"), "positional"),
        (lambda: M.forecaster(24, 0), "forecaster.*horizon"),
        (lambda: M.compile_model(keras.Sequential(), task="ranking"), "task"),
    ],
)
def test_bad_arguments_raise_clear_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_padding_mask_reaches_the_tagger_logits():
    model = M.tagger(12, 3, backbone="lstm", embedding_dim=8, units=8)
    ids = np.array([[4, 5, 6, 0, 0], [7, 0, 0, 0, 0]], "int32")
    logits = model(ids)
    np.testing.assert_array_equal(np.asarray(mask_of(logits)), ids != 0)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_builders_train_under_mixed_precision(policy):
    keras.config.set_dtype_policy(policy)
    try:
        inputs, tgt = reversal(128, 8)
        model = M.recurrent_seq2seq(12, 12, embedding_dim=8, units=16, attention="additive")
        assert model.output.dtype == "float32"  # logits stay float32
        compile_model(model)
        history = model.fit(inputs, tgt, epochs=1, batch_size=64, verbose=0)
        assert np.isfinite(history.history["loss"][0])
    finally:
        keras.config.set_dtype_policy("float32")


def test_tbptt_fit_with_state_reset_callback():
    ids = np.random.default_rng(5).integers(4, 12, size=801)
    x, y = seqkeras.data.tbptt_windows(ids, batch_size=4, window=10)
    model = M.recurrent_language_model(12, 8, cell="lstm", stateful=True, batch_size=4)
    compile_model(model)
    history = model.fit(
        x,
        y,
        batch_size=4,
        shuffle=False,
        epochs=2,
        verbose=0,
        callbacks=[M.ResetStatesAtEpochStart()],
    )
    assert np.all(np.isfinite(history.history["loss"]))


def test_compile_model_defaults_to_the_models_task():
    # Regression: the default used to be the token task for every model: a
    # classifier's label 0 was ignored as padding, and a model predicting
    # class 1 everywhere reported accuracy 1.0.
    rng = np.random.default_rng(0)
    x = rng.integers(1, 12, size=(64, 6)).astype("int32")
    y = np.array([0, 1] * 32)
    model = M.classifier(12, 2, backbone="gru", units=8, embedding_dim=8)
    compile_model(model)
    bias = model.get_layer("logits_dense").bias
    bias.assign([0.0, 50.0])  # always class 1
    result = model.evaluate(x, y, verbose=0, return_dict=True)
    assert result["accuracy"] == pytest.approx(0.5)
    assert result["loss"] > 10  # every label-0 example costs ~50 nats
    assert M.infer_task(model) == "classes"
    assert M.infer_task(M.tagger(12, 3)) == "tokens"
    assert M.infer_task(M.forecaster(6, 2)) == "regression"
    assert M.infer_task(M.conditioned_decoder(4, 12)) == "tokens"
    assert M.infer_task(M.recurrent_seq2seq(12, 12, units=8)) == "tokens"


@pytest.mark.parametrize(
    "build,task,match",
    [
        (lambda: M.classifier(12, 2), "tokens", "task='tokens' needs logits of"),
        (lambda: M.tagger(12, 3), "classes", "task='classes' needs logits of"),
        (lambda: M.forecaster(6, 2), "classes", "task='classes' needs logits"),
        (lambda: M.forecaster(6, 2, targets=3), "tokens", "token ids in"),
        (lambda: M.classifier(12, 2), "ranking", "invalid value for `task`"),
    ],
)
def test_compile_model_refuses_a_task_that_contradicts_the_model(build, task, match):
    with pytest.raises(ValueError, match=match):
        compile_model(build(), task=task)
