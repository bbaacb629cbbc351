"""seqkeras layers: keras.ops only, backend-portable."""

from seqkeras.layers.attention import Attention
from seqkeras.layers.attention import MultiHeadAttention
from seqkeras.layers.attention_decoder import AttentionDecoder
from seqkeras.layers.char_encoder import CharacterEncoder
from seqkeras.layers.crf import CRF
from seqkeras.layers.decoder_block import LlamaDecoderBlock
from seqkeras.layers.embedding import BertEmbedding
from seqkeras.layers.embedding import GatherSteps
from seqkeras.layers.feedforward import GatedFeedForward
from seqkeras.layers.feedforward import MixtureOfExperts
from seqkeras.layers.cells import GRUCell
from seqkeras.layers.cells import LSTMCell
from seqkeras.layers.cells import RecurrentCell
from seqkeras.layers.cells import SimpleRNNCell
from seqkeras.layers.min_rnn import LinearRecurrentCell
from seqkeras.layers.min_rnn import MinGRUCell
from seqkeras.layers.min_rnn import MinLSTMCell
from seqkeras.layers.mixing import ReverseSequence
from seqkeras.layers.mixing import ScalarMix
from seqkeras.layers.pooling import SequencePooling
from seqkeras.layers.positional import PositionalEmbedding
from seqkeras.layers.positional import SinusoidalPositionalEncoding
from seqkeras.layers.recurrent import Bidirectional
from seqkeras.layers.recurrent import Recurrent
from seqkeras.layers.recurrent import StackedRecurrent
from seqkeras.layers.rotary import RotaryEmbedding
from seqkeras.layers.mamba import Mamba2Mixer
from seqkeras.layers.mamba import MambaBlock
from seqkeras.layers.mamba import MambaMixer
from seqkeras.layers.rglru import RGLRU
from seqkeras.layers.rglru import GriffinBlock
from seqkeras.layers.delta import GatedDeltaNet
from seqkeras.layers.xlstm import MLSTMLayer
from seqkeras.layers.xlstm import SLSTMLayer
from seqkeras.layers.hybrid import MixerBlock
from seqkeras.layers.hybrid import ShortConvolution
from seqkeras.layers.rwkv import RWKV7Blocks
from seqkeras.layers.rwkv import RWKV7ChannelMixing
from seqkeras.layers.rwkv import RWKV7TimeMixing
from seqkeras.layers.rglru import GriffinTemporalBlock
from seqkeras.layers.scaling import Scale
from seqkeras.layers.scaling import SoftCap
from seqkeras.layers.scaling import WindowScaling
from seqkeras.layers.token_dropout import TokenDropout
from seqkeras.layers.transformer import TransformerDecoderBlock
from seqkeras.layers.transformer import TransformerEncoderBlock
from seqkeras.layers.walk import all_layers

__all__ = [
    "Attention",
    "AttentionDecoder",
    "BertEmbedding",
    "Bidirectional",
    "CRF",
    "CharacterEncoder",
    "GRUCell",
    "GatedFeedForward",
    "GatherSteps",
    "GriffinBlock",
    "GatedDeltaNet",
    "MLSTMLayer",
    "SLSTMLayer",
    "MixerBlock",
    "MixtureOfExperts",
    "ShortConvolution",
    "RWKV7Blocks",
    "RWKV7ChannelMixing",
    "RWKV7TimeMixing",
    "GriffinTemporalBlock",
    "LSTMCell",
    "LinearRecurrentCell",
    "LlamaDecoderBlock",
    "Mamba2Mixer",
    "MambaBlock",
    "MambaMixer",
    "MinGRUCell",
    "MinLSTMCell",
    "MultiHeadAttention",
    "PositionalEmbedding",
    "RGLRU",
    "Recurrent",
    "RotaryEmbedding",
    "RecurrentCell",
    "ReverseSequence",
    "ScalarMix",
    "Scale",
    "SequencePooling",
    "SimpleRNNCell",
    "SinusoidalPositionalEncoding",
    "SoftCap",
    "StackedRecurrent",
    "TokenDropout",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "WindowScaling",
    "all_layers",
]
