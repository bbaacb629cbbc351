"""Runs the error-input registry (`tests/error_inputs`): every entry
raises its error, named after the function or layer and the argument,
never a bare TensorFlow, NumPy or Python error; traceable entries also
inside `tf.function` (and under XLA where marked). Every public name has
entries or a written opt-out."""

import os
import re

import pytest

from tests.error_inputs import RAISES_FILE, by_definition, load_all, raised

ENTRIES, OPT_OUT = load_all()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Where the registry stands (914 entries): raise it as entries are added.
AT_LEAST = 910


_calls = [0]


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """This module's own (it overrides tests/conftest.py's): the entries
    build tiny objects, so Keras' session is cleared every 100 tests, not
    after each (clear_session took 0.3 s a test, most of the module's time)."""
    import keras

    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    _calls[0] += 1
    if _calls[0] % 100 == 0:
        keras.backend.clear_session()


def _public_names():
    with open(os.path.join(ROOT, "tests", "public_api.txt"), encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def _check(item, info):
    message = str(info.value)
    assert item.short in message, f"the message does not name {item.short}: {message}"
    assert item.argument in message, f"the message does not name {item.argument}: {message}"
    for word in item.words:
        assert re.search(word, message), f"{word!r} not in: {message}"
    first = message.splitlines()[0] if message else ""
    assert not first.startswith(("{{function_node", "Graph execution")), message


#: {id(entry): the error class name it raised}, for the Raises check below
_RAISED = {}


@pytest.mark.parametrize("item", ENTRIES, ids=lambda e: e.id)
def test_every_error_input_fails_clearly(item):
    with pytest.raises(item.error) as info:
        item.call()
    _RAISED[id(item)] = type(info.value).__name__
    _check(item, info)


TRACED = [e for e in ENTRIES if e.graph or e.xla]


@pytest.mark.parametrize("item", TRACED, ids=lambda e: e.id)
def test_traceable_error_inputs_fail_clearly_in_a_graph(item):
    import tensorflow as tf

    for jit in (False, True) if item.xla else (False,):
        with pytest.raises(item.error) as info:
            tf.function(item.call, jit_compile=jit)()
        _check(item, info)


def _gaps():
    """The public names still without entries (tests/error_inputs/gaps.txt):
    the list only shrinks; a new public name needs entries at once."""
    with open(os.path.join(ROOT, "tests", "error_inputs", "gaps.txt"), encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def test_every_public_name_has_error_inputs_or_a_reason():
    covered = {e.name for e in ENTRIES} | set(OPT_OUT)
    missing = _public_names() - covered
    unknown = sorted(n for n in OPT_OUT if n not in _public_names())
    assert not unknown, f"opt-outs for names that are not public: {unknown}"
    new = sorted(missing - _gaps())
    assert not new, f"{len(new)} public names have no error inputs or opt-out: {new}"
    closed = sorted(_gaps() - missing)
    assert not closed, f"these have entries now: delete them from gaps.txt: {closed}"


def test_the_registry_is_as_large_as_it_was():
    assert len(ENTRIES) >= AT_LEAST, len(ENTRIES)


def test_the_api_pages_raises_are_the_registrys():
    """docs/api/raises.json (the API pages' "Raises" sections) holds what
    the entries raise, per public name: rewrite it with `python
    docs/gen_api.py` when entries change. (The entries the test above ran
    are not called again.)"""
    import json

    with open(os.path.join(ROOT, RAISES_FILE), encoding="utf-8") as f:
        written = json.load(f)
    seen = {i: _RAISED[id(e)] for i, e in enumerate(ENTRIES) if id(e) in _RAISED}
    expected = by_definition(raised(ENTRIES, seen))
    wrong = sorted(k for k in set(written) | set(expected) if written.get(k) != expected.get(k))
    assert not wrong, f"{RAISES_FILE} is not the registry's for {wrong}: run python docs/gen_api.py"
