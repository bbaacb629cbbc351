"""Pretrained checkpoints: BERT-family encoders and GPT-2, from Hugging Face
directories (`config.json` + `model.safetensors`, no torch) or keras-hub
presets, and Llama-family decoders (Llama, Qwen2, Mistral) from Hugging
Face directories or llama.cpp GGUF files (`read_checkpoint`), and Mamba,
Mamba-2, RecurrentGemma, xLSTM, Qwen3-Next and LFM2 language models from
Hugging Face directories (`read_state_space_directory`), as seqkeras
models that fine-tune with `fit`, save as `.keras` and export like any
other (`seqkeras.export`).

    ckpt = seqkeras.pretrained.read_checkpoint("all-MiniLM-L6-v2/")
    model = seqkeras.pretrained.bert_classifier(ckpt.architecture, 2)
    seqkeras.pretrained.load_pretrained(model, ckpt)
    tokenizer = seqkeras.data.BertTokenizer.load("all-MiniLM-L6-v2/")

The checkpoint's own WordPiece tokenizer is `seqkeras.data.BertTokenizer`
(graph ops that TF Serving has); GPT-2's byte-level BPE is not here (use
`tokenizers` or keras-hub outside the graph).
"""

from seqkeras.pretrained.checkpoints import Checkpoint
from seqkeras.pretrained.checkpoints import bert_architecture
from seqkeras.pretrained.checkpoints import gpt2_architecture
from seqkeras.pretrained.checkpoints import read_checkpoint
from seqkeras.pretrained.llama_checkpoints import SMOLLM2_SHA256
from seqkeras.pretrained.llama_checkpoints import gguf_architecture
from seqkeras.pretrained.llama_checkpoints import gguf_metadata
from seqkeras.pretrained.llama_checkpoints import gguf_tensor_name
from seqkeras.pretrained.llama_checkpoints import llama_architecture
from seqkeras.pretrained.llama_checkpoints import read_gguf
from seqkeras.pretrained.llama_checkpoints import read_llama_directory
from seqkeras.pretrained.llama_checkpoints import smollm2_path
from seqkeras.pretrained.llama_checkpoints import unpermute_rope_rows
from seqkeras.pretrained.state_space import load_state_space_weights
from seqkeras.pretrained.state_space import read_state_space_directory
from seqkeras.pretrained.state_space import state_space_arguments
from seqkeras.pretrained.state_space import state_space_language_model
from seqkeras.pretrained.models import PretrainedClassifier
from seqkeras.pretrained.models import PretrainedMaskedLM
from seqkeras.pretrained.models import PretrainedCRFTagger
from seqkeras.pretrained.models import PretrainedTagger
from seqkeras.pretrained.models import bert_classifier
from seqkeras.pretrained.models import bert_encoder
from seqkeras.pretrained.models import bert_masked_lm
from seqkeras.pretrained.models import bert_tagger
from seqkeras.pretrained.models import gpt2_classifier
from seqkeras.pretrained.models import gpt2_language_model
from seqkeras.pretrained.models import gpt2_tagger
from seqkeras.pretrained.models import llama_language_model
from seqkeras.pretrained.models import load_llama
from seqkeras.pretrained.models import load_pretrained
from seqkeras.pretrained.writing import save_checkpoint

__all__ = [
    "Checkpoint",
    "PretrainedCRFTagger",
    "PretrainedClassifier",
    "PretrainedMaskedLM",
    "PretrainedTagger",
    "SMOLLM2_SHA256",
    "bert_architecture",
    "bert_classifier",
    "bert_encoder",
    "bert_masked_lm",
    "bert_tagger",
    "gpt2_architecture",
    "gpt2_classifier",
    "gpt2_language_model",
    "gpt2_tagger",
    "gguf_architecture",
    "gguf_metadata",
    "gguf_tensor_name",
    "llama_architecture",
    "llama_language_model",
    "load_llama",
    "load_pretrained",
    "load_state_space_weights",
    "read_checkpoint",
    "read_gguf",
    "read_state_space_directory",
    "read_llama_directory",
    "save_checkpoint",
    "smollm2_path",
    "state_space_arguments",
    "state_space_language_model",
    "unpermute_rope_rows",
]
