"""LoRA fine-tuning across devices: a tiny Llama-family model's adapters
trained for 20 steps reach the loss of one device within 1e-4 relative,
under `keras.distribution` on JAX (8 virtual CPU devices: data parallel,
and model parallel with the weights split by `seqkeras.distribute.
layout_map` over 4 of them) and under `tf.distribute.MirroredStrategy` on
TensorFlow (two logical CPUs); the recurrent and Transformer builders
train under the same model-parallel layouts as on one device. Each
backend runs in its own process (tests/distributed_lora_worker.py): the
device count is fixed when the backend starts."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import seqkeras
import seqkeras.distribute as dist

WORKER = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "distributed_lora_worker.py"
)


def run_worker(tmp_path, backend, **env):
    out = tmp_path / f"{backend}.json"
    environ = dict(os.environ, KERAS_BACKEND=backend, **env)
    environ.pop("TF_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-P", WORKER, str(out)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def check_equal_training(one, other):
    (before, after), _ = one
    (other_before, other_after), _ = other
    assert after < before - 0.02  # the adapters learned (the test can fail)
    np.testing.assert_allclose(other_before, before, rtol=1e-5)
    np.testing.assert_allclose(other_after, after, rtol=1e-4)


def test_lora_data_and_model_parallel_on_jax_match_one_device(tmp_path):
    pytest.importorskip("jax")
    xla = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    result = run_worker(tmp_path, "jax", XLA_FLAGS=xla.strip())
    assert result["devices"] == 8
    check_equal_training(result["one"], result["data"])
    check_equal_training(result["one"], result["model"])
    layouts = result["model"][1]
    assert layouts["decoder_block_0/attention/query_kernel"] == [None, "model", None]
    assert layouts["decoder_block_0/feedforward/down_kernel"] == ["model", None]
    assert not any(layouts[p] and any(layouts[p]) for p in layouts if "lora" in p)
    assert not any(axes and any(axes) for axes in result["data"][1].values())  # replicated
    for name in ("lstm tagger", "transformer_seq2seq"):
        plain, split = result[name]
        np.testing.assert_allclose(split, plain, rtol=1e-5, err_msg=name)


def test_lora_under_mirrored_strategy_matches_one_device(tmp_path):
    result = run_worker(tmp_path, "tensorflow")
    assert result["devices"] == 2
    check_equal_training(result["one"], result["mirrored"])


def mesh(model_size):
    devices = [f"cpu:{i}" for i in range(2 * model_size)]
    return keras.distribution.DeviceMesh((2, model_size), ("batch", "model"), devices)


def test_layout_map_splits_heads_units_vocabularies_and_gates_where_they_divide():
    lm = seqkeras.models.decoder_language_model(
        vocab_size=48,
        hidden_dim=16,
        num_layers=1,
        num_heads=4,
        num_key_value_heads=2,
        intermediate_dim=32,
    )
    layouts = dist.layout_map(lm, mesh(4))
    axes = {p: layout.axes for p, layout in layouts.items()}
    assert axes["embedding/embeddings"] == ("model", None)
    assert axes["decoder_block_0/attention/query_kernel"] == (None, "model", None)
    assert "decoder_block_0/attention/key_kernel" not in axes  # 2 heads over 4 devices
    assert axes["decoder_block_0/attention/output_kernel"] == ("model", None, None)
    assert axes["decoder_block_0/feedforward/up_kernel"] == (None, "model")
    assert axes["decoder_block_0/feedforward/down_kernel"] == ("model", None)
    assert not any("norm" in p for p in axes)
    rnn = seqkeras.models.recurrent_seq2seq(30, 32, units=16, cell="lstm", attention="additive")
    axes = {p: layout.axes for p, layout in dist.layout_map(rnn, mesh(4)).items()}
    assert axes["decoder/lstm_cell_1/recurrent_kernel"] == (None, "model")  # the 4 gates' units
    assert axes["logits_dense/kernel"] == (None, "model")
    assert "source_embedding/embeddings" not in axes  # 30 rows over 4 devices


def test_distribution_arguments_are_checked():
    lm = seqkeras.models.decoder_language_model(
        vocab_size=8, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=8
    )
    with pytest.raises(ValueError, match="`axis`.*Received: axis='tensor'"):
        dist.layout_map(lm, mesh(2), axis="tensor")
    with pytest.raises(TypeError, match="`device_mesh`"):
        dist.layout_map(lm, (2, 4))
    with pytest.raises(TypeError, match="`model`.*built keras.Model"):
        dist.layout_map("lm", mesh(2))
    with pytest.raises(ValueError, match="`name`.*Received: name='tensor'"):
        dist.get_distribution("tensor")
    if keras.backend.backend() != "jax":
        with pytest.raises(ValueError, match="needs the JAX backend"):
            dist.get_distribution("data")
