"""Will the TF Serving binary load this SavedModel? An op audit.

The model server runs core TensorFlow ops (no `Xla*` op: those exist only
for XLA compilation) and the TF Text ops it links: the `ops_lib` target of
TF Text 2.12 (`tensorflow_text/BUILD` at v2.12.0), which leaves out ops
added later and the round-robin trimmer (`RoundRobinTrim`,
tensorflow/serving#4057), and without the SentencePiece ops, which the
server does not link (tensorflow/serving#1333). The list below was read
from that tag's kernel sources (`kOpName` / `REGISTER_OP`) for the targets
`ops_lib` depends on.

`audit_serving(path)` lists a SavedModel's ops and sorts out the ones the
server would refuse; `fresh_translate(path, texts)` runs a `translate`
signature in a new Python process where `seqkeras` cannot be imported (what
a server has).
"""

import json
import os
import subprocess
import sys

TF_SERVING_TF_TEXT_OPS = frozenset({
    "CaseFoldUTF8", "ConstrainedSequence", "FastBertNormalize",
    "FastWordpieceTokenizeWithOffsets", "FindSourceOffsets",
    "MaxSpanningTree", "NormalizeUTF8", "NormalizeUTF8WithOffsetsMap",
    "PhraseTokenize", "RegexSplitWithOffsets", "RougeL",
    "SentenceFragments", "SentenceFragmentsV2",
    "SplitMergeTokenizeWithOffsets", "TFText>BoiseTagsToOffsets",
    "TFText>ByteSplitByOffsets", "TFText>ByteSplitWithOffsets",
    "TFText>FastWordpieceDetokenize", "TFText>NgramsStringJoin",
    "TFText>OffsetsToBoiseTags", "TFText>PhraseDetokenize",
    "TFText>WhitespaceTokenizeWithOffsetsV2", "TokenizerFromLogits",
    "UnicodeScriptTokenizeWithOffsets", "WhitespaceTokenizeWithOffsets",
    "WordpieceTokenizeWithOffsets",
})


def serving_ops(path):
    """Every op in a SavedModel's graphs (all signatures and library
    functions; calls of library functions themselves excluded)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(str(path), "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    ops = set()
    for graph in saved.meta_graphs:
        library = {f.signature.name for f in graph.graph_def.library.function}
        ops |= {n.op for n in graph.graph_def.node}
        for function in graph.graph_def.library.function:
            ops |= {n.op for n in function.node_def}
        ops -= library
    return ops


def audit_serving(path):
    """A dict: `ops` (sorted), `xla` (XLA-only ops), `tf_text` (the TF Text
    ops used), `tf_text_unsupported` (TF Text ops the model server does not
    register) and `no_kernel` (core ops without a CPU kernel). All three
    lists empty: the TF Serving binary can load the graph.

    Example:

    >>> import tempfile, keras
    >>> from seqkeras.export import saved_model
    >>> from seqkeras.export.audit import audit_serving
    >>> inputs = keras.Input((3,), name="x")
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="y")(inputs))
    >>> path = saved_model(model, tempfile.mkdtemp() + "/m/1")
    >>> report = audit_serving(path)
    >>> report["xla"], report["tf_text_unsupported"], report["no_kernel"]
    ([], [], [])
    """
    import tensorflow as tf

    ops = serving_ops(path)
    text_ops = sorted(op for op in ops if op.startswith("TFText>") or (
        op not in tf.raw_ops.__dict__ and not op.startswith("_")))
    if text_ops:  # registers TF Text's kernels for the kernel check
        try:
            import tensorflow_text  # noqa: F401
        except ImportError:
            pass
    from tensorflow.python.framework import kernels

    def has_cpu_kernel(op):
        try:
            found = kernels.get_registered_kernels_for_op(op).kernel
        except Exception:  # an op this TensorFlow does not know
            return False
        return bool({k.device_type for k in found} & {"CPU", "DEFAULT"})

    return {
        "ops": sorted(ops),
        "xla": sorted(op for op in ops if op.startswith("Xla")),
        "tf_text": text_ops,
        "tf_text_unsupported": [op for op in text_ops
                                if op not in TF_SERVING_TF_TEXT_OPS],
        "no_kernel": sorted(op for op in ops if op not in text_ops
                            and not has_cpu_kernel(op)),
    }


_FRESH = """
import json, sys, time
sys.modules["seqkeras"] = None  # a server has no seqkeras
import tensorflow as tf
try:
    import tensorflow_text  # noqa: F401  (registers the TF Text ops)
except ImportError:
    pass
texts = json.loads(sys.stdin.read())
fn = tf.saved_model.load(sys.argv[1]).signatures[sys.argv[2]]
start = time.perf_counter()
out = fn(text=tf.constant(texts))
seconds = time.perf_counter() - start
def plain(x):
    x = x.numpy()
    if x.dtype == object:
        return [[b.decode("utf-8") for b in row] if hasattr(row, "__len__")
                and not isinstance(row, bytes) else row.decode("utf-8")
                for row in x]
    return x.tolist()
print(json.dumps([{k: plain(v) for k, v in out.items()}, seconds]))
"""


def fresh_signature(path, signature, texts):
    """`(outputs, seconds)`: the SavedModel's signature `signature`, whose
    input is `text` (strings), called on `texts` in a new Python process
    where `seqkeras` is not importable (TensorFlow and, if installed, TF
    Text only, as on a model server). `outputs` maps each output name to
    nested lists (strings decoded); seconds of the call, after loading."""
    result = subprocess.run(
        [sys.executable, "-c", _FRESH, str(path), signature],
        input=json.dumps(list(texts)), capture_output=True, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if result.returncode:
        raise RuntimeError(
            f"`fresh_signature`: calling {signature} of {path} in a new "
            f"process failed: {result.stderr.strip().splitlines()[-1:]}")
    outputs, seconds = json.loads(result.stdout.strip().splitlines()[-1])
    return outputs, seconds


def fresh_translate(path, texts):
    """`(strings, seconds)`: the SavedModel's `translate` signature on
    `texts` in a new Python process where `seqkeras` is not importable;
    seconds of the call (after loading)."""
    outputs, seconds = fresh_signature(path, "translate", texts)
    return outputs["text"], seconds


__all__ = ["TF_SERVING_TF_TEXT_OPS", "audit_serving", "fresh_signature",
           "fresh_translate", "serving_ops"]
