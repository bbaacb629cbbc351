"""The first entries of the registry: public layers, builders, decoding,
data and export functions given bad input (each must raise ValueError or
TypeError whose message names the layer or function and the argument,
before any NaN, silent result or bare TensorFlow error). `case(where,
argument, call)` registers an entry of the public name `where` resolves
to."""

import keras
import numpy as np

import seqkeras
from seqkeras import decoding
from seqkeras import layers as L
from seqkeras.data import CharVocabulary
from tests.error_inputs import entry

M = seqkeras.models
D = seqkeras.data
F = np.float32
RNG = np.random.default_rng(0)
X3 = RNG.normal(size=(2, 5, 4)).astype(F)  # (batch, time, features)
IDS = np.array([[4, 5, 6, 0], [7, 8, 0, 0]], "int32")


def built(layer, *args, **kwargs):
    layer(*args, **kwargs)
    return layer


def step(tokens, cache, index):  # a decoding step over 6 tokens
    return np.zeros((tokens.shape[0], 6), F), cache


#: Model methods: the entries of the model class, the message names the method.
METHODS = {"fit": "SequenceModel", "evaluate": "SequenceModel", "predict": "SequenceModel"}
NAMESPACES = ("layers", "models", "training", "decoding", "data", "export", "pretrained")


def public(where):
    """The public name of `where` (a layer, function or `Class.method`)."""
    import importlib

    first = METHODS.get(where, where.split(".")[0])
    for namespace in NAMESPACES:
        module = importlib.import_module(f"seqkeras.{namespace}")
        if first in module.__all__:
            return f"seqkeras.{namespace}.{first}"
    return f"seqkeras.(internal).{first}"  # runs, but counts for no public name


def case(where, arg, call, error=(ValueError, TypeError)):
    entry(public(where), arg, call, error, named=where.split(".")[0])


# ---- layer constructors -------------------------------------------------
for cell in ("SimpleRNNCell", "GRUCell", "LSTMCell"):
    cls = getattr(L, cell)
    case(cell, "units", lambda cls=cls: cls(0))
    case(cell, "units", lambda cls=cls: cls(-3))
    case(cell, "units", lambda cls=cls: cls(2.5))
    case(cell, "units", lambda cls=cls: cls("8"))
    case(cell, "dropout", lambda cls=cls: cls(4, dropout=1.0))
    case(cell, "dropout", lambda cls=cls: cls(4, dropout=-0.1))
    case(cell, "recurrent_dropout", lambda cls=cls: cls(4, recurrent_dropout=2))
case("SimpleRNNCell", "activation", lambda: L.SimpleRNNCell(4, activation="sigmoid"))
case("GRUCell", "reset_after", lambda: L.GRUCell(4, reset_after="yes"))
case("LSTMCell", "unit_forget_bias", lambda: L.LSTMCell(4, unit_forget_bias=1))
case("Recurrent", "cell", lambda: L.Recurrent("lstm"))
case("Recurrent", "return_sequences", lambda: L.Recurrent(L.GRUCell(4), return_sequences="no"))
case(
    "Bidirectional",
    "merge_mode",
    lambda: L.Bidirectional(L.Recurrent(L.GRUCell(4)), merge_mode="max"),
)
case("Bidirectional", "layer", lambda: L.Bidirectional(L.GRUCell(4)))
case("StackedRecurrent", "layers", lambda: L.StackedRecurrent([]))
case(
    "StackedRecurrent",
    "dropout",
    lambda: L.StackedRecurrent([L.Recurrent(L.GRUCell(4), return_sequences=True)], dropout=1.5),
)
case("Attention", "score", lambda: L.Attention("bilinear"))
case("Attention", "dropout", lambda: L.Attention(dropout=1.0))
case("Attention", "units", lambda: L.Attention("additive", units=0))
case("MultiHeadAttention", "num_heads", lambda: L.MultiHeadAttention(0, 4))
case("MultiHeadAttention", "key_dim", lambda: L.MultiHeadAttention(2, -1))
case("MultiHeadAttention", "dropout", lambda: L.MultiHeadAttention(2, 4, dropout=2.0))
case("MultiHeadAttention", "use_bias", lambda: L.MultiHeadAttention(2, 4, use_bias="yes"))
for block in ("TransformerEncoderBlock", "TransformerDecoderBlock"):
    cls = getattr(L, block)
    case(block, "num_heads", lambda cls=cls: cls(0, 16))
    case(block, "intermediate_dim", lambda cls=cls: cls(2, 0))
    case(block, "dropout", lambda cls=cls: cls(2, 16, dropout=1.0))
    case(block, "activation", lambda cls=cls: cls(2, 16, activation="tanh"))
    case(block, "norm_first", lambda cls=cls: cls(2, 16, norm_first=None))
    case(block, "layer_norm_epsilon", lambda cls=cls: cls(2, 16, layer_norm_epsilon=0.0))
    case(block, "layer_norm_epsilon", lambda cls=cls: cls(2, 16, layer_norm_epsilon=-1e-5))
    case(block, "layer_norm_epsilon", lambda cls=cls: cls(2, 16, layer_norm_epsilon=float("nan")))
