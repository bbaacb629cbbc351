"""Every private TensorFlow API the library uses is listed here, with the
reason no public one serves beside its use, and fails this test loudly if
TensorFlow moves it; a new one fails the scan until it is listed."""

import importlib
import os
import re

import pytest
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (file, module, name, attribute used): each private use, as imported
#: there (`from module import name`), and what the code reads of it
PRIVATE = [
    (
        "seqkeras/export/tflite.py",
        "tensorflow.python.framework.convert_to_constants",
        "convert_variables_to_constants_v2",
        None,
    ),
    (
        "seqkeras/export/audit.py",
        "tensorflow.python.framework",
        "kernels",
        "get_registered_kernels_for_op",
    ),
    ("seqkeras/export/audit.py", "tensorflow.core.protobuf", "saved_model_pb2", "SavedModel"),
]
#: `tf.compat.v1` names used (public but frozen TF1 API): file -> names
COMPAT_V1 = {
    "seqkeras/data/tables.py": ["GraphKeys.TABLE_INITIALIZERS", "get_default_graph"],
    # a SavedModel's nodes rewritten (no TF2 API makes a NodeDef)
    "seqkeras/export/standard_ops.py": ["AttrValue", "NodeDef"],
}

_PRIVATE_IMPORT = re.compile(
    r"^\s*from (tensorflow\.(?:python|core)[\w.]*) import \(?\s*(\w+)"
    r"|^\s*import (tensorflow\.(?:python|core))",
    re.M,
)


def _sources():
    for folder, _, files in os.walk(os.path.join(ROOT, "seqkeras")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, ROOT), f.read()


@pytest.mark.parametrize("where, module, name, attribute", PRIVATE)
def test_each_private_api_is_still_where_it_was(where, module, name, attribute):
    try:
        found = getattr(importlib.import_module(module), name)
        if attribute is not None:
            found = getattr(found, attribute)
    except (ImportError, AttributeError) as e:
        used = ".".join(x for x in (module, name, attribute) if x)
        pytest.fail(
            f"{where} uses {used}, which TensorFlow {tf.__version__} no longer has ({e}): find "
            "its new place or a public replacement"
        )
    assert callable(found)


def test_tf_compat_v1_names_are_still_there():
    for where, names in COMPAT_V1.items():
        for name in names:
            obj = tf.compat.v1
            for part in name.split("."):
                assert hasattr(obj, part), f"{where} uses tf.compat.v1.{name}, now gone"
                obj = getattr(obj, part)


def test_no_private_tensorflow_import_is_unlisted_or_unexplained():
    listed = {(where, module, name) for where, module, name, _ in PRIVATE}
    found = set()
    for where, text in _sources():
        for match in _PRIVATE_IMPORT.finditer(text):
            module = match.group(1) or match.group(3)
            found.add((where, module, match.group(2)))
            # the reason stands in the comment block just above the import
            comment = []
            for line in reversed(text[: match.start()].rstrip("\n").splitlines()):
                if not line.strip().startswith("#"):
                    break
                comment.insert(0, line.strip().lstrip("# "))
            assert "no public" in " ".join(comment).lower(), (
                f"{where}: the private import of {module} needs a comment saying why "
                "no public API serves"
            )
        if re.search(r"^[^#\n]*tf\.compat\.v1\.", text, re.M):  # in code, not a comment
            assert where in COMPAT_V1, f"{where} uses tf.compat.v1: list it in COMPAT_V1"
    assert found == listed, f"unlisted: {sorted(found - listed)}; gone: {sorted(listed - found)}"


#: private attributes the library sets on public TensorFlow objects: (file,
#: the object, the attribute). Setting an attribute a class no longer has
#: fails silently, so each is checked on a real object here.
PRIVATE_ATTRIBUTES = [
    # `convert_in_new_process`: the weights after the flatbuffer, without
    # the converter's Python-side rebuild of the model (1 GB for SmolLM2)
    ("seqkeras/export/tflite.py", "tf.lite.TFLiteConverter", "_experimental_use_buffer_offset"),
    # stand-in weights: a norm's scale kept out of the next weights
    (
        "seqkeras/export/tflite.py",
        "tf.lite.TFLiteConverter",
        "_experimental_disable_fuse_mul_and_fc",
    ),
    # stand-in weights: a large one written as a FILL, not its bytes
    (
        "seqkeras/export/tflite.py",
        "tf.lite.TFLiteConverter",
        "_experimental_unfold_large_splat_constant",
    ),
]
_PRIVATE_ATTRIBUTE = re.compile(r"\w\.(_experimental_\w+) = ")


def test_each_private_converter_attribute_is_still_read(tmp_path):
    import inspect

    module = tf.Module()
    module.f = tf.function(lambda x: {"y": x * 2.0}, input_signature=[tf.TensorSpec([2])])
    tf.saved_model.save(module, str(tmp_path), signatures={"f": module.f.get_concrete_function()})
    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path))
    source = inspect.getsource(inspect.getmodule(type(converter)))
    for where, _, attribute in PRIVATE_ATTRIBUTES:
        assert hasattr(converter, attribute), f"{where}: the converter has no {attribute} now"
        assert f"self.{attribute}" in source, f"{where}: the converter no longer reads {attribute}"


def test_no_private_attribute_is_unlisted():
    listed = {(where, attribute) for where, _, attribute in PRIVATE_ATTRIBUTES}
    found = {
        (where, match.group(1))
        for where, text in _sources()
        for match in _PRIVATE_ATTRIBUTE.finditer(text)
    }
    assert found == listed, f"unlisted: {sorted(found - listed)}; gone: {sorted(listed - found)}"
