"""Error inputs of `seqkeras.models`' classes, builders and helpers (those
`catalogue.py` does not cover): tiny models built once, on first use,
outside any `tf.function`, then given one plausible wrong input each."""

import numpy as np

import seqkeras
from tests.error_inputs import entry

M = seqkeras.models
F = np.float32
P = "seqkeras.models."
IDS = np.array([[4, 5, 6, 0]], "int32")
BAD_IDS = {
    "id 25": np.array([[4, 25]], "int32"),
    "id -1": np.array([[4, -1]], "int32"),
    "float": np.array([[1.5, 2.0]], F),
    "str": np.array([["a", "b"]]),
}
_BUILT = {}


def built(key):
    """The tiny model `key`, built once (outside a traced function)."""
    if key not in _BUILT:
        import tensorflow as tf

        with tf.init_scope():
            _BUILT[key] = _BUILDERS[key]()
    return _BUILT[key]


def _tiny_lm():
    import keras

    ids = keras.Input((None,), dtype="int32", name="token_ids")
    logits = keras.layers.Dense(10)(keras.layers.Embedding(10, 2)(ids))
    return M.LanguageModel(ids, logits, vocabulary_sizes={"token_ids": 10})


def _tiny_seq2seq():
    import keras

    source = keras.Input((None,), dtype="int32", name="source_ids")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    memory = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(10, 2)(source))
    x = keras.layers.Embedding(10, 2)(target) + keras.ops.expand_dims(memory, 1)
    return M.Seq2Seq(
        [source, target],
        keras.layers.Dense(10)(x),
        vocabulary_sizes={"source_ids": 10, "target_ids": 10},
    )


def _with_lora():
    return M.with_lora(built("decoder_lm"), rank=2)


def _tokenizer():
    return seqkeras.data.WordTokenizer.train(["a good film", "a bad film"])


def _t5_tokenizer():
    from seqkeras.data import pretraining

    return pretraining.pretraining_vocabulary(["good bad movie"], 40, sentinels=1)


_BUILDERS = {
    "bilm": lambda: M.bi_language_model(10, embedding_dim=4, units=4, num_layers=1),
    "bilm_wide": lambda: M.bi_language_model(10, embedding_dim=6, units=4, num_layers=1),
    "crf": lambda: M.tagger(10, 3, units=4, embedding_dim=4, crf=True),
    "tagger": lambda: M.tagger(10, 3, units=4, embedding_dim=4),
    "classifier": lambda: M.classifier(10, 2, units=4, embedding_dim=4),
    "attention_classifier": lambda: M.classifier(
        10, 2, units=4, embedding_dim=4, pooling="attention"
    ),
    "conditioned": lambda: M.conditioned_decoder(3, 10, embedding_dim=4, units=4),
    "decoder_lm": lambda: M.decoder_language_model(
        vocab_size=10, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=8
    ),
    "lora": _with_lora,
    "mamba_lm": lambda: M.mamba_language_model(10, 8, 1, state_size=2),
    "elmo": lambda: M.elmo_classifier(
        10, 2, {"embedding_dim": 4, "units": 4, "num_layers": 1}, embedding_dim=4, units=4
    ),
    "forecaster": lambda: M.forecaster(6, 2, units=4),
    "seq2seq_forecaster": lambda: M.seq2seq_forecaster(6, 2, units=4),
    "language_model": _tiny_lm,
    "rnn_lm": lambda: M.recurrent_language_model(10, 4, cell="gru"),
    "transformer_lm": lambda: M.transformer_language_model(
        10, 8, num_layers=1, num_heads=2, hidden_dim=8
    ),
    "seq2seq": lambda: M.recurrent_seq2seq(10, 10, units=4, embedding_dim=4),
    "attention_seq2seq": lambda: M.recurrent_seq2seq(
        10, 10, units=4, embedding_dim=4, attention="additive"
    ),
    "base_seq2seq": _tiny_seq2seq,
    "transformer_seq2seq": lambda: M.transformer_seq2seq(
        10, 10, 8, num_layers=1, num_heads=2, hidden_dim=8
    ),
    "transformer_seq2seq_wide": lambda: M.transformer_seq2seq(
        10, 10, 8, num_layers=1, num_heads=2, hidden_dim=16
    ),
    "tokenizer": _tokenizer,
    "t5_tokenizer": _t5_tokenizer,
}


