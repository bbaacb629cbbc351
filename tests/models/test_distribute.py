"""Training under tf.distribute: two worker processes on 127.0.0.1 with
`MultiWorkerMirroredStrategy` reach the losses of one process with the same
global batch, and the chief's checkpoint restores in one process; every
builder trains under `MirroredStrategy` as without it; `TF_CONFIG` and
strategy names are checked."""

import json
import os
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest

import seqkeras
import seqkeras.distribute as dist
from seqkeras.training import compile_model

HERE = os.path.dirname(os.path.abspath(__file__))
# Run with `python -P` (3.11+): tests/ must not come first on sys.path, as
# tests/jax would shadow the jax package Keras imports.
WORKER = os.path.join(os.path.dirname(HERE), "distributed_worker.py")
TIMEOUT = 240  # seconds for each group of processes
RUN_ALONE = True  # tests/run.py: no other test process beside the workers


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_processes(commands):
    """Starts (argv, env) pairs together; waits at most TIMEOUT seconds,
    kills them all on failure or timeout; returns their outputs."""
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for argv, env in commands
    ]
    try:
        outs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    return outs


def test_two_workers_match_one_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    single = tmp_path / "single"
    single.mkdir()
    run_processes([([sys.executable, "-P", WORKER, str(single)], env)])
    multi = tmp_path / "multi"
    multi.mkdir()
    workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    commands = []
    for i in range(2):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}
        commands.append(
            (
                [sys.executable, "-P", WORKER, str(multi), "--strategy", "multiworker"],
                dict(env, TF_CONFIG=json.dumps(config)),
            )
        )
    run_processes(commands)

    one = json.loads((single / "losses-single.json").read_text())
    w0 = json.loads((multi / "losses-worker0.json").read_text())
    w1 = json.loads((multi / "losses-worker1.json").read_text())
    assert w0["replicas"] == 2 and not w0["jit_compile"]
    assert one["replicas"] == 1
    # Each step's loss: the mean over the global batch, in one process or
    # as the reduced halves of two; the same up to float32 summation order.
    assert len(one["loss"]) == 6
    np.testing.assert_allclose(w0["loss"], one["loss"], rtol=1e-5)
    np.testing.assert_allclose(w1["loss"], w0["loss"], rtol=1e-6)
    assert one["loss"][-1] < one["loss"][0]  # it trains

    # Only the chief wrote model.keras; it restores in this process and
    # predicts as the one-process model does (same weights after 6 steps).
    a = keras.saving.load_model(str(multi / "model.keras"))
    b = keras.saving.load_model(str(single / "model.keras"))
    x = np.random.default_rng(1).integers(1, 20, (3, 12)).astype("int32")
    np.testing.assert_allclose(np.asarray(a(x)), np.asarray(b(x)), atol=1e-4)
    assert not any(
        os.path.exists(multi / f) for f in os.listdir(multi) if f.startswith("seqkeras-worker-")
    )


def tiny_builders():
    """(name, build, inputs, targets) for every builder, tiny shapes."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 12, (8, 6)).astype("int32")
    series = rng.normal(size=(8, 10, 1)).astype("float32")
    future = rng.normal(size=(8, 2, 1)).astype("float32")
    M = seqkeras.models
    return [
        (
            "classifier",
            lambda: M.classifier(12, 3, backbone="gru", units=8, embedding_dim=8),
            ids,
            ids[:, 0] % 3,
        ),
        (
            "tagger",
            lambda: M.tagger(12, 4, backbone="lstm", units=8, embedding_dim=8),
            ids,
            ids % 4,
        ),
        ("crf tagger", lambda: M.tagger(12, 4, units=8, embedding_dim=8, crf=True), ids, ids % 4),
        (
            "recurrent_language_model",
            lambda: M.recurrent_language_model(12, embedding_dim=8, units=8),
            ids,
            ids,
        ),
        (
            "transformer_language_model",
            lambda: M.transformer_language_model(
                12, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16, max_length=8
            ),
            ids,
            ids,
        ),
        (
            "recurrent_seq2seq",
            lambda: M.recurrent_seq2seq(12, 12, embedding_dim=8, units=8, attention="additive"),
            {"source_ids": ids, "target_ids": ids},
            ids,
        ),
        (
            "transformer_seq2seq",
            lambda: M.transformer_seq2seq(
                12, 12, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16, max_length=8
            ),
            {"source_ids": ids, "target_ids": ids},
            ids,
        ),
        ("forecaster", lambda: M.forecaster(10, 2, units=8), series, future),
        (
            "seq2seq_forecaster (teacher forcing)",
            lambda: M.seq2seq_forecaster(10, 2, units=8).teacher_forcing_model(),
            {"series": series, "future": future},
            future,
        ),
    ]


@pytest.mark.parametrize("name,build,x,y", tiny_builders(), ids=[b[0] for b in tiny_builders()])
def test_every_builder_trains_under_mirrored_strategy(name, build, x, y):
    def train(strategy):
        keras.utils.set_random_seed(0)
        with strategy.scope():
            model = build()
            compile_model(model, jit_compile=False)  # as multi-replica
        return model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]

    plain = train(dist.get_strategy("default"))
    mirrored = train(dist.get_strategy("mirrored"))
    assert np.all(np.isfinite(mirrored))
    np.testing.assert_allclose(mirrored, plain, rtol=1e-4)


def test_bad_strategy_and_cluster_config(monkeypatch):
    with pytest.raises(ValueError, match="`name`.*Received: name='gpu'"):
        dist.get_strategy("gpu")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG is not set"):
        dist.get_strategy("multiworker")
    for raw, match in [
        ("{not json", "not valid JSON"),
        ('{"task": {}}', "`worker` list"),
        (
            '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}',
            "must name one",
        ),
    ]:
        with pytest.raises(ValueError, match=match):
            dist.cluster_spec({"TF_CONFIG": raw})
    two = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    assert not dist.is_chief({"TF_CONFIG": json.dumps(two)})
    two["task"]["index"] = 0
    assert dist.is_chief({"TF_CONFIG": json.dumps(two)})
    assert dist.is_chief({})
    path = dist.worker_path(
        "/x/model.keras", {"TF_CONFIG": json.dumps(dict(two, task={"type": "worker", "index": 1}))}
    )
    assert path != "/x/model.keras" and path.endswith("model.keras")