case("SequencePooling", "mode", lambda: L.SequencePooling("median"))
case("PositionalEmbedding", "max_length", lambda: L.PositionalEmbedding(0))
case(
    "SinusoidalPositionalEncoding",
    "max_wavelength",
    lambda: L.SinusoidalPositionalEncoding(max_wavelength=0),
)
case("AttentionDecoder", "score", lambda: L.AttentionDecoder(L.GRUCell(4), score="bilinear"))
case("AttentionDecoder", "style", lambda: L.AttentionDecoder(L.GRUCell(4), style="gnmt"))

# ---- layer calls ----------------------------------------------------------
case("Recurrent", "inputs", lambda: L.Recurrent(L.GRUCell(4))(np.array([[["a"]]])))
case(
    "Recurrent",
    "inputs",
    lambda: built(L.Recurrent(L.GRUCell(4)), X3)(RNG.normal(size=(2, 5, 3)).astype(F)),
)
case("Recurrent", "inputs", lambda: L.Recurrent(L.GRUCell(4))(X3[0]))
case(
    "Recurrent",
    "initial_state",
    lambda: L.Recurrent(L.GRUCell(4))(X3, initial_state=[np.zeros((2, 5), F)]),
)
case(
    "Recurrent",
    "initial_state",
    lambda: L.Recurrent(L.LSTMCell(4))(X3, initial_state=[np.zeros((2, 4), F)]),
)
case(
    "Recurrent",
    "initial_state",
    lambda: L.Recurrent(L.GRUCell(4))(X3, initial_state=[np.zeros((3, 4), F)]),
)
case("Recurrent", "mask", lambda: L.Recurrent(L.GRUCell(4))(X3, mask=np.ones((2, 4), bool)))
case("Recurrent", "batch", lambda: built(L.Recurrent(L.GRUCell(4), stateful=True), X3)(X3[:1]))
case(
    "GRUCell",
    "states",
    lambda: built(L.GRUCell(4), X3[:, 0], [np.zeros((2, 4), F)])(X3[:, 0], [np.zeros((2, 3), F)]),
)
case(
    "LSTMCell",
    "inputs",
    lambda: built(L.LSTMCell(4), X3[:, 0], [np.zeros((2, 4), F)] * 2)(
        RNG.normal(size=(2, 7)).astype(F), [np.zeros((2, 4), F)] * 2
    ),
)
case(
    "Bidirectional",
    "inputs",
    lambda: built(L.Bidirectional(L.Recurrent(L.GRUCell(4))), X3)(
        RNG.normal(size=(2, 5, 6)).astype(F)
    ),
)
case(
    "Bidirectional",
    "mask",
    lambda: L.Bidirectional(L.Recurrent(L.GRUCell(4)))(X3, mask=np.ones((2, 7), bool)),
)
case(
    "StackedRecurrent",
    "mask",
    lambda: L.StackedRecurrent([L.Recurrent(L.GRUCell(4), return_sequences=True)])(
        X3, mask=np.ones((3, 5), bool)
    ),
)
case("Attention", "value_mask", lambda: L.Attention()(X3, X3, value_mask=np.ones((2, 3), bool)))
case("Attention", "query_mask", lambda: L.Attention()(X3, X3, query_mask=np.ones((2, 9), bool)))
case(
    "Attention",
    "query",
    lambda: built(L.Attention("general"), X3, X3)(RNG.normal(size=(2, 5, 3)).astype(F), X3),
)
case("Attention", "query", lambda: L.Attention()(np.array([[["a"]]]), X3))
case("Attention", "query", lambda: L.Attention()(X3.astype("int32"), X3.astype("int32")))
case(
    "SinusoidalPositionalEncoding",
    "start_index",
    lambda: L.SinusoidalPositionalEncoding()(X3, start_index="3"),
)
case("PositionalEmbedding", "start_index", lambda: L.PositionalEmbedding(8)(X3, start_index=1.5))
case(
    "MultiHeadAttention",
    "value_mask",
    lambda: L.MultiHeadAttention(2, 4)(X3, value_mask=np.ones((2, 3), bool)),
)
case(
    "MultiHeadAttention",
    "query_mask",
    lambda: L.MultiHeadAttention(2, 4)(X3, X3, query_mask=np.ones((1, 5), bool)),
)
case(
    "MultiHeadAttention",
    "attention_mask",
    lambda: L.MultiHeadAttention(2, 4)(X3, attention_mask=np.ones((2, 5, 3), bool)),
)
case(
    "MultiHeadAttention",
    "query",
    lambda: built(L.MultiHeadAttention(2, 4), X3)(RNG.normal(size=(2, 5, 6)).astype(F)),
)
case(
    "MultiHeadAttention",
    "cache",
    lambda: L.MultiHeadAttention(2, 4)(
        X3[:, :1], X3[:, :1], cache=np.zeros((2, 2, 8, 3, 4), F), cache_index=0
    ),
)
case(
    "TransformerEncoderBlock",
    "padding_mask",
    lambda: L.TransformerEncoderBlock(2, 8)(X3, padding_mask=np.ones((2, 3), bool)),
)
case(
    "TransformerEncoderBlock",
    "attention_mask",
    lambda: L.TransformerEncoderBlock(2, 8)(X3, attention_mask=np.ones((2, 4, 4), bool)),
)
case(
    "TransformerEncoderBlock",
    "inputs",
    lambda: built(L.TransformerEncoderBlock(2, 8), X3)(RNG.normal(size=(2, 5, 6)).astype(F)),
)
case(
    "TransformerEncoderBlock",
    "inputs",
    lambda: L.TransformerEncoderBlock(2, 8)(np.array([[["a"] * 4]])),
)
case(
    "TransformerDecoderBlock",
    "decoder_padding_mask",
    lambda: L.TransformerDecoderBlock(2, 8)(X3, decoder_padding_mask=np.ones((2, 2), bool)),
)
case(
    "TransformerDecoderBlock",
    "encoder_padding_mask",
    lambda: L.TransformerDecoderBlock(2, 8)(X3, X3, encoder_padding_mask=np.ones((2, 2), bool)),
)
case(
    "TransformerDecoderBlock",
    "encoder_sequence",
    lambda: built(L.TransformerDecoderBlock(2, 8), X3)(X3, X3),
)
case("SequencePooling", "mask", lambda: L.SequencePooling("mean")(X3, mask=np.ones((2, 3), bool)))
case("SequencePooling", "inputs", lambda: L.SequencePooling("max")(X3[0]))
case("SequencePooling", "inputs", lambda: L.SequencePooling("mean")(np.array([[["a"]]])))
case("PositionalEmbedding", "inputs", lambda: L.PositionalEmbedding(3)(X3))
case("PositionalEmbedding", "start_index", lambda: L.PositionalEmbedding(8)(X3, start_index=6))
case(
    "AttentionDecoder",
    "memory_mask",
    lambda: L.AttentionDecoder(L.GRUCell(4))(X3, X3, memory_mask=np.ones((2, 2), bool)),
)
case(
    "AttentionDecoder",
    "inputs_mask",
    lambda: L.AttentionDecoder(L.GRUCell(4))(X3, X3, inputs_mask=np.ones((3, 5), bool)),
)
case(
    "AttentionDecoder",
    "initial_state",
    lambda: L.AttentionDecoder(L.GRUCell(4))(X3, X3, initial_state=[np.zeros((2, 7), F)]),
)
case("AttentionDecoder", "memory", lambda: L.AttentionDecoder(L.GRUCell(4))(X3, X3[0]))

