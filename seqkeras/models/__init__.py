"""Model builders: each returns a functional `keras.Model` with named
inputs and outputs, trainable with `model.fit(jit_compile=True)`."""

from seqkeras.models.base import SequenceModel
from seqkeras.models.base import check_token_ids
from seqkeras.models.classification import classifier
from seqkeras.models.classification import tagger
from seqkeras.models.forecasting import forecaster
from seqkeras.models.generation import decoder_step
from seqkeras.models.generation import generate
from seqkeras.models.language_models import rnn_language_model
from seqkeras.models.language_models import transformer_language_model
from seqkeras.models.encoder_decoder import attention_model
from seqkeras.models.encoder_decoder import conditioned_decoder
from seqkeras.models.encoder_decoder import seq2seq
from seqkeras.models.encoder_decoder import transformer_seq2seq
from seqkeras.models.training import MaskedAccuracy
from seqkeras.models.training import MaskedPerplexity
from seqkeras.models.training import ResetStatesAtEpochStart
from seqkeras.models.training import compile_model
from seqkeras.models.training import infer_task
from seqkeras.models.training import masked_loss
from seqkeras.models.training import reset_states

__all__ = [
    "MaskedAccuracy", "MaskedPerplexity", "ResetStatesAtEpochStart",
    "SequenceModel", "check_token_ids",
    "attention_model", "classifier", "compile_model", "conditioned_decoder",
    "decoder_step", "forecaster", "generate", "infer_task", "masked_loss", "reset_states", "rnn_language_model",
    "seq2seq", "tagger", "transformer_language_model", "transformer_seq2seq",
]