def ids_entries(name, key, wrap=lambda x: x):
    """A model class called with out-of-range, negative, float and string
    ids (eager calls: the check needs the values; `wrap` builds the
    inputs, its docstring names the input)."""
    for bad in BAD_IDS.values():
        entry(P + name, wrap.__doc__ or "token_ids", lambda b=bad: built(key)(wrap(b)))


# ---- model classes: called with bad token ids ---------------------------------
ids_entries("BiLanguageModel", "bilm")
ids_entries("CRFTagger", "crf")
ids_entries("Tagger", "tagger")
ids_entries("DecoderLanguageModel", "decoder_lm")
ids_entries("ElmoClassifier", "elmo")
ids_entries("LanguageModel", "language_model")
ids_entries("RecurrentLanguageModel", "rnn_lm")
ids_entries("TransformerLanguageModel", "transformer_lm")
ids_entries("StateSpaceLanguageModel", "mamba_lm")


def _source(x):
    """source_ids"""
    return {"source_ids": x, "target_ids": IDS[:, :2]}


def _target(x):
    """target_ids"""
    return {"source_ids": IDS, "target_ids": x}


def _conditioned(x):
    """target_ids"""
    return {"features": np.zeros((1, 3), F), "target_ids": x}


for cls, key in (
    ("RecurrentSeq2Seq", "seq2seq"),
    ("TransformerSeq2Seq", "transformer_seq2seq"),
    ("Seq2Seq", "base_seq2seq"),
):
    ids_entries(cls, key, _source)
    entry(P + cls, "target_ids", lambda k=key: built(k)(_target(BAD_IDS["id 25"])))
ids_entries("ConditionedDecoder", "conditioned", _conditioned)


def _tiny_io():
    import keras

    ids = keras.Input((None,), dtype="int32", name="token_ids")
    return ids, keras.layers.Dense(10)(keras.layers.Embedding(10, 2)(ids))


entry(
    P + "LanguageModel",
    "vocabulary_sizes",
    lambda: M.LanguageModel(*_tiny_io(), vocabulary_sizes={"token_ids": 0}),
)
entry(
    P + "LanguageModel",
    "vocabulary_sizes",
    lambda: M.LanguageModel(*_tiny_io(), vocabulary_sizes={"tokens": 10}),
)
entry(
    P + "DecoderLanguageModel",
    "max_length",
    lambda: M.DecoderLanguageModel(*_tiny_io(), max_length=0),
)
entry(
    P + "DecoderLanguageModel",
    "max_length",
    lambda: M.DecoderLanguageModel(*_tiny_io(), max_length="2048"),
)
SS = P + "StateSpaceLanguageModel"
entry(SS, "max_length", lambda: M.StateSpaceLanguageModel(*_tiny_io(), max_length=0))
entry(SS, "logit_soft_cap", lambda: M.StateSpaceLanguageModel(*_tiny_io(), logit_soft_cap=0))

