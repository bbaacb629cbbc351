"""Data: synthetic tasks (the built-in defaults), vocabularies, local file
readers and helpers that turn sequences into training pairs."""

from seqkeras.data.sequences import forecast_windows
from seqkeras.data.sequences import tbptt_windows
from seqkeras.data.sequences import teacher_forcing
from seqkeras.data.synthetic import BOS
from seqkeras.data.synthetic import EOS
from seqkeras.data.synthetic import PAD
from seqkeras.data.synthetic import adding_problem
from seqkeras.data.synthetic import copy_task
from seqkeras.data.synthetic import dates
from seqkeras.data.synthetic import multi_seasonal_series
from seqkeras.data.text import CharVocabulary
from seqkeras.data.text import read_tinyshakespeare
from seqkeras.data.text import shared_data_dir

__all__ = [
    "BOS", "EOS", "PAD", "CharVocabulary", "adding_problem", "copy_task",
    "dates", "forecast_windows", "multi_seasonal_series",
    "read_tinyshakespeare", "shared_data_dir", "tbptt_windows",
    "teacher_forcing",
]
