"""Every layer's `run_layer_test` again on the JAX backend (what the
backend computes: the config round trip, the eager call against symbolic
shapes, masks, weight counts, `mixed_bfloat16`; the `.keras` file and a
jit `fit` per configuration are checked on TensorFlow, and training under
jit per layer family in `test_jax_backend.py`), and the layers' equality
tests: the same test
functions as `tests/layers`, collected here so that `tests/run.py` runs
them with `KERAS_BACKEND=jax`."""

import keras
import pytest

if keras.backend.backend() != "jax":
    pytest.skip(
        "JAX backend tests: run with KERAS_BACKEND=jax (tests/run.py does)", allow_module_level=True
    )

from tests.layers.test_attention import (  # noqa: E402,F401
    test_attention_layer_contract,
    test_mha_layer_contract,
)
from tests.layers.test_attention_decoder import (  # noqa: E402,F401
    test_decoder_layer_contract as test_attention_decoder_layer_contract,
)
from tests.layers.test_cells import (  # noqa: E402,F401
    test_layer_contract as test_recurrent_cells_layer_contract,
)
from tests.layers.test_linear_recurrences import (  # noqa: E402,F401
    test_griffin_layer_contracts,
    test_mamba_block_layer_contract,
    test_mamba_parallel_equals_step_and_prefill,
    test_min_cells_match_the_paper_equations,
    test_min_recurrent_layer_contract,
    test_ssd_scan_equals_the_recurrence,
)
from tests.layers.test_matrix_memories import (  # noqa: E402,F401
    test_matrix_memory_layer_contracts,
    test_parallel_equals_steps_and_padding_leaves_the_state_alone,
    test_rwkv7_blocks_steps_and_padding,
)
from tests.layers.test_pooling import (  # noqa: E402,F401
    test_pooling_layer_contract,
)
from tests.layers.test_positional import (  # noqa: E402,F401
    test_positional_layer_contract,
)
from tests.layers.test_recurrent import (  # noqa: E402,F401
    test_wrapper_layer_contract,
)
from tests.layers.test_transformer import (  # noqa: E402,F401
    test_decoder_layer_contract,
    test_encoder_layer_contract,
)
from tests.layers.test_crf import (  # noqa: E402,F401
    case,
    test_against_brute_force,
    test_contract_and_errors,
    test_loss_trains_under_xla_beyond_any_per_token_rule,
    test_padding_changes_nothing,
)
from tests.layers.test_char_encoder import (  # noqa: E402,F401
    test_layer_contract_and_errors as test_char_encoder_layer_contract,
)
from tests.layers.test_embedding import (  # noqa: E402,F401
    test_bert_embedding_contract_and_errors,
    test_bert_embedding_matches_numpy_with_segments_and_mask,
    test_gather_steps_contract,
    test_gather_steps_matches_numpy_and_masks_index_zero,
)
from tests.layers.test_token_dropout import (  # noqa: E402,F401
    test_layer_contract_and_errors as test_token_dropout_layer_contract,
)
from tests.layers.test_mixing import (  # noqa: E402,F401
    test_reverse_sequence_contract_and_errors,
    test_reverse_sequence_matches_numpy_and_undoes_itself,
    test_scalar_mix_contract_and_errors,
    test_scalar_mix_layer_norm_ignores_padding_values,
    test_scalar_mix_matches_hand_computation,
)
