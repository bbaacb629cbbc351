"""Smoke runs of the benchmark scripts (`benchmarks/`): each runs its
peers side by side in its quick configuration and reports sane numbers.
Apart from `test_package.py` so that neither process holds every model the
other compiles (the test runner's memory budget)."""

import importlib.util
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: tests/run.py --slow: the two smoke runs that compile keras-hub's layers
#: and nine small models (measured 100 s and 40 s on 2 busy cores)
SLOW_SECONDS = 95
SLOW_PEAK_MB = 1938


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "recurrent.py"), "bench")
    results = bench.main(["--quick", "--no-torch", "--cells", "gru", "--breakdown"])
    seconds, ratios = results["gru"]
    # ours and Keras, each in its four configurations
    assert len(seconds) == 8 and all(s > 0 for s in seconds.values())
    assert set(ratios) == {"keras"} and ratios["keras"] > 0


def test_linear_recurrences_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "linear_recurrences.py"), "lrbench")
    ratios = bench.main(["--quick", "--no-torch"])
    # minGRU against Keras' GRU and our GRUCell (and mingru-keras when
    # installed); the Mamba block has only torch peers
    assert {"keras GRU", "seqkeras GRUCell"} <= set(ratios)
    assert all(r > 0 for r in ratios.values())


@pytest.mark.slow
def test_matrix_memories_benchmark_smoke(capsys):
    """Both layers against keras-hub's on this process's backend, tiny."""
    bench = _load(os.path.join(ROOT, "benchmarks", "matrix_memories.py"), "mmbench")
    bench.main(["--quick", "--only", "deltanet"])
    out = capsys.readouterr().out
    assert "RATIO deltanet" in out and "RESULT deltanet | keras-hub" in out


@pytest.mark.slow
def test_recall_and_tracking_benchmark_smoke():
    """Parity and MQAR run end to end (tiny), their accuracies fractions."""
    bench = _load(os.path.join(ROOT, "benchmarks", "recall_and_tracking.py"), "rtbench")
    rows = bench.main(["--quick", "--models", "slstm", "deltanet"])
    rows += bench.main(["--quick", "--task", "mqar", "--models", "deltanet"])
    assert [r["task"] for r in rows] == ["parity", "parity", "mqar"]
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in rows)


def test_state_space_latency_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "state_space_latency.py"), "sslatency")
    rows = bench.main(["--quick", "--models", "hawk", "transformer"])
    assert [r["model"] for r in rows] == ["hawk", "transformer"]
    assert all(r["early_ms"] > 0 and r["late_ms"] > 0 for r in rows)
    # Hawk's state: the RG-LRU state and the convolution's 3 inputs, width 8
    assert rows[0]["state_bytes_per_layer"] == 4 * (8 + 3 * 8)


def test_attention_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "attention.py"), "abench")
    results = bench.main(["--quick", "--no-torch"])
    assert sorted(results) == [("encoder", 8), ("mha", 8)]
    seconds, ratios = results["encoder", 8]
    assert len(seconds) == 8 and set(ratios) == {"keras-hub"}
    assert results["mha", 8][1]["keras"] > 0


def test_tflite_latency_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "tflite_latency.py"), "tflite_latency")
    rows = bench.main(["--quick"])
    assert [r["threads"] for r in rows] == [1]
    # the three whole-sequence models carry the same weights
    assert rows[0]["max_abs_diff"] < 1e-5
    assert all(rows[0][k] > 0 for k in ("keras_ms", "ours_ms", "fused_ms", "step_ms"))


def test_attention_chunking_experiment_computes_the_same_block():
    bench = _load(os.path.join(ROOT, "benchmarks", "attention_chunking.py"), "chunking")
    x = np.random.default_rng(0).normal(size=(2, 20, 16)).astype("float32")
    one_shot = bench.make_block(None, False, 2, 32)
    want = np.asarray(one_shot(x))
    for remat in (False, True):
        block = bench.make_block(8, remat, 2, 32)  # 3 blocks, the last short
        block(x)
        block.set_weights(one_shot.get_weights())
        np.testing.assert_allclose(np.asarray(block(x)), want, atol=1e-5)
    rates = bench.main(["--quick"])
    assert set(rates) == {"one_shot", "chunk8", "chunk8_remat"}


