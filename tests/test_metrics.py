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
