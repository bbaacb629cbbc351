"""Error inputs of `seqkeras.pretrained`: checkpoint readers given bad
paths, configs and metadata, builders given bad architectures and sizes,
built models given bad token ids, `load_pretrained` / `save_checkpoint`
given the wrong model or checkpoint. Everything is tiny (one block of
width 8) and nothing is trained, downloaded or exported."""

import numpy as np

from tests.error_inputs import entry, opt_out

P = "seqkeras.pretrained."
#: A tiny BERT / GPT-2 / Llama architecture (the builders' doc examples).
BERT = dict(
    vocab_size=40, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16, max_length=16
)
GPT2 = dict(BERT, model_type="gpt2")
LLAMA = dict(BERT, model_type="llama", num_key_value_heads=1)
#: A tiny Hugging Face BERT `config.json`.
BERT_CONFIG = {
    "model_type": "bert",
    "vocab_size": 40,
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 16,
    "max_position_embeddings": 16,
    "hidden_act": "gelu",
}
GPT2_CONFIG = {
    "model_type": "gpt2",
    "vocab_size": 40,
    "n_embd": 8,
    "n_layer": 1,
    "n_head": 2,
    "n_positions": 16,
}
LLAMA_CONFIG = {
    "model_type": "llama",
    "vocab_size": 40,
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "intermediate_size": 16,
    "max_position_embeddings": 16,
}
GGUF_METADATA = {
    "general.architecture": "llama",
    "llama.embedding_length": 8,
    "llama.attention.head_count": 2,
    "llama.attention.head_count_kv": 1,
    "llama.context_length": 16,
    "llama.block_count": 1,
    "llama.feed_forward_length": 16,
    "llama.vocab_size": 40,
}
_BUILT = {}


def sp():
    import seqkeras.pretrained

    return seqkeras.pretrained


def built(key):
    """A tiny model made once (key: a builder of `seqkeras.pretrained`)."""
    if key not in _BUILT:
        s = sp()
        _BUILT[key] = {
            "bert_classifier": lambda: s.bert_classifier(BERT, 2),
            "bert_masked_lm": lambda: s.bert_masked_lm(BERT),
            "bert_tagger": lambda: s.bert_tagger(BERT, 5),
            "bert_crf_tagger": lambda: s.bert_tagger(BERT, 5, crf=True),
            "bert_encoder": lambda: s.bert_encoder(BERT),
            "gpt2_language_model": lambda: s.gpt2_language_model(GPT2),
        }[key]()
    return _BUILT[key]


def with_config(config, **changes):
    return {**config, **changes}


def _scratch():
    """One temporary directory for this module's files (made once)."""
    if "tmp" not in _BUILT:
        import tempfile

        _BUILT["tmp"] = tempfile.mkdtemp(prefix="pretrained_error_inputs_")
    return _BUILT["tmp"]


def a_file(text=b"hello"):
    """A small file that is not a checkpoint."""
    import os

    path = os.path.join(_scratch(), f"not_gguf_{len(text)}.gguf")
    with open(path, "wb") as f:
        f.write(text)
    return path


def an_empty_directory():
    import os

    path = os.path.join(_scratch(), "empty")
    os.makedirs(path, exist_ok=True)
    return path


def bert_checkpoint(**changes):
    return sp().Checkpoint("bert", dict(BERT), {}, "nowhere", "huggingface")


# ---- constants --------------------------------------------------------------
opt_out(
    P + "SMOLLM2_SHA256",
    "a constant string (the sha256 that smollm2_path checks), not a callable",
)
opt_out(
    P + "smollm2_path",
    "takes no arguments: its only errors (package missing, sha256 mismatch) come from the "
    "installed environment, not from an input a user passes",
)