# ---- the state-space builders -------------------------------------------------
RW = P + "rwkv7_language_model"
entry(RW, "vocab_size", lambda: M.rwkv7_language_model(0, 8, 1))
entry(RW, "head_size", lambda: M.rwkv7_language_model(10, 8, 1, head_size=3))
entry(RW, "num_layers", lambda: M.rwkv7_language_model(10, 8, "1"))
HY = P + "hybrid_language_model"
entry(HY, "num_heads", lambda: M.hybrid_language_model(10, 8, 1, num_heads=0))
entry(HY, "block_types", lambda: M.hybrid_language_model(10, 8, 1, 2, block_types="deltanet"))
entry(HY, "block_types", lambda: M.hybrid_language_model(10, 8, 1, 2, block_types=["gru"]))
entry(HY, "block_options", lambda: M.hybrid_language_model(10, 8, 1, 2, block_options={"x": {}}))
MB = P + "mamba_language_model"
entry(MB, "vocab_size", lambda: M.mamba_language_model(0, 8, 1))
entry(MB, "hidden_dim", lambda: M.mamba_language_model(10, "8", 1))
entry(MB, "version", lambda: M.mamba_language_model(10, 8, 1, version="s4"))
entry(MB, "state_size", lambda: M.mamba_language_model(10, 8, 1, state_size=0))
entry(MB, "head_dim", lambda: M.mamba_language_model(10, 8, 1, version="mamba2", head_dim=5))
GB = P + "griffin_language_model"
entry(GB, "num_layers", lambda: M.griffin_language_model(10, 8, 0, num_heads=2))
entry(GB, "block_types", lambda: M.griffin_language_model(10, 8, 2, 2, block_types="recurrent"))
entry(GB, "block_types", lambda: M.griffin_language_model(10, 8, 2, 2, block_types=["mlp"]))
entry(GB, "window", lambda: M.griffin_language_model(10, 8, 2, 2, window=0))
entry(
    SS,
    "max_length",
    lambda: M.griffin_language_model(10, 8, 3, 2, window=2).stream_start(None, 1),
    named="stream_start",
)

# ---- forecasters: the series' shape and values --------------------------------
for cls, key in (("Forecaster", "forecaster"), ("Seq2SeqForecaster", "seq2seq_forecaster")):
    entry(P + cls, "series", lambda k=key: built(k)(np.zeros((2, 3, 1), F)), graph=True, xla=True)
    entry(P + cls, "series", lambda k=key: built(k)(np.zeros((2, 6), F)), graph=True, xla=True)
    entry(P + cls, "series", lambda k=key: built(k)(np.array([[["a"]] * 6])), graph=True, xla=True)
    entry(P + cls, "series", lambda k=key: built(k)(np.zeros((2, 6, 3), F)), graph=True, xla=True)


def _forecast_io():
    import keras

    series = keras.Input((6, 1), name="series")
    return series, keras.layers.Dense(2)(keras.layers.Flatten()(series))


entry(P + "Forecaster", "quantiles", lambda: M.Forecaster(*_forecast_io(), quantiles=["low"]))
entry(P + "Forecaster", "quantiles", lambda: M.Forecaster(*_forecast_io(), quantiles=[0.9, 0.1]))
entry(P + "seq2seq_forecaster", "input_steps", lambda: M.seq2seq_forecaster(0, 2))
entry(P + "seq2seq_forecaster", "horizon", lambda: M.seq2seq_forecaster(6, -1))
entry(P + "seq2seq_forecaster", "cell", lambda: M.seq2seq_forecaster(6, 2, cell="cnn"))
entry(
    P + "seq2seq_forecaster", "quantiles", lambda: M.seq2seq_forecaster(6, 2, quantiles=[0.0, 0.5])
)
entry(
    P + "seq2seq_forecaster", "quantiles", lambda: M.seq2seq_forecaster(6, 2, quantiles=[0.5, 0.5])
)
entry(P + "seq2seq_forecaster", "targets", lambda: M.seq2seq_forecaster(6, 2, 1, targets=3))

# ---- builders -----------------------------------------------------------------
entry(P + "bi_language_model", "vocab_size", lambda: M.bi_language_model(0))
entry(P + "bi_language_model", "vocab_size", lambda: M.bi_language_model(10.5))
entry(P + "bi_language_model", "units", lambda: M.bi_language_model(10, units=-4))
entry(P + "bi_language_model", "num_layers", lambda: M.bi_language_model(10, num_layers=0))
entry(P + "bi_language_model", "dropout", lambda: M.bi_language_model(10, dropout=1.5))
DLM = dict(vocab_size=10, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=8)
entry(
    P + "decoder_language_model",
    "vocab_size",
    lambda: M.decoder_language_model(**{**DLM, "vocab_size": 0}),
)
entry(
    P + "decoder_language_model",
    "num_heads",
    lambda: M.decoder_language_model(**{**DLM, "num_heads": 3}),
)
entry(
    P + "decoder_language_model",
    "window_layers",
    lambda: M.decoder_language_model(**{**DLM, "window": 4, "window_layers": [3]}),
)
entry(
    P + "decoder_language_model",
    "dropout",
    lambda: M.decoder_language_model(**{**DLM, "dropout": float("nan")}),
)
ELMO = {"embedding_dim": 4, "units": 4, "num_layers": 1}
entry(P + "elmo_classifier", "bilm_arguments", lambda: M.elmo_classifier(10, 2, None))
entry(P + "elmo_classifier", "bilm_arguments", lambda: M.elmo_classifier(10, 2, [4, 4, 1]))
entry(P + "elmo_classifier", "num_classes", lambda: M.elmo_classifier(10, 0, ELMO))
entry(P + "elmo_classifier", "pooling", lambda: M.elmo_classifier(10, 2, ELMO, pooling="sum"))

