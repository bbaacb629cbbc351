"""The served decoding of a `transformer_seq2seq`: the default graph
(`TransformerServingDecoder`: fused projections, growing caches, no
reordering of the encoder's keys and values) and the XLA-compiled option
(`saved_model(..., jit_compile=True)`) give what `seqkeras.models.generate`
gives, in a process without seqkeras; the audit tells them apart; TF
Serving's batching file."""

import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import seqkeras
from seqkeras.data import SubwordTokenizer
from seqkeras.export import NotServable, assert_servable, audit_serving, batching_parameters
from seqkeras.export import fresh_signature, fresh_translate, saved_model
from seqkeras.export import signatures as S
from seqkeras.export.serving_decoder import TransformerServingDecoder, supports

DE = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee!", "Eine Frau fährt ein Auto."] * 3
EN = ["A man rides a bike.", "Two dogs play in the snow!", "A woman drives a car."] * 3


def _model(norm_first=True, vocab=(50, 40), seed=0):
    model = seqkeras.models.transformer_seq2seq(
        *vocab, max_length=16, num_layers=2, num_heads=2, hidden_dim=16, norm_first=norm_first
    )
    rng = np.random.default_rng(seed)
    for w in model.weights:  # weights large enough that EOS and ties are rare by chance
        w.assign(rng.normal(0, 0.3, w.shape).astype("float32"))
    return model


def _sources(seed=0):
    src = np.random.default_rng(seed).integers(4, 50, (5, 7)).astype("int32")
    src[1, 4:] = 0  # padding masked
    return src


@pytest.mark.parametrize("norm_first", [True, False])
def test_serving_decoder_equals_generate(norm_first):
    model = _model(norm_first)
    decoder = TransformerServingDecoder(model)
    src = _sources()
    # EOS = a token the random model emits, so that rows end at different steps
    eos = int(np.asarray(seqkeras.models.generate(model, src, max_length=4))[0, 2])
    greedy = tf.function(lambda s: decoder.decode(s, 12, eos_id=eos))
    want = np.asarray(seqkeras.models.generate(model, src, max_length=12, eos_id=eos))
    np.testing.assert_array_equal(greedy(src).numpy(), want)
    for alpha in (0.0, 0.6) if norm_first else (0.6,):
        ids, scores = tf.function(lambda s, a=alpha: decoder.decode(s, 12, 3, a, eos_id=eos))(src)
        want_ids, want_scores = seqkeras.models.generate(
            model,
            src,
            max_length=12,
            eos_id=eos,
            strategy="beam",
            beam_width=3,
            length_penalty_alpha=alpha,
        )
        np.testing.assert_array_equal(ids.numpy(), np.asarray(want_ids))
        np.testing.assert_allclose(scores.numpy(), np.asarray(want_scores), atol=1e-4)


@contextlib.contextmanager
def serving_decoder_rows(rows):
    """`SMALL_ROWS` set to `rows` while tracing."""
    from seqkeras.export import serving_decoder

    before, serving_decoder.SMALL_ROWS = serving_decoder.SMALL_ROWS, rows
    try:
        yield
    finally:
        serving_decoder.SMALL_ROWS = before


