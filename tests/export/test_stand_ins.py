"""Stand-in weights (`save_functions(stand_ins=...)`): the converter sees
each large weight as a constant of one value, and the real weights are
written into the file afterwards (`litert_files.fill_stand_ins`). The
files are checked against the conversion of the real weights: float32,
float16 and int4 give bit-identical logits; int8 equals `quantize_int8`
of the real weights' float32 file. A tiny random Llama (tied table: a
lookup and logits on its last axis; Dense kernels; 3-D attention
kernels; norm scales kept real)."""

import importlib
import json
import os

import numpy as np
import pytest

pytest.importorskip("litert_quantizer")

from ai_edge_litert.interpreter import Interpreter  # noqa: E402

import seqkeras.pretrained as sp  # noqa: E402
from seqkeras.export import litert_files  # noqa: E402
from seqkeras.export.on_device import _litert_lm_functions  # noqa: E402
from tests.export.export_checks import operators  # noqa: E402

tflite = importlib.import_module("seqkeras.export.tflite")  # the module, not the function

ARCH = dict(
    vocab_size=2048,  # the table: 4 Mbit, which the converter writes as a FILL
    hidden_dim=64,
    num_layers=2,
    num_heads=4,
    num_key_value_heads=2,
    intermediate_dim=128,
    max_length=32,
    tie_weights=True,
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(directory, real SavedModel, stand-in SavedModel, keys, model)."""
    import keras

    keras.utils.set_random_seed(3)
    model = sp.llama_language_model(ARCH)
    model(np.zeros((1, 4), "int32"))
    root = tmp_path_factory.mktemp("stand_ins")
    functions = _litert_lm_functions(model, 32, (8,))
    keys = tflite.save_functions(functions, model.weights, str(root / "real"))
    # 1,024 elements or more: the table, the MLP's and the key/value
    # kernels (buffers of one value); the (64, 4, 16) query and (4, 16, 64)
    # output kernels split into equal halves and stay real
    stand = tflite.save_functions(functions, model.weights, str(root / "stand"), stand_ins=1024)
    assert stand == keys
    return root, str(root / "real"), str(root / "stand"), keys, model


def _outputs(path):
    """Every output of prefill and decode on fixed random inputs."""
    rng = np.random.default_rng(0)
    interpreter = Interpreter(path)
    found = {}
    for key in ("prefill_8", "decode"):
        runner = interpreter.get_signature_runner(key)
        feeds = {}
        for name, detail in runner.get_input_details().items():
            if name.startswith("kv_cache"):
                feeds[name] = rng.standard_normal(detail["shape"]).astype("float32")
            else:
                feeds[name] = rng.integers(0, 30, detail["shape"]).astype(detail["dtype"])
        feeds["input_pos"] = np.arange(len(feeds["input_pos"]), dtype="int32")
        found.update({f"{key}/{k}": v for k, v in runner(**feeds).items()})
    return found


def test_the_stand_ins_are_the_large_unambiguous_weights(saved):
    _, _, stand, _, model = saved
    with open(os.path.join(stand, litert_files.STAND_INS), encoding="utf-8") as f:
        entries = json.load(f)
    shapes = sorted(tuple(e["shape"]) for e in entries)
    assert shapes == sorted(
        [(2048, 64)] + [(64, 128), (64, 128), (128, 64), (64, 2, 16), (64, 2, 16)] * 2
    )
    assert len({e["value"] for e in entries}) == len(entries)
    by_shape = {tuple(w.shape): w for w in model.weights}
    table = np.load(os.path.join(stand, entries[0]["file"]))
    assert np.array_equal(table, np.asarray(by_shape[(2048, 64)].numpy()))
    # the SavedModel itself holds the stand-ins as single numbers
    size = lambda d: sum(  # noqa: E731
        os.path.getsize(os.path.join(d, "variables", f)) for f in os.listdir(d + "/variables")
    )
    real = saved[1]
    assert size(stand) < size(real) / 2


@pytest.mark.parametrize("quantize", [None, "float16", "int4"])
def test_stand_in_files_equal_the_real_weights_conversion(saved, quantize):
    root, real, stand, keys, _ = saved
    a = tflite.convert_in_new_process(real, keys, str(root / f"real_{quantize}.tflite"), quantize)
    b = tflite.convert_in_new_process(stand, keys, str(root / f"stand_{quantize}.tflite"), quantize)
    expected, found = _outputs(a), _outputs(b)
    assert sorted(found) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)
    with open(b, "rb") as f:
        data = f.read()
    assert operators(data).count("FILL") == operators(open(a, "rb").read()).count("FILL")
    if quantize is None:  # no stand-in is left in the file
        with open(os.path.join(stand, litert_files.STAND_INS), encoding="utf-8") as f:
            for e in json.load(f):
                assert np.full(16, e["value"], np.float32).tobytes() not in data


def test_stand_in_int8_is_litert_quantizer_on_the_real_weights(saved):
    root, real, stand, keys, _ = saved
    float32 = tflite.convert_in_new_process(real, keys, str(root / "real_f32.tflite"))
    with open(float32, "rb") as f:
        reference = str(root / "reference_int8.tflite")
        with open(reference, "wb") as g:
            g.write(litert_files.quantize_int8(f.read()))
    ours = tflite.convert_in_new_process(
        stand, keys, str(root / "stand_int8.tflite"), "dynamic_int8"
    )
    expected, found = _outputs(reference), _outputs(ours)
    for name in expected:
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)
    with open(ours, "rb") as f:
        assert "EMBEDDING_LOOKUP" in tflite.op_names(f.read())  # the table quantized too


def test_a_file_without_the_stand_ins_is_refused(saved, tmp_path):
    _, real, stand, keys, _ = saved
    path = tflite.convert_in_new_process(real, keys, str(tmp_path / "real.tflite"))
    with pytest.raises(ValueError, match="holds no buffer of the stand-ins"):
        litert_files.fill_stand_ins(path, stand)


def test_bad_stand_ins_argument(saved, tmp_path):
    *_, model = saved
    functions = _litert_lm_functions(model, 32, (8,))
    with pytest.raises(TypeError, match="`save_functions` expects `stand_ins` to be a bool"):
        tflite.save_functions(functions, model.weights, str(tmp_path / "x"), stand_ins="yes")
    with pytest.raises(ValueError, match="stand_in_value"):
        litert_files.stand_in_value(1024)
