"""Fine-tuned pretrained models served the way users deploy them: a BERT
classifier's `serve_text` and a BERT CRF tagger's `tag` take raw strings
with the checkpoint's WordPiece tokenizer in the graph, pass the
servability audit (no XLA-only op, TF Text ops that TF Serving links, no
`FastBertNormalize`), and equal Keras in a process without seqkeras; the
id model converts to builtin-only TFLite (float32 and dynamic-range int8)
and to ONNX (`export_and_verify`)."""

import numpy as np
import pytest

import seqkeras.pretrained as sp
from seqkeras.data import BertTokenizer, BertWordFeatures, WordFeatures
from seqkeras.export import assert_servable, export_and_verify, fresh_signature, saved_model
from seqkeras.export import signatures as S
from seqkeras.export.streaming import streaming_tflite, verify_streaming
from tests.export.export_checks import assert_builtin_only
from tests.pretrained_checks import tiny_bert_directory

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

CORPUS = [
    "EU rejects German call to boycott British lamb .",
    "Peter Blackburn visits Paris and Berlin .",
    "a gorgeous , witty , seductive movie .",
    "the plot is dull and the acting is bad",
] * 3


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny random BERT with a WordPiece tokenizer trained on CORPUS."""
    return tiny_bert_directory(str(tmp_path_factory.mktemp("ckpt")), CORPUS)


def test_classifier_serve_text_tflite_and_onnx(checkpoint, tmp_path):
    ckpt = sp.read_checkpoint(checkpoint)
    tokenizer = BertTokenizer.load(checkpoint, max_length=32)
    model = sp.bert_classifier(ckpt.architecture, 2, pooling="mean")
    sp.load_pretrained(model, ckpt)
    texts = ["a witty movie", "the acting is bad , dull", "Paris"]
    path = saved_model(
        model, str(tmp_path / "c" / "1"), signatures=[S.ServeText(tokenizer=tokenizer)]
    )
    audit = assert_servable(path)
    assert not audit["xla"] and "FastBertNormalize" not in audit["ops"]
    served, _ = fresh_signature(path, "serve_text", text=texts)
    ids = tokenizer.encode(texts).to_tensor(0).numpy()
    logits = np.asarray(model(ids))
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    report = export_and_verify(
        model,
        "bert-classifier",
        [ids[:1], ids],
        str(tmp_path / "x"),
        tolerance=1e-4,
        quantize=("dynamic_int8",),
    )
    # export_and_verify raises on a Flex op or a difference over tolerance
    assert report["tflite_dynamic_int8_bytes"] < report["tflite_bytes"]
    assert report["onnx_max_abs_diff"] <= 1e-4 * max(1.0, report["max_abs_output"])


def test_crf_tagger_tag_signature(checkpoint, tmp_path):
    ckpt = sp.read_checkpoint(checkpoint)
    sentences = [s.split() for s in CORPUS[:2]]
    characters = WordFeatures.train(sentences).characters
    features = BertWordFeatures(BertTokenizer.load(checkpoint), characters, casing=True)
    tags = ["<pad>", "O", "B-ORG", "B-MISC", "B-PER", "I-PER", "B-LOC"]
    model = sp.bert_tagger(
        ckpt.architecture,
        len(tags),
        crf=True,
        char_vocab_size=characters.vocabulary_size,
        char_filters=4,
        casing=True,
    )
    sp.load_pretrained(model, ckpt)
    crf = model.get_layer("crf")  # transitions that make spans likely
    rng = np.random.default_rng(0)
    crf.set_weights([rng.normal(0, 2, w.shape) for w in crf.get_weights()])
    texts = ["EU rejects German lamb", "Peter Blackburn visits Paris now", "x"]
    path = saved_model(model, str(tmp_path / "t" / "1"), signatures=[S.Tag(features, tags)])
    assert_servable(path)
    served, _ = fresh_signature(path, "tag", text=texts)
    for i, text in enumerate(texts):
        words = text.split()
        feats = {k: v.numpy() for k, v in features(np.array([words], object)).items()}
        expected = [tags[k] for k in np.asarray(model(feats)["tags"])[0]]
        assert served["words"][i][: len(words)] == words
        assert served["tags"][i][: len(words)] == expected


def test_gpt2_generate_signatures_equal_transformers(tmp_path):
    config = transformers.GPT2Config(
        vocab_size=101,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=1,
        eos_token_id=100,
    )
    torch.manual_seed(2)
    reference = transformers.GPT2LMHeadModel(config).eval()
    reference.save_pretrained(str(tmp_path / "gpt2"))
    ckpt = sp.read_checkpoint(str(tmp_path / "gpt2"))
    model = sp.gpt2_language_model(ckpt.architecture)
    sp.load_pretrained(model, ckpt)
    path = saved_model(model, str(tmp_path / "g" / "1"), signatures=S.generation(16, eos_id=100))
    assert not assert_servable(path)["xla"]
    prompts = np.array([[0, 17, 42, 9], [5, 5, 0, 61]], "int32")  # 0 is a token ("!")
    served, _ = fresh_signature(path, "generate", prompt_ids=prompts)
    with torch.no_grad():
        want = reference.generate(
            torch.tensor(prompts, dtype=torch.long),
            max_new_tokens=12,
            do_sample=False,
            eos_token_id=100,
            pad_token_id=100,
        ).numpy()
    for got, expected in zip(np.asarray(served["ids"]), want):
        expected = list(expected)
        end = expected.index(100, 4) + 1 if 100 in expected[4:] else len(expected)
        assert list(got[:end]) == expected[:end]
    # the TFLite step model with key/value caches, token by token (id 0
    # included: a token, not padding) against the full Keras pass
    step, _ = streaming_tflite(model, str(tmp_path / "step.tflite"))
    with open(step, "rb") as f:
        flatbuffer = f.read()
    assert_builtin_only(flatbuffer)
    ids = np.array([[5, 0, 17, 42, 9, 33, 2, 8, 0, 77]], "int32")
    diff, _, steps = verify_streaming(model, flatbuffer, {"token_ids": ids})
    assert steps == 10 and diff < 1e-4
