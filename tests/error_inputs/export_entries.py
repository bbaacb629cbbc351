"""Error inputs of `seqkeras.export`'s runners, auditors and writers (the
exporters' bad arguments fail before any conversion). Tiny TFLite and
ONNX files are made once (a converted one-op function, an ONNX graph
built by hand); no model is trained or exported."""

import functools
import os
import tempfile

import numpy as np

from tests.error_inputs import entry, opt_out

X = "seqkeras.export."
NEVER = os.path.join(tempfile.gettempdir(), "seqkeras-never", "x")  # never written


def _e():
    from seqkeras import export

    return export


def _tagger():
    import seqkeras

    return seqkeras.models.tagger(10, 3, units=4, embedding_dim=4, bidirectional=False)


@functools.lru_cache(maxsize=None)
def _lm():
    import seqkeras

    return seqkeras.models.decoder_language_model(
        vocab_size=30, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16, max_length=16
    )


@functools.lru_cache(maxsize=None)
def _flatbuffer():
    """A one-op TFLite model: signature `serving_default`, `x` (batch, 3)
    float32 in, `y` out."""
    import tensorflow as tf

    from seqkeras.export.tflite import convert_functions

    @tf.function(input_signature=[{"x": tf.TensorSpec((None, 3), tf.float32, name="x")}])
    def serve(inputs):
        return {"y": inputs["x"] * 2.0}

    return convert_functions([serve], [])


@functools.lru_cache(maxsize=None)
def _onnx_path():
    """An ONNX file: `ids` (batch, time) int32 in, `y` (the same) out."""
    import onnx
    from onnx import TensorProto, helper

    spec = [None, None]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["ids"], ["y"])],
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT32, spec)],
        [helper.make_tensor_value_info("y", TensorProto.INT32, spec)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(), "tiny.onnx")
    onnx.save(model, path)
    return path


@functools.lru_cache(maxsize=None)
def _empty_dir():
    return tempfile.mkdtemp()


@functools.lru_cache(maxsize=None)
def _a_file():
    path = os.path.join(tempfile.mkdtemp(), "model.tflite")
    with open(path, "wb") as f:
        f.write(b"not a saved model")
    return path


def _tokenizer(template="{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"):
    from seqkeras.data import ByteLevelBPETokenizer

    return ByteLevelBPETokenizer(
        ["<s>", "</s>", "a"], [], bos_id=0, eos_id=1, chat_template=template
    )


opt_out(
    X + "NotServableError",
    "an exception class that `assert_servable` raises; users catch it and never pass it input",
)

# ---- audit ---------------------------------------------------------------------
for fn in ("assert_servable", "audit_serving"):
    entry(X + fn, "path", lambda fn=fn: getattr(_e(), fn)(NEVER))
    entry(X + fn, "path", lambda fn=fn: getattr(_e(), fn)(_empty_dir()))
    entry(X + fn, "path", lambda fn=fn: getattr(_e(), fn)(_a_file()))
    entry(X + fn, "path", lambda fn=fn: getattr(_e(), fn)(None))
entry(X + "assert_servable", "xla_jit", lambda: _e().assert_servable(_empty_dir(), xla_jit="yes"))

entry(X + "fresh_signature", "path", lambda: _e().fresh_signature(NEVER, "serving_default"))
entry(X + "fresh_signature", "signature", lambda: _e().fresh_signature(_empty_dir(), None))
entry(
    X + "fresh_signature",
    "inputs",
    lambda: _e().fresh_signature(_empty_dir(), "serving_default", x=np.ones(2, complex)),
)
entry(
    X + "fresh_signature",
    "inputs",
    lambda: _e().fresh_signature(_empty_dir(), "serving_default", x=[{"a": 1}]),
)

# ---- files and TF Serving --------------------------------------------------------
entry(X + "next_version", "base", lambda: _e().next_version(None))
entry(X + "next_version", "base", lambda: _e().next_version(_a_file()))
entry(X + "next_version", "base", lambda: _e().next_version(3))

P = os.path.join(tempfile.gettempdir(), "seqkeras-never-batching.txt")
entry(
    X + "batching_parameters",
    "max_batch_size",
    lambda: _e().batching_parameters(P, max_batch_size=0),
)
entry(
    X + "batching_parameters",
    "batch_timeout_micros",
    lambda: _e().batching_parameters(P, batch_timeout_micros=-5),
)
entry(X + "batching_parameters", "options", lambda: _e().batching_parameters(P, max_batch=8))
entry(
    X + "batching_parameters",
    "allowed_batch_sizes",
    lambda: _e().batching_parameters(P, allowed_batch_sizes=(1, 2, 4)),
)
entry(
    X + "batching_parameters",
    "allowed_batch_sizes",
    lambda: _e().batching_parameters(P, max_batch_size=4, allowed_batch_sizes=(1, 2.5, 4)),
)
entry(
    X + "batching_parameters",
    "allowed_batch_sizes",
    lambda: _e().batching_parameters(P, max_batch_size=4, allowed_batch_sizes=(1, "2", "x")),
)
entry(X + "batching_parameters", "path", lambda: _e().batching_parameters(None))

