"""Readers for CoNLL-style tagged text: one token per line, columns
separated by whitespace, a blank line after each sentence, `-DOCSTART-`
lines between documents (CoNLL-2003: word, POS, chunk, NER tag)."""

from seqkeras.data.pipelines import read_text


def read_conll(path, tag_column=-1, name="read_conll"):
    """`(sentences, tags)`: lists of word lists and tag lists from the
    CoNLL file `path` (UTF-8, LF or CRLF). Document separators
    (`-DOCSTART-`) are skipped.

    Args:
        path: the file.
        tag_column: which column holds the tag (default the last).
        name: the name errors start with.

    Raises a one-line `ValueError` (file and line number) for bytes that
    are not UTF-8, a line whose column count differs from the file's
    first token line or that has fewer than 2 columns, and a file with
    no sentence; `FileNotFoundError` for a missing file.

    Examples:
        >>> import tempfile, os
        >>> from seqkeras.data import read_conll
        >>> path = os.path.join(tempfile.mkdtemp(), "x.txt")
        >>> with open(path, "w") as f:
        ...     _ = f.write("-DOCSTART- -X- -X- O\\n\\nEU NNP B-NP B-ORG\\n"
        ...                 "rejects VBZ B-VP O\\n\\nPeter NNP B-NP B-PER\\n")
        >>> read_conll(path)
        ([['EU', 'rejects'], ['Peter']], [['B-ORG', 'O'], ['B-PER']])
    """
    if isinstance(tag_column, bool) or not isinstance(tag_column, int):
        raise TypeError(f"`{name}` expects an int `tag_column`. Received: {tag_column!r}")
    text = read_text(path, name)
    sentences, tags, words, labels = [], [], [], []
    columns = None
    for number, line in enumerate(text.split("\n"), start=1):
        fields = line.split()
        if not fields:
            if words:
                sentences.append(words)
                tags.append(labels)
                words, labels = [], []
            continue
        if fields[0] == "-DOCSTART-":
            continue
        if columns is None:
            columns = len(fields)
            if columns < 2:
                raise ValueError(
                    f"`{name}`: {path} line {number}: expected a token and "
                    f"its tag separated by whitespace, got {line.strip()!r}"
                )
            if not -columns <= tag_column < columns:
                raise ValueError(
                    f"`{name}`: {path} has {columns} columns; `tag_column` must be in "
                    f"[{-columns}, {columns}). Received: {tag_column}"
                )
        if len(fields) != columns:
            raise ValueError(
                f"`{name}`: {path} line {number}: expected {columns} "
                f"columns as in the file's first token line, got "
                f"{len(fields)}: {line.strip()!r}"
            )
        words.append(fields[0])
        labels.append(fields[tag_column])
    if words:
        sentences.append(words)
        tags.append(labels)
    if not sentences:
        raise ValueError(f"`{name}`: {path} has no tagged sentence")
    return sentences, tags


def split_words(line):
    """The CoNLL-style words of a raw sentence: split at whitespace, and
    punctuation at a word's ends split off ("Germany's" -> "Germany",
    "'s"; "(EU)," -> "(", "EU", ")", ",").

    Args:
        line: a sentence (str).

    Returns:
        A list of words.

    Examples:
        >>> from seqkeras.data import split_words
        >>> split_words('"Hello," said (EU) Germany\\'s team.')
        ['"', 'Hello', ',', '"', 'said', '(', 'EU', ')', 'Germany', "'s", 'team', '.']
    """
    import re

    if not isinstance(line, str):
        raise TypeError(
            f"`split_words` expects `line` to be a str. Received: {type(line).__name__}"
        )
    words = []
    for token in line.split():
        lead = re.match(r"^[(\"'\[]*", token).group()
        tail = re.search(r"[)\"'\],.;:!?]*$", token[len(lead) :]).group()
        core = token[len(lead) : len(token) - len(tail)]
        if core.endswith("'s") and tail == "" and len(core) > 2:
            core, tail = core[:-2], "'s"
        words += list(lead) + ([core] if core else []) + ([tail] if tail == "'s" else list(tail))
    return words