def test_finished_sources_leave_the_loop_with_the_same_answers():
    # A model trained a little on reversals ends its outputs (EOS, id 2)
    # at many different steps. Sources leave the loop at the step their
    # answer is final, and what the rest decode must not change: 40 sources
    # greedy (batched products) and 12 x beam 3 (36 rows), then 5 sources
    # (products and sums), against `generate` and each source alone.
    from seqkeras.data import copy_task, teacher_forcing
    from seqkeras.models import compile_model

    keras.utils.set_random_seed(0)
    src, tgt = copy_task(256, 1, 9, num_symbols=8, reverse=True, seed=0)
    model = seqkeras.models.transformer_seq2seq(
        12, 12, max_length=16, num_layers=2, num_heads=2, hidden_dim=16
    )
    compile_model(model, learning_rate=1e-2)
    inputs = {"source_ids": src, "target_ids": teacher_forcing(tgt)}
    model.fit(inputs, tgt, epochs=4, batch_size=64, verbose=0)
    src = copy_task(40, 1, 9, num_symbols=8, reverse=True, seed=1)[0]
    decoder = TransformerServingDecoder(model)
    want = np.asarray(seqkeras.models.generate(model, src, max_length=14, eos_id=2))
    ends = [list(row).index(2) if 2 in row else None for row in want]
    assert len(set(ends)) >= 4, ends  # rows end at several steps
    got = tf.function(lambda s: decoder.decode(s, 14, eos_id=2))
    np.testing.assert_array_equal(got(src).numpy(), want)
    np.testing.assert_array_equal(got(src[:5]).numpy(), want[:5])
    for alpha in (0.0, 0.6):
        beam = tf.function(lambda s, a=alpha: decoder.decode(s, 14, 3, a, eos_id=2))
        for sources in (src[:12], src[12:17]):
            ids, scores = beam(sources)
            want_ids, want_scores = seqkeras.models.generate(
                model,
                sources,
                max_length=14,
                eos_id=2,
                strategy="beam",
                beam_width=3,
                length_penalty_alpha=alpha,
            )
            np.testing.assert_array_equal(ids.numpy(), np.asarray(want_ids))
            np.testing.assert_allclose(scores.numpy(), np.asarray(want_scores), atol=1e-4)
    # one source: the loop without compaction
    np.testing.assert_array_equal(beam(src[15:16])[0].numpy()[0], np.asarray(want_ids)[3])
    # the bfloat16 option (the same trained model): the steps on more
    # than 32 rows in bfloat16, close to the float32 outputs; fewer rows
    # (here after sources left, and a request of 5) exactly float32
    half = TransformerServingDecoder(model, dtype="bfloat16")
    assert (half.dtype, half.large_dtype) == ("float32", "bfloat16")
    run = tf.function(lambda s: half.decode(s, 14, eos_id=2))
    got = run(src).numpy()
    assert (got == want).all(axis=1).mean() >= 0.9, (got != want).any(axis=1).sum()
    np.testing.assert_array_equal(run(src[:5]).numpy(), want[:5])
    with serving_decoder_rows(4):  # every step on more than 4 rows in bfloat16
        assert 0.8 <= (run(src[:12]).numpy() == want[:12]).all(axis=1).mean()
    with pytest.raises(ValueError, match="dtype.*float16"):
        TransformerServingDecoder(model, dtype="float16")
    with pytest.raises(ValueError, match="Translate.*serving_decoder.*'half'"):
        S.Translate(None, None, 8, serving_decoder="half")


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_serving_decoder_untied_learned_positions_and_bfloat16(policy):
    # Dense logits (tie_weights=False), learned positions; a mixed_bfloat16
    # model computes in bfloat16 in both paths, whose rounding may differ:
    # ids equal on most rows there, scores within bfloat16's resolution
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = seqkeras.models.transformer_seq2seq(
            50,
            40,
            max_length=16,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            norm_first=True,
            tie_weights=policy == "mixed_bfloat16",
            positional="learned",
        )
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert (model.part("logits") is None) == (policy == "mixed_bfloat16")
    rng = np.random.default_rng(0)
    for w in model.weights:
        w.assign(rng.normal(0, 0.3, w.shape).astype("float32"))
    decoder, src = TransformerServingDecoder(model), _sources()
    greedy = tf.function(lambda s: decoder.decode(s, 12, eos_id=3))(src).numpy()
    want = np.asarray(seqkeras.models.generate(model, src, max_length=12, eos_id=3))
    ids, scores = tf.function(lambda s: decoder.decode(s, 12, 3, 0.6, eos_id=3))(src)
    want_ids, want_scores = seqkeras.models.generate(
        model,
        src,
        max_length=12,
        eos_id=3,
        strategy="beam",
        beam_width=3,
        length_penalty_alpha=0.6,
    )
    same_greedy = (greedy == want).all(axis=1)
    same_beam = (ids.numpy() == np.asarray(want_ids)).all(axis=1)
    if policy == "float32":
        assert same_greedy.all() and same_beam.all()
        np.testing.assert_allclose(scores.numpy(), np.asarray(want_scores), atol=1e-4)
    else:
        assert same_greedy.sum() >= 4 and same_beam.sum() >= 4, (same_greedy, same_beam)
        np.testing.assert_allclose(
            scores.numpy()[same_beam], np.asarray(want_scores)[same_beam], atol=0.05
        )


