"""The griffe extension of the API pages (mkdocs.yml: mkdocstrings'
`extensions`). Only the built site changes: `help()` and the source keep
the docstrings as written.

- A layer docstring's "Call arguments:" section, Keras' name for the
  arguments of `call`, is rendered as a parameter list titled "Call
  arguments", as "Args:" is. The Google-style parser knows no such
  section: it made the section one run-on paragraph.
- "Raises" comes from the error-input registry (`tests/error_inputs`,
  written to `docs/api/raises.json` by `python docs/gen_api.py`): each
  error its entries raise, with the arguments they get wrong. Errors the
  docstring's own "Raises:" section describes keep its words; the others
  are added. So the pages and the registry cannot disagree
  (tests/test_error_inputs.py checks the file against the entries).
"""

import json
import os
import re

import griffe

HEADING = re.compile(r"^(\s*)Call arguments:\s*$", re.M)
RAISES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api", "raises.json")


def _registry():
    try:
        with open(RAISES, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:  # before `python docs/gen_api.py` ran
        return {}


def _arguments(names):
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


class ApiPages(griffe.Extension):
    def __init__(self):
        super().__init__()
        self.registry = _registry()

    def on_object(self, *, obj, **kwargs):
        docstring = obj.docstring
        raises = self.registry.get(obj.path, {}).get("raises")
        calls = docstring is not None and HEADING.search(docstring.value)
        if docstring is None or not (raises or calls):
            return
        if calls:
            # "Other Parameters:" is the parser's name for a second list of
            # arguments: parsed as "Args:" is, then retitled
            docstring.value = HEADING.sub(r"\1Other Parameters:", docstring.value)
        sections = docstring.parse()
        for section in sections:
            if calls and section.kind is griffe.DocstringSectionKind.other_parameters:
                section.title = "Call arguments:"
        if raises:
            _add_raises(sections, raises)
        docstring.parsed = sections  # a cached property: this parse is the one shown


def _add_raises(sections, raises):
    found = [s for s in sections if s.kind is griffe.DocstringSectionKind.raises]
    if found:
        section = found[0]
    else:
        section = griffe.DocstringSectionRaises([])
        # before the examples, as a written "Raises:" would be
        at = next(
            (i for i, s in enumerate(sections) if s.kind is griffe.DocstringSectionKind.examples),
            len(sections),
        )
        sections.insert(at, section)
    described = {str(item.annotation) for item in section.value}
    for error, names in raises.items():
        if error not in described:
            text = f"a wrong {_arguments(names)} (the message names the argument)."
            section.value.append(griffe.DocstringRaise(annotation=error, description=text))
