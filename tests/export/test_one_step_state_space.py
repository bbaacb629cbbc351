"""One decoding step for every runtime, for the language models that
generate with a fixed-size state (Mamba, Mamba-2, Griffin, the gated
DeltaNet / mLSTM / sLSTM hybrid, RWKV-7): identical ids in Keras (graph
and XLA), the served graph (and its XLA option for Mamba-2), greedy,
beam and seeded sampling, prompts of different lengths (see
`one_step_checks`). The minGRU language model decodes through the same
`Recurrent` step as the GRU one (`test_one_step_language_models.py`);
its cell's step equals its parallel pass
(`tests/layers/test_linear_recurrences.py`) and its exports and TFLite
step are `test_state_space_export.py`'s and `test_one_step_tflite.py`'s."""

import pytest

from tests.export.one_step_checks import check

# many models exported and checked in fresh processes: a group of its own
# (tests/run.py)
OWN_GROUP = True

#: tests/run.py --slow: the hybrid's and RWKV-7's checks (their chunked
#: mixers and the sLSTM's loop compile in every runtime)
SLOW_SECONDS = 130
SLOW_PEAK_MB = 4104

NAMES = [
    "mamba_language_model",
    "mamba2_language_model",
    "griffin_language_model",
]
#: the slow test's
SLOW_NAMES = ["hybrid_language_model", "rwkv7_language_model"]


def test_state_space_models_decode_identically_in_every_runtime(tmp_path):
    check(NAMES, tmp_path)


@pytest.mark.slow
def test_hybrid_model_decodes_identically_in_every_runtime(tmp_path):
    check(SLOW_NAMES, tmp_path)
