"""JAX keeps every compiled executable for the life of the process; the
layer contract tests compile dozens of models, so each test's are
dropped after it (the group's memory stays inside the CI budget)."""

import keras
import pytest


@pytest.fixture(autouse=True)
def _drop_compiled_functions():
    yield
    if keras.backend.backend() == "jax":
        import jax

        jax.clear_caches()
