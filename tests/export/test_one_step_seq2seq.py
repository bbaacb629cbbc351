"""One decoding step for every runtime: the encoder-decoders (recurrent
without attention and with Bahdanau's and Luong's, the pre-LN
Transformer) give identical ids in Keras, the served graph (and its XLA
option for one model of each kind of state), greedy and beam with and
without a length penalty (see `one_step_checks`). The post-LN
Transformer's step is the same model code with the norms after each
sublayer: its blocks' cached steps equal their full pass
(`tests/layers/test_transformer.py`, both norm placements, with and
without cross-attention) and its Keras `generate` equals recomputation
(`tests/models/test_generation.py`)."""

from tests.export.one_step_checks import BUILDERS, check
from tests.export.test_one_step_language_models import NAMES
from tests.export.test_one_step_state_space import NAMES as STATE_SPACE
from tests.export.test_one_step_state_space import SLOW_NAMES

#: the builders of `one_step_checks.BUILDERS` whose one-step check is
#: elsewhere (see the modules' docstrings)
ELSEWHERE = ("transformer_language_model", "transformer_seq2seq_post_ln", "min_gru_language_model")

# many models exported and checked in fresh processes: a group of its own
# (tests/run.py)
OWN_GROUP = True


def test_encoder_decoders_decode_identically_in_every_runtime(tmp_path):
    others = NAMES + STATE_SPACE + SLOW_NAMES + list(ELSEWHERE)
    names = [name for name in BUILDERS if name not in others]
    # seq2seq without attention, with Bahdanau's and Luong's, a Transformer
    assert len(names) == 4
    check(names, tmp_path)