def test_seq2seq_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "seq2seq.py"), "s2sbench")
    seconds = bench.main(["--quick", "--no-torch"])
    assert sorted(seconds) == sorted(
        f"ours, {p}, {j}" for p in ("float32", "mixed_bfloat16") for j in ("jit", "no jit")
    )
    assert all(s > 0 for s in seconds.values())
    # the FLOPs count grows with the source length only through attention
    assert (
        bench.train_flops_per_token(31) - bench.train_flops_per_token(30)
        == 3 * 2 * 2 * bench.ENC * 2
    )


def test_torch_seq2seq_peer_trains():
    pytest.importorskip("torch", reason="torch (a benchmark peer) is not installed")
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        peers = _load(os.path.join(ROOT, "benchmarks", "torch_peers.py"), "torch_peers")
        # seq2seq.py's batch: its vocabularies, lengths 10 to `steps`
        net, forward, loss, optimizer = peers.build(
            "seq2seq",
            dict(
                batch=4, steps=12, dims=dict(src_vocab=7800, tgt_vocab=5900, emb=8, enc=8, dec=16)
            ),
        )
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    out = forward()
    assert tuple(out.shape) == (4, 12, 5900)
    opt = optimizer(net.parameters(), lr=1e-2)
    first = float(loss(out))
    for _ in range(20):
        opt.zero_grad()
        loss(forward()).backward()
        opt.step()
    assert float(loss(forward())) < first


def test_decoding_benchmark_smoke():
    bench = _load(os.path.join(ROOT, "benchmarks", "decoding.py"), "dbench")
    rows = bench.main(["--quick", "--no-keras-hub"])
    assert rows["ours greedy"] > 0 and rows["beam 2"] > 0


def test_ctranslate2_peer_carries_our_weights(tmp_path):
    # the serving benchmark's like-for-like claim: CTranslate2 with the
    # weights copied through TransformerSpec scores every target token as
    # Keras does, and its greedy translations are Keras' ids
    ctranslate2 = pytest.importorskip("ctranslate2")
    import seqkeras

    peer = _load(os.path.join(ROOT, "benchmarks", "ctranslate2_peer.py"), "ct2_peer")
    vocab = 40
    model = seqkeras.models.transformer_seq2seq(
        vocab,
        vocab,
        32,
        num_layers=2,
        num_heads=4,
        hidden_dim=16,
        intermediate_dim=32,
        norm_first=True,
    )
    rng = np.random.default_rng(0)
    for w in model.weights:
        w.assign(rng.normal(0, 0.2, w.shape).astype("float32"))
    tokens = ["<pad>", "<bos>", "<eos>", "<unk>"] + [f"t{i}" for i in range(vocab - 4)]
    peer.transformer_spec(model, tokens, tokens).save(str(tmp_path))
    translator = ctranslate2.Translator(str(tmp_path), device="cpu", intra_threads=1)
    src = rng.integers(4, vocab, (3, 6)).astype("int32")
    src[:, -1] = 2  # EOS, as our tokenizers end a source
    tgt = rng.integers(4, vocab, (3, 5)).astype("int32")
    scored = translator.score_batch(
        [[tokens[i] for i in r] for r in src], [[tokens[i] for i in r] for r in tgt]
    )
    logits = np.asarray(model({"source_ids": src, "target_ids": np.c_[np.ones(3, "int32"), tgt]}))
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = np.take_along_axis(logp, np.c_[tgt, np.full(3, 2)][..., None], -1)[..., 0]
    np.testing.assert_allclose([s.log_probs for s in scored], expected, atol=1e-4)
    ours = np.asarray(seqkeras.models.generate(model, src, max_length=8, eos_id=2))
    theirs = translator.translate_batch(
        [[tokens[i] for i in r] for r in src], beam_size=1, max_decoding_length=7
    )
    for row, result in zip(ours, theirs):
        mine = [int(t) for t in row[1:] if t not in (0, 2)]
        assert [tokens.index(t) for t in result.hypotheses[0]] == mine


