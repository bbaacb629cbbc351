"""Properties of the public API's argument checks over whole numeric
ranges (hypothesis), where a rule is clearer than a list of entries
(tests/error_inputs): a value is refused exactly when it is outside the
documented range, with an error naming the function or layer and the
argument; a value inside is accepted and kept."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import seqkeras
from seqkeras.data import check_token_ids, length_batches

L = seqkeras.layers
QUICK = settings(
    max_examples=40,
    deadline=None,
    # the autouse per-test Keras reset (tests/conftest.py) runs once per test, not per example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
ANY_NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32), st.integers(-(10**6), 10**6)
)


@QUICK
@given(units=st.integers(-(10**6), 10**6), cell=st.sampled_from(["SimpleRNNCell", "GRUCell"]))
def test_cell_units_are_refused_exactly_when_not_positive(units, cell):
    cls = getattr(L, cell)
    if units > 0:
        assert cls(units).units == units
        return
    with pytest.raises(ValueError, match=rf"`{cell}`.*`units`.*Received: units={units}"):
        cls(units)


@QUICK
@given(units=st.floats(allow_nan=True, allow_infinity=True))
def test_a_float_size_is_a_type_error_even_when_whole(units):
    with pytest.raises(TypeError, match=r"`LSTMCell`.*`units`.*a positive integer"):
        L.LSTMCell(units)


@QUICK
@given(rate=ANY_NUMBER)
def test_dropout_is_refused_exactly_outside_zero_to_one(rate):
    if 0 <= rate < 1:
        assert L.GRUCell(4, dropout=rate).dropout == pytest.approx(float(rate))
        return
    with pytest.raises(ValueError, match=r"`GRUCell`.*`dropout`.*\[0, 1\)"):
        L.GRUCell(4, dropout=rate)


@QUICK
@given(
    ids=hnp.arrays(
        np.int64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=6), elements=st.integers(-3, 13)
    ),
    vocab_size=st.integers(1, 10),
)
def test_token_ids_are_refused_exactly_outside_the_vocabulary_naming_the_worst(ids, vocab_size):
    outside = (ids < 0) | (ids >= vocab_size)
    if not outside.any():
        check_token_ids("predict", "token_ids", ids, vocab_size)
        return
    worst = ids.min() if ids.min() < 0 else ids.max()
    with pytest.raises(ValueError, match=rf"`predict`: input `token_ids` has token id {worst},"):
        check_token_ids("predict", "token_ids", ids, vocab_size)


@QUICK
@given(value=st.floats(allow_nan=True, allow_infinity=True, width=32))
def test_float_ids_pass_only_when_whole_numbers(value):
    ids = np.array([[1.0, value]], "float32")
    if math.isfinite(value) and float(value).is_integer() and 0 <= value < 10:
        check_token_ids("fit", "token_ids", ids, 10)
    elif math.isfinite(value) and float(value).is_integer():
        with pytest.raises(ValueError, match=r"`fit`: input `token_ids` has token id"):
            check_token_ids("fit", "token_ids", ids, 10)
    else:
        with pytest.raises(TypeError, match=r"`fit`: input `token_ids` must hold integer"):
            check_token_ids("fit", "token_ids", ids, 10)


@QUICK
@given(batch_size=st.integers(-50, 50))
def test_batch_sizes_are_refused_exactly_when_not_positive(batch_size):
    rows = [[5] * 3, [6], [7, 8], [9]]
    if batch_size > 0:
        batches = list(length_batches(rows, batch_size=batch_size))
        assert sum(len(indices) for indices, _ in batches) == len(rows)
        assert all(len(indices) <= batch_size for indices, _ in batches)
        return
    with pytest.raises(ValueError, match=r"`length_batches`.*`batch_size`"):
        length_batches(rows, batch_size=batch_size)


@pytest.fixture(scope="module")
def language_model():
    return seqkeras.models.recurrent_language_model(8, 4, cell="gru")


@QUICK
@given(temperature=st.floats(allow_nan=True, allow_infinity=True))
def test_sampling_temperature_must_be_finite_and_not_negative(language_model, temperature):
    if math.isfinite(temperature) and temperature >= 0:
        return  # valid: decoding it is the sampling tests' subject
    with pytest.raises(ValueError, match=r"`generate`.*`temperature`|`sample`.*`temperature`"):
        seqkeras.models.generate(
            language_model,
            prompt=np.ones((1, 1), "int32"),
            strategy="sample",
            temperature=temperature,
        )


@QUICK
@given(top_p=st.floats(allow_nan=True, allow_infinity=True))
def test_top_p_is_refused_exactly_outside_zero_to_one(language_model, top_p):
    if math.isfinite(top_p) and 0 < top_p <= 1:
        return
    with pytest.raises(ValueError, match=r"`top_p`.*\(0, 1\]"):
        seqkeras.models.generate(
            language_model, prompt=np.ones((1, 1), "int32"), strategy="sample", top_p=top_p
        )
