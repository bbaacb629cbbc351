"""Forecasting on raw values (issue 16): `WindowScaling` against NumPy and
its contract, window-scaled forecasters whose outputs follow the level and
scale of their inputs, the seq2seq forecaster (teacher forcing shares the
weights; autoregressive forecasts equal a NumPy-free recomputation that
feeds the median back), the CSV reader's errors, rolling windows, the
seasonal-naive forecast and the error measures against hand counts."""

import numpy as np
import pytest

import seqkeras
from seqkeras.data import series as S
from tests.layer_checks import run_layer_test


def _numpy_scale(x, eps):
    mu = x.mean(1, keepdims=True)
    sigma = np.sqrt(x.var(1, keepdims=True) + eps)
    return mu, sigma


def test_window_scaling_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(50, 10, (3, 7, 2)).astype("float32")
    mu, sigma = _numpy_scale(x.astype("float64"), 1e-6)
    layer = seqkeras.layers.WindowScaling()
    np.testing.assert_allclose(np.asarray(layer(x)), (x - mu) / sigma, rtol=1e-5, atol=1e-5)
    v = rng.normal(size=(3, 4, 1)).astype("float32")
    np.testing.assert_allclose(
        np.asarray(layer(x, v)), (v - mu[:, :, :1]) / sigma[:, :, :1], rtol=1e-5, atol=1e-5
    )
    q = rng.normal(size=(3, 4, 2, 3)).astype("float32")
    back = seqkeras.layers.WindowScaling(inverse=True)
    np.testing.assert_allclose(
        np.asarray(back(x, q)), q * sigma[..., None] + mu[..., None], rtol=1e-5, atol=1e-4
    )
    # a constant window: no division by zero, values map to the level
    flat = np.full((1, 5, 1), 7.0, "float32")
    out = np.asarray(layer(flat))
    assert np.all(np.isfinite(out)) and np.all(out == 0)
    np.testing.assert_allclose(np.asarray(back(flat, np.zeros((1, 2, 1), "float32"))), 7.0)


def test_window_scaling_contract_and_errors():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 6, 3)).astype("float32")
    run_layer_test(lambda: seqkeras.layers.WindowScaling(), x, num_weights=(0, 0))
    run_layer_test(
        lambda: seqkeras.layers.WindowScaling(inverse=True),
        (x, rng.normal(size=(2, 4, 2)).astype("float32")),
        num_weights=(0, 0),
    )
    with pytest.raises(ValueError, match=r"WindowScaling.*values"):
        seqkeras.layers.WindowScaling(inverse=True)(x)
    with pytest.raises(ValueError, match=r"WindowScaling.*rank 3"):
        seqkeras.layers.WindowScaling()(x[0])
    with pytest.raises(ValueError, match=r"WindowScaling.*targets"):
        seqkeras.layers.WindowScaling()(x, np.zeros((2, 4, 5)))
    with pytest.raises(ValueError, match=r"WindowScaling.*epsilon"):
        seqkeras.layers.WindowScaling(epsilon=-1.0)
    with pytest.raises(TypeError, match=r"WindowScaling.*inverse"):
        seqkeras.layers.WindowScaling(inverse="yes")


@pytest.mark.parametrize("kind", ["lstm", "transformer", "seq2seq"])
def test_scaled_forecasts_follow_level_and_scale(kind):
    """With window scaling, forecast(a * x + b) = a * forecast(x) + b for
    a > 0: the model sees only the window's shape."""
    if kind == "seq2seq":
        model = seqkeras.models.seq2seq_forecaster(12, 3, units=8, quantiles=[0.1, 0.5, 0.9])
    else:
        model = seqkeras.models.forecaster(
            12, 3, backbone=kind, units=8, num_heads=2, quantiles=[0.1, 0.5, 0.9], scaling="window"
        )
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 12, 1)).astype("float32")
    base = np.asarray(model(x))
    moved = np.asarray(model(x * 30.0 + 500.0))
    np.testing.assert_allclose(moved, base * 30.0 + 500.0, rtol=1e-4, atol=1e-2)
    assert np.all(np.diff(moved, axis=-1) >= 0)
    assert not model.streamable


