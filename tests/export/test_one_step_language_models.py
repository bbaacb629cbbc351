"""One decoding step for every runtime: the language models, the
conditioned decoder and a user's own `SequenceModel` subclass give
identical ids in Keras, the served graph (and its XLA option for one
model of each kind of state), greedy and beam with and without a length
penalty (see `one_step_checks`)."""

from tests.export.one_step_checks import check

# many models exported and checked in fresh processes: a group of its own
# (tests/run.py)
OWN_GROUP = True

#: (`transformer_language_model` is `gpt2_language_model`'s class with
#: sinusoidal positions: its step is checked on the phone,
#: `test_one_step_tflite.py`, and in Keras, `tests/models/test_generation.py`)
NAMES = [
    "recurrent_language_model",
    "gpt2_language_model",
    "decoder_language_model",
    "conditioned_decoder",
    "user_subclass",
]


def test_language_models_decode_identically_in_every_runtime(tmp_path):
    check(NAMES, tmp_path)
