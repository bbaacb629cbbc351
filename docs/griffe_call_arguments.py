"""A griffe extension for the API pages (mkdocs.yml: mkdocstrings'
`extensions`): a layer docstring's "Call arguments:" section, Keras'
name for the arguments of `call`, is rendered as a parameter list titled
"Call arguments", as "Args:" is. The Google-style parser knows no such
section: it made the section one run-on paragraph.

Only the built site changes: `help()` and the source keep Keras' text.
"""

import re

import griffe

HEADING = re.compile(r"^(\s*)Call arguments:\s*$", re.M)
TITLE = "Call arguments:"


class CallArguments(griffe.Extension):
    def on_object(self, *, obj, **kwargs):
        docstring = obj.docstring
        if docstring is None or not HEADING.search(docstring.value):
            return
        # "Other Parameters:" is the parser's own name for a second list of
        # arguments; it is parsed as the "Args:" section is, then retitled
        docstring.value = HEADING.sub(r"\1Other Parameters:", docstring.value)
        sections = docstring.parse()
        for section in sections:
            if section.kind is griffe.DocstringSectionKind.other_parameters:
                section.title = TITLE
        docstring.parsed = sections  # a cached property: this parse is the one shown
