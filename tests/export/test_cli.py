import os
import subprocess
import sys


import seqkeras

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "seqkeras.export", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )


def test_cli_exports_all_formats_and_bumps_versions(tmp_path):
    model = seqkeras.models.classifier(10, 3, backbone="gru", units=4, embedding_dim=4)
    path = str(tmp_path / "c.keras")
    model.save(path)
    out = run(path, "--name", "clf", "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    for key in ("savedmodel_max_abs_diff", "tflite_max_abs_diff", "onnx_max_abs_diff"):
        line = [x for x in out.stdout.splitlines() if x.startswith(key)][0]
        assert float(line.split(": ")[1]) <= 1e-5
    for sub in ("clf/1/saved_model.pb", "clf-tflite/1/model.tflite", "clf-onnx/1/model.onnx"):
        assert os.path.exists(tmp_path / "m" / sub)
    again = run(
        path, "--name", "clf", "--out", str(tmp_path / "m"), "--formats", "savedmodel", cwd=tmp_path
    )
    assert again.returncode == 0
    assert os.path.exists(tmp_path / "m" / "clf" / "2")
    assert not os.path.exists(tmp_path / "m" / "clf-tflite" / "2")


def test_cli_bad_arguments(tmp_path):
    (tmp_path / "file").write_text("x")
    bad = run("missing.keras", "--name", "x", cwd=tmp_path)
    assert bad.returncode == 2 and "not a .keras file" in bad.stderr
    model = seqkeras.models.tagger(10, 3, units=4, embedding_dim=4)
    path = str(tmp_path / "t.keras")
    model.save(path)
    bad = run(path, "--name", "x", "--formats", "pb", cwd=tmp_path)
    assert bad.returncode == 2 and "invalid choice: 'pb'" in bad.stderr
    bad = run(path, "--name", "x", "--out", str(tmp_path / "file"), cwd=tmp_path)
    assert bad.returncode == 2 and "is a file" in bad.stderr
