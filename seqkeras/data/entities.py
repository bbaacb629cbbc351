"""Entity spans from IOB tags and entity-level precision / recall / F1,
as conlleval counts them.

Why not `seqeval`: it is the reference (and the tests compare with it where
it is installed), but its only release (1.2.2, 2020) is a source
distribution whose `setup_requires` build fetches today's setuptools_scm
without its dependencies and fails on a fresh machine, so a package that
depends on it does not install with plain `pip install`. The chunk rules
here are conlleval's (seqeval's default mode) for B-/I-/O tags: an entity
starts at `B-X`, or at `I-X` after `O` or after another type; it goes on
over `I-X` of the same type.
"""

import collections


def _split(tag, where="`entity_spans`: `tags`"):
    if not isinstance(tag, str):
        raise TypeError(f"{where} must hold tag strings. Received: {type(tag).__name__} {tag!r}")
    if tag in ("O", "", "<pad>"):
        return "O", ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BI":
        return tag[0], tag[2:]
    raise ValueError(f"{where}: entity tags must be O, B-<type> or I-<type>. Received: {tag!r}")


def _sentence(name, argument, tags):
    """`tags` as one sentence's list of tags (a str or a non-sequence is a
    TypeError naming `argument`)."""
    if isinstance(tags, str) or not hasattr(tags, "__len__"):
        raise TypeError(
            f"`{name}` expects `{argument}` as a list of tag strings (one sentence). "
            f"Received: {type(tags).__name__} {tags!r}"
        )
    return tags


def _spans(tags, where):
    try:
        return entity_spans(tags)
    except (ValueError, TypeError) as error:
        raise type(error)(str(error).replace("`entity_spans`: `tags`", where)) from None


def entity_spans(tags):
    """`[(type, start, end)]` (end exclusive) of one sentence's IOB tags.

    Args:
        tags: one sentence's tags (`B-PER`, `I-PER`, `O`, ...).

    Returns:
        A list of `(type, start, end)` tuples.

    Examples:
        >>> from seqkeras.data.entities import entity_spans
        >>> entity_spans(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"])
        [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5), ('ORG', 5, 6)]
    """
    spans, current = [], None
    for i, tag in enumerate(_sentence("entity_spans", "tags", tags)):
        prefix, kind = _split(tag)
        continues = current is not None and prefix == "I" and kind == current[0]
        if continues:
            continue
        if current is not None:
            spans.append((current[0], current[1], i))
            current = None
        if prefix != "O":
            current = (kind, i)
    if current is not None:
        spans.append((current[0], current[1], len(tags)))
    return spans


def entity_scores(true_tags, predicted_tags):
    """Entity-level scores over sentences of IOB tags: a predicted entity
    counts when its type, start and end all match a true one.

    Args:
        true_tags: sentences of true IOB tags.
        predicted_tags: the predicted tags, aligned with `true_tags`.

    Returns:
        `{"micro": {...}, "<type>": {...}}`, each `{"precision",
        "recall", "f1"}` in percent and `"support"` (true entities).

    Examples:
        >>> from seqkeras.data.entities import entity_scores
        >>> s = entity_scores([["B-PER", "I-PER", "O", "B-LOC"]],
        ...                   [["B-PER", "I-PER", "O", "B-ORG"]])
        >>> round(s["micro"]["f1"], 1), s["PER"]["f1"], s["LOC"]["recall"]
        (50.0, 100.0, 0.0)
    """
    for argument, given in (("true_tags", true_tags), ("predicted_tags", predicted_tags)):
        if isinstance(given, str) or not hasattr(given, "__len__"):
            raise TypeError(
                f"`entity_scores` expects `{argument}` as a list of sentences (lists of tag "
                f"strings). Received: {type(given).__name__} {given!r}"
            )
    if len(true_tags) != len(predicted_tags):
        raise ValueError(
            "`entity_scores` needs as many sentences in `predicted_tags` as in `true_tags`. "
            f"Received {len(predicted_tags)} and {len(true_tags)}"
        )
    true_n, pred_n, hit = (collections.Counter() for _ in range(3))
    for n, (t, p) in enumerate(zip(true_tags, predicted_tags)):
        t = _sentence("entity_scores", f"true_tags[{n}]", t)
        p = _sentence("entity_scores", f"predicted_tags[{n}]", p)
        if len(t) != len(p):
            raise ValueError(
                f"`entity_scores`: sentence {n} has {len(t)} tags in `true_tags` and {len(p)} "
                "in `predicted_tags`"
            )
        where = "`entity_scores`: `true_tags`", "`entity_scores`: `predicted_tags`"
        ts, ps = set(_spans(t, where[0])), set(_spans(p, where[1]))
        true_n.update(s[0] for s in ts)
        pred_n.update(s[0] for s in ps)
        hit.update(s[0] for s in ts & ps)

    def score(h, p, t):
        precision = 100.0 * h / p if p else 0.0
        recall = 100.0 * h / t if t else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"precision": precision, "recall": recall, "f1": f1, "support": t}

    result = {"micro": score(sum(hit.values()), sum(pred_n.values()), sum(true_n.values()))}
    for kind in sorted(set(true_n) | set(pred_n)):
        result[kind] = score(hit[kind], pred_n[kind], true_n[kind])
    return result
