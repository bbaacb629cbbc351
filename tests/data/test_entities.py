"""Entity spans and entity-level F1 against hand-counted cases, against
`seqeval` (the conlleval reimplementation) on random tag sequences where
it is installed, and the graph version used by exported taggers."""

import numpy as np
import pytest

from seqkeras.data.entities import entity_scores, entity_spans
from seqkeras.export.signatures import graph_entity_spans

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]


def test_hand_counted_spans():
    assert entity_spans(["O", "O"]) == []
    assert entity_spans(["I-PER", "I-PER", "B-PER"]) == [
        ("PER", 0, 2),
        ("PER", 2, 3),
    ]  # IOB1 start, then a new entity
    assert entity_spans(["B-LOC", "I-PER", "I-PER", "O", "I-LOC"]) == [
        ("LOC", 0, 1),
        ("PER", 1, 3),
        ("LOC", 4, 5),
    ]
    with pytest.raises(ValueError, match="B-<type>"):
        entity_spans(["PER"])


def test_hand_counted_scores():
    true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-LOC"]]
    # true: PER(0,2) LOC(3,4) ORG(0,1); predicted: PER(0,1) LOC(3,4)
    # ORG(0,1) LOC(1,2) -> 2 hits of 4 predicted, 3 true
    s = entity_scores(true, pred)
    assert s["micro"]["precision"] == pytest.approx(50.0)
    assert s["micro"]["recall"] == pytest.approx(200 / 3)
    assert s["micro"]["f1"] == pytest.approx(2 * 50 * 200 / 3 / (50 + 200 / 3))
    assert s["PER"]["f1"] == 0.0 and s["ORG"]["f1"] == 100.0
    assert s["LOC"]["precision"] == 50.0 and s["LOC"]["support"] == 1
    with pytest.raises(ValueError, match="sentence 0"):
        entity_scores([["O"]], [["O", "O"]])


def _random_tags(rng, n):
    return [[TAGS[k] for k in rng.integers(0, len(TAGS), rng.integers(1, 12))] for _ in range(n)]


def test_against_seqeval():
    seqeval = pytest.importorskip(
        "seqeval.metrics",
        reason="seqeval is not installed (its sdist "
        "does not build on a fresh machine; see seqkeras.data.entities)",
    )
    rng = np.random.default_rng(0)
    true = _random_tags(rng, 300)
    pred = [[t if rng.random() < 0.7 else TAGS[rng.integers(len(TAGS))] for t in s] for s in true]
    ours = entity_scores(true, pred)
    assert ours["micro"]["f1"] / 100 == pytest.approx(seqeval.f1_score(true, pred), abs=1e-9)
    assert ours["micro"]["precision"] / 100 == pytest.approx(
        seqeval.precision_score(true, pred), abs=1e-9
    )
    report = seqeval.classification_report(true, pred, output_dict=True)
    for kind in ("PER", "LOC", "ORG"):
        assert ours[kind]["f1"] / 100 == pytest.approx(report[kind]["f1-score"], abs=1e-9)
        assert ours[kind]["support"] == report[kind]["support"]


def test_graph_spans_equal_the_python_ones():
    rng = np.random.default_rng(1)
    sentences = _random_tags(rng, 50)
    width = max(len(s) for s in sentences)
    dense = np.array([s + [""] * (width - len(s)) for s in sentences])
    types, starts, ends = (np.asarray(t) for t in graph_entity_spans(dense))
    for i, s in enumerate(sentences):
        got = [
            (k.decode(), int(a), int(b)) for k, a, b in zip(types[i], starts[i], ends[i]) if a >= 0
        ]
        assert got == entity_spans(s)