# ---- TFLite ----------------------------------------------------------------------
entry(X + "op_names", "flatbuffer", lambda: _e().op_names("/tmp/model.tflite"))
entry(X + "op_names", "flatbuffer", lambda: _e().op_names(b"not a tflite model at all"))
entry(X + "op_names", "flatbuffer", lambda: _e().op_names(None))

entry(X + "run_tflite", "inputs", lambda: _e().run_tflite(_flatbuffer()))
entry(
    X + "run_tflite", "inputs", lambda: _e().run_tflite(_flatbuffer(), np.ones((1, 3)), np.ones(2))
)
entry(X + "run_tflite", "inputs", lambda: _e().run_tflite(_flatbuffer(), np.ones((1, 5))))
entry(X + "run_tflite", "inputs", lambda: _e().run_tflite(_flatbuffer(), [["a", "b", "c"]]))
entry(X + "run_tflite", "flatbuffer", lambda: _e().run_tflite("/tmp/model.tflite", np.ones((1, 3))))

S = "run_tflite_signature"
entry(
    X + S, "signature_key", lambda: _e().run_tflite_signature(_flatbuffer(), "serve", x=[[1, 2, 3]])
)
entry(X + S, "signature_key", lambda: _e().run_tflite_signature(_flatbuffer(), None, x=[[1, 2, 3]]))
entry(
    X + S,
    "signature_key",
    lambda: _e().run_tflite_signature(_flatbuffer(), "decode", x=np.ones((1, 3))),
)
entry(X + S, "inputs", lambda: _e().run_tflite_signature(_flatbuffer(), "serving_default"))
entry(
    X + S,
    "inputs",
    lambda: _e().run_tflite_signature(_flatbuffer(), "serving_default", x=np.ones((1, 3)), z=1),
)
entry(
    X + S,
    "inputs",
    lambda: _e().run_tflite_signature(_flatbuffer(), "serving_default", x=np.ones((1, 4))),
)
entry(
    X + S,
    "inputs",
    lambda: _e().run_tflite_signature(_flatbuffer(), "serving_default", x=[["a", "b", "c"]]),
)
entry(X + S, "flatbuffer", lambda: _e().run_tflite_signature(None, "serve", x=np.ones((1, 3))))

entry(X + "tflite", "quantize", lambda: _e().tflite(_tagger(), NEVER + ".tflite", quantize="int3"))
entry(X + "tflite", "model", lambda: _e().tflite(None, NEVER + ".tflite"))
entry(X + "tflite", "path", lambda: _e().tflite(_tagger(), _empty_dir()))
entry(
    X + "tflite",
    "model",
    lambda: _e().tflite(_stateful(), NEVER + ".tflite"),
)


def _stateful():
    import seqkeras

    return seqkeras.models.recurrent_language_model(10, 4, stateful=True, batch_size=2)


# ---- ONNX ------------------------------------------------------------------------
entry(X + "run_onnx", "path", lambda: _e().run_onnx(NEVER + ".onnx", ids=[[1, 2]]))
entry(X + "run_onnx", "inputs", lambda: _e().run_onnx(_onnx_path(), token_ids=[[1, 2]]))
entry(X + "run_onnx", "inputs", lambda: _e().run_onnx(_onnx_path()))
entry(X + "run_onnx", "inputs", lambda: _e().run_onnx(_onnx_path(), ids=[[1.5, 2.0]]))
entry(X + "run_onnx", "inputs", lambda: _e().run_onnx(_onnx_path(), ids=[1, 2]))

# ---- serving functions and signatures --------------------------------------------
entry(X + "serving_function", "model", lambda: _e().serving_function(None))
entry(X + "serving_function", "model", lambda: _e().serving_function(_unbuilt()))
entry(X + "serving_function", "check", lambda: _e().serving_function(_tagger(), check="yes"))


def _unbuilt():
    import keras

    return keras.Sequential([keras.layers.Dense(2)])


SIG = X + "signatures"
entry(SIG, "max_length", lambda: _e().signatures.Generate(0), named="Generate")
entry(SIG, "max_length", lambda: _e().signatures.Generate(2.5), named="Generate")
entry(SIG, "eos_id", lambda: _e().signatures.Generate(8, eos_id=-1), named="Generate")
entry(
    SIG, "beam_width", lambda: _e().signatures.GenerateBeam(8, beam_width=0), named="GenerateBeam"
)
entry(
    SIG,
    "length_penalty_alpha",
    lambda: _e().signatures.GenerateBeam(8, length_penalty_alpha="long"),
    named="GenerateBeam",
)
entry(SIG, "vocabulary", lambda: _e().signatures.GenerateText(42, 8), named="GenerateText")
entry(SIG, "tag_vocabulary", lambda: _e().signatures.Tag(None, "BIO"), named="Tag")
entry(SIG, "max_length", lambda: _e().signatures.Translate(None, None, 0), named="Translate")
entry(
    SIG,
    "beam_width",
    lambda: _e().signatures.Translate(None, None, 8, beam_width=-2),
    named="Translate",
)
entry(SIG, "max_length", lambda: _e().signatures.generation(max_length="20"), named="generation")