# ---- builders -----------------------------------------------------------
for name, build in {
    "classifier": lambda **k: M.classifier(**{"vocab_size": 10, "num_classes": 2, **k}),
    "tagger": lambda **k: M.tagger(**{"vocab_size": 10, "num_tags": 3, **k}),
    "recurrent_language_model": lambda **k: M.recurrent_language_model(**{"vocab_size": 10, **k}),
}.items():
    case(name, "vocab_size", lambda b=build: b(vocab_size=0))
    case(name, "vocab_size", lambda b=build: b(vocab_size=1.5))
    case(name, "embedding_dim", lambda b=build: b(embedding_dim=0))
    case(name, "units", lambda b=build: b(units=-1))
    case(name, "num_layers", lambda b=build: b(num_layers=0))
    case(name, "dropout", lambda b=build: b(dropout=1.0))
case("classifier", "num_classes", lambda: M.classifier(10, 0))
case("classifier", "backbone", lambda: M.classifier(10, 2, backbone="cnn"))
case("classifier", "pooling", lambda: M.classifier(10, 2, pooling="sum"))
case("classifier", "num_heads", lambda: M.classifier(10, 2, backbone="transformer", num_heads=0))
case("tagger", "num_tags", lambda: M.tagger(10, -2))
case("recurrent_language_model", "cell", lambda: M.recurrent_language_model(10, cell="cnn"))
case(
    "recurrent_language_model", "batch_size", lambda: M.recurrent_language_model(10, stateful=True)
)
case(
    "recurrent_language_model",
    "tie_weights",
    lambda: M.recurrent_language_model(10, tie_weights="yes"),
)
case("transformer_language_model", "vocab_size", lambda: M.transformer_language_model(0, 8))
case("transformer_language_model", "max_length", lambda: M.transformer_language_model(10, 0))
case(
    "transformer_language_model",
    "num_heads",
    lambda: M.transformer_language_model(10, 8, num_heads=3, hidden_dim=16),
)
case(
    "transformer_language_model",
    "positional",
    lambda: M.transformer_language_model(10, 8, positional="rotary"),
)
case(
    "transformer_language_model", "dropout", lambda: M.transformer_language_model(10, 8, dropout=-1)
)
case("recurrent_seq2seq", "source_vocab_size", lambda: M.recurrent_seq2seq(0, 10))
case("recurrent_seq2seq", "target_vocab_size", lambda: M.recurrent_seq2seq(10, 0))
case("recurrent_seq2seq", "attention", lambda: M.recurrent_seq2seq(10, 10, attention="x"))
case(
    "recurrent_seq2seq",
    "style",
    lambda: M.recurrent_seq2seq(10, 10, attention="additive", style="gnmt"),
)
case("recurrent_seq2seq", "cell", lambda: M.recurrent_seq2seq(10, 10, cell="cnn"))
case("recurrent_seq2seq", "units", lambda: M.recurrent_seq2seq(10, 10, units=0))
case("transformer_seq2seq", "max_length", lambda: M.transformer_seq2seq(10, 10, 0))
case(
    "transformer_seq2seq",
    "positional",
    lambda: M.transformer_seq2seq(10, 10, 8, positional="rotary"),
)
case(
    "transformer_seq2seq",
    "hidden_dim",
    lambda: M.transformer_seq2seq(10, 10, 8, num_heads=3, hidden_dim=16),
)
case("conditioned_decoder", "feature_dim", lambda: M.conditioned_decoder(0, 10))
case("conditioned_decoder", "vocab_size", lambda: M.conditioned_decoder(4, 0))
case("conditioned_decoder", "cell", lambda: M.conditioned_decoder(4, 10, cell="cnn"))
case("forecaster", "input_steps", lambda: M.forecaster(0, 2))
case("forecaster", "horizon", lambda: M.forecaster(6, 0))
case("forecaster", "features", lambda: M.forecaster(6, 2, features=0))
case("forecaster", "backbone", lambda: M.forecaster(6, 2, backbone="cnn"))
case("compile_model", "task", lambda: M.compile_model(M.classifier(10, 2), task="tokens"))
case("compile_model", "task", lambda: M.compile_model(M.tagger(10, 3), task="classes"))
case("compile_model", "task", lambda: M.compile_model(M.classifier(10, 2), task="ranking"))
case(
    "SequenceModel",
    "vocabulary_sizes",
    lambda: M.SequenceModel(*_tiny_io(), vocabulary_sizes={"other": 5}),
)
case(
    "SequenceModel",
    "vocabulary_sizes",
    lambda: M.SequenceModel(*_tiny_io(), vocabulary_sizes={"token_ids": 0}),
)


