"""Training helpers: what `fit` needs beside a model. Masked losses and
metrics, learning-rate schedules, callbacks, `compile_model` (the loss,
metrics and XLA choice a model's task implies), and the model directory a
training run writes (`config.json` that rebuilds the model, its best
weights, its history) with the callbacks that write it and resume a
killed run."""

from seqkeras.training.objectives import MaskedAccuracy
from seqkeras.training.objectives import MaskedPerplexity
from seqkeras.training.objectives import PinballLoss
from seqkeras.training.objectives import ResetStatesAtEpochStart
from seqkeras.training.objectives import SmoothedTokenCrossEntropy
from seqkeras.training.objectives import TimeBudget
from seqkeras.training.objectives import WarmupLinearDecay
from seqkeras.training.objectives import choose_jit_compile
from seqkeras.training.objectives import compile_model
from seqkeras.training.objectives import cosine_schedule
from seqkeras.training.objectives import infer_task
from seqkeras.training.objectives import masked_loss
from seqkeras.training.objectives import reset_states
from seqkeras.training.workflow import CONFIG_FILE
from seqkeras.training.workflow import EpochTimer
from seqkeras.training.workflow import LoraCheckpoint
from seqkeras.training.workflow import PretrainingRun
from seqkeras.training.workflow import WEIGHTS_FILE
from seqkeras.training.workflow import build_from_config
from seqkeras.training.workflow import load_model_directory
from seqkeras.training.workflow import read_model_config
from seqkeras.training.workflow import read_training_history
from seqkeras.training.workflow import training_callbacks
from seqkeras.training.workflow import with_cardinality
from seqkeras.training.workflow import write_model_config

__all__ = [
    "compile_model",
    "choose_jit_compile",
    "infer_task",
    "masked_loss",
    "MaskedAccuracy",
    "MaskedPerplexity",
    "PinballLoss",
    "SmoothedTokenCrossEntropy",
    "cosine_schedule",
    "WarmupLinearDecay",
    "TimeBudget",
    "ResetStatesAtEpochStart",
    "reset_states",
    "EpochTimer",
    "training_callbacks",
    "LoraCheckpoint",
    "with_cardinality",
    "CONFIG_FILE",
    "WEIGHTS_FILE",
    "write_model_config",
    "read_model_config",
    "build_from_config",
    "load_model_directory",
    "read_training_history",
    "PretrainingRun",
]