# ---- streaming ---------------------------------------------------------------------
entry(X + "streaming_nll", "ids", lambda: _e().streaming_nll(b"", np.array([1.0, 2.0, 3.0])))
entry(X + "streaming_nll", "ids", lambda: _e().streaming_nll(b"", np.array([[1, 2, 3]])))
entry(X + "streaming_nll", "ids", lambda: _e().streaming_nll(b"", [5]))
entry(X + "streaming_nll", "ids", lambda: _e().streaming_nll(b"", [5, -1, 3]))
entry(X + "streaming_nll", "flatbuffer", lambda: _e().streaming_nll("/tmp/step.tflite", [5, 6, 7]))

V = "streaming_variants"
IDS = np.array([4, 5, 6], "int32")
SAMPLE = {"token_ids": IDS[None]}
entry(X + V, "variants", lambda: _e().streaming_variants(_tagger(), NEVER, SAMPLE, IDS, "float16"))
entry(X + V, "variants", lambda: _e().streaming_variants(_tagger(), NEVER, SAMPLE, IDS, ("int2",)))
entry(
    X + V, "ids", lambda: _e().streaming_variants(_tagger(), NEVER, SAMPLE, IDS.astype("float32"))
)
entry(X + V, "sample", lambda: _e().streaming_variants(_tagger(), NEVER, IDS, IDS))
entry(X + V, "model", lambda: _e().streaming_variants(_unbuilt(), NEVER, SAMPLE, IDS))

# ---- on device -----------------------------------------------------------------------
LM = "litert_lm_tflite"
entry(X + LM, "model", lambda: _e().litert_lm_tflite(_tagger(), NEVER + ".tflite"))
entry(X + LM, "max_length", lambda: _e().litert_lm_tflite(_lm(), NEVER + ".tflite", max_length=0))
entry(
    X + LM,
    "prefill_lengths",
    lambda: _e().litert_lm_tflite(_lm(), NEVER + ".tflite", max_length=16, prefill_lengths=[32]),
)
entry(
    X + LM,
    "prefill_lengths",
    lambda: _e().litert_lm_tflite(_lm(), NEVER + ".tflite", max_length=16, prefill_lengths=8),
)
entry(X + LM, "quantize", lambda: _e().litert_lm_tflite(_lm(), NEVER + ".tflite", quantize="int3"))

entry(X + "litert_lm_metadata", "max_length", lambda: _e().litert_lm_metadata(_tokenizer(), 0))
entry(X + "litert_lm_metadata", "tokenizer", lambda: _e().litert_lm_metadata(_tokenizer()))
entry(X + "litert_lm_metadata", "tokenizer", lambda: _e().litert_lm_metadata(None))

CB = "chat_bundle"
entry(X + CB, "quantize", lambda: _e().chat_bundle(_lm(), _tokenizer(), NEVER, quantize="float16"))
entry(X + CB, "quantize", lambda: _e().chat_bundle(_lm(), _tokenizer(), NEVER, quantize=("int3",)))
entry(X + CB, "max_length", lambda: _e().chat_bundle(_lm(), _tokenizer(), NEVER, max_length=-1))
entry(X + CB, "model", lambda: _e().chat_bundle(_tagger(), _tokenizer(), NEVER))
entry(X + CB, "tokenizer", lambda: _e().chat_bundle(_lm(), None, NEVER))
entry(X + CB, "directory", lambda: _e().chat_bundle(_lm(), _tokenizer(), _a_file()))

CS = "chat_bundle_source"
entry(
    X + CS, "quantize", lambda: _e().chat_bundle_source(_lm(), _tokenizer(), NEVER, quantize="int3")
)
entry(
    X + CS, "max_length", lambda: _e().chat_bundle_source(_lm(), _tokenizer(), NEVER, max_length=0)
)
entry(X + CS, "model", lambda: _e().chat_bundle_source(_tagger(), _tokenizer(), NEVER))
entry(X + CS, "tokenizer", lambda: _e().chat_bundle_source(_lm(), None, NEVER))
entry(X + CS, "source", lambda: _e().chat_bundle_source(_lm(), _tokenizer(), _a_file()))

CC = "convert_chat_bundle"
entry(X + CC, "source", lambda: _e().convert_chat_bundle(None, NEVER))
entry(X + CC, "source", lambda: _e().convert_chat_bundle(tempfile.mkdtemp(), NEVER))

SM = "saved_model"
entry(X + SM, "max_batch_size", lambda: _e().saved_model(_tagger(), NEVER, max_batch_size=0))
entry(X + SM, "max_batch_size", lambda: _e().saved_model(_tagger(), NEVER, max_batch_size="32"))
entry(X + SM, "max_batch_size", lambda: _e().saved_model(_tagger(), NEVER, max_batch_size=2.5))
entry(
    X + SM,
    "max_batch_size",
    lambda: _e().saved_model(_tagger(), NEVER, max_batch_size=8, target="tflite"),
    words=("target='serving'",),
)
