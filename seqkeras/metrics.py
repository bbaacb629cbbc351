"""Evaluation metrics computed from predictions (NumPy, outside the graph):
the negative log-likelihood of next-token targets and bits per
character, per-class precision / recall / F1 with accuracy, and corpus
BLEU and chrF (sacreBLEU, the `apps` extra), entity spans and
entity-level precision / recall / F1 (conlleval's rules), and callbacks
that add such a metric to each epoch's logs.

The training metrics that run inside `fit` (masked accuracy, perplexity)
are `seqkeras.training`'s.
"""

import math

import numpy as np
from keras import callbacks

from seqkeras.data.entities import entity_scores, entity_spans

__all__ = [
    "BitsPerCharacter",
    "EntityF1",
    "entity_scores",
    "entity_spans",
    "bits_per_character",
    "classification_report",
    "corpus_bleu",
    "token_nll",
    "windows_nll",
]


def _where(name):
    return f"`{name}`"


def token_nll(logits, targets, pad_id=0):
    """Summed negative log-likelihood (nats) of `targets` under the softmax
    of `logits`, over the targets that are not `pad_id`, in float64.

    Args:
        logits: float (..., vocab).
        targets: int (...), the same leading shape.
        pad_id: targets equal to it are left out.

    Returns:
        `(total nats, number of targets counted)`.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.metrics import token_nll
        >>> total, count = token_nll(np.zeros((1, 2, 4)), np.array([[1, 0]]))
        >>> round(total, 4), count  # one target, uniform over 4: log 4
        (1.3863, 1)
    """
    logits = np.asarray(logits)
    if logits.dtype.kind not in "iuf":  # not strings, objects, bools or complex
        raise TypeError(
            f"{_where('token_nll')} expects float `logits`. Received: dtype={logits.dtype}"
        )
    logits = logits.astype("float64")
    targets = np.asarray(targets)
    if not np.issubdtype(targets.dtype, np.integer):
        raise TypeError(
            f"{_where('token_nll')} expects integer `targets`. Received: dtype={targets.dtype}"
        )
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"{_where('token_nll')} expects `logits` of shape targets.shape + (vocab,). "
            f"Received: logits.shape={logits.shape}, targets.shape={targets.shape}"
        )
    if targets.size and (targets.min() < 0 or targets.max() >= logits.shape[-1]):
        raise ValueError(
            f"{_where('token_nll')}: `targets` must be ids in [0, {logits.shape[-1]}). "
            f"Received: ids from {targets.min()} to {targets.max()}"
        )
    top = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    keep = targets != pad_id
    return float(((log_z - picked) * keep).sum()), int(keep.sum())


def windows_nll(predict, inputs, targets, batch_size=64, pad_id=0):
    """`token_nll` over many windows, `batch_size` at a time: the logits
    of each batch from `predict` (a model's `predict_on_batch`, or a
    runtime's function of the ids).

    Args:
        predict: ids (batch, time) -> logits (batch, time, vocab).
        inputs: int (n, time), the windows.
        targets: int (n, time), their next tokens.
        batch_size: windows per call.
        pad_id: targets equal to it are left out.

    Returns:
        `(total nats, number of targets counted)`.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.metrics import windows_nll
        >>> uniform = lambda x: np.zeros(x.shape + (4,))
        >>> total, count = windows_nll(uniform, np.ones((3, 2), "int32"), np.ones((3, 2), "int32"))
        >>> round(total / count, 4), count
        (1.3863, 6)
    """
    if not callable(predict):
        raise TypeError(
            f"{_where('windows_nll')} expects `predict`, a function of the ids (e.g. a "
            f"model's `predict_on_batch`). Received: predict={predict!r}"
        )
    inputs, targets = np.asarray(inputs), np.asarray(targets)
    if inputs.shape[:1] != targets.shape[:1]:
        raise ValueError(
            f"{_where('windows_nll')}: `inputs` has {len(inputs)} windows, `targets` {len(targets)}"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            f"{_where('windows_nll')} expects `batch_size` >= 1. Received: {batch_size!r}"
        )
    total = count = 0
    for i in range(0, len(inputs), batch_size):
        t, n = token_nll(predict(inputs[i : i + batch_size]), targets[i : i + batch_size], pad_id)
        total, count = total + t, count + n
    return total, count


