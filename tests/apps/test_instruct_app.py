"""apps/instruct.py end to end over a tiny chat checkpoint made in the
test (tests/pretrained_checks.py): train (LoRA, loss on the answer tokens;
killed after an epoch, it resumes), evaluate (ends with `accuracy = N%`),
export (the phone bundle, checked against Keras), serve (the chat
SavedModel, servable and equal to Keras in a process without seqkeras)
and predict."""

import json
import os
import subprocess
import sys

import pytest

from tests.apps.app_checks import assert_resumes
from tests.models.test_instruction import TEXT, WORDS, keyword_task
from tests.pretrained_checks import tiny_chat_directory

SLOW_SECONDS = 78  # tests/run.py --slow: its slow tests beside another module
SLOW_PEAK_MB = 2074  # (2 cores; the summed memory of its processes)
KILL_ENV = "INSTRUCT_APP_KILL_AFTER_EPOCH"  # apps/instruct.py's

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("tensorflow_text")


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("instruct"))
    corpus = [f"{TEXT} {w} film positive negative user assistant" for w in WORDS]
    return tiny_chat_directory(path, corpus * 20, vocab_size=400)


APP = os.path.join(os.path.dirname(__file__), "..", "..", "apps", "instruct.py")


def keyword_tsv(tmp_path, n):
    """An SST-2-style TSV of `n` rows of the keyword task."""
    rows = ["sentence\tlabel"]
    for prompt, label in zip(*keyword_task(n, 2)):
        rows.append(f"{prompt.split('Review: ')[-1]}\t{int(label == 'positive')}")
    tsv = tmp_path / "data.tsv"
    tsv.write_text("\n".join(rows) + "\n")
    return tsv


@pytest.mark.slow  # end to end: five app processes (train, evaluate, export, serve, predict)
def test_app_trains_evaluates_and_predicts(directory, tmp_path):
    tsv = keyword_tsv(tmp_path, 48)
    out = tmp_path / "model"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}

    def run(*args, stdin=None):
        result = subprocess.run(
            [sys.executable, APP, *args], capture_output=True, text=True, env=env, input=stdin
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    # train: SIGKILLed after epoch 1 and run again, it resumes at epoch 2
    # (the shared workflow's BackupAndRestore, the adapters as its best
    # checkpoint)
    argv = ["train", "--init", directory, "--lora", "4", "--out", str(out)]
    argv += ["--train", str(tsv), "--validation", str(tsv), "--epochs", "2"]
    assert_resumes("instruct", argv + ["--examples", "32", "--verbose", "2"], KILL_ENV, out, 2)
    config = json.loads((out / "config.json").read_text())
    assert config["rank"] == 4 and (out / "adapters.npz").is_file()
    assert os.path.getsize(out / "adapters.npz") < 2 * config["adapter_bytes"]
    last = run("evaluate", "--model", str(out), "--data", str(tsv)).strip().splitlines()[-1]
    assert last.startswith("accuracy = ") and last.endswith("%")
    printed = run(
        "export", "--model", str(out), "--check", "2", "--tokens", "4", "--max-length", "96"
    )
    assert "model.tflite: " in printed and "on 2/2 prompts" in printed.split("model.tflite: ")[1]
    assert (out / "export" / "phone" / "runner.py").is_file()
    printed = run("serve", "--model", str(out), "--max-length", "64")
    assert "(servable)" in printed and "equal to Keras: True" in printed
    printed = run("predict", "--model", str(out), stdin="a good film\na bad film\n")
    assert [line.split("\t")[1] for line in printed.strip().splitlines()] == [
        "a good film",
        "a bad film",
    ]


@pytest.mark.slow  # two app processes on JAX
def test_train_distributed_over_devices_matches_one_device(directory, tmp_path):
    """`train --distribute model` on 8 virtual JAX devices (the weights
    split by `seqkeras.distribute.layout_map`) and `--distribute data`
    reach one device's losses."""
    pytest.importorskip("jax")
    tsv = keyword_tsv(tmp_path, 32)
    xla = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "jax", "XLA_FLAGS": xla}
    losses = {}
    for how in (None, "data", "model"):
        out = tmp_path / f"model-{how}"
        argv = [sys.executable, APP, "train", "--init", directory, "--lora", "4", "--out", str(out)]
        argv += ["--train", str(tsv), "--validation", str(tsv), "--examples", "32"]
        argv += ["--batch-size", "8", "--verbose", "0"] + (["--distribute", how] if how else [])
        result = subprocess.run(argv, capture_output=True, text=True, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        history = (out / "history.csv").read_text().strip().splitlines()
        header, last = history[0].split(","), history[-1].split(",")
        losses[how] = float(last[header.index("loss")])
        assert json.loads((out / "config.json").read_text())["training"]["distribute"] == how
    assert losses["data"] == pytest.approx(losses[None], rel=1e-4)
    assert losses["model"] == pytest.approx(losses[None], rel=1e-4)