def _tiny_io():
    import keras

    ids = keras.Input((None,), dtype="int32", name="token_ids")
    return ids, keras.layers.Embedding(10, 2)(ids)


# ---- model inputs: token ids ------------------------------------------------
_CLS = {}


def classifier():
    if "m" not in _CLS:
        _CLS["m"] = M.compile_model(M.classifier(10, 2, backbone="gru", units=4, embedding_dim=4))
    return _CLS["m"]


for bad, label in (
    (np.array([[1, 25]]), "id 25"),
    (np.array([[1, -1]]), "id -1"),
    (np.array([[1.7, 2.0]]), "1.7"),
    (np.array([["a", "b"]]), "str"),
):
    case("Classifier", "token_ids", lambda b=bad: classifier()(b))
    case("predict", "token_ids", lambda b=bad: classifier().predict(b, verbose=0))
    case("fit", "token_ids", lambda b=bad: classifier().fit(b, np.array([1]), verbose=0))
    case("evaluate", "token_ids", lambda b=bad: classifier().evaluate(b, np.array([1]), verbose=0))
case(
    "fit",
    "token_ids",
    lambda: classifier().fit(
        np.array([[1, 2]]),
        np.array([1]),
        verbose=0,
        validation_data=(np.array([[1, 40]]), np.array([0])),
    ),
)

