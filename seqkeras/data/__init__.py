"""Data: synthetic tasks (the built-in defaults), vocabularies, local file
readers and helpers that turn sequences into training pairs."""

from seqkeras.data.sequences import forecast_windows
from seqkeras.data.sequences import language_model_windows
from seqkeras.data.sequences import length_batches
from seqkeras.data.sequences import tbptt_windows
from seqkeras.data.sequences import teacher_forcing
from seqkeras.data import tokens
from seqkeras.data.tokens import BOS
from seqkeras.data.tokens import EOS
from seqkeras.data.tokens import PAD
from seqkeras.data.tokens import UNK
from seqkeras.data.synthetic import adding_problem
from seqkeras.data.synthetic import copy_task
from seqkeras.data.synthetic import dates
from seqkeras.data.synthetic import multi_seasonal_series
from seqkeras.data.bert_text import BertSubwordTokenizer
from seqkeras.data.bert_text import load_translation_tokenizers
from seqkeras.data.bert_text import save_translation_tokenizers
from seqkeras.data.bert_text import translation_tokenizers
from seqkeras.data.bert_text import BertTokenizer
from seqkeras.data.bert_text import BertWordFeatures
from seqkeras.data.byte_level_bpe import ByteLevelBPETokenizer
from seqkeras.data.checks import check_token_dataset
from seqkeras.data.checks import check_token_ids
from seqkeras.data.conll import read_conll
from seqkeras.data.conll import split_words
from seqkeras.data.pipelines import classification_dataset
from seqkeras.data.pipelines import random_windows_dataset
from seqkeras.data.pipelines import read_lines
from seqkeras.data.pipelines import read_parallel
from seqkeras.data.pipelines import read_text
from seqkeras.data.pipelines import tag_vocabulary
from seqkeras.data.pipelines import tagging_dataset
from seqkeras.data.pipelines import translation_dataset
from seqkeras.data.series import read_series_csv
from seqkeras.data.series import sarima_forecasts
from seqkeras.data.subword import SubwordTokenizer
from seqkeras.data.text import CharVocabulary
from seqkeras.data.text import read_tinyshakespeare
from seqkeras.data.tsv import read_labeled_tsv
from seqkeras.data.word_features import WordFeatures
from seqkeras.data.words import WordTokenizer

__all__ = [
    "BOS",
    "BertSubwordTokenizer",
    "BertTokenizer",
    "BertWordFeatures",
    "ByteLevelBPETokenizer",
    "CharVocabulary",
    "EOS",
    "PAD",
    "SubwordTokenizer",
    "UNK",
    "WordFeatures",
    "WordTokenizer",
    "adding_problem",
    "check_token_dataset",
    "check_token_ids",
    "classification_dataset",
    "copy_task",
    "dates",
    "forecast_windows",
    "language_model_windows",
    "length_batches",
    "multi_seasonal_series",
    "random_windows_dataset",
    "read_conll",
    "split_words",
    "read_labeled_tsv",
    "read_lines",
    "read_parallel",
    "read_series_csv",
    "sarima_forecasts",
    "read_text",
    "read_tinyshakespeare",
    "tag_vocabulary",
    "tagging_dataset",
    "tbptt_windows",
    "teacher_forcing",
    "tokens",
    "translation_dataset",
    "translation_tokenizers",
    "save_translation_tokenizers",
    "load_translation_tokenizers",
]
