"""seqkeras.training's workflow: the model directory (config, rebuild,
best weights), the callbacks that write it and resume a killed run, the
cosine schedule against its formula, datasets with a counted length, and
LoRA's adapter checkpoint."""

import csv
import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import seqkeras
from seqkeras import training

CONFIG = {
    "builder": "classifier",
    "arguments": {"units": 4, "embedding_dim": 4},
    "sizes": {"vocab_size": 12, "num_classes": 2},
}


def _fit(directory, epochs=2, **callbacks_options):
    model = training.build_from_config(CONFIG)
    training.compile_model(model, learning_rate=1e-2, jit_compile=False)
    x = np.random.default_rng(0).integers(1, 12, (16, 5))
    y = (x[:, 0] > 6).astype("int32")
    callbacks, checkpoint = training.training_callbacks(directory, **callbacks_options)
    model.fit(x, y, validation_data=(x, y), epochs=epochs, callbacks=callbacks, verbose=0)
    return model, checkpoint, x


def test_a_model_directory_rebuilds_the_best_weights(tmp_path):
    d = str(tmp_path / "run")
    training.write_model_config(d, dict(CONFIG, model="tiny"))
    model, checkpoint, x = _fit(d)
    config, rows, seconds = training.read_training_history(d)
    assert config["model"] == "tiny" and len(rows) == 2 and len(seconds) == 2
    losses = [float(r["val_loss"]) for r in rows]
    assert checkpoint.best == pytest.approx(min(losses))
    loaded, _ = training.load_model_directory(d)
    # the best epoch's weights: the validation loss they give is the best logged
    loaded_loss = training.compile_model(loaded, jit_compile=False).evaluate(
        x, (x[:, 0] > 6).astype("int32"), verbose=0
    )[0]
    assert loaded_loss == pytest.approx(min(losses), rel=1e-4)
    for name in ("config.json", "best.weights.h5", "history.csv", "epoch_seconds.csv", "logs"):
        assert os.path.exists(os.path.join(d, name)), name