# ---- Checkpoint ---------------------------------------------------------------
entry(P + "Checkpoint", "model_type", lambda: sp().Checkpoint("t5", {}, {}, "d", "huggingface"))
entry(P + "Checkpoint", "architecture", lambda: sp().Checkpoint("bert", None, {}, "d", "gguf"))
entry(P + "Checkpoint", "tensors", lambda: sp().Checkpoint("bert", {}, [1, 2], "d", "gguf"))
entry(P + "Checkpoint", "source", lambda: sp().Checkpoint("bert", {}, {}, "d", "pytorch"))
entry(P + "Checkpoint", "name", lambda: bert_checkpoint().tensor(None), named="Checkpoint")

# ---- config readers -----------------------------------------------------------
entry(P + "bert_architecture", "config", lambda: sp().bert_architecture("config.json"))
entry(
    P + "bert_architecture",
    "model_type",
    lambda: sp().bert_architecture(with_config(BERT_CONFIG, model_type="gpt2")),
)
entry(
    P + "bert_architecture",
    "hidden_act",
    lambda: sp().bert_architecture(with_config(BERT_CONFIG, hidden_act="swish")),
)
entry(
    P + "bert_architecture",
    "hidden_size",
    lambda: sp().bert_architecture(with_config(BERT_CONFIG, hidden_size="8")),
)
entry(
    P + "bert_architecture",
    "num_attention_heads",
    lambda: sp().bert_architecture(with_config(BERT_CONFIG, num_attention_heads=3)),
)
entry(
    P + "bert_architecture",
    "vocab_size",
    lambda: sp().bert_architecture(with_config(BERT_CONFIG, vocab_size=0)),
)
entry(P + "gpt2_architecture", "config", lambda: sp().gpt2_architecture(None))
entry(
    P + "gpt2_architecture",
    "model_type",
    lambda: sp().gpt2_architecture(with_config(GPT2_CONFIG, model_type="bert")),
)
entry(
    P + "gpt2_architecture",
    "n_head",
    lambda: sp().gpt2_architecture(with_config(GPT2_CONFIG, n_head=0)),
)
entry(
    P + "gpt2_architecture",
    "n_embd",
    lambda: sp().gpt2_architecture(with_config(GPT2_CONFIG, n_embd=8.5)),
)
entry(
    P + "gpt2_architecture",
    "n_positions",
    lambda: sp().gpt2_architecture({k: v for k, v in GPT2_CONFIG.items() if k != "n_positions"}),
)
entry(P + "llama_architecture", "config", lambda: sp().llama_architecture([LLAMA_CONFIG]))
entry(
    P + "llama_architecture",
    "model_type",
    lambda: sp().llama_architecture(with_config(LLAMA_CONFIG, model_type="bert")),
)
entry(
    P + "llama_architecture",
    "num_key_value_heads",
    lambda: sp().llama_architecture(with_config(LLAMA_CONFIG, num_key_value_heads=3)),
)
entry(
    P + "llama_architecture",
    "hidden_size",
    lambda: sp().llama_architecture(with_config(LLAMA_CONFIG, hidden_size="eight")),
)
entry(
    P + "llama_architecture",
    "rope_scaling",
    lambda: sp().llama_architecture(with_config(LLAMA_CONFIG, rope_scaling={"type": "yarn"})),
)
entry(P + "gguf_architecture", "metadata", lambda: sp().gguf_architecture([("a", 1)]))
entry(
    P + "gguf_architecture",
    "metadata",
    lambda: sp().gguf_architecture(with_config(GGUF_METADATA, **{"general.architecture": "gpt2"})),
)
entry(
    P + "gguf_architecture",
    "tensor_names",
    lambda: sp().gguf_architecture(GGUF_METADATA, tensor_names=None),
)
entry(
    P + "gguf_architecture",
    "tensor_names",
    lambda: sp().gguf_architecture(GGUF_METADATA, tensor_names="output.weight"),
)
entry(
    P + "gguf_architecture",
    "embedding_length",
    lambda: sp().gguf_architecture(with_config(GGUF_METADATA, **{"llama.embedding_length": -8})),
)
entry(
    P + "gguf_architecture",
    "rope_freqs",
    lambda: sp().gguf_architecture(GGUF_METADATA, rope_freqs=np.ones(7, "float32")),
)
entry(
    P + "gguf_architecture",
    "rope_freqs",
    lambda: sp().gguf_architecture(GGUF_METADATA, rope_freqs=np.full(2, np.nan, "float32")),
)

