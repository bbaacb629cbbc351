"""The error-input registry's layer and model entries on the JAX backend:
the same bad inputs fail with the same named errors (tests/run.py runs
this group with KERAS_BACKEND=jax). Entries that go through TensorFlow
objects (tf.data pipelines, TF Text tokenizers, exporters) are
TensorFlow's and stay in tests/test_error_inputs.py."""

import keras
import pytest

if keras.backend.backend() != "jax":
    pytest.skip(
        "JAX backend tests: run with KERAS_BACKEND=jax (tests/run.py does)", allow_module_level=True
    )

from tests.error_inputs import load_all  # noqa: E402
from tests.test_error_inputs import _check, _fresh_keras_state  # noqa: E402,F401  (its fixture)

#: Entries whose call builds TensorFlow objects (word features, tf.data,
#: TensorFlow tensors): not layer or model code on this backend.
TENSORFLOW_ONLY = {
    "seqkeras.models.predict_tags",
    "seqkeras.models.class_probabilities",
    "seqkeras.models.translate_texts",
    "seqkeras.models.classify_by_generation",
    "seqkeras.models.instruction_data",
    "seqkeras.models.InstructionBatches",
    "seqkeras.models.generate_answers",
    "seqkeras.models.answer_ids",
}
ENTRIES = [
    e
    for e in load_all()[0]
    if e.name.split(".")[1] in ("layers", "models") and e.name not in TENSORFLOW_ONLY
]


#: Entries that still reach a bare error on JAX before the layer's own
#: check: none. String inputs used to reach a NumPy conversion error
#: ("could not convert string to float") in `Layer.__call__`; the layers
#: now check their arguments before that conversion
#: (`validation.numeric_arguments`). The list only shrinks: a test fails
#: when one of them is fixed, so that it leaves this list.
JAX_GAPS = set()


@pytest.fixture(autouse=True)
def _drop_compiled_functions():
    """This module's own (it overrides tests/jax/conftest.py's): the
    entries compile next to nothing, so JAX's caches are not cleared
    after each."""
    yield


BARE = ("could not convert string", "invalid literal for int()")


def _string_input(item):
    try:
        item.call()
    except Exception as error:  # noqa: BLE001  (a bare error, of any type)
        return any(text in str(error) for text in BARE) and item.short not in str(error)
    return False


@pytest.mark.parametrize("item", ENTRIES, ids=lambda e: e.id)
def test_layer_and_model_error_inputs_fail_clearly_on_jax(item):
    if item.id in JAX_GAPS and _string_input(item):
        pytest.xfail("a string input: a bare conversion error on JAX (JAX_GAPS)")
    with pytest.raises(item.error) as info:
        item.call()
    _check(item, info)


def test_the_jax_gaps_are_still_gaps():
    found = {e.id for e in ENTRIES if e.id in JAX_GAPS and _string_input(e)}
    assert found == JAX_GAPS, f"fixed on JAX: remove {sorted(JAX_GAPS - found)} from JAX_GAPS"
