"""Error inputs of `seqkeras.training`: masked losses and metrics,
schedules, callbacks and the model directory (`config.json`, best weights,
history) given the wrong thing."""

import json
import os
import tempfile

import numpy as np

from tests.error_inputs import entry, opt_out

F = np.float32
T = "seqkeras.training."
IDS = np.array([[4, 5, 0]], "int32")  # (batch, time) targets
LOGITS = np.zeros((1, 3, 6), F)  # (batch, time, vocab)
CONFIG = {
    "builder": "classifier",
    "arguments": {"units": 4, "embedding_dim": 4},
    "sizes": {"vocab_size": 12, "num_classes": 2},
}


def _training():
    import seqkeras.training

    return seqkeras.training


def _directory(config=None, files=()):
    """A new temporary directory with `config` as its config.json (a str
    is written as is) and empty `files`."""
    d = tempfile.mkdtemp(prefix="seqkeras-error-inputs-")
    if config is not None:
        with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
            f.write(config if isinstance(config, str) else json.dumps(config))
    for name in files:
        open(os.path.join(d, name), "w").close()
    return d


def _missing():
    return os.path.join(tempfile.gettempdir(), "seqkeras-no-such-directory", "run")


def _file():
    d = _directory()
    path = os.path.join(d, "a-file")
    open(path, "w").close()
    return path


def _dense_model():
    import keras

    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])


def _add(name, argument, call, **options):
    entry(T + name, argument, call, **options)


opt_out(T + "CONFIG_FILE", "a constant file name (a str), read by the library, not a callable")
opt_out(T + "WEIGHTS_FILE", "a constant file name (a str), read by the library, not a callable")

# ---- metrics and losses ----------------------------------------------------
for metric in ("MaskedAccuracy", "MaskedPerplexity"):
    _add(metric, "pad_id", lambda m=metric: getattr(_training(), m)(pad_id="0"))
    _add(metric, "pad_id", lambda m=metric: getattr(_training(), m)(pad_id=0.5))
    # probabilities of the target id instead of logits over the vocabulary
    _add(
        metric,
        "y_pred",
        lambda m=metric: getattr(_training(), m)().update_state(IDS, np.zeros((1, 3), F)),
        graph=True,
        xla=True,
    )
    # targets one step longer than the logits
    _add(
        metric,
        "y_true",
        lambda m=metric: getattr(_training(), m)().update_state(
            np.array([[4, 5, 0, 0]], "int32"), LOGITS
        ),
        graph=True,
        xla=True,
    )

S = "SmoothedTokenCrossEntropy"
_add(S, "label_smoothing", lambda: _training().SmoothedTokenCrossEntropy(label_smoothing=1.0))
_add(S, "label_smoothing", lambda: _training().SmoothedTokenCrossEntropy(label_smoothing="0.1"))
_add(S, "label_smoothing", lambda: _training().SmoothedTokenCrossEntropy(float("nan")))
_add(S, "pad_id", lambda: _training().SmoothedTokenCrossEntropy(0.1, pad_id=None))
_add(
    S,
    "y_pred",
    lambda: _training().SmoothedTokenCrossEntropy()(IDS, np.zeros((1, 3), F)),
    graph=True,
    xla=True,
)

_add("masked_loss", "label_smoothing", lambda: _training().masked_loss(label_smoothing=1.5))
_add("masked_loss", "label_smoothing", lambda: _training().masked_loss(label_smoothing=-0.1))
_add("masked_loss", "label_smoothing", lambda: _training().masked_loss(label_smoothing="yes"))
_add("masked_loss", "pad_id", lambda: _training().masked_loss(pad_id="<pad>"))

_add("PinballLoss", "quantiles", lambda: _training().PinballLoss(0.5))
_add("PinballLoss", "quantiles", lambda: _training().PinballLoss([0.1, 1.5]))
_add("PinballLoss", "quantiles", lambda: _training().PinballLoss(["low", "high"]))
_add("PinballLoss", "quantiles", lambda: _training().PinballLoss([]))
# three quantiles' predictions for a loss of two levels
_add(
    "PinballLoss",
    "y_pred",
    lambda: _training().PinballLoss([0.1, 0.9])(np.zeros((2, 4), F), np.zeros((2, 4, 3), F)),
    graph=True,
    xla=True,
)

# ---- schedules ---------------------------------------------------------------
W = "WarmupLinearDecay"
_add(W, "peak", lambda: _training().WarmupLinearDecay(0.0, total_steps=10))
_add(W, "total_steps", lambda: _training().WarmupLinearDecay(1e-3, total_steps=0))
_add(W, "total_steps", lambda: _training().WarmupLinearDecay(1e-3, total_steps=10.0))
_add(W, "warmup_steps", lambda: _training().WarmupLinearDecay(1e-3, 10, warmup_steps=10))

C = "cosine_schedule"
_add(C, "peak", lambda: _training().cosine_schedule(-1e-3, steps=10))
_add(C, "steps", lambda: _training().cosine_schedule(1e-3, steps=0))
_add(C, "warmup", lambda: _training().cosine_schedule(1e-3, steps=10, warmup=20))
_add(C, "alpha", lambda: _training().cosine_schedule(1e-3, steps=10, alpha=2.0))

_add("TimeBudget", "minutes", lambda: _training().TimeBudget(minutes=-5, peak=1e-3))
_add("TimeBudget", "minutes", lambda: _training().TimeBudget(minutes="30", peak=1e-3))
_add("TimeBudget", "peak", lambda: _training().TimeBudget(minutes=5, peak=0))
_add("TimeBudget", "warmup", lambda: _training().TimeBudget(5, 1e-3, warmup=-10))
_add("TimeBudget", "alpha", lambda: _training().TimeBudget(5, 1e-3, alpha=1.5))