def test_a_resumed_run_keeps_the_best_value_of_its_history(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    with open(d / "history.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerows([["epoch", "val_loss"], [0, 0.9], [1, 0.25], [2, 0.4]])
    _, checkpoint = training.training_callbacks(str(d))
    assert checkpoint.best == pytest.approx(0.25)
    _, checkpoint = training.training_callbacks(str(d), monitor="val_loss", mode="max")
    assert checkpoint.best == pytest.approx(0.9)


def test_a_given_checkpoint_keeps_the_best_epoch_instead(tmp_path):
    # e.g. LoraCheckpoint (the adapters alone): in the default's place, no
    # best.weights.h5 written, the history and the backup as always
    saved = []

    class Best(keras.callbacks.Callback):
        best = float("inf")

        def on_epoch_end(self, epoch, logs=None):
            if logs["val_loss"] < self.best:
                self.best = logs["val_loss"]
                saved.append(epoch)

    given = Best()
    d = str(tmp_path / "run")
    training.write_model_config(d, dict(CONFIG, model="tiny"))
    _, checkpoint, _ = _fit(d, epochs=3, checkpoint=given)
    assert checkpoint is given
    _, rows, _ = training.read_training_history(d)
    losses = [float(r["val_loss"]) for r in rows]
    assert given.best == pytest.approx(min(losses)) and saved[0] == 0
    assert not os.path.exists(os.path.join(d, "best.weights.h5"))
    callbacks, _ = training.training_callbacks(d, checkpoint=given)
    assert callbacks[1] is given


def test_model_directory_errors_name_the_function_and_argument(tmp_path):
    with pytest.raises(ValueError, match="read_model_config.*no such directory"):
        training.read_model_config(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="not a trained model directory"):
        training.read_model_config(str(tmp_path))
    training.write_model_config(str(tmp_path), CONFIG)
    with pytest.raises(ValueError, match="load_model_directory.*best.weights.h5"):
        training.load_model_directory(str(tmp_path))
    with pytest.raises(ValueError, match=r"build_from_config.*'nothing' is not a builder"):
        training.build_from_config(dict(CONFIG, builder="nothing"))
    with pytest.raises(ValueError, match="build_from_config.*has no sizes"):
        training.build_from_config({"builder": "classifier", "arguments": {}})
    with pytest.raises(TypeError, match="write_model_config.*`directory`"):
        training.write_model_config(3, CONFIG)
    with pytest.raises(ValueError, match="training_callbacks.*`mode`"):
        training.training_callbacks(str(tmp_path), mode="best")
    with pytest.raises(ValueError, match="PretrainingRun.*not a bilm or span"):
        training.PretrainingRun(str(tmp_path))


def test_cosine_schedule_follows_its_formula():
    peak, steps, warmup, alpha = 2e-3, 50, 10, 0.1
    s = training.cosine_schedule(peak, steps, warmup, alpha)
    for t in (0, 5, 10, 20, 35, 50):
        if t < warmup:
            expected = peak * t / warmup
        else:
            frac = (t - warmup) / (steps - warmup)
            expected = peak * (alpha + (1 - alpha) * 0.5 * (1 + math.cos(math.pi * frac)))
        assert float(s(t)) == pytest.approx(expected, rel=1e-5, abs=1e-9), t
    no_warmup = training.cosine_schedule(peak, steps, alpha=0.0)
    assert float(no_warmup(steps // 2)) == pytest.approx(peak / 2, rel=1e-5)
    for bad in (
        dict(peak=-1e-3),
        dict(steps=0),
        dict(warmup=51),
        dict(alpha=2.0),
        dict(steps=True),
    ):
        args = {**dict(peak=peak, steps=steps, warmup=0, alpha=0.05), **bad}
        with pytest.raises(ValueError, match=f"cosine_schedule.*`{next(iter(bad))}`"):
            training.cosine_schedule(**args)


def test_with_cardinality_counts_the_batches():
    data = tf.data.Dataset.range(23).filter(lambda x: x % 3 > 0).batch(4)
    assert int(data.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    counted, steps = training.with_cardinality(data)
    assert steps == len(list(data)) == 4 and int(counted.cardinality()) == 4
    with pytest.raises(ValueError, match="with_cardinality.*infinite"):
        training.with_cardinality(data.repeat())
    with pytest.raises(TypeError, match="with_cardinality"):
        training.with_cardinality([1, 2])


def test_epoch_timer_appends_across_runs(tmp_path):
    path = str(tmp_path / "t.csv")
    for _ in range(2):
        timer = training.EpochTimer(path)
        timer.on_epoch_begin(0)
        timer.on_epoch_end(0)
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and all(float(r["seconds"]) >= 0 for r in rows)


def test_lora_checkpoint_saves_only_improvements_and_resumes_its_best(tmp_path):
    model = seqkeras.models.decoder_language_model(
        vocab_size=20, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16, max_length=8
    )
    lm = seqkeras.models.with_lora(model, 2)
    path = tmp_path / "adapters.npz"
    saver = training.LoraCheckpoint(lm, str(path))
    saver.on_epoch_end(0, {"val_loss": 1.0})
    first = path.stat().st_mtime_ns
    assert saver.best == 1.0
    saver.on_epoch_end(1, {"val_loss": 2.0})  # worse: not written
    assert path.stat().st_mtime_ns == first and saver.best == 1.0
    with open(tmp_path / "history.csv", "w") as f:
        f.write("epoch,val_loss\n0,0.5\n1,0.7\n")
    resumed = training.LoraCheckpoint(lm, str(path), history=str(tmp_path / "history.csv"))
    assert resumed.best == 0.5
    resumed.on_epoch_end(2, {"val_loss": 0.6})
    assert path.stat().st_mtime_ns == first  # 0.6 does not beat the history's 0.5


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the TensorFlow trainer's tracing"
)
@pytest.mark.parametrize("task", ["classes", "regression"])
def test_the_first_fit_traces_the_train_step_once(task):
    """`SequenceModel.fit` builds the optimizer before Keras traces the
    train step (TensorFlow traces a step again when its first trace makes
    variables) and `compile_model` passes metric objects (a string's
    metric is made inside the trace): one trace of the step per `fit`."""
    x = np.random.default_rng(0).integers(1, 12, (16, 5))
    if task == "classes":
        model = seqkeras.models.classifier(12, 2, units=4, embedding_dim=4)
        y = (x[:, 0] > 6).astype("int32")
    else:
        model = seqkeras.models.forecaster(5, 1, units=4)
        x = x[..., None].astype("float32")
        y = x[:, :1]
    training.compile_model(model, jit_compile=False)
    traces = []
    step = model.train_step

    def counted(data):
        traces.append(1)
        return step(data)

    model.train_step = counted
    model.fit(x, y, validation_data=(x, y), epochs=2, batch_size=8, verbose=0)
    assert len(traces) == 1
    assert model.optimizer.built and len(model.optimizer.variables) > 1
