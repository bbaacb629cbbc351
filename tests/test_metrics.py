"""seqkeras.metrics against independent references: SciPy's log-softmax,
counts made by hand, sacreBLEU's functional API."""

import math

import numpy as np
import pytest
from scipy.special import log_softmax

from seqkeras import metrics


def test_token_nll_equals_scipy_log_softmax_over_the_non_pad_targets():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (4, 7, 11))
    targets = rng.integers(0, 11, (4, 7))
    targets[0, :3] = 0  # padding is left out
    total, count = metrics.token_nll(logits, targets)
    logp = log_softmax(logits, axis=-1)
    expected = [-logp[i, t, targets[i, t]] for i in range(4) for t in range(7) if targets[i, t]]
    assert count == len(expected)
    assert total == pytest.approx(sum(expected), rel=1e-12)
    # large logits stay finite (the max is taken out before exp)
    total, _ = metrics.token_nll(np.array([[[1e4, 0.0]]]), np.array([[1]]))
    assert total == pytest.approx(1e4)


def test_bits_per_character_and_its_callback():
    assert metrics.bits_per_character(math.log(2)) == pytest.approx(1.0)
    logs = {"val_loss": 2 * math.log(2)}
    metrics.BitsPerCharacter().on_epoch_end(0, logs)
    assert logs["val_bpc"] == pytest.approx(2.0)


def test_classification_report_counts():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.0, 0.0], [0.4, 0.6]])
    labels = np.array([0, 1, 1, 0, 0])
    accuracy, per_class = metrics.classification_report(probs, labels, ["neg", "pos"])
    # predicted 0, 0, 1, none, 1: right on rows 0 and 2
    assert accuracy == pytest.approx(40.0)
    p, r, f, n = per_class["neg"]  # tp 1 of 2 predicted, of 3 true
    assert (p, r, n) == (50.0, pytest.approx(100 / 3), 3)
    assert f == pytest.approx(2 * 50 * (100 / 3) / (50 + 100 / 3))
    p, r, f, n = per_class["pos"]  # tp 1 of 2 predicted, of 2 true
    assert (p, r, f, n) == (50.0, 50.0, pytest.approx(50.0), 2)


def test_corpus_bleu_equals_sacrebleus_functions():
    import sacrebleu

    hyps = ["a dog runs through the snow .", "two men are playing cards ."]
    refs = ["a dog is running in the snow .", "Two men play cards ."]
    scores = metrics.corpus_bleu(hyps, refs)
    assert scores["BLEU"][0].score == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    lowered = sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score
    assert scores["BLEU lowercased"][0].score == pytest.approx(lowered)
    assert scores["chrF"][0].score == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)


def test_bad_inputs_name_the_function_and_argument():
    with pytest.raises(TypeError, match="`token_nll` expects integer `targets`"):
        metrics.token_nll(np.zeros((1, 3)), np.zeros((1,)))
    with pytest.raises(ValueError, match="`token_nll` expects `logits` of shape"):
        metrics.token_nll(np.zeros((2, 3)), np.zeros((3,), int))
    with pytest.raises(ValueError, match=r"`token_nll`: `targets` must be ids in \[0, 3\)"):
        metrics.token_nll(np.zeros((1, 3)), np.array([3]))
    with pytest.raises(ValueError, match="`classification_report` expects `probabilities`"):
        metrics.classification_report(np.zeros(3), [0, 1, 0], ["a"])
    with pytest.raises(ValueError, match="a name per class"):
        metrics.classification_report(np.zeros((2, 3)), [0, 1], ["a"])
    with pytest.raises(ValueError, match="`corpus_bleu` expects one reference per hypothesis"):
        metrics.corpus_bleu(["a"], [])
    with pytest.raises(TypeError, match="`corpus_bleu` expects strings"):
        metrics.corpus_bleu([1], ["a"])


def test_windows_nll_equals_scipy_over_all_windows():
    rng = np.random.default_rng(1)
    table = rng.normal(0, 2, (9, 6))  # a "model": logits of each input id
    x = rng.integers(1, 9, (7, 5))
    y = rng.integers(0, 6, (7, 5))
    total, count = metrics.windows_nll(lambda ids: table[ids], x, y, batch_size=3)
    logp = log_softmax(table[x], axis=-1)
    expected = [-logp[i, t, y[i, t]] for i in range(7) for t in range(5) if y[i, t]]
    assert count == len(expected) and total == pytest.approx(sum(expected), rel=1e-12)
    with pytest.raises(ValueError, match="windows_nll.*7 windows, `targets` 6"):
        metrics.windows_nll(lambda ids: table[ids], x, y[:6])
    with pytest.raises(ValueError, match="windows_nll.*`batch_size`"):
        metrics.windows_nll(lambda ids: table[ids], x, y, batch_size=0)


def test_entity_f1_callback_logs_the_f1_of_the_predicted_tags():
    import seqkeras

    sentences = [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    tags = [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"]]
    features = seqkeras.data.WordFeatures.train(sentences, max_chars=6)
    vocabulary = seqkeras.data.tag_vocabulary(tags)
    model = seqkeras.models.tagger(
        features.sizes["token_ids"], len(vocabulary), units=4, embedding_dim=4, crf=True,
        char_vocab_size=features.sizes["char_ids"], char_embedding_dim=4, char_filters=4,
        casing=True,
    )  # fmt: skip
    callback = metrics.EntityF1(features, vocabulary, sentences, tags, verbose=False)
    callback.set_model(model)
    logs = {}
    callback.on_epoch_end(0, logs)
    predicted = seqkeras.models.predict_tags(model, features, vocabulary, sentences)
    # entity-level F1 counted by hand from the spans
    true = {(i, *s) for i, t in enumerate(tags) for s in metrics.entity_spans(t)}
    found = {(i, *s) for i, t in enumerate(predicted) for s in metrics.entity_spans(t)}
    right = len(true & found)
    f1 = 0.0 if not right else 200 * right / (len(true) + len(found))
    assert logs["val_f1"] == pytest.approx(f1)
    with pytest.raises(ValueError, match="EntityF1.*2 `sentences` but 1"):
        metrics.EntityF1(features, vocabulary, sentences, tags[:1])