def bits_per_character(nats):
    """Nats per character as bits per character (`nats / ln 2`).

    Args:
        nats: one number, nats per character.

    Returns:
        A float.

    Examples:
        >>> from seqkeras.metrics import bits_per_character
        >>> round(bits_per_character(1.0), 4)
        1.4427
    """
    if isinstance(nats, (bool, np.bool_, str, bytes)) or np.ndim(nats) != 0:
        raise TypeError(
            f"{_where('bits_per_character')} expects `nats`, one number (nats per "
            f"character). Received: nats={nats!r}"
        )
    try:
        value = float(nats)
    except (TypeError, ValueError):
        raise TypeError(
            f"{_where('bits_per_character')} expects `nats`, one number (nats per "
            f"character). Received: nats={nats!r}"
        ) from None
    if value < 0:  # NaN and inf pass: a diverged loss stays visible
        raise ValueError(
            f"{_where('bits_per_character')} expects `nats` >= 0 (a negative "
            f"log-likelihood). Received: nats={nats!r}"
        )
    return value / math.log(2)


class BitsPerCharacter(callbacks.Callback):
    """Adds `val_bpc` (bits per character) beside a character language
    model's `val_loss` (nats per character) in each epoch's logs.

    Examples:
        >>> from seqkeras.metrics import BitsPerCharacter
        >>> logs = {"val_loss": 1.0}
        >>> BitsPerCharacter().on_epoch_end(0, logs)
        >>> round(logs["val_bpc"], 4)
        1.4427
    """

    def on_epoch_end(self, epoch, logs=None):
        if logs and "val_loss" in logs:
            logs["val_bpc"] = bits_per_character(logs["val_loss"])


class EntityF1(callbacks.Callback):
    """Adds `val_f1` (entity-level micro F1, percent, `entity_scores`) to
    each epoch's logs: a CRF tagger's Viterbi tags of validation sentences
    against their true tags. Put it before a checkpoint that monitors
    `val_f1`.

    Args:
        features: the word features, words (batch, time) -> the model's
            inputs (e.g. `seqkeras.data.WordFeatures`).
        tag_vocabulary: tag strings by id.
        sentences: validation sentences (lists of words).
        tags: their true tags (lists of strings).
        verbose: print the value after each epoch.
    """

    def __init__(self, features, tag_vocabulary, sentences, tags, verbose=True):
        super().__init__()
        if not callable(features):
            raise TypeError(
                "`EntityF1` expects `features`, a function of the words (e.g. "
                f"`seqkeras.data.WordFeatures`). Received: features={features!r}"
            )
        if isinstance(tag_vocabulary, str) or not all(isinstance(t, str) for t in tag_vocabulary):
            raise TypeError(
                "`EntityF1` expects `tag_vocabulary`, the tag strings by id. "
                f"Received: tag_vocabulary={tag_vocabulary!r}"
            )
        if len(sentences) != len(tags):
            raise ValueError(
                f"`EntityF1`: {len(sentences)} `sentences` but {len(tags)} `tags` lists"
            )
        for n, (words, row) in enumerate(zip(sentences, tags)):
            if len(words) != len(row):
                raise ValueError(
                    f"`EntityF1` expects one tag per word: `sentences[{n}]` has "
                    f"{len(words)} words, `tags[{n}]` {len(row)} tags"
                )
        self.features, self.tag_vocabulary = features, tag_vocabulary
        self.sentences, self.tags, self.verbose = sentences, tags, verbose

    def on_epoch_end(self, epoch, logs=None):
        from seqkeras.models import predict_tags

        predicted = predict_tags(self.model, self.features, self.tag_vocabulary, self.sentences)
        f1 = entity_scores(self.tags, predicted)["micro"]["f1"]
        if logs is not None:
            logs["val_f1"] = f1
        if self.verbose:
            print(f" - val_f1: {f1:.2f}")