# ---- generation and inference helpers -----------------------------------------
entry(P + "decoder_step", "model", lambda: M.decoder_step(built("classifier")))
entry(P + "decoder_step", "model", lambda: M.decoder_step(None))
entry(P + "decoder_step", "model", lambda: M.decoder_step(built("tagger")))
entry(P + "attention_model", "model", lambda: M.attention_model(built("seq2seq")))
entry(P + "attention_model", "model", lambda: M.attention_model(built("transformer_seq2seq")))
entry(P + "attention_model", "model", lambda: M.attention_model(None))
AW = "attention_weights"
entry(P + AW, "source_ids", lambda: M.attention_weights(built("attention_seq2seq"), IDS, 4))
entry(
    P + AW,
    "source_ids",
    lambda: M.attention_weights(built("attention_seq2seq"), np.array([1.5, 2.0]), 4),
)
entry(
    P + AW,
    "source_ids",
    lambda: M.attention_weights(built("attention_seq2seq"), np.array([4, 25]), 4),
)
entry(P + AW, "model", lambda: M.attention_weights(built("seq2seq"), np.array([4, 5]), 4))
entry(
    P + AW, "max_length", lambda: M.attention_weights(built("attention_seq2seq"), np.array([4]), 0)
)
PW = "pooling_weights"
entry(P + PW, "model", lambda: M.pooling_weights(built("classifier"), np.array([4, 5])))
entry(P + PW, "token_ids", lambda: M.pooling_weights(built("attention_classifier"), IDS))
entry(
    P + PW,
    "token_ids",
    lambda: M.pooling_weights(built("attention_classifier"), np.array([4.0, 5.5])),
)
entry(
    P + PW,
    "token_ids",
    lambda: M.pooling_weights(built("attention_classifier"), np.array([4, 99])),
)
PBL = "predict_by_length"
entry(P + PBL, "predict", lambda: M.predict_by_length(None, [[4, 5]]))
entry(P + PBL, "batch_size", lambda: M.predict_by_length(lambda x: x, [[4, 5]], batch_size=0))
entry(P + PBL, "max_width", lambda: M.predict_by_length(lambda x: x, [[4, 5, 6]], max_width=2))
entry(P + PBL, "rows", lambda: M.predict_by_length(lambda x: x, None))
entry(P + PBL, "predict", lambda: M.predict_by_length(lambda x: x[:1], [[4], [5, 6]]))


def _features(words):
    return {"token_ids": np.ones(np.shape(words), "int32")}