# ---- GGUF helpers ---------------------------------------------------------------
entry(P + "gguf_tensor_name", "name", lambda: sp().gguf_tensor_name(None))
entry(P + "gguf_tensor_name", "name", lambda: sp().gguf_tensor_name(3))
entry(P + "gguf_tensor_name", "name", lambda: sp().gguf_tensor_name(b"blk.0.attn_q.weight"))
entry(P + "unpermute_rope_rows", "n_head", lambda: sp().unpermute_rope_rows(np.ones((8, 4)), 0))
entry(P + "unpermute_rope_rows", "n_head", lambda: sp().unpermute_rope_rows(np.ones((8, 4)), 2.0))
entry(P + "unpermute_rope_rows", "n_head", lambda: sp().unpermute_rope_rows(np.ones((6, 4)), 2))
entry(P + "unpermute_rope_rows", "weights", lambda: sp().unpermute_rope_rows(np.float32(1.0), 1))
entry(P + "unpermute_rope_rows", "weights", lambda: sp().unpermute_rope_rows(["a", "b"], 1))

# ---- file readers ----------------------------------------------------------------
entry(P + "gguf_metadata", "path", lambda: sp().gguf_metadata("/no/such/model.gguf"))
entry(P + "gguf_metadata", "path", lambda: sp().gguf_metadata(None))
entry(P + "gguf_metadata", "path", lambda: sp().gguf_metadata(a_file()))
entry(P + "read_gguf", "path", lambda: sp().read_gguf("/no/such/model.gguf"))
entry(P + "read_gguf", "path", lambda: sp().read_gguf(7))
entry(P + "read_gguf", "path", lambda: sp().read_gguf(a_file(b"GGML not gguf")))
entry(P + "read_checkpoint", "path", lambda: sp().read_checkpoint("/no/such/dir"))
entry(P + "read_checkpoint", "path", lambda: sp().read_checkpoint(None))
entry(P + "read_checkpoint", "path", lambda: sp().read_checkpoint(a_file()))
entry(P + "read_checkpoint", "path", lambda: sp().read_checkpoint(an_empty_directory()))
entry(P + "read_llama_directory", "directory", lambda: sp().read_llama_directory("/no/such"))
entry(P + "read_llama_directory", "directory", lambda: sp().read_llama_directory(None))
entry(
    P + "read_llama_directory",
    "directory",
    lambda: sp().read_llama_directory(an_empty_directory()),
)
entry(
    P + "read_llama_directory",
    "config",
    lambda: sp().read_llama_directory(an_empty_directory(), config="config.json"),
)