def test_pretraining_comparison_table(tmp_path, capsys):
    bench = _load(os.path.join(ROOT, "benchmarks", "pretraining.py"), "pretraining_bench")

    def run(name, accuracies, key="val_accuracy"):
        d = tmp_path / name
        d.mkdir()
        rows = "".join(f"{i},0.5,{a}\n" for i, a in enumerate(accuracies))
        (d / "history.csv").write_text(f"epoch,val_loss,{key}\n" + rows)
        seconds = "".join(f"{i},60\n" for i in range(len(accuracies)))
        (d / "epoch_seconds.csv").write_text("epoch,seconds\n" + seconds)
        return str(d)

    scratch, pretrained = run("a", [0.80, 0.82]), run("b", [0.84, 0.86, 0.85])
    ner = run("c", [90.0, 91.0], "val_f1"), run("d", [91.5, 91.6], "val_f1")
    bench.main(
        ["--out", str(tmp_path / "out"), "--pair", "SST-2 X", scratch, pretrained, "3"]
        + ["--pair", "NER", *ner, "0.8", "--pretraining", scratch, pretrained]
    )
    out = capsys.readouterr().out
    assert "| SST-2 X | 82.00 | 86.00 | +4.00 | >= +3 | met | 2.0 / 3.0 |" in out
    assert "| NER | 91.00 | 91.60 | +0.60 | >= +0.8 | not met |" in out
    assert sorted(os.listdir(tmp_path / "out")) == ["ner.png", "pretraining.png", "sst-2-x.png"]
    # a run against an earlier table's figure; a score evaluate printed
    bench.main(
        ["--out", str(tmp_path / "o2"), "--against", "T5 / MLM", pretrained, "86.5", "-1"]
        + ["--score", pretrained, "85.25"]
    )
    out = capsys.readouterr().out
    assert "| T5 / MLM | 86.50 | 85.25 | -1.25 | >= -1 | not met | - / 3.0 |" in out
    assert os.listdir(tmp_path / "o2") == ["t5---mlm.png"]


def test_serving_floor_products_are_the_step_products():
    """`benchmarks/serving_floor.py` times each kernel on the products a
    decoding step runs: each kind's product i must be x @ kernel_i + bias_i
    (NumPy), float32 exactly, bfloat16 and int8 within their rounding."""
    bench = _load(os.path.join(ROOT, "benchmarks", "serving_floor.py"), "serving_floor")
    rng = np.random.default_rng(0)
    shapes = [(8, 24), (8, 8), (8, 8), (8, 8), (8, 32), (32, 8), (8, 50)]
    pairs = [
        (rng.normal(size=s).astype("float32"), rng.normal(size=s[1]).astype("float32"))
        for s in shapes
    ]
    kinds, d = bench.builders(pairs)
    assert d == 8 and sorted(kinds) == ["XLA float32", "bfloat16", "float32", "int8"]
    tolerance = {"float32": 1e-5, "XLA float32": 1e-5, "bfloat16": 2e-2, "int8": 2e-2}
    for kind, products in kinds.items():
        assert [w for _, w in products] == [s[0] for s in shapes]
        for (product, width), (kernel, bias) in zip(products, pairs):
            h = rng.normal(size=(3, width)).astype("float32")
            want = h @ kernel + bias
            got = np.asarray(product(h))
            error = np.linalg.norm(got - want) / np.linalg.norm(want)
            assert error < tolerance[kind], (kind, error)
    # the timed loop runs (no wall-clock assertion: only that it returns a time)
    assert bench.time_kind(kinds["int8"], d, 2, 2, 1, False) > 0
    assert bench.time_kind(None, d, 2, 2, 1, False, ops=5) > 0
