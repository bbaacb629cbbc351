"""Every model builder exports to all three formats and each export
has no XLA-only op and a CPU kernel for every op (audited over every
signature and library function), and
matches Keras in its own runtime: the SavedModel (with the raw-string
`serve_text` and `generate_text` signatures for text models) in a process
where seqkeras cannot be imported, TFLite (builtin ops only) at batch 1 and two sequence
lengths, ONNX at two sequence lengths. The id-level decoding signatures
(`generate`, `generate_beam`, sampling) of every generative builder are
checked against Keras in every runtime by `test_one_step_*.py`."""

import json
import subprocess
import sys

import numpy as np

import seqkeras
from seqkeras.export import signatures as S
from seqkeras.export import convert_builtin, onnx, run_onnx, run_tflite_signature, saved_model
from seqkeras.export import assert_servable
from tests.export.export_checks import assert_builtin_only

M = seqkeras.models
V = 12
VOCAB = seqkeras.data.CharVocabulary("abcdefgh")  # ids 4..11
TEXTS = ["abc", "hgfed", "a", "xb"]  # "x" is unknown


def expected_text(model, name, max_length=6):
    """What `generate_text` must return: Keras greedy decoding, decoded."""
    if name in ("recurrent_seq2seq", "transformer_seq2seq"):
        ids = M.generate(model, VOCAB.encode(TEXTS), max_length=max_length)
        return VOCAB.decode(np.asarray(ids)[:, 1:])
    lengths = [len(t) for t in TEXTS]
    ids = np.asarray(
        M.generate(
            model,
            prompt=VOCAB.encode(TEXTS),
            max_length=max_length,
            prompt_lengths=np.array(lengths),
        )
    )
    return [VOCAB.decode(row[n:][None])[0] for row, n in zip(ids, lengths)]


def builders():
    return {
        "classifier": lambda: M.classifier(
            V, 3, backbone="gru", units=8, embedding_dim=8, bidirectional=True, pooling="attention"
        ),
        "tagger": lambda: M.tagger(V, 4, units=8, embedding_dim=8),
        "recurrent_language_model": lambda: M.recurrent_language_model(V, 8, units=8),
        "transformer_language_model": lambda: M.transformer_language_model(
            V, 16, num_layers=1, num_heads=2, hidden_dim=8
        ),
        "decoder_language_model": lambda: M.decoder_language_model(
            V, 8, 1, 4, 16, num_key_value_heads=2, window=4, max_length=16
        ),
        "conditioned_decoder": lambda: M.conditioned_decoder(5, V, units=8, embedding_dim=8),
        "recurrent_seq2seq": lambda: M.recurrent_seq2seq(
            V, V, units=8, embedding_dim=8, attention="additive"
        ),
        "transformer_seq2seq": lambda: M.transformer_seq2seq(
            V, V, 16, num_layers=1, num_heads=2, hidden_dim=8
        ),
        "forecaster": lambda: M.forecaster(6, 2, backbone="lstm", units=8),
        "elmo_classifier": lambda: M.elmo_classifier(  # ELMo: the biLM inside, both directions
            V, 3, {"embedding_dim": 8, "units": 8, "num_layers": 1}, embedding_dim=8, units=8
        ),
    }


def sample(model, batch, steps, rng):
    out = {}
    for t in model.inputs:
        if t.name == "features":
            out[t.name] = rng.normal(size=(batch, 5)).astype("float32")
        elif t.name == "series":
            out[t.name] = rng.normal(size=(batch, 6, 1)).astype("float32")
        else:
            length = steps if t.name != "target_ids" else max(2, steps - 2)
            ids = rng.integers(4, V, size=(batch, length)).astype("int32")
            ids[:, 0] = 1 if t.name == "target_ids" else ids[:, 0]
            out[t.name] = ids
    return out


def keras_out(model, inputs):
    return np.asarray(model(inputs if len(inputs) > 1 else next(iter(inputs.values()))))


