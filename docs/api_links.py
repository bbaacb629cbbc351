"""An mkdocs hook (mkdocs.yml `hooks:`): on every page outside the API
reference, the first mention of each public name in inline code (`generate`,
`seqkeras.models.generate`, `models.generate`, `generate(...)`) becomes a
link to its entry in the API reference (mkdocstrings' autorefs resolves
`[text][seqkeras.models.generate]`; `mkdocs build --strict` fails on one
it cannot). The Markdown files stay plain, so they read the same on a code
host. Names listed in tests/public_api.txt; a short name that two modules
share links only in its dotted forms."""

import functools
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^(```|~~~)")
CODE = re.compile(r"(?<![`\[])`([A-Za-z_][\w.]*)(\([^`]*\))?`(?![`\]])")


def public_names():
    """{spelling: full path}: each public name's full path, its path
    without `seqkeras.` and, when no other module has it, its short name."""
    with open(os.path.join(ROOT, "tests", "public_api.txt"), encoding="utf-8") as f:
        paths = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    short = {}
    for path in paths:
        short.setdefault(path.rsplit(".", 1)[1], []).append(path)
    names = {}
    for path in paths:
        anchor, name = _anchor(path), path.rsplit(".", 1)[1]
        names[path] = names[path.split(".", 1)[1]] = anchor
        if len(short[name]) == 1:
            names[name] = anchor
    return names


@functools.lru_cache(maxsize=None)
def _written(module):
    """The identifiers that docs/api/<module>.md renders."""
    with open(os.path.join(ROOT, "docs", "api", f"{module}.md"), encoding="utf-8") as f:
        return {line[4:].strip() for line in f if line.startswith("::: ")}


def _anchor(path):
    """The entry's identifier on its API page: docs/gen_api.py writes a
    function named like its submodule (`seqkeras.export.tflite`) by the
    submodule's path (`seqkeras.export.tflite.tflite`)."""
    written = _written(path.split(".")[1])
    for candidate in (path, f"{path}.{path.rsplit('.', 1)[1]}"):
        if candidate in written:
            return candidate
    return path


NAMES = public_names()


def link(markdown):
    """`markdown` with the first mention of each public name linked."""
    seen, out, fenced = set(), [], False
    for line in markdown.split("\n"):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        if fenced or line.startswith("#") or FENCE.match(line.lstrip()):
            out.append(line)
            continue

        def replace(match):
            path = NAMES.get(match.group(1))
            if path is None or path in seen:
                return match.group(0)
            seen.add(path)
            return f"[{match.group(0)}][{path}]"

        out.append(CODE.sub(replace, line))
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files):  # the mkdocs hook
    if page.file.src_path.startswith("api/"):
        return markdown
    return link(markdown)