PT = "predict_tags"
entry(P + PT, "sentences", lambda: M.predict_tags(built("crf"), _features, ["O", "B"], "a b"))
entry(
    P + PT,
    "batch_size",
    lambda: M.predict_tags(built("crf"), _features, ["O", "B"], [["a"]], batch_size=0),
)
entry(P + PT, "features", lambda: M.predict_tags(built("crf"), None, ["O", "B"], [["a"]]))
entry(P + PT, "model", lambda: M.predict_tags(built("tagger"), _features, ["O", "B"], [["a"]]))
CP = "class_probabilities"
entry(
    P + CP, "texts", lambda: M.class_probabilities(built("classifier"), built("tokenizer"), "a", 8)
)
entry(
    P + CP,
    "max_length",
    lambda: M.class_probabilities(built("classifier"), built("tokenizer"), ["a"], 0),
)
entry(
    P + CP,
    "batch_size",
    lambda: M.class_probabilities(built("classifier"), built("tokenizer"), ["a"], 8, batch_size=0),
)
entry(
    P + CP,
    "model",
    lambda: M.class_probabilities("classifier", built("tokenizer"), ["a"], 8),
)
CG = "classify_by_generation"
entry(
    P + CG,
    "label_words",
    lambda: M.classify_by_generation(
        built("transformer_seq2seq"), built("t5_tokenizer"), ["good movie"], ["good", "good"]
    ),
)
entry(
    P + CG,
    "texts",
    lambda: M.classify_by_generation(
        built("transformer_seq2seq"), built("t5_tokenizer"), "good movie", ["good", "bad"]
    ),
)
entry(
    P + CG,
    "batch_size",
    lambda: M.classify_by_generation(
        built("transformer_seq2seq"), built("t5_tokenizer"), ["good"], ["good", "bad"], batch_size=0
    ),
)
entry(
    P + CG,
    "label_words",
    lambda: M.classify_by_generation(
        built("transformer_seq2seq"), built("t5_tokenizer"), ["good"], "good"
    ),
)
TT = "translate_texts"
TOK = lambda: built("tokenizer")  # noqa: E731
entry(
    P + TT,
    "batch_size",
    lambda: M.translate_texts(built("seq2seq"), ["a"], TOK(), TOK(), 4, batch_size=0),
)
entry(
    P + TT,
    "beam_width",
    lambda: M.translate_texts(built("seq2seq"), ["a"], TOK(), TOK(), 4, beam_width=0),
)
entry(
    P + TT,
    "source_length",
    lambda: M.translate_texts(built("seq2seq"), ["a"], TOK(), TOK(), 4, source_length=-1),
)
entry(P + TT, "max_length", lambda: M.translate_texts(built("seq2seq"), ["a"], TOK(), TOK(), 0))
entry(P + TT, "texts", lambda: M.translate_texts(built("seq2seq"), "a film", TOK(), TOK(), 4))

# ---- loading and features -----------------------------------------------------
entry(
    P + "load_encoder",
    "model",
    lambda: M.load_encoder(built("seq2seq"), built("transformer_seq2seq")),
)
entry(P + "load_encoder", "source", lambda: M.load_encoder(built("transformer_seq2seq"), None))
entry(
    P + "load_encoder",
    "model",
    lambda: M.load_encoder(built("transformer_seq2seq_wide"), built("transformer_seq2seq")),
)
entry(P + "load_bilm", "model", lambda: M.load_bilm(built("classifier"), built("bilm")))
entry(P + "load_bilm", "source", lambda: M.load_bilm(built("elmo"), "bilm.weights.h5"))
entry(P + "load_bilm", "model", lambda: M.load_bilm(built("bilm_wide"), built("bilm")))
entry(P + "load_bilm", "source", lambda: M.load_bilm(built("elmo"), built("classifier")))
entry(P + "elmo_features", "model", lambda: M.elmo_features(built("classifier")))
entry(P + "elmo_features", "model", lambda: M.elmo_features(None))
entry(P + "elmo_features", "trainable", lambda: M.elmo_features(built("bilm"), trainable="no"))

