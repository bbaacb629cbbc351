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


@pytest.fixture(autouse=True)
def _drop_compiled_functions():
    """This module's own (it overrides tests/jax/conftest.py's): the
    entries compile next to nothing, so JAX's caches are not cleared
    after each."""
    yield


@pytest.mark.parametrize("item", ENTRIES, ids=lambda e: e.id)
def test_layer_and_model_error_inputs_fail_clearly_on_jax(item):
    # every entry, string inputs included: the layers check their
    # arguments before Keras converts them (`validation.numeric_arguments`;
    # JAX's conversion of a string array fails first, with a bare error)
    with pytest.raises(item.error) as info:
        item.call()
    _check(item, info)