# ---- decoding and generate ---------------------------------------------------
P = np.array([[1]], "int32")
case("greedy", "max_length", lambda: decoding.greedy(step, P, (), 0))
case("greedy", "max_length", lambda: decoding.greedy(step, P, (), 2.5))
case("greedy", "max_length", lambda: decoding.greedy(step, P, (), "4"))
case("greedy", "prompt", lambda: decoding.greedy(step, P[0], (), 4))
case("greedy", "prompt", lambda: decoding.greedy(step, np.zeros((1, 0), "int32"), (), 4))
case("greedy", "prompt", lambda: decoding.greedy(step, np.ones((1, 6), "int32"), (), 4))
case("Runtime", "cache_layout", lambda: decoding.Runtime("paged"))
case("Runtime", "buffer_writes", lambda: decoding.Runtime(buffer_writes="inplace"))
case("Runtime", "while_loop", lambda: decoding.Runtime(while_loop="tf"))
case("greedy", "runtime", lambda: decoding.greedy(step, P, (), 4, runtime="serving"))
case("choose_token", "logits", lambda: decoding.choose_token(np.zeros(5, "float32"), 0))
case("greedy", "prompt", lambda: decoding.greedy(step, np.array([[1.7]]), (), 5))
case(
    "greedy",
    "prompt_lengths",
    lambda: decoding.greedy(step, P, (), 5, prompt_lengths=np.array([1, 1, 1])),
)
case("choose_token", "temperature", lambda: decoding.choose_token(np.zeros((1, 5)), 0, -1.0))
case("choose_token", "top_k", lambda: decoding.choose_token(np.zeros((1, 5)), 0, 1.0, top_k=0))
case("choose_token", "seed", lambda: decoding.choose_token(np.zeros((1, 5)), 0, 1.0, seed=0.5))
case("sample", "temperature", lambda: decoding.sample(step, P, (), 4, temperature=-1.0))
case("sample", "temperature", lambda: decoding.sample(step, P, (), 4, temperature=float("nan")))
case("sample", "temperature", lambda: decoding.sample(step, P, (), 4, temperature=float("inf")))
case("sample", "temperature", lambda: decoding.sample(step, P, (), 4, temperature="hot"))
case("sample", "top_k", lambda: decoding.sample(step, P, (), 4, top_k=0))
case("sample", "top_k", lambda: decoding.sample(step, P, (), 4, top_k=2.5))
case("sample", "top_p", lambda: decoding.sample(step, P, (), 4, top_p=0))
case("sample", "top_p", lambda: decoding.sample(step, P, (), 4, top_p=1.5))
case("sample", "top_p", lambda: decoding.sample(step, P, (), 4, top_p=float("nan")))
case("sample", "seed", lambda: decoding.sample(step, P, (), 4, seed=1.5))
case("beam_search", "beam_width", lambda: decoding.beam_search(step, P, (), 4, beam_width=0))
case("beam_search", "beam_width", lambda: decoding.beam_search(step, P, (), 4, beam_width=2.0))
case(
    "beam_search",
    "length_penalty_alpha",
    lambda: decoding.beam_search(step, P, (), 4, length_penalty_alpha=-0.5),
)
case(
    "beam_search",
    "length_penalty_alpha",
    lambda: decoding.beam_search(step, P, (), 4, length_penalty_alpha=float("nan")),
)
_LM = {}


