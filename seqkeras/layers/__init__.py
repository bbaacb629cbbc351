"""seqkeras layers: keras.ops only, backend-portable."""

from seqkeras.layers.cells import GRUCell
from seqkeras.layers.cells import LSTMCell
from seqkeras.layers.cells import RecurrentCell
from seqkeras.layers.cells import SimpleRNNCell
from seqkeras.layers.recurrent import Bidirectional
from seqkeras.layers.recurrent import Recurrent
from seqkeras.layers.recurrent import StackedRecurrent

__all__ = [
    "Bidirectional",
    "GRUCell",
    "LSTMCell",
    "Recurrent",
    "RecurrentCell",
    "SimpleRNNCell",
    "StackedRecurrent",
]