# ---- builders ---------------------------------------------------------------------
entry(P + "bert_encoder", "architecture", lambda: sp().bert_encoder(None))
entry(P + "bert_encoder", "architecture", lambda: sp().bert_encoder(GPT2))
entry(P + "bert_encoder", "num_heads", lambda: sp().bert_encoder(dict(BERT, num_heads=3)))
entry(P + "bert_encoder", "vocab_size", lambda: sp().bert_encoder(dict(BERT, vocab_size=0)))
entry(P + "bert_classifier", "num_classes", lambda: sp().bert_classifier(BERT, 0))
entry(P + "bert_classifier", "pooling", lambda: sp().bert_classifier(BERT, 2, pooling="max"))
entry(P + "bert_classifier", "dropout", lambda: sp().bert_classifier(BERT, 2, dropout=1.5))
entry(P + "bert_classifier", "architecture", lambda: sp().bert_classifier([BERT], 2))
entry(P + "bert_masked_lm", "architecture", lambda: sp().bert_masked_lm("bert"))
entry(P + "bert_masked_lm", "dropout", lambda: sp().bert_masked_lm(BERT, dropout=-0.1))
entry(P + "bert_masked_lm", "max_length", lambda: sp().bert_masked_lm(dict(BERT, max_length=0)))
entry(P + "bert_tagger", "num_tags", lambda: sp().bert_tagger(BERT, 0))
entry(P + "bert_tagger", "crf", lambda: sp().bert_tagger(BERT, 5, crf="yes"))
entry(P + "bert_tagger", "units", lambda: sp().bert_tagger(BERT, 5, units=0))
entry(P + "bert_tagger", "architecture", lambda: sp().bert_tagger(dict(BERT, model_type="gpt2"), 5))
entry(P + "gpt2_classifier", "num_classes", lambda: sp().gpt2_classifier(GPT2, -1))
entry(
    P + "gpt2_classifier",
    "architecture",
    lambda: sp().gpt2_classifier(BERT | {"model_type": "bert"}, 2),
)
entry(P + "gpt2_classifier", "dropout", lambda: sp().gpt2_classifier(GPT2, 2, dropout=1.0))
entry(P + "gpt2_classifier", "pad_id", lambda: sp().gpt2_classifier(GPT2, 2, pad_id="<pad>"))
entry(P + "gpt2_tagger", "num_tags", lambda: sp().gpt2_tagger(GPT2, 0))
entry(P + "gpt2_tagger", "pad_id", lambda: sp().gpt2_tagger(GPT2, 5, pad_id=-1))
entry(P + "gpt2_tagger", "casing", lambda: sp().gpt2_tagger(GPT2, 5, casing="no"))
entry(P + "gpt2_language_model", "architecture", lambda: sp().gpt2_language_model(None))
entry(
    P + "gpt2_language_model",
    "architecture",
    lambda: sp().gpt2_language_model(dict(BERT, model_type="bert")),
)
entry(P + "gpt2_language_model", "dropout", lambda: sp().gpt2_language_model(GPT2, dropout=2.0))
entry(
    P + "gpt2_language_model",
    "num_heads",
    lambda: sp().gpt2_language_model(dict(GPT2, num_heads=3)),
)
entry(P + "llama_language_model", "architecture", lambda: sp().llama_language_model((1, 2)))
entry(
    P + "llama_language_model",
    "architecture",
    lambda: sp().llama_language_model(dict(BERT, model_type="gpt2")),
)
entry(
    P + "llama_language_model",
    "dropout",
    lambda: sp().llama_language_model(LLAMA, dropout=1.5),
)
entry(
    P + "llama_language_model",
    "num_key_value_heads",
    lambda: sp().llama_language_model(dict(LLAMA, num_key_value_heads=3)),
)

# ---- built models: bad token ids ---------------------------------------------------
entry(
    P + "PretrainedClassifier",
    "token_ids",
    lambda: built("bert_classifier")(np.array([[2, 5, 40]])),
)
entry(
    P + "PretrainedClassifier",
    "token_ids",
    lambda: built("bert_classifier")(np.array([[2.5, 5.0, 3.0]])),
)
entry(
    P + "PretrainedClassifier",
    "parts",
    lambda: sp().PretrainedClassifier(*_tiny_io(), parts=["embedding"]),
)
entry(
    P + "PretrainedMaskedLM",
    "token_ids",
    lambda: built("bert_masked_lm")(
        {"token_ids": np.array([[1, -4, 9, 2]]), "mask_positions": np.array([[1, 0]])}
    ),
)
entry(
    P + "PretrainedMaskedLM",
    "vocabulary_sizes",
    lambda: sp().PretrainedMaskedLM(*_tiny_io(), vocabulary_sizes={"token_ids": 0}),
)
entry(
    P + "PretrainedTagger",
    "token_ids",
    lambda: built("bert_tagger")(
        {"token_ids": np.array([[2, 5, 99, 7, 3]]), "word_starts": np.array([[1, 3, 0]])}
    ),
)
entry(
    P + "PretrainedTagger",
    "parts",
    lambda: sp().PretrainedTagger(*_tiny_io(), parts=[("embedding", 3)]),
)
entry(
    P + "PretrainedCRFTagger",
    "token_ids",
    lambda: built("bert_crf_tagger")(
        {"token_ids": np.array([[2, 5, 6, 7, 3.5]]), "word_starts": np.array([[1, 3, 0]])}
    ),
)
entry(
    P + "PretrainedCRFTagger",
    "parts",
    lambda: sp().PretrainedCRFTagger(*_tiny_io(), parts="crf"),
)


