"""A reader for labeled text in tab-separated files with a header (the
GLUE/SST-2 layout: `sentence<TAB>label`, one example per line)."""

from seqkeras.data.pipelines import read_text


def read_labeled_tsv(
    path, text_column="sentence", label_column="label", num_classes=None, name="read_labeled_tsv"
):
    """`(texts, labels)` from a UTF-8 TSV file with a header line (LF or
    CRLF line ends; other columns are ignored). Quotes are ordinary
    characters, as in GLUE's files.

    Args:
        path: the file.
        text_column, label_column: header names of the two columns.
        num_classes: labels must be integers in [0, num_classes) (default:
            any integer >= 0).
        name: the name errors start with.

    Raises a one-line `ValueError` (file and line number) for bytes that
    are not UTF-8, a header without the two columns, a line with fewer
    fields than the header, an empty sentence, a label that is not an
    integer in range, and a file without examples.

    Examples:
        >>> import tempfile, os
        >>> from seqkeras.data import read_labeled_tsv
        >>> path = os.path.join(tempfile.mkdtemp(), "dev.tsv")
        >>> with open(path, "w") as f:
        ...     _ = f.write("sentence\\tlabel\\r\\na fine film \\t1\\r\\n"
        ...                 "dull\\t0\\r\\n")
        >>> read_labeled_tsv(path)
        (['a fine film', 'dull'], [1, 0])
    """
    if num_classes is not None and (
        isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1
    ):
        raise ValueError(
            f"`{name}` expects `num_classes` to be a positive int or None. "
            f"Received: {num_classes!r}"
        )
    text = read_text(path, name)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise ValueError(
            f"`{name}`: {path} is empty (expected a header line `{text_column}<TAB>{label_column}`)"
        )
    header = lines[0].split("\t")
    missing = [
        f"{c!r} (`{arg}`)"
        for arg, c in (("text_column", text_column), ("label_column", label_column))
        if c not in header
    ]
    if missing:
        raise ValueError(
            f"`{name}`: {path} line 1: the header has no column "
            f"{', '.join(missing)} (expected "
            f"`{text_column}<TAB>{label_column}`, tab-separated). "
            f"Received: {lines[0][:80]!r}"
        )
    t, y = header.index(text_column), header.index(label_column)
    texts, labels = [], []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue  # blank lines (e.g. at the end) carry no example
        fields = line.split("\t")
        if len(fields) < len(header):
            raise ValueError(
                f"`{name}`: {path} line {number}: expected "
                f"{len(header)} tab-separated columns as in the header, "
                f"got {len(fields)}: {line[:80]!r}"
            )
        sentence, label = fields[t].strip(), fields[y].strip()
        if not sentence:
            raise ValueError(f"`{name}`: {path} line {number}: the `{text_column}` column is empty")
        try:
            value = int(label)
        except ValueError:
            value = -1
        if value < 0 or (num_classes is not None and value >= num_classes):
            expected = (
                "an integer >= 0" if num_classes is None else f"an integer in [0, {num_classes})"
            )
            raise ValueError(
                f"`{name}`: {path} line {number}: the label must be {expected}. Received: {label!r}"
            )
        texts.append(sentence)
        labels.append(value)
    if not texts:
        raise ValueError(f"`{name}`: {path} has a header but no example")
    return texts, labels