def test_every_builder_exports_and_matches_everywhere(tmp_path):
    rng = np.random.default_rng(0)
    jobs = []
    for name, build in builders().items():
        model = build()
        generative = model.generates
        signatures = []
        if "token_ids" in [t.name for t in model.inputs]:
            signatures.append(S.ServeText(vocabulary=VOCAB))
        if generative and S.GenerateText.applies(model):
            signatures.append(S.GenerateText(VOCAB, 6))
        path = saved_model(model, tmp_path / name / "1", signatures=signatures)
        assert_servable(path)  # every signature: TF Serving runs it
        flatbuffer = convert_builtin(path)
        assert_builtin_only(flatbuffer)
        onnx_path = onnx(model, tmp_path / f"{name}.onnx")
        for steps in (5, 9):
            for batch in (1, 2):
                inputs = sample(model, batch, steps, rng)
                expected = keras_out(model, inputs)
                tflite = run_tflite_signature(flatbuffer, **inputs)
                out = model.output_names[0]
                np.testing.assert_allclose(
                    tflite[out], expected, atol=1e-5, err_msg=f"{name} tflite"
                )
                np.testing.assert_allclose(
                    run_onnx(onnx_path, **inputs)[out], expected, atol=1e-5, err_msg=f"{name} onnx"
                )
        inputs = sample(model, 2, 5, rng)
        job = {
            "name": name,
            "path": path,
            "output": model.output_names[0],
            "inputs": {},
            "expected": str(tmp_path / f"{name}.npy"),
        }
        for key, value in inputs.items():
            np.save(tmp_path / f"{name}-{key}.npy", value)
            job["inputs"][key] = str(tmp_path / f"{name}-{key}.npy")
        np.save(job["expected"], keras_out(model, inputs))
        if "token_ids" in [t.name for t in model.inputs]:
            np.save(
                tmp_path / f"{name}-text.npy", keras_out(model, {"token_ids": VOCAB.encode(TEXTS)})
            )
            job["serve_text"] = True
        if generative and name != "conditioned_decoder":
            job["generate_text"] = expected_text(model, name)
        jobs.append(job)

    code = r"""
import json, sys
sys.modules["seqkeras"] = None  # TF Serving has no seqkeras
import numpy as np, tensorflow as tf
jobs = json.load(open(sys.argv[1]))
for job in jobs:
    m = tf.saved_model.load(job["path"])
    args = {k: tf.constant(np.load(v)) for k, v in job["inputs"].items()}
    out = m.signatures["serving_default"](**args)[job["output"]].numpy()
    np.save(job["expected"].replace(".npy", "-served.npy"), out)
    texts = tf.constant(json.loads(sys.argv[2]))
    if "serve_text" in job:
        out = m.signatures["serve_text"](text=texts)[job["output"]].numpy()
        np.save(job["expected"][:-4] + "-text-served.npy", out)
    if "generate_text" in job:
        out = m.signatures["generate_text"](text=texts)["text"].numpy()
        job["generate_text_served"] = [t.decode() for t in out]
json.dump(jobs, open(sys.argv[1], "w"))
"""
    with open(tmp_path / "jobs.json", "w") as f:
        json.dump(jobs, f)
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "jobs.json"), json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "jobs.json") as f:
        jobs = json.load(f)
    assert sum("serve_text" in j for j in jobs) == 6  # classifiers, tagger, LMs
    assert sum("generate_text" in j for j in jobs) == 5  # LMs, seq2seqs
    for job in jobs:
        if "serve_text" in job:
            base = job["expected"][:-4]
            np.testing.assert_allclose(
                np.load(base + "-text-served.npy"),
                np.load(base + "-text.npy"),
                atol=1e-5,
                err_msg=job["name"],
            )
        if "generate_text" in job:
            assert job["generate_text_served"] == job["generate_text"], job["name"]
        expected = np.load(job["expected"])
        served = np.load(job["expected"].replace(".npy", "-served.npy"))
        np.testing.assert_allclose(served, expected, atol=1e-5, err_msg=job["name"])