def test_compiled_serving_decoder_equals_generate():
    # XLA's fixed shapes: caches of 16, then 32, then 36 positions (outputs
    # of 35 tokens with no EOS cross both capacity changes)
    from seqkeras.layers.export_mode import export_mode

    model = seqkeras.models.transformer_seq2seq(
        50, 40, max_length=40, num_layers=2, num_heads=2, hidden_dim=16, norm_first=True
    )
    rng = np.random.default_rng(1)
    for w in model.weights:
        w.assign(rng.normal(0, 0.3, w.shape).astype("float32"))
    decoder = TransformerServingDecoder(model, compiled=True)
    src = _sources(1)
    for eos in (None, 3):
        for beam in (1, 3):
            options = dict(strategy="beam", beam_width=3, length_penalty_alpha=0.6)
            want = seqkeras.models.generate(
                model, src, max_length=36, eos_id=eos, **(options if beam > 1 else {})
            )
            run = tf.function(
                lambda s, b=beam, e=eos: decoder.decode(s, 36, b, 0.6, eos_id=e), jit_compile=True
            )
            with export_mode("xla"):
                got = run(src)
            if beam > 1:
                got, want = got[0], want[0]
            np.testing.assert_array_equal(got.numpy(), np.asarray(want))


def test_generated_padding_decodes_as_in_keras():
    # untrained tiny models generate PAD (id 0) inside live beams; Keras'
    # cached step masks such a query, and so must the serving decoder
    from seqkeras.layers.export_mode import export_mode

    cases = 0
    for seed in range(40):  # the first two models that generate PAD inside a beam
        keras.utils.set_random_seed(seed)
        model = seqkeras.models.transformer_seq2seq(12, 12, 16, num_heads=2, hidden_dim=8)
        src = np.random.default_rng(seed).integers(3, 12, (2, 5)).astype("int32")
        src[1, 3:] = 0
        want = np.asarray(
            seqkeras.models.generate(model, src, max_length=6, strategy="beam", jit_compile=False)[
                0
            ]
        )
        body = want[:, 1:]
        if not ((body[:, :-1] == 0) & (body[:, 1:] != 0)).any():
            continue
        for compiled in (False, True):
            decoder = TransformerServingDecoder(model, compiled=compiled)
            run = tf.function(
                lambda s, d=decoder: d.decode(s, 6, 4, eos_id=2)[0], jit_compile=compiled
            )
            with export_mode("xla" if compiled else "serving"):
                np.testing.assert_array_equal(run(src).numpy(), want)
        cases += 1
        if cases == 2:
            break
    assert cases == 2  # the case this test is about occurred


def test_serving_decoder_refuses_other_models():
    model = seqkeras.models.seq2seq(20, 20, units=8)
    assert not supports(model)
    with pytest.raises(ValueError, match="transformer_seq2seq"):
        TransformerServingDecoder(model)
    with pytest.raises(ValueError, match="max_length=40 is more than the model's 16"):
        TransformerServingDecoder(
            seqkeras.models.transformer_seq2seq(
                20, 20, max_length=16, num_heads=2, hidden_dim=8, positional="learned"
            )
        ).decode(np.ones((1, 3), "int32"), 40)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    src = SubwordTokenizer.train(DE, vocabulary_size=100)
    tgt = SubwordTokenizer.train(EN, vocabulary_size=100)
    model = _model(vocab=(src.vocabulary_size, tgt.vocabulary_size))
    signatures = [S.Translate(src, tgt, max_length=12, beam_width=3)] + S.generation(12, 3)
    root = tmp_path_factory.mktemp("t")
    paths = {
        jit: saved_model(model, root / f"jit{int(jit)}" / "1", signatures, jit_compile=jit)
        for jit in (False, True)
    }
    return model, src, tgt, paths