# ---- compile mode ----------------------------------------------------------------
J = "choose_jit_compile"
_add(J, "purpose", lambda: _training().choose_jit_compile(purpose="eval"))
_add(J, "purpose", lambda: _training().choose_jit_compile(purpose=None))
_add(J, "purpose", lambda: _training().choose_jit_compile(None, "TRAIN"))

# ---- stateful models -------------------------------------------------------------
_add("reset_states", "model", lambda: _training().reset_states(None))
_add("reset_states", "model", lambda: _training().reset_states("gru"))
R = "ResetStatesAtEpochStart"
_add(R, "model", lambda: _training().ResetStatesAtEpochStart().set_model("model"))
_add(R, "model", lambda: _training().ResetStatesAtEpochStart().set_model(_dense_model()))

# ---- callbacks -----------------------------------------------------------------
_add("EpochTimer", "path", lambda: _training().EpochTimer(None))
_add("EpochTimer", "path", lambda: _training().EpochTimer(""))
_add("EpochTimer", "path", lambda: _training().EpochTimer(_directory()))

TC = "training_callbacks"
_add(TC, "directory", lambda: _training().training_callbacks(None))
_add(TC, "mode", lambda: _training().training_callbacks(_directory(), mode="minimum"))
_add(TC, "monitor", lambda: _training().training_callbacks(_directory(), monitor=None))
_add(TC, "checkpoint", lambda: _training().training_callbacks(_directory(), checkpoint="best"))
_add(TC, "target", lambda: _training().training_callbacks(_directory(), target="encoder"))

LC = "LoraCheckpoint"
_add(LC, "model", lambda: _training().LoraCheckpoint("model", "adapters.npz"))
_add(LC, "path", lambda: _training().LoraCheckpoint(_dense_model(), None))
_add(LC, "monitor", lambda: _training().LoraCheckpoint(_dense_model(), "a.npz", monitor=0))
_add(LC, "history", lambda: _training().LoraCheckpoint(_dense_model(), "a.npz", history=3))


def _infinite():
    import tensorflow as tf

    return tf.data.Dataset.range(4).repeat().batch(2)


_add("with_cardinality", "dataset", lambda: _training().with_cardinality([[1, 2], [3, 4]]))
_add("with_cardinality", "dataset", lambda: _training().with_cardinality(np.zeros((4, 2))))
_add("with_cardinality", "dataset", lambda: _training().with_cardinality(_infinite()))

# ---- the model directory ---------------------------------------------------------
WC = "write_model_config"
_add(WC, "directory", lambda: _training().write_model_config(None, CONFIG))
_add(WC, "directory", lambda: _training().write_model_config(_file(), CONFIG))
_add(WC, "config", lambda: _training().write_model_config(_directory(), [CONFIG]))
_add(WC, "config", lambda: _training().write_model_config(_directory(), json.dumps(CONFIG)))

RC = "read_model_config"
_add(RC, "directory", lambda: _training().read_model_config(3))
_add(RC, "directory", lambda: _training().read_model_config(_missing()))
_add(RC, "directory", lambda: _training().read_model_config(_directory()))
_add(RC, "directory", lambda: _training().read_model_config(_directory("[1, 2]")))
_add(RC, "directory", lambda: _training().read_model_config(_directory("{not json")))

B = "build_from_config"
_add(B, "config", lambda: _training().build_from_config(None))
_add(B, "config", lambda: _training().build_from_config({"builder": "classifier"}))
_add(B, "config", lambda: _training().build_from_config(dict(CONFIG, builder="clasifier")))
_add(B, "config", lambda: _training().build_from_config(dict(CONFIG, arguments=[4, 4])))
_add(
    B,
    "config",
    lambda: _training().build_from_config(dict(CONFIG, arguments={"unit": 4})),
)

LM = "load_model_directory"
_add(LM, "directory", lambda: _training().load_model_directory(None))
_add(LM, "directory", lambda: _training().load_model_directory(_missing()))
_add(
    LM, "directory", lambda: _training().load_model_directory(_directory(dict(CONFIG, builder="x")))
)
_add(LM, "directory", lambda: _training().load_model_directory(_directory(CONFIG)))

RH = "read_training_history"
_add(RH, "directory", lambda: _training().read_training_history(None))
_add(RH, "directory", lambda: _training().read_training_history(_missing()))
_add(RH, "directory", lambda: _training().read_training_history(_directory(CONFIG)))

P = "PretrainingRun"
_add(P, "directory", lambda: _training().PretrainingRun(None))
_add(P, "directory", lambda: _training().PretrainingRun(_missing()))
_add(P, "directory", lambda: _training().PretrainingRun(_directory(CONFIG)))
_add(
    P,
    "encoder_only",
    lambda: _training().PretrainingRun(_directory(dict(CONFIG, objective="span")), "yes"),
)


# -- infer_task and choose_jit_compile's model (seqkeras.models.tasks) -----------

entry("seqkeras.training.infer_task", "model", lambda: _training().infer_task(None))
entry("seqkeras.training.infer_task", "model", lambda: _training().infer_task("gru"))
entry(
    "seqkeras.training.choose_jit_compile",
    "model",
    lambda: _training().choose_jit_compile(model="gru"),
)


def _training():
    from seqkeras import training

    return training
