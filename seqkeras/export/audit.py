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
server would refuse; `assert_servable(path)` raises unless there are none
(the one servability rule apps and tests use); `fresh_signature(path,
name, **inputs)` runs a signature in a new Python process where `seqkeras`
cannot be imported (what a server has).
"""

import json
import os
import subprocess
import sys

from seqkeras.layers import validation

TF_SERVING_TF_TEXT_OPS = frozenset(
    {
        "CaseFoldUTF8",
        "ConstrainedSequence",
        "FastBertNormalize",
        "FastWordpieceTokenizeWithOffsets",
        "FindSourceOffsets",
        "MaxSpanningTree",
        "NormalizeUTF8",
        "NormalizeUTF8WithOffsetsMap",
        "PhraseTokenize",
        "RegexSplitWithOffsets",
        "RougeL",
        "SentenceFragments",
        "SentenceFragmentsV2",
        "SplitMergeTokenizeWithOffsets",
        "TFText>BoiseTagsToOffsets",
        "TFText>ByteSplitByOffsets",
        "TFText>ByteSplitWithOffsets",
        "TFText>FastWordpieceDetokenize",
        "TFText>NgramsStringJoin",
        "TFText>OffsetsToBoiseTags",
        "TFText>PhraseDetokenize",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
        "TokenizerFromLogits",
        "UnicodeScriptTokenizeWithOffsets",
        "WhitespaceTokenizeWithOffsets",
        "WordpieceTokenizeWithOffsets",
    }
)


def saved_model_dir(name, path, arg="path"):
    """`path` as a str when it is a SavedModel directory (one holding
    `saved_model.pb`); otherwise a clear error naming the function
    `name` and its argument `arg`."""
    path = validation.path(name, arg, path, "a SavedModel directory")
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        what = (
            "does not exist"
            if not os.path.exists(path)
            else "is a file"
            if not os.path.isdir(path)
            else "has no saved_model.pb"
        )
        raise ValueError(
            f"`{name}` expects `{arg}` to be a SavedModel directory (holding saved_model.pb, "
            f"as `saved_model` writes). Received: {arg}={path!r}, which {what}"
        )
    return path


def read_saved_model(path):
    """The `SavedModel` protocol buffer of `path`'s saved_model.pb."""
    # TensorFlow's generated protocol buffers (tests/test_private_apis.py
    # fails loudly if they move): no public API parses saved_model.pb into
    # its graphs without loading (and running the initialisers of) the model
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(str(path), "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    return saved


def _graphs(path):
    return [graph.graph_def for graph in read_saved_model(path).meta_graphs]


def _called(function, library):
    """Names of the library functions `function`'s nodes call (as ops or
    through function-valued attributes: a while loop's body, a call)."""
    names = set()
    for node in function.node_def:
        if node.op in library:
            names.add(node.op)
        for value in node.attr.values():
            if value.HasField("func"):
                names.add(value.func.name)
            names |= {f.name for f in value.list.func}
    return names & set(library)


def xla_compiled_functions(path):
    """Names of the SavedModel's library functions that XLA compiles whole
    (`tf.function(jit_compile=True)`: attribute `_XlaMustCompile`) and of
    every function they call: the XLA clusters."""
    return compiled_function_names(_graphs(path))


def compiled_function_names(graphs):
    """`xla_compiled_functions` of parsed `graphs` (GraphDefs)."""
    found = set()
    for graph in graphs:
        library = {f.signature.name: f for f in graph.library.function}
        todo = [
            name
            for name, f in library.items()
            if f.attr.get("_XlaMustCompile") is not None and f.attr["_XlaMustCompile"].b
        ]
        while todo:
            name = todo.pop()
            if name not in found:
                found.add(name)
                todo += _called(library[name], library)
    return found


def serving_ops(path, compiled=None):
    """Every op in a SavedModel's graphs (all signatures and library
    functions; calls of library functions themselves excluded). With
    `compiled` True: only the ops inside XLA clusters
    (`xla_compiled_functions`); False: only those outside."""
    clusters = xla_compiled_functions(path) if compiled is not None else set()
    ops = set()
    for graph in _graphs(path):
        library = {f.signature.name for f in graph.library.function}
        if not compiled:
            ops |= {n.op for n in graph.node}
        for function in graph.library.function:
            if compiled is None or (function.signature.name in clusters) == compiled:
                ops |= {n.op for n in function.node_def}
        ops -= library
    return ops


def audit_serving(path):
    """A dict: `ops` (sorted), `xla` (XLA-only ops outside XLA clusters),
    `xla_compiled` (the functions XLA compiles whole: a SavedModel written
    with `jit_compile=True`; TF Serving runs them only with
    `--xla_cpu_compilation_enabled=true`), `tf_text` (the TF Text ops
    used), `tf_text_unsupported` (TF Text ops the model server does not
    register) and `no_kernel` (core ops without a CPU kernel, outside XLA
    clusters). `xla`, `tf_text_unsupported` and `no_kernel` empty: the TF
    Serving binary can load the graph.

    Args:
        path: a SavedModel directory.

    Returns:
        The dict above.

    Raises:
        ValueError: a `path` that is not a SavedModel directory.

    Examples:
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

    path = saved_model_dir("audit_serving", path)
    ops = serving_ops(path)
    clusters = xla_compiled_functions(path)
    outside = serving_ops(path, compiled=False) if clusters else ops
    text_ops = sorted(  # ops inside XLA clusters are XLA's to compile, not kernels to find
        op
        for op in outside
        if op.startswith("TFText>") or (op not in tf.raw_ops.__dict__ and not op.startswith("_"))
    )
    if text_ops:  # registers TF Text's kernels for the kernel check
        try:
            import tensorflow_text  # noqa: F401
        except ImportError:
            pass
    # TensorFlow has no public API that lists an op's registered kernels (a
    # private module: tests/test_private_apis.py fails loudly if it moves)
    from tensorflow.python.framework import kernels

    def has_cpu_kernel(op):
        try:
            found = kernels.get_registered_kernels_for_op(op).kernel
        except Exception:  # an op this TensorFlow does not know
            return False
        return bool({k.device_type for k in found} & {"CPU", "DEFAULT"})

    return {
        "ops": sorted(ops),
        "xla": sorted(op for op in outside if op.startswith("Xla")),
        "xla_compiled": sorted(clusters),
        "tf_text": text_ops,
        "tf_text_unsupported": [op for op in text_ops if op not in TF_SERVING_TF_TEXT_OPS],
        "no_kernel": sorted(op for op in outside if op not in text_ops and not has_cpu_kernel(op)),
    }


class NotServableError(ValueError):
    """A SavedModel the TF Serving binary would refuse."""


def assert_servable(path, xla_jit=False):
    """The audit of `path` (`audit_serving`) when the TF Serving binary
    can load it: no XLA-only op, no TF Text op the server does not
    register, a CPU kernel for every other op. Otherwise raises
    `NotServableError` (a ValueError) naming the offending ops. The one
    servability rule: the exporters' callers, the apps and the tests
    check with it. A SavedModel with XLA clusters (`saved_model(...,
    jit_compile=True)`) is refused unless `xla_jit` (the server then
    needs `--xla_cpu_compilation_enabled=true`).

    Args:
        path: a SavedModel directory.
        xla_jit: accept functions XLA compiles whole.

    Returns:
        The audit (`audit_serving`'s dict).

    Raises:
        NotServableError: what the TF Serving binary cannot run, named.
        ValueError: a `path` that is not a SavedModel directory.
        TypeError: an `xla_jit` that is not a bool.

    Examples:
        >>> import tempfile, keras
        >>> from seqkeras.export import assert_servable, saved_model
        >>> x = keras.Input((3,), name="x")
        >>> model = keras.Model(x, keras.layers.Dense(2, name="y")(x))
        >>> report = assert_servable(saved_model(model, tempfile.mkdtemp()
        ...                                      + "/m/1"))
        >>> "MatMul" in report["ops"]
        True
    """
    if not isinstance(xla_jit, bool):
        raise TypeError(
            "`assert_servable` received an invalid value for `xla_jit`: expected True or "
            f"False. Received: xla_jit={xla_jit!r}"
        )
    path = saved_model_dir("assert_servable", path)
    report = audit_serving(path)
    problems = {
        key: report[key] for key in ("xla", "tf_text_unsupported", "no_kernel") if report[key]
    }
    if report["xla_compiled"] and not xla_jit:
        problems["xla_compiled"] = report["xla_compiled"]
    if problems:
        what = {
            "xla_compiled": "functions compiled by XLA (TF Serving runs them only with "
            "--xla_cpu_compilation_enabled=true; pass xla_jit=True to accept them)",
            "xla": "XLA-only ops",
            "tf_text_unsupported": "TF Text ops TF Serving does not register",
            "no_kernel": "ops without a CPU kernel",
        }
        raise NotServableError(
            f"`assert_servable`: the TF Serving binary cannot load {path}: "
            + "; ".join(f"{what[k]} {v}" for k, v in problems.items())
        )
    return report


_FRESH = """
import json, sys, time
sys.modules["seqkeras"] = None  # a server has no seqkeras
import numpy as np
import tensorflow as tf
try:
    import tensorflow_text  # noqa: F401  (registers the TF Text ops)
except ImportError:
    pass
given = json.loads(sys.stdin.read())
inputs = {k: tf.constant(np.asarray(v["values"], v["dtype"]) if v["dtype"]
                         else v["values"]) for k, v in given.items()}
fn = tf.saved_model.load(sys.argv[1]).signatures[sys.argv[2]]
start = time.perf_counter()
try:
    out = fn(**inputs)
except tf.errors.OpError as error:  # the served graph refused the request
    lines = [l for l in error.message.splitlines() if l.strip()]
    said = [l.split("assertion failed: ", 1)[1] for l in lines if "assertion failed: " in l]
    print(json.dumps({"refused": type(error).__name__, "message": (said or lines[-1:])[0]}))
    sys.exit(3)
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


def _json_input(name, value):
    """`{"values": nested lists, "dtype": numpy dtype or None}` (None:
    strings) for the fresh process."""
    import numpy as np

    def refuse(what):
        return TypeError(
            f"`fresh_signature` expects each of `inputs` to be strings or numbers; input "
            f"`{name}` is {what}"
        )

    try:
        array = np.asarray(value)
    except ValueError as error:  # ragged nested lists
        raise refuse(f"not a rectangular array ({error})") from None
    if array.dtype.kind == "O" and not all(isinstance(v, (str, bytes)) for v in array.flat):
        kinds = sorted({type(v).__name__ for v in array.flat if not isinstance(v, (str, bytes))})
        raise refuse(f"an array of objects of type {kinds}")
    if array.dtype.kind in "USO":
        return {"values": array.astype(str).tolist(), "dtype": None}
    if array.dtype.kind not in "biuf":
        raise refuse(f"of dtype {array.dtype}")
    return {"values": array.tolist(), "dtype": array.dtype.name}


def fresh_signature(path, signature, **inputs):
    """`(outputs, seconds)`: the SavedModel's signature `signature` called
    on the named `inputs` (lists or arrays of strings or numbers, e.g.
    `text=["a sentence"]` or `series=windows`) in a new Python process
    where `seqkeras` is not importable (TensorFlow and, if installed, TF
    Text only, as on a model server). `outputs` maps each output name to
    nested lists (strings decoded); seconds of the call, after loading.
    A request the served graph refuses (e.g. ids outside the vocabulary,
    an input longer than the model's positions: InvalidArgument) raises
    RuntimeError with the error's name and its assertion message.

    Args:
        path: a SavedModel directory.
        signature: the signature's name, e.g. `"serving_default"`.
        **inputs: the signature's inputs by name.

    Returns:
        `(outputs, seconds)`.

    Raises:
        RuntimeError: the served graph refused the request.
        TypeError: a `signature` that is not a name.

    Examples:
        >>> import tempfile, keras, numpy as np
        >>> from seqkeras.export import fresh_signature, saved_model
        >>> x = keras.Input((3,), name="x")
        >>> model = keras.Model(x, keras.layers.Dense(2, name="y")(x))
        >>> path = saved_model(model, tempfile.mkdtemp() + "/m/1")
        >>> out, _ = fresh_signature(path, "serving_default",
        ...                          x=np.ones((1, 3), "float32"))
        >>> np.allclose(out["y"], model(np.ones((1, 3))), atol=1e-6)
        True
    """
    if not isinstance(signature, str) or not signature:
        raise TypeError(
            "`fresh_signature` expects `signature` to be a signature name (a str, e.g. "
            f"'serving_default'). Received: signature={signature!r}"
        )
    given = {k: _json_input(k, v) for k, v in inputs.items()}
    path = saved_model_dir("fresh_signature", path)
    result = subprocess.run(
        [sys.executable, "-c", _FRESH, str(path), signature],
        input=json.dumps(given),
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    if result.returncode == 3:  # the served graph refused the request
        refused = json.loads(result.stdout.strip().splitlines()[-1])
        raise RuntimeError(
            f"`fresh_signature`: {signature} of {path} refused the request: "
            f"{refused['refused']}: {refused['message']}"
        )
    if result.returncode:
        raise RuntimeError(
            f"`fresh_signature`: calling {signature} of {path} in a new "
            f"process failed: {result.stderr.strip().splitlines()[-1:]}"
        )
    outputs, seconds = json.loads(result.stdout.strip().splitlines()[-1])
    return outputs, seconds


def fresh_translate(path, texts):
    """`(strings, seconds)`: the SavedModel's `translate` signature on
    `texts` in a new Python process where `seqkeras` is not importable;
    seconds of the call (after loading)."""
    outputs, seconds = fresh_signature(path, "translate", text=list(texts))
    return outputs["text"], seconds


def __getattr__(name):  # renamed names: the old one warns and still works
    if name == "NotServable":
        import warnings

        warnings.warn("`NotServable` is now `NotServableError`", DeprecationWarning, stacklevel=2)
        return NotServableError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NotServableError",
    "TF_SERVING_TF_TEXT_OPS",
    "assert_servable",
    "audit_serving",
    "fresh_signature",
    "fresh_translate",
    "serving_ops",
]