def lm():
    if "m" not in _LM:
        _LM["m"] = M.recurrent_language_model(10, 4, cell="gru")
        _LM["s"] = M.recurrent_seq2seq(10, 10, units=4, embedding_dim=4)
    return _LM["m"]


def s2s():
    lm()
    return _LM["s"]


PR = np.array([[4, 5]], "int32")
case(
    "generate",
    "top_k",
    lambda: M.generate(lm(), prompt=PR, max_length=4, strategy="greedy", top_k=5),
)
case(
    "generate",
    "beam_width",
    lambda: M.generate(lm(), prompt=PR, max_length=4, strategy="sample", beam_width=2),
)
case(
    "generate",
    "temperature",
    lambda: M.generate(lm(), prompt=PR, max_length=4, strategy="beam", temperature=0.5),
)
case("generate", "strategy", lambda: M.generate(lm(), prompt=PR, max_length=4, strategy="nucleus"))
case(
    "generate",
    "top_k",
    lambda: M.generate(lm(), prompt=PR, max_length=4, strategy="sample", top_k=50),
)
case(
    "generate",
    "beam_width",
    lambda: M.generate(lm(), prompt=PR, max_length=4, strategy="beam", beam_width=50),
)
case("generate", "prompt", lambda: M.generate(lm(), prompt=np.array([[4, 25]]), max_length=4))
case("generate", "prompt", lambda: M.generate(lm(), prompt=np.array([[4, -2]]), max_length=4))
case("generate", "prompt", lambda: M.generate(lm(), prompt=np.zeros((1, 0), "int32"), max_length=4))
case("generate", "prompt", lambda: M.generate(lm(), max_length=4))
case("generate", "max_length", lambda: M.generate(lm(), prompt=PR, max_length=0))
case(
    "generate",
    "temperature",
    lambda: M.generate(lm(), prompt=PR, max_length=4, strategy="sample", temperature=float("nan")),
)
case(
    "generate",
    "length_penalty_alpha",
    lambda: M.generate(
        lm(), prompt=PR, max_length=4, strategy="beam", length_penalty_alpha=float("inf")
    ),
)
case(
    "generate",
    "prompt_lengths",
    lambda: M.generate(lm(), prompt=PR, max_length=4, prompt_lengths=np.array([1, 2])),
)
case("generate", "source", lambda: M.generate(s2s(), np.zeros((2, 0), "int32"), max_length=4))
case("generate", "source_ids", lambda: M.generate(s2s(), np.array([[4, 30]]), max_length=4))
case("generate", "inputs", lambda: M.generate(s2s(), None, max_length=4))
case(
    "generate",
    "prompt",
    lambda: M.generate(s2s(), np.array([[4, 5]]), prompt=np.ones((3, 1), "int32"), max_length=4),
)

