"""One decoding step for every runtime: the encoder-decoders (recurrent
without attention and with Bahdanau's and Luong's, Transformer pre- and
post-LN) give identical ids in Keras, the served graph (and its XLA
option for one model of each kind of state), greedy and beam with and
without a length penalty (see `one_step_checks`)."""

from tests.export.one_step_checks import BUILDERS, check
from tests.export.test_one_step_language_models import NAMES
from tests.export.test_one_step_state_space import NAMES as STATE_SPACE
from tests.export.test_one_step_state_space import SLOW_NAMES

# many models exported and checked in fresh processes: a group of its own
# (tests/run.py)
OWN_GROUP = True


def test_encoder_decoders_decode_identically_in_every_runtime(tmp_path):
    names = [name for name in BUILDERS if name not in NAMES + STATE_SPACE + SLOW_NAMES]
    # seq2seq without attention, with Bahdanau's and Luong's, 2 Transformers
    assert len(names) == 5
    check(names, tmp_path)
