"""`seqkeras.export.saved_model`: named signatures, atomic writes, and the
builtin-only TFLite conversion of the attention seq2seq models."""

import os

import numpy as np
import pytest
import tensorflow as tf

import seqkeras
from seqkeras.export import signatures as S
from seqkeras.export import convert_builtin, run_tflite_signature, saved_model
from seqkeras.export import loops
from tests.export.export_checks import assert_builtin_only

SRC = np.array([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11]], "int32")
TGT = np.array([[1, 7, 8, 0], [1, 9, 4, 5]], "int32")


@pytest.mark.parametrize(
    "attention,style", [(None, "bahdanau"), ("additive", "bahdanau"), ("general", "luong")]
)
def test_seq2seq_exports_named_and_builtin_only(attention, style, tmp_path):
    model = seqkeras.models.recurrent_seq2seq(12, 12, units=16, attention=attention, style=style)
    inputs = {"source_ids": SRC, "target_ids": TGT}
    expected = np.asarray(model(inputs))
    path = saved_model(model, tmp_path / "s2s" / "1")
    served = tf.saved_model.load(path).signatures["serving_default"](
        source_ids=tf.constant(SRC), target_ids=tf.constant(TGT)
    )
    assert list(served) == ["logits"]
    np.testing.assert_allclose(served["logits"], expected, atol=1e-5)
    flatbuffer = convert_builtin(path)
    assert_builtin_only(flatbuffer, required=("WHILE",))
    for n, t in ((1, 3), (2, 4)):  # two batch sizes and target lengths
        sample = {"source_ids": SRC[:n], "target_ids": TGT[:n, :t]}
        got = run_tflite_signature(flatbuffer, **sample)["logits"]
        np.testing.assert_allclose(got, np.asarray(model(sample)), atol=1e-5)


def test_inference_loop_equals_training_loop_with_its_gradient():
    """The inference loop (slice updates with their own gradient: what
    exports trace) computes what training's (scatter writes) does, and
    differentiates alike."""
    layer = seqkeras.layers.AttentionDecoder(seqkeras.layers.LSTMCell(8), score="additive")
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(2, 5, 3)).astype("float32"))
    memory = tf.constant(rng.normal(size=(2, 4, 6)).astype("float32"))
    results = []
    for training in (True, False):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = layer(x, memory, return_attention_scores=True, training=training)
            weights = tf.range(1.0, out[0].shape[-1] + 1.0)
            loss = tf.reduce_sum(out[0] * weights) + tf.reduce_sum(out[1] * out[1])
        results.append(list(out) + tape.gradient(loss, [x] + layer.trainable_weights))
    for a, b in zip(*results):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)