def test_both_servings_equal_keras_without_seqkeras(exported):
    model, src, tgt, paths = exported
    ids = src.encode(DE[:3], add_eos=True).to_tensor(0).numpy()
    beam_ids, _ = seqkeras.models.generate(model, ids, max_length=12, strategy="beam", beam_width=3)
    expected = [t.decode() for t in tgt.decode(np.asarray(beam_ids)[:, 1:]).numpy()]
    greedy = np.asarray(seqkeras.models.generate(model, ids, max_length=12))
    # the XLA option in a process without seqkeras (it compiles there)
    assert fresh_translate(paths[True], DE[:3])[0] == expected
    out, _ = fresh_signature(paths[True], "generate", source_ids=ids)
    np.testing.assert_array_equal(np.asarray(out["ids"]), greedy)
    # the default graph (tests/apps runs it in a fresh process too)
    loaded = tf.saved_model.load(str(paths[False])).signatures
    served = loaded["translate"](text=tf.constant(DE[:3]))["text"].numpy()
    assert [t.decode() for t in served] == expected
    out = loaded["generate"](source_ids=tf.constant(ids))["ids"].numpy()
    np.testing.assert_array_equal(out, greedy)


def test_audit_tells_the_xla_clusters_apart(exported):
    _, _, _, paths = exported
    plain, xla = audit_serving(paths[False]), audit_serving(paths[True])
    assert plain["xla_compiled"] == [] and plain["xla"] == []
    # the loops are compiled whole; no XLA-only op outside them
    assert xla["xla_compiled"] and xla["xla"] == [] and xla["no_kernel"] == []
    assert_servable(paths[False])
    with pytest.raises(NotServable, match="--xla_cpu_compilation_enabled=true"):
        assert_servable(paths[True])
    assert assert_servable(paths[True], xla_jit=True)["xla_compiled"]
    with pytest.raises(ValueError, match="jit_compile"):
        saved_model(exported[0], paths[False] + "x", jit_compile="yes")


def _batching_parameters_message():
    """TF Serving's `BatchingParameters` message, declared here as in
    tensorflow_serving/servables/tensorflow/session_bundle_config.proto
    (the tensorflow-serving-api package does not ship it)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

    pool = descriptor_pool.DescriptorPool()
    wrappers = descriptor_pb2.FileDescriptorProto()
    wrappers_pb2.DESCRIPTOR.CopyToProto(wrappers)
    pool.Add(wrappers)
    proto = descriptor_pb2.FileDescriptorProto(
        name="batching.proto",
        package="tensorflow.serving",
        syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    message = proto.message_type.add(name="BatchingParameters")
    F = descriptor_pb2.FieldDescriptorProto
    for number, name in enumerate(
        ["max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads"], 1
    ):
        message.field.add(
            name=name,
            number=number,
            type=F.TYPE_MESSAGE,
            type_name=".google.protobuf.Int64Value",
            label=F.LABEL_OPTIONAL,
        )
    message.field.add(
        name="allowed_batch_sizes", number=6, type=F.TYPE_INT64, label=F.LABEL_REPEATED
    )
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    )


def test_batching_parameters(tmp_path):
    from google.protobuf import text_format

    text = batching_parameters(tmp_path / "b.txt", max_batch_size=8, allowed_batch_sizes=[1, 4, 8])
    assert (tmp_path / "b.txt").read_text() == text
    parsed = text_format.Parse(text, _batching_parameters_message()())
    assert parsed.max_batch_size.value == 8 and list(parsed.allowed_batch_sizes) == [1, 4, 8]
    assert parsed.num_batch_threads.value == 1 and parsed.batch_timeout_micros.value == 5000
    with pytest.raises(ValueError, match="ending at max_batch_size=8"):
        batching_parameters(tmp_path / "c.txt", max_batch_size=8, allowed_batch_sizes=[1, 4])
    with pytest.raises(ValueError, match="num_batch_threads"):
        batching_parameters(tmp_path / "c.txt", num_batch_threads=0)