def _tiny_io():
    import keras

    ids = keras.Input((None,), dtype="int32", name="token_ids")
    return ids, keras.layers.Embedding(10, 2)(ids)


# ---- weights in and out ---------------------------------------------------------------
entry(
    P + "load_pretrained", "checkpoint", lambda: sp().load_pretrained(built("bert_encoder"), None)
)
entry(P + "load_pretrained", "checkpoint", lambda: sp().load_pretrained(built("bert_encoder"), 3))
entry(P + "load_pretrained", "model", lambda: sp().load_pretrained(None, bert_checkpoint()))
entry(
    P + "load_pretrained",
    "model",
    lambda: sp().load_pretrained(built("gpt2_language_model"), bert_checkpoint()),
)
entry(P + "load_llama", "path", lambda: sp().load_llama(None))
entry(P + "load_llama", "path", lambda: sp().load_llama(3))
entry(P + "load_llama", "path", lambda: sp().load_llama("/no/such/model.gguf"))
entry(
    P + "save_checkpoint",
    "architecture",
    lambda: sp().save_checkpoint(built("bert_encoder"), an_empty_directory(), None),
)
entry(
    P + "save_checkpoint",
    "architecture",
    lambda: sp().save_checkpoint(built("bert_encoder"), an_empty_directory(), LLAMA),
)
entry(
    P + "save_checkpoint",
    "model",
    lambda: sp().save_checkpoint(None, an_empty_directory(), BERT),
)
entry(
    P + "save_checkpoint",
    "directory",
    lambda: sp().save_checkpoint(built("bert_encoder"), None, BERT),
)


# ---- Mamba / Mamba-2 / RecurrentGemma checkpoints -----------------------------
def _state_space(function):
    import seqkeras.pretrained as pretrained

    return getattr(pretrained, function)


MAMBA_CONFIG = {
    "model_type": "mamba",
    "vocab_size": 10,
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "state_size": 2,
}
SSL = P + "state_space_language_model"
entry(
    SSL,
    "layer_types",
    lambda: _state_space("state_space_language_model")(
        {
            "model_type": "lfm2",
            "vocab_size": 10,
            "hidden_size": 8,
            "num_hidden_layers": 1,
            "layer_types": ["sliding_attention"],
        }
    ),
)
entry(
    SSL,
    "layer_types",
    lambda: _state_space("state_space_language_model")(
        {
            "model_type": "qwen3_next",
            "vocab_size": 10,
            "hidden_size": 8,
            "num_hidden_layers": 1,
            "layer_types": ["sliding_attention"],
        }
    ),
)
entry(SSL, "model_type", lambda: _state_space("state_space_language_model")({"model_type": "x"}))
entry(SSL, "config", lambda: _state_space("state_space_language_model")("config.json"))
entry(
    SSL,
    "hidden_size",
    lambda: _state_space("state_space_language_model")({"model_type": "mamba"}),
)
entry(
    P + "state_space_arguments",
    "model_type",
    lambda: _state_space("state_space_arguments")({"model_type": "gpt2"}),
)
entry(
    P + "load_state_space_weights",
    "tensors",
    lambda: _state_space("load_state_space_weights")(
        _state_space("state_space_language_model")(MAMBA_CONFIG), {}
    ),
)
entry(
    P + "read_state_space_directory",
    "directory",
    lambda: _state_space("read_state_space_directory")("/nonexistent-seqkeras-checkpoint"),
)