# ---- data --------------------------------------------------------------------
case("copy_task", "n", lambda: D.copy_task(0, 1, 2))
case("copy_task", "min_length", lambda: D.copy_task(5, 3, 2))
case("dates", "n", lambda: D.dates(0))
case(
    "multi_seasonal_series",
    "periods",
    lambda: D.multi_seasonal_series(10, periods=(0,), amplitudes=(1,)),
)
case("forecast_windows", "series", lambda: D.forecast_windows(np.arange(5.0), 4, 3))
case("teacher_forcing", "targets", lambda: D.teacher_forcing(np.arange(3)))
case("CharVocabulary", "characters", lambda: CharVocabulary(["ab"]))
case("CharVocabulary", "characters", lambda: CharVocabulary("aa"))
case(
    "CharVocabulary.encode",
    "max_length",
    lambda: CharVocabulary("ab").encode(["abab"], max_length=2),
)
case(
    "read_tinyshakespeare",
    "path",
    lambda: D.read_tinyshakespeare("/nonexistent/input.txt"),
    FileNotFoundError,
)
case("tbptt_windows", "batch_size", lambda: D.tbptt_windows(np.arange(10), 0, 2))
# each a silent result or a bare error before (a float for an id or a size,
# a wrong rank, an id outside the vocabulary)
case("copy_task", "min_length", lambda: D.copy_task(3, 2.5, 4))
case("forecast_windows", "series", lambda: D.forecast_windows(np.zeros((20, 2, 2)), 4, 2))
case("forecast_windows", "horizon", lambda: D.forecast_windows(np.arange(20.0), 4, 2.5))
case("teacher_forcing", "targets", lambda: D.teacher_forcing(np.array([[5.5, 6.2, 2.0]])))
case("CharVocabulary.decode", "ids", lambda: CharVocabulary("abc").decode(np.array([[4, -1]])))
case("CharVocabulary.decode", "ids", lambda: CharVocabulary("abc").decode(np.array([[4, 50]])))
case("CharVocabulary.encode", "texts", lambda: CharVocabulary("abc").encode([5]))
case("tbptt_windows", "ids", lambda: D.tbptt_windows(np.arange(40).reshape(20, 2), 2, 3))
case("tbptt_windows", "batch_size", lambda: D.tbptt_windows(np.arange(40), 2.5, 3))


# ---- export ------------------------------------------------------------------
def _export_cases():
    from seqkeras import export as E

    tagger = lambda: M.tagger(10, 3, units=4, embedding_dim=4)  # noqa: E731
    case("saved_model", "target", lambda: E.saved_model(tagger(), "/tmp/never", target="tpu"))
    case("ServeText", "vocabulary", lambda: E.signatures.ServeText(vocabulary=["ab", "c"]))
    case("ServeText", "vocabulary", lambda: E.signatures.ServeText(vocabulary=42))
    case(
        "saved_model",
        "signatures",
        lambda: E.saved_model(tagger(), "/tmp/never", signatures=["generate"]),
    )
    case(
        "saved_model",
        "stateful",
        lambda: E.saved_model(
            M.recurrent_language_model(10, 4, stateful=True, batch_size=2), "/tmp/never"
        ),
    )
    case("onnx", "opset", lambda: E.onnx(tagger(), "/tmp/n.onnx", opset=3))
    case("onnx", "opset", lambda: E.onnx(tagger(), "/tmp/n.onnx", opset="17"))
    case("convert_builtin", "quantize", lambda: E.convert_builtin("/tmp/never", quantize="int3"))
    case("GenerateBeam", "length_penalty_alpha", lambda: E.signatures.GenerateBeam(8, 4, -0.5))
    unbuilt = lambda: keras.Sequential([L.Scale(2.0)])  # noqa: E731
    case("saved_model", "inputs", lambda: E.saved_model(unbuilt(), "/tmp/never/1"))
    case("tflite", "inputs", lambda: E.tflite(unbuilt(), "/tmp/never.tflite"))
    case(
        "export_and_verify",
        "quantize",
        lambda: E.export_and_verify(tagger(), "t", [IDS], quantize="float16"),
    )
    case("export_and_verify", "samples", lambda: E.export_and_verify(tagger(), "t", []))
    case(
        "export_and_verify",
        "formats",
        lambda: E.export_and_verify(tagger(), "t", [IDS], formats=("tflite", "coreml")),
    )
    case(
        "streaming_tflite",
        "model",
        lambda: E.streaming_tflite(
            M.tagger(10, 3, units=4, embedding_dim=4, bidirectional=True), "/tmp/never.tflite"
        ),
    )


_export_cases()