def test_existing_version_and_file_paths_fail_clearly(tmp_path):
    model = seqkeras.models.classifier(10, 2, units=4, embedding_dim=4)
    path = saved_model(model, tmp_path / "c" / "1")
    with pytest.raises(ValueError, match="exists; pass overwrite=True"):
        saved_model(model, path)
    saved_model(model, path, overwrite=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        saved_model(model, tmp_path / "file")


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    model = seqkeras.models.classifier(10, 2, units=4, embedding_dim=4)

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(tf.saved_model, "save", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        saved_model(model, tmp_path / "c" / "1")
    assert os.listdir(tmp_path / "c") == []


@pytest.mark.parametrize(
    "strategy,kwargs",
    [("greedy", {}), ("beam", {"beam_width": 3}), ("sample", {"top_k": 4, "seed": 2})],
)
def test_the_decoding_loop_traces_into_a_saved_model(strategy, kwargs, tmp_path):
    """generate() is one graph: it saves as a signature and the reloaded
    signature returns the same ids (the export issue builds on this)."""
    model = seqkeras.models.recurrent_seq2seq(12, 12, units=16, attention="additive")
    expected = seqkeras.models.generate(
        model, SRC, max_length=6, strategy=strategy, eos_id=2, jit_compile=False, **kwargs
    )
    expected = np.asarray(expected[0] if strategy == "beam" else expected)
    module = tf.Module()
    module.model = model

    @tf.function(input_signature=[tf.TensorSpec((None, None), tf.int32)])
    def generate(source_ids):
        out = seqkeras.models.generate(
            model,
            source_ids,
            max_length=6,
            strategy=strategy,
            eos_id=2,
            jit_compile=False,
            runtime=loops.SERVING,  # TF Serving's loop, passed as a value
            **kwargs,
        )
        return {"ids": out[0] if strategy == "beam" else out}

    module.generate = generate
    concrete = generate.get_concrete_function()
    tf.saved_model.save(module, str(tmp_path / "g"), signatures={"generate": concrete})
    reloaded = tf.saved_model.load(str(tmp_path / "g"))
    got = reloaded.signatures["generate"](source_ids=tf.constant(SRC))["ids"]
    np.testing.assert_array_equal(got.numpy(), expected)


def test_quantized_tflite_is_smaller_builtin_and_close(tmp_path):
    """Both quantizations of one trained model's SavedModel (one training,
    one export and one float32 conversion for the two)."""
    model = seqkeras.models.recurrent_seq2seq(
        12, 12, units=64, embedding_dim=32, attention="additive"
    )
    sample = {"source_ids": SRC, "target_ids": TGT}
    # Trained a little, so that the predictions are decisions: an untrained
    # model's logits differ by ~1e-3, and its argmax flips on rounding.
    targets = np.array([[7, 8, 2, 0], [9, 4, 5, 2]], "int32")
    seqkeras.training.compile_model(model, learning_rate=1e-2)
    model.fit(sample, targets, epochs=20, verbose=0)
    path = saved_model(model, tmp_path / "s" / "1")
    full = convert_builtin(path)
    expected = np.asarray(model(sample))
    real = TGT != 0  # padded steps' logits are not predictions
    # a list of modes: the same files from one frozen graph, in order
    together = convert_builtin(path, quantize=[None, "dynamic_int8", "float16"])
    assert len(together) == 3 and together[0] == full
    for quantize, small in zip(("dynamic_int8", "float16"), together[1:]):
        assert small == convert_builtin(path, quantize=quantize), quantize
        assert_builtin_only(small)
        assert len(small) < 0.6 * len(full), quantize
        got = run_tflite_signature(small, **sample)["logits"]
        np.testing.assert_allclose(got, expected, atol=0.05, err_msg=quantize)
        assert np.mean((np.argmax(got, -1) == np.argmax(expected, -1))[real]) >= 0.9, quantize
    for bad in ("int3", [], ["float16", "int3"]):
        with pytest.raises(ValueError, match="convert_builtin.*quantize"):
            convert_builtin(path, quantize=bad)


def test_saved_model_runs_where_seqkeras_is_not_importable(tmp_path):
    """TF Serving has no seqkeras: the SavedModel must not need it."""
    import subprocess
    import sys

    model = seqkeras.models.recurrent_seq2seq(12, 12, units=16, attention="general", style="luong")
    path = saved_model(model, tmp_path / "s" / "1")
    np.save(tmp_path / "src.npy", SRC)
    np.save(tmp_path / "tgt.npy", TGT)
    code = (
        "import sys; sys.modules['seqkeras'] = None\n"  # import fails
        "import numpy as np, tensorflow as tf\n"
        f"m = tf.saved_model.load({str(path)!r})\n"
        "out = m.signatures['serving_default'](\n"
        f"    source_ids=tf.constant(np.load({str(tmp_path / 'src.npy')!r})),\n"
        f"    target_ids=tf.constant(np.load({str(tmp_path / 'tgt.npy')!r})))\n"
        f"np.save({str(tmp_path / 'out.npy')!r}, out['logits'].numpy())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    np.testing.assert_allclose(
        np.load(tmp_path / "out.npy"),
        np.asarray(model({"source_ids": SRC, "target_ids": TGT})),
        atol=1e-5,
    )


def test_saved_model_cli_lists_the_signatures(tmp_path):
    import shutil
    import subprocess
    import sys

    model = seqkeras.models.recurrent_seq2seq(12, 12, units=8, attention="dot", bidirectional=False)
    path = saved_model(model, tmp_path / "s" / "1", signatures=S.generation(max_length=5))
    cli = shutil.which("saved_model_cli") or os.path.join(
        os.path.dirname(sys.executable), "saved_model_cli"
    )
    out = subprocess.run(
        [cli, "show", "--dir", path, "--all"], capture_output=True, text=True, check=True
    ).stdout
    for signature in ("serving_default", "generate", "generate_beam"):
        assert f"signature_def['{signature}']" in out
    assert "inputs['source_ids']" in out and "outputs['logits']" in out


def test_export_bad_inputs(tmp_path):
    from seqkeras.export import export_and_verify, tflite

    model = seqkeras.models.classifier(10, 2, units=4, embedding_dim=4)
    with pytest.raises(ValueError, match="generate signatures need a generative model"):
        saved_model(model, tmp_path / "c" / "1", signatures=[S.Generate(max_length=4)])
    assert not os.path.exists(tmp_path / "c" / "1")
    with pytest.raises(ValueError, match="formats"):
        export_and_verify(model, "c", [], str(tmp_path), formats=("pb",))
    path = tflite(model, tmp_path / "c.tflite")
    with pytest.raises(ValueError, match="exists; pass overwrite=True"):
        tflite(model, path)
    with pytest.raises(ValueError, match="is a directory"):
        tflite(model, tmp_path)


def test_convert_builtin_names_an_unknown_signature_key(tmp_path):
    import keras

    inputs = keras.Input((3,), name="x")
    path = saved_model(keras.Model(inputs, keras.layers.Dense(2)(inputs)), tmp_path / "m" / "1")
    with pytest.raises(ValueError, match=r"`convert_builtin`.*signature_key.*'serve'"):
        convert_builtin(path, signature_key="serve")
    with pytest.raises(ValueError, match=r"`saved_model` needs a model with defined inputs"):
        saved_model(keras.Sequential([keras.layers.Dense(2)]), tmp_path / "u" / "1")


def test_an_export_traces_each_signature_once_and_saves_no_keras_objects(tmp_path):
    # The SavedModel holds the signatures, the variables and the lookup
    # tables, not the Keras model: saving the model traced its own default
    # signature and, with the functions attached, each signature again
    # (an export took 2.2x as long).
    import keras

    traces = []

    class Counted(keras.layers.Layer):
        def call(self, x):
            traces.append(1)  # Python runs once per trace
            return x * 2.0

    inp = keras.Input((3,), name="x")
    lookup = keras.layers.StringLookup(vocabulary=["a", "b"])
    model = keras.Model(inp, keras.layers.Dense(2)(Counted()(inp)))
    model.lookup = lookup  # a lookup table the signature captures
    traces.clear()

    class Table(S.Signature):
        names = ("ids",)

        def build(self, model, check=True):
            @tf.function(input_signature=[tf.TensorSpec((None,), tf.string)])
            def ids(text):
                return {"ids": model.lookup(text)}

            return S.Functions({"ids": ids})

    path = saved_model(model, tmp_path / "m" / "1", [S.Forward(), Table()])
    assert len(traces) == 1
    loaded = tf.saved_model.load(path)
    x = np.ones((2, 3), "float32")
    np.testing.assert_allclose(
        loaded.signatures["serving_default"](x=tf.constant(x))[model.output_names[0]],
        np.asarray(model(x)),
        atol=1e-6,
    )
    got = loaded.signatures["ids"](text=tf.constant(["b", "z"]))["ids"].numpy()
    np.testing.assert_array_equal(got, [2, 0])
