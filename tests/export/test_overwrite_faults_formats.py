"""Every export format overwritten under fault injection (slow: one
export per kill point): SavedModel (a classifier: every SavedModel is
written by the same directory exchange), TFLite, ONNX, the streaming step
TFLite (recurrent, and a decoder's prefill/decode pair), LiteRT-LM's
layout and the phone bundle. A kill at any rename or delete leaves the
previous export or the new one, and the next export recovers it. Last, a
real SIGKILL in a child process during an overwrite."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import seqkeras
from seqkeras import _atomic
from seqkeras.export import (
    chat_bundle,
    litert_lm_tflite,
    onnx,
    saved_model,
    streaming_tflite,
    tflite,
)
from tests.export.fault_injection import check_every_kill_point, digest, leftovers
from tests.pretrained_checks import tiny_chat_directory

SLOW_SECONDS = 75  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 2748  # (2 cores; the summed memory of its processes)

pytestmark = pytest.mark.slow
M = seqkeras.models


def _classifier(seed):
    import keras

    keras.utils.set_random_seed(seed)
    return M.classifier(20, 2, units=4, embedding_dim=4)


def _decoder(seed):
    import keras

    keras.utils.set_random_seed(seed)
    return M.decoder_language_model(
        vocab_size=20, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16, max_length=16
    )


def _recurrent(seed):
    import keras

    keras.utils.set_random_seed(seed)
    return M.recurrent_language_model(20, 8, units=8, cell="gru")


FORMATS = {
    "saved_model": ("dir", lambda m, p: saved_model(m, p, overwrite=True), _classifier),
    "tflite": ("file", lambda m, p: tflite(m, p, overwrite=True), _classifier),
    "onnx": ("file", lambda m, p: onnx(m, p, overwrite=True), _classifier),
    "streaming_tflite": (
        "file",
        lambda m, p: streaming_tflite(m, p, overwrite=True),
        _recurrent,
    ),
    "streaming_tflite_prefill": (
        "file",
        lambda m, p: streaming_tflite(m, p, overwrite=True, prefill=True),
        _decoder,
    ),
    "litert_lm_tflite": (
        "file",
        lambda m, p: litert_lm_tflite(m, p, max_length=16, prefill_lengths=[4], overwrite=True),
        _decoder,
    ),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_an_overwrite_survives_every_kill_point(name, tmp_path, monkeypatch):
    kind, write, build = FORMATS[name]
    path = str(tmp_path / "out" / ("1" if kind == "dir" else "model.bin"))
    old, new = build(0), build(1)
    points = check_every_kill_point(
        monkeypatch,
        path,
        lambda: write(old, path),
        lambda: write(new, path),
        lambda: _atomic.recover(path),
    )
    assert points >= 1


def test_the_phone_bundle_survives_every_kill_point(tmp_path, monkeypatch):
    from seqkeras.data import ByteLevelBPETokenizer
    from seqkeras.pretrained import load_llama

    (tmp_path / "ckpt").mkdir()
    checkpoint = tiny_chat_directory(str(tmp_path / "ckpt"), ["the cat sat on the mat"] * 20)
    model, tokenizer, _ = load_llama(checkpoint)
    other, _, _ = load_llama(checkpoint)
    for v in other.weights:  # a different new version
        v.assign(np.asarray(v) * 0.5)
    assert isinstance(tokenizer, ByteLevelBPETokenizer)
    path = str(tmp_path / "phone")

    def write(m):
        return lambda: chat_bundle(m, tokenizer, path, max_length=32, quantize=(), overwrite=True)

    recover = lambda: _atomic.recover(path)  # noqa: E731  (what the next call runs first)
    check_every_kill_point(monkeypatch, path, write(model), write(other), recover)


CHILD = r"""
import os, signal, sys
import seqkeras
from seqkeras.export import saved_model
target, k = sys.argv[1], int(sys.argv[2])
model = seqkeras.models.classifier(20, 2, units=4, embedding_dim=4)
count = [0]
for module, name in ((os, "replace"), (os, "rename")):
    real = getattr(module, name)
    def patched(*args, _real=real, **kwargs):
        if os.path.abspath(os.fsdecode(args[1])) == target or os.path.abspath(
            os.fsdecode(args[0])) == target:
            if count[0] == k:
                os.kill(os.getpid(), signal.SIGKILL)  # a real kill -9: nothing runs after
            count[0] += 1
        return _real(*args, **kwargs)
    setattr(module, name, patched)
import seqkeras._atomic as atomic
atomic._exchange = lambda a, b: False  # the rename-aside path: two renames
saved_model(model, target, overwrite=True)
"""


@pytest.mark.parametrize("k", [0, 1])
def test_a_sigkill_between_the_renames_loses_nothing(tmp_path, k):
    target = str(tmp_path / "served" / "1")
    saved_model(_classifier(0), target)
    old = digest(target)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, target, str(k)],
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        capture_output=True,
        text=True,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    if k == 0:  # killed before the old version was set aside: it is still there
        assert digest(target) == old
    else:  # killed with the old version aside and the new one not yet in
        assert not os.path.exists(target) and leftovers(target)
    saved_model(_classifier(2), target, overwrite=True)  # the next call recovers, then writes
    assert os.path.exists(os.path.join(target, "saved_model.pb")) and not leftovers(target)
    with pytest.raises(ValueError, match="exists; pass overwrite=True"):
        saved_model(_classifier(2), target)  # a killed overwrite's old version came back