# ---- LoRA ---------------------------------------------------------------------
entry(P + "with_lora", "rank", lambda: M.with_lora(built("decoder_lm"), 0))
entry(P + "with_lora", "rank", lambda: M.with_lora(built("decoder_lm"), 2.5))
entry(P + "with_lora", "model", lambda: M.with_lora(built("rnn_lm"), 2))
entry(P + "with_lora", "model", lambda: M.with_lora("decoder_language_model", 2))
entry(P + "with_lora", "alpha", lambda: M.with_lora(built("decoder_lm"), 2, alpha=-1.0))
entry(P + "lora_variables", "model", lambda: M.lora_variables(None))
entry(P + "lora_variables", "model", lambda: M.lora_variables("model.npz"))
entry(P + "adapter_size", "model", lambda: M.adapter_size(None))
entry(P + "adapter_size", "model", lambda: M.adapter_size([built("lora")]))
entry(P + "merge_lora", "model", lambda: M.merge_lora(built("decoder_lm")))
entry(P + "merge_lora", "model", lambda: M.merge_lora(None))
entry(P + "save_lora", "model", lambda: M.save_lora(built("decoder_lm"), "/tmp/never.npz"))
entry(P + "save_lora", "path", lambda: M.save_lora(built("lora"), None))
entry(P + "save_lora", "model", lambda: M.save_lora(None, "/tmp/never.npz"))
entry(P + "load_lora", "model", lambda: M.load_lora(built("decoder_lm"), "/tmp/never.npz"))
entry(
    P + "load_lora",
    "path",
    lambda: M.load_lora(built("lora"), "/nonexistent/adapters.npz"),
    FileNotFoundError,
)
entry(P + "load_lora", "path", lambda: M.load_lora(built("lora"), None))


# ---- instruction tuning -------------------------------------------------------
class _Chars:  # a stand-in chat tokenizer: one id per character
    vocabulary = [chr(i) for i in range(128)]
    eos_id = 3

    def apply_chat_template(self, messages, add_generation_prompt=True):
        text = "".join(f"<{m['role']}>{m['content']};" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def encode(self, texts):
        import tensorflow as tf

        return tf.ragged.constant([[ord(c) % 10 for c in t] for t in texts])


ID = "instruction_data"
entry(P + ID, "prompts", lambda: M.instruction_data(_Chars(), "hi", ["yo"]))
entry(P + ID, "answers", lambda: M.instruction_data(_Chars(), ["hi"], ["yo", "ho"]))
entry(P + ID, "answers", lambda: M.instruction_data(_Chars(), ["hi"], [7]))
entry(P + ID, "prompts", lambda: M.instruction_data(_Chars(), [], []))
DATA = {"token_ids": [np.arange(1, 6, dtype="int32")], "answer_start": np.array([3], "int32")}
IB = "InstructionBatches"
entry(P + IB, "batch_size", lambda: M.InstructionBatches(DATA, batch_size=0))
entry(P + IB, "multiple", lambda: M.InstructionBatches(DATA, multiple=2.5))
entry(P + IB, "data", lambda: M.InstructionBatches({"token_ids": DATA["token_ids"]}))
entry(
    P + IB,
    "data",
    lambda: M.InstructionBatches({**DATA, "answer_start": np.array([3, 1], "int32")}),
)
entry(
    P + IB, "data", lambda: M.InstructionBatches({**DATA, "answer_start": np.array([9], "int32")})
)
entry(P + IB, "data", lambda: M.InstructionBatches({"token_ids": [], "answer_start": []}))
entry(P + "answer_model", "model", lambda: M.answer_model(built("rnn_lm")))
entry(P + "answer_model", "model", lambda: M.answer_model(None))
AI = "answer_ids"
entry(P + AI, "prompts", lambda: M.answer_ids(built("decoder_lm"), _Chars(), "hi"))
entry(
    P + AI,
    "max_new_tokens",
    lambda: M.answer_ids(built("decoder_lm"), _Chars(), ["hi"], max_new_tokens=0),
)
entry(
    P + AI, "batch_size", lambda: M.answer_ids(built("decoder_lm"), _Chars(), ["hi"], batch_size=-1)
)
entry(P + AI, "model", lambda: M.answer_ids(built("classifier"), _Chars(), ["hi"]))
GA = "generate_answers"
entry(P + GA, "prompts", lambda: M.generate_answers(built("decoder_lm"), _Chars(), "hi"))
entry(P + GA, "prompts", lambda: M.generate_answers(built("decoder_lm"), _Chars(), [b"hi"]))
entry(
    P + GA,
    "max_new_tokens",
    lambda: M.generate_answers(built("decoder_lm"), _Chars(), ["hi"], max_new_tokens=0),
)
entry(
    P + GA,
    "multiple",
    lambda: M.generate_answers(built("decoder_lm"), _Chars(), ["hi"], multiple=0),
)
