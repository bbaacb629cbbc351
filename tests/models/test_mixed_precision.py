"""Under `mixed_bfloat16` every builder family clears the same learning
bars as in float32 (the tests of test_builders.py, run again under the
policy, as TensorFlow graphs as there: `compile_model`'s own choice for
`mixed_bfloat16` on a CPU); the compile-mode choice on this machine."""

import keras
import pytest

import seqkeras
from seqkeras.training import choose_jit_compile, compile_model
from tests.models import test_builders as builders

SAME_BARS = {
    "classifier gru attention": lambda: builders.test_classifier_learns_and_round_trips(
        "gru", "attention", True
    ),
    "classifier transformer": lambda: builders.test_classifier_learns_and_round_trips(
        "transformer", "mean", False
    ),
    "tagger": builders.test_tagger_learns_context_dependent_tags,
    "rnn language model": lambda: builders.test_language_models_learn_and_tie_weights("rnn"),
    "transformer language model": lambda: builders.test_language_models_learn_and_tie_weights(
        "transformer"
    ),
    "seq2seq attention": builders.test_seq2seq_overfits_one_batch,
    "transformer seq2seq": builders.test_transformer_seq2seq_learns_reversal,
    "forecaster": lambda: builders.test_forecaster_beats_the_seasonal_naive_baseline("gru"),
}


class policy:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.old = keras.config.dtype_policy()
        keras.config.set_dtype_policy(self.name)

    def __exit__(self, *exc):
        keras.config.set_dtype_policy(self.old)


@pytest.mark.parametrize("name", sorted(SAME_BARS))
def test_same_bars_under_mixed_bfloat16(name):
    # seeded: the bars are met with margin from most initialisations, not
    # all (an unseeded run of the one-batch seq2seq reached 0.82 once;
    # seeded, float32 and mixed_bfloat16 with and without XLA reach
    # 0.98-0.99)
    keras.utils.set_random_seed(0)
    with policy("mixed_bfloat16"):
        SAME_BARS[name]()


def cpu_only():
    return all(d.lower().startswith("cpu") for d in keras.distribution.list_devices())


@pytest.mark.skipif(not cpu_only(), reason="the CPU rules; a GPU is here")
def test_compile_mode_choice_on_this_cpu():
    model = seqkeras.models.tagger(12, 3, units=8, embedding_dim=8)
    jit, reason = choose_jit_compile(model)
    assert jit is True and "float32" in reason
    compile_model(model)
    assert model.jit_compile is True
    with policy("mixed_bfloat16"):
        mixed = seqkeras.models.tagger(12, 3, units=8, embedding_dim=8)
        jit, reason = choose_jit_compile(mixed)
        assert jit is False and "bfloat16" in reason
        assert choose_jit_compile() == (jit, reason)  # the global policy
        compile_model(mixed)
        assert mixed.jit_compile is False
        compile_model(mixed, jit_compile=True)  # overridable
        assert mixed.jit_compile is True


def test_compile_mode_argument_is_checked():
    model = seqkeras.models.tagger(12, 3, units=8, embedding_dim=8)
    with pytest.raises(ValueError, match="`jit_compile`.*Received: jit_compile='yes'"):
        compile_model(model, jit_compile="yes")