def classification_report(probabilities, labels, names):
    """Accuracy and per-class precision, recall and F1 of the argmax of
    `probabilities`; a row of zeros (no class chosen, e.g. a generated
    answer that is no label word) counts as wrong.

    Args:
        probabilities: float (n, classes).
        labels: int (n,), the true classes.
        names: the classes' names, in id order.

    Returns:
        `(accuracy percent, {name: (precision, recall, f1, support)})`,
        precision, recall and F1 in percent.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.metrics import classification_report
        >>> probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.0, 0.0]])
        >>> accuracy, per_class = classification_report(probs, [0, 0, 1], ["neg", "pos"])
        >>> round(accuracy, 2), per_class["neg"]
        (33.33, (100.0, 50.0, 66.66666666666666, 2))
    """
    probabilities = np.asarray(probabilities, "float64")
    labels = np.asarray(labels)
    if probabilities.ndim != 2 or labels.shape != probabilities.shape[:1]:
        raise ValueError(
            f"{_where('classification_report')} expects `probabilities` (n, classes) and "
            f"`labels` (n,). Received: shapes {probabilities.shape} and {labels.shape}"
        )
    if len(names) < probabilities.shape[1]:
        raise ValueError(
            f"{_where('classification_report')} expects a name per class "
            f"({probabilities.shape[1]}). Received: {len(names)} names"
        )
    if not np.all(np.isfinite(probabilities)):
        raise ValueError(
            f"{_where('classification_report')} expects finite `probabilities`. "
            "Received: NaN or inf values"
        )
    if labels.size and (
        not np.issubdtype(labels.dtype, np.integer)
        or labels.min() < 0
        or labels.max() >= probabilities.shape[1]
    ):
        raise ValueError(
            f"{_where('classification_report')} expects `labels`, class ids in "
            f"[0, {probabilities.shape[1]}). Received: {labels.tolist()!r:.200}"
        )
    predicted = probabilities.argmax(-1)
    predicted[probabilities.sum(-1) == 0] = -1
    per_class = {}
    for k, name in enumerate(names[: probabilities.shape[1]]):
        tp = int(np.sum((predicted == k) & (labels == k)))
        precision = tp / max(1, int(np.sum(predicted == k)))
        recall = tp / max(1, int(np.sum(labels == k)))
        f1 = 2 * precision * recall / max(1e-12, precision + recall)
        per_class[name] = (100 * precision, 100 * recall, 100 * f1, int(np.sum(labels == k)))
    return 100.0 * float(np.mean(predicted == labels)), per_class


def corpus_bleu(hypotheses, references):
    """sacreBLEU's corpus scores of `hypotheses` against one reference
    each: cased BLEU, lowercased BLEU and chrF (detokenized text, as
    sacreBLEU expects).

    Args:
        hypotheses: the system's outputs, strings.
        references: one reference string per hypothesis.

    Returns:
        `{"BLEU": (score, metric), "BLEU lowercased": ..., "chrF": ...}`:
        each sacreBLEU score object with its metric (for the signature).

    Examples:
        >>> from seqkeras.metrics import corpus_bleu
        >>> scores = corpus_bleu(["a dog runs in the snow ."], ["a dog runs in the snow ."])
        >>> round(scores["BLEU"][0].score, 1)
        100.0
    """
    from sacrebleu.metrics import BLEU, CHRF

    for arg, texts in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(texts, (str, bytes)):
            raise TypeError(
                f"{_where('corpus_bleu')} expects `{arg}`, a list of strings (one per "
                f"sentence). Received: one string {texts[:40]!r}"
            )
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{_where('corpus_bleu')} expects one reference per hypothesis. Received: "
            f"{len(hypotheses)} hypotheses, {len(references)} references"
        )
    for arg, texts in (("hypotheses", hypotheses), ("references", references)):
        bad = [t for t in texts if not isinstance(t, str)]
        if bad:
            raise TypeError(
                f"{_where('corpus_bleu')} expects strings in `{arg}` (one per sentence). "
                f"Received: {bad[0]!r}"
            )
    metrics = {"BLEU": BLEU(), "BLEU lowercased": BLEU(lowercase=True), "chrF": CHRF()}
    return {name: (m.corpus_score(hypotheses, [references]), m) for name, m in metrics.items()}
