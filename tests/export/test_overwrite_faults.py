"""No data loss on overwrite: a kill at any rename or delete of an
overwrite leaves the previous version or the new one at the target, and
the next call recovers what the killed one left behind (fault injection:
tests/export/fault_injection.py). The primitives here (fast); every
export format in test_overwrite_faults_formats.py (slow)."""

import os

import numpy as np
import pytest

import seqkeras
from seqkeras import _atomic
from seqkeras.export import files
from tests.export.fault_injection import check_every_kill_point, digest, leftovers


def _tree(path, text):
    os.makedirs(os.path.join(path, "variables"), exist_ok=True)
    for name in ("saved_model.pb", "variables/variables.data", "variables/variables.index"):
        with open(os.path.join(path, name), "w") as f:
            f.write(f"{text} {name}")


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "rename-aside"])
def test_a_directory_overwrite_survives_every_kill_point(tmp_path, monkeypatch, exchange):
    path = str(tmp_path / "model" / "1")

    def write(text):
        def run():
            if not os.path.exists(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            new = _atomic.temporary_dir(path)
            _tree(new, text)
            _atomic.replace_dir(new, path, exchange=exchange)

        return run

    points = check_every_kill_point(
        monkeypatch, path, write("old"), write("new"), lambda: _atomic.recover(path)
    )
    assert points >= 2  # the move(s) and the deletion of the old version


def test_the_exchange_swaps_two_directories_in_one_step(tmp_path, monkeypatch):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    _tree(a, "a")
    _tree(b, "b")
    before = digest(a), digest(b)
    if not _atomic._exchange(a, b):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here: the rename-aside path is used")
    assert (digest(b), digest(a)) == before
    calls = []
    real = _atomic._exchange
    monkeypatch.setattr(_atomic, "_exchange", lambda x, y: calls.append(y) or real(x, y))
    new = _atomic.temporary_dir(b)
    _tree(new, "new")
    _atomic.replace_dir(new, b)
    assert calls == [b] and not leftovers(b)
    with open(os.path.join(b, "saved_model.pb")) as f:
        assert f.read() == "new saved_model.pb"


def test_a_file_overwrite_survives_every_kill_point(tmp_path, monkeypatch):
    path = str(tmp_path / "model.tflite")
    check_every_kill_point(
        monkeypatch,
        path,
        lambda: _atomic.write_bytes(path, b"old" * 100),
        lambda: _atomic.write_bytes(path, b"new" * 100),
        lambda: _atomic.recover(path),
    )


def test_lora_adapters_survive_every_kill_point(tmp_path, monkeypatch):
    model = seqkeras.models.decoder_language_model(
        vocab_size=20, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16, max_length=8
    )
    lm = seqkeras.models.with_lora(model, 2)
    path = str(tmp_path / "adapters.npz")
    variables = seqkeras.models.lora_variables(lm)

    def save(value):
        def run():
            for v in variables:
                v.assign(np.full(v.shape, value, "float32"))
            seqkeras.models.save_lora(lm, path)

        return run

    check_every_kill_point(monkeypatch, path, save(1.0), save(2.0), lambda: _atomic.recover(path))
    seqkeras.models.load_lora(lm, path)  # whichever version is there loads
    assert {float(np.asarray(v).flat[0]) for v in variables} <= {1.0, 2.0}


def test_the_next_export_recovers_a_version_set_aside_by_a_killed_one(tmp_path):
    path = str(tmp_path / "m" / "1")
    _tree(path, "old")
    old = digest(path)
    aside = os.path.join(os.path.dirname(path), ".old-1-killed")
    os.replace(path, aside)  # what a kill between the two renames leaves
    os.makedirs(os.path.join(os.path.dirname(path), ".tmp-1-killed"))
    with pytest.raises(ValueError, match="exists; pass overwrite=True"):
        files.check_target("saved_model", path, overwrite=False, want="dir")
    assert digest(path) == old and not leftovers(path)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_exports_get_the_modes_the_umask_gives(tmp_path, umask):
    """An export other accounts may read (a model server's): the atomic
    writes' temporary paths (mkdtemp and mkstemp make them 0o700 / 0o600)
    end with the modes `os.mkdir` and `open` give under the umask."""
    target = str(tmp_path / "m" / "1")
    os.makedirs(os.path.dirname(target))
    previous = os.umask(umask)
    try:
        _atomic.replace_dir(_atomic.temporary_dir(target), target)
        file = _atomic.write_bytes(str(tmp_path / "model.tflite"), b"model")
    finally:
        os.umask(previous)
    assert os.stat(target).st_mode & 0o777 == 0o777 & ~umask
    assert os.stat(file).st_mode & 0o777 == 0o666 & ~umask
