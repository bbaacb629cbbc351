"""Model builders: each returns a functional `keras.Model` subclass (a
`SequenceModel`) with named inputs and outputs, trainable with
`model.fit(jit_compile=True)`, that owns its kind's generation and
streaming contract."""

from seqkeras.models.base import SequenceModel
from seqkeras.models.classification import CRFTagger
from seqkeras.models.classification import Classifier
from seqkeras.models.classification import Tagger
from seqkeras.models.classification import classifier
from seqkeras.models.classification import tagger
from seqkeras.models.encoder_decoder import ConditionedDecoder
from seqkeras.models.encoder_decoder import RecurrentSeq2Seq
from seqkeras.models.encoder_decoder import Seq2Seq
from seqkeras.models.encoder_decoder import TransformerSeq2Seq
from seqkeras.models.encoder_decoder import attention_model
from seqkeras.models.encoder_decoder import conditioned_decoder
from seqkeras.models.encoder_decoder import recurrent_seq2seq
from seqkeras.models.encoder_decoder import transformer_seq2seq
from seqkeras.models.encoder_decoder import load_encoder
from seqkeras.models.forecasting import Forecaster
from seqkeras.models.forecasting import Seq2SeqForecaster
from seqkeras.models.forecasting import forecaster
from seqkeras.models.forecasting import seq2seq_forecaster
from seqkeras.models.generation import decoder_step
from seqkeras.models.inference import attention_weights
from seqkeras.models.inference import class_probabilities
from seqkeras.models.inference import pooling_weights
from seqkeras.models.inference import predict_by_length
from seqkeras.models.inference import predict_tags
from seqkeras.models.generation import generate
from seqkeras.models.generation import translate_texts
from seqkeras.models.language_models import LanguageModel
from seqkeras.models.language_models import RecurrentLanguageModel
from seqkeras.models.language_models import TransformerLanguageModel
from seqkeras.models.decoder_lm import DecoderLanguageModel
from seqkeras.models.decoder_lm import decoder_language_model
from seqkeras.models.state_space import StateSpaceLanguageModel
from seqkeras.models.state_space import griffin_language_model
from seqkeras.models.state_space import hybrid_language_model
from seqkeras.models.state_space import mamba_language_model
from seqkeras.models.state_space import rwkv7_language_model
from seqkeras.models.instruction import InstructionBatches
from seqkeras.models.instruction import answer_ids
from seqkeras.models.instruction import answer_model
from seqkeras.models.instruction import generate_answers
from seqkeras.models.instruction import instruction_data
from seqkeras.models.lora import adapter_size
from seqkeras.models.lora import load_lora
from seqkeras.models.lora import lora_variables
from seqkeras.models.lora import merge_lora
from seqkeras.models.lora import save_lora
from seqkeras.models.lora import with_lora
from seqkeras.models.language_models import recurrent_language_model
from seqkeras.models.language_models import transformer_language_model
from seqkeras.models.elmo import BiLanguageModel
from seqkeras.models.pretraining import ElmoClassifier
from seqkeras.models.elmo import bi_language_model
from seqkeras.models.pretraining import classify_by_generation
from seqkeras.models.pretraining import elmo_classifier
from seqkeras.models.elmo import elmo_features
from seqkeras.models.elmo import load_bilm

__all__ = [
    "BiLanguageModel",
    "ElmoClassifier",
    "CRFTagger",
    "Classifier",
    "ConditionedDecoder",
    "Forecaster",
    "LanguageModel",
    "RecurrentLanguageModel",
    "RecurrentSeq2Seq",
    "Seq2Seq",
    "Seq2SeqForecaster",
    "SequenceModel",
    "StateSpaceLanguageModel",
    "Tagger",
    "TransformerLanguageModel",
    "DecoderLanguageModel",
    "TransformerSeq2Seq",
    "attention_model",
    "attention_weights",
    "class_probabilities",
    "pooling_weights",
    "predict_by_length",
    "predict_tags",
    "bi_language_model",
    "classifier",
    "classify_by_generation",
    "conditioned_decoder",
    "decoder_step",
    "elmo_classifier",
    "elmo_features",
    "forecaster",
    "generate",
    "load_bilm",
    "griffin_language_model",
    "hybrid_language_model",
    "load_encoder",
    "mamba_language_model",
    "rwkv7_language_model",
    "recurrent_language_model",
    "recurrent_seq2seq",
    "seq2seq_forecaster",
    "tagger",
    "transformer_language_model",
    "decoder_language_model",
    "load_lora",
    "InstructionBatches",
    "adapter_size",
    "answer_ids",
    "answer_model",
    "generate_answers",
    "instruction_data",
    "lora_variables",
    "merge_lora",
    "save_lora",
    "with_lora",
    "transformer_seq2seq",
    "translate_texts",
]


_TRAINING = (
    "MaskedAccuracy MaskedPerplexity PinballLoss ResetStatesAtEpochStart "
    "SmoothedTokenCrossEntropy TimeBudget WarmupLinearDecay choose_jit_compile "
    "compile_model infer_task masked_loss reset_states"
).split()
_MOVED = {"check_token_ids": "seqkeras.data", **{n: "seqkeras.training" for n in _TRAINING}}


#: Builders renamed to match their classes: the old name warns and still works.
_RENAMED = {
    "seq2seq": "recurrent_seq2seq",
    "bilm": "bi_language_model",
    "rnn_language_model": "recurrent_language_model",
}


def __getattr__(name):  # names with one home now: the old one warns and still works
    if name in _RENAMED:
        import warnings

        new = _RENAMED[name]
        warnings.warn(
            f"`seqkeras.models.{name}` is now `seqkeras.models.{new}`",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[new]
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(
            f"`seqkeras.models.{name}` is `{_MOVED[name]}.{name}`", DeprecationWarning, stacklevel=2
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