def test_seq2seq_forecaster_teacher_forcing_and_feedback():
    model = seqkeras.models.seq2seq_forecaster(10, 4, units=6, scaling=None)
    trainer = model.teacher_forcing_model()
    assert trainer is model.teacher_forcing_model()
    ours = {id(w) for w in model.weights}
    assert {id(w) for w in trainer.weights} == ours
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 10, 1)).astype("float32")
    free = np.asarray(model(x))
    # teacher-forced on its own forecasts, the decoder sees the same inputs
    # as when it feeds them back: the outputs agree
    forced = np.asarray(trainer({"series": x, "future": free}))
    np.testing.assert_allclose(forced, free, rtol=1e-5, atol=1e-5)
    # and forced on other values, the steps after the first differ
    other = np.asarray(trainer({"series": x, "future": free + 1.0}))
    np.testing.assert_allclose(other[:, 0], free[:, 0], atol=1e-6)
    assert np.abs(other[:, 1:] - free[:, 1:]).max() > 1e-3
    # training the teacher-forced graph trains the forecaster
    y = np.repeat(x[:, -1:], 4, axis=1)
    seqkeras.training.compile_model(
        trainer, task="regression", learning_rate=1e-2, jit_compile=False
    )
    before = np.abs(np.asarray(model(x)) - y).mean()
    trainer.fit({"series": x, "future": y}, y, epochs=30, verbose=0)
    assert np.abs(np.asarray(model(x)) - y).mean() < before


def test_seq2seq_forecaster_bad_arguments():
    with pytest.raises(ValueError, match=r"seq2seq_forecaster.*cell"):
        seqkeras.models.seq2seq_forecaster(10, 2, cell="tcn")
    with pytest.raises(ValueError, match=r"seq2seq_forecaster.*targets"):
        seqkeras.models.seq2seq_forecaster(10, 2, features=1, targets=2)
    with pytest.raises(ValueError, match=r"forecaster.*scaling"):
        seqkeras.models.forecaster(10, 2, scaling="global")


def _csv(tmp_path, text, name="s.csv", raw=False):
    path = tmp_path / name
    if raw:
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


def test_read_series_csv_and_its_errors(tmp_path):
    dates, values = S.read_series_csv(
        _csv(tmp_path, 'Date,Temp\n1981-01-01,20.7\n"1981-01-02","17.9"\n\n')
    )
    assert dates == ["1981-01-01", "1981-01-02"]
    np.testing.assert_allclose(values, [20.7, 17.9], rtol=1e-6)
    cases = [
        ("d,v\n1,2\n2,\n", "line 3.*missing"),
        ("d,v\n1,2\n2,abc\n", "line 3.*not a finite number"),
        ("d,v\n1,nan\n", "line 2.*not a finite number"),
        ("d,v\n1,2,3\n", "line 2.*2 columns"),
        ("", "empty"),
        ("d,v\n", "no rows"),
    ]
    for text, match in cases:
        with pytest.raises(ValueError, match=match):
            S.read_series_csv(_csv(tmp_path, text))
    with pytest.raises(ValueError, match="UTF-8"):
        S.read_series_csv(_csv(tmp_path, b"d,v\n1,\xff\n", raw=True))


def test_rolling_windows_naive_and_errors():
    values = np.arange(30.0)
    x, y, t = S.rolling_windows(values, 5, 3, first_origin=20)
    assert t.tolist() == list(range(20, 28))
    for row, origin in enumerate(t):
        assert x[row, :, 0].tolist() == list(range(origin - 5, origin))
        assert y[row, :, 0].tolist() == list(range(origin, origin + 3))
    with pytest.raises(ValueError, match="needs at least"):
        S.rolling_windows(np.arange(6.0), 5, 3)
    # "same as last season", season 4, from origin 10: 6 7 8 9 6
    naive = S.seasonal_naive(values, [10], 5, 4)
    assert naive[0, :, 0].tolist() == [6.0, 7.0, 8.0, 9.0, 6.0]
    with pytest.raises(ValueError, match="season"):
        S.seasonal_naive(values, [2], 2, 4)


def test_error_measures_against_hand_counts():
    y = np.array([[[1.0], [2.0]], [[3.0], [4.0]]])
    f = np.array([[[2.0], [2.0]], [[3.0], [1.0]]])  # errors 1, 0, 0, 3
    naive = y + 2.0  # MAE 2
    e = S.forecast_errors(y, f, naive)
    assert e["mae"] == pytest.approx(1.0)
    assert e["rmse"] == pytest.approx(np.sqrt(10 / 4))
    assert e["mase"] == pytest.approx(0.5)
    # y 1, 2, 3 inside [y - 1, f]; 4 above [3, 1]
    assert S.coverage(y, y - 1, f) == pytest.approx(0.75)
