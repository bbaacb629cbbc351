"""The layers' equality tests again on the JAX backend: the same test
functions as `tests/layers` (parallel forms against step-by-step ones,
padding that leaves states alone, the scans against their recurrences,
the CRF against brute force, layers against NumPy), collected here so
that `tests/run.py` runs them with `KERAS_BACKEND=jax`.

What is not re-run: `run_layer_test`'s contracts (the config round trip,
symbolic shapes, masks, weight counts, the `.keras` file, mixed
precision). They run on TensorFlow for every layer and configuration;
on JAX each layer family trains under jit (`test_jax_backend.py`'s
`LAYERS` and model kinds), and the maths is checked here. Re-running the
contracts on JAX took about 120 of this module's 215 s (2 cores)."""

import keras
import pytest

if keras.backend.backend() != "jax":
    pytest.skip(
        "JAX backend tests: run with KERAS_BACKEND=jax (tests/run.py does)", allow_module_level=True
    )

from tests.layers.test_linear_recurrences import (  # noqa: E402,F401
    test_mamba_parallel_equals_step_and_prefill,
    test_min_cells_match_the_paper_equations,
    test_ssd_scan_equals_the_recurrence,
)
from tests.layers.test_matrix_memories import (  # noqa: E402,F401
    test_parallel_equals_steps_and_padding_leaves_the_state_alone,
    test_rwkv7_blocks_steps_and_padding,
)
from tests.layers.test_crf import (  # noqa: E402,F401
    case,
    test_against_brute_force,
    test_loss_trains_under_xla_beyond_any_per_token_rule,
    test_padding_changes_nothing,
)
from tests.layers.test_embedding import (  # noqa: E402,F401
    test_bert_embedding_matches_numpy_with_segments_and_mask,
    test_gather_steps_matches_numpy_and_masks_index_zero,
)
from tests.layers.test_mixing import (  # noqa: E402,F401
    test_reverse_sequence_matches_numpy_and_undoes_itself,
    test_scalar_mix_layer_norm_ignores_padding_values,
    test_scalar_mix_matches_hand_computation,
)
