"""Quantile forecasts (issue 16, a first piece): `PinballLoss` against
NumPy and its minimiser, quantiles non-decreasing by construction, a
quantile forecaster that learns intervals with the right coverage, the
`.keras` round trip, and bad `quantiles`."""

import numpy as np
import pytest

import seqkeras
from seqkeras.training import PinballLoss


def _numpy_pinball(y, f, q):
    e = y[..., None] - f
    return np.mean(np.maximum(q * e, (q - 1) * e))


def test_pinball_matches_numpy_and_is_minimised_by_the_quantile():
    rng = np.random.default_rng(0)
    q = np.array([0.1, 0.5, 0.9])
    y = rng.normal(size=(4, 3, 2)).astype("float32")
    f = rng.normal(size=(4, 3, 2, 3)).astype("float32")
    got = float(PinballLoss(q.tolist())(y, f))
    assert got == pytest.approx(_numpy_pinball(y, f, q), rel=1e-5)
    # over constants, the loss of 1,000 draws is smallest at their quantile
    draws = rng.exponential(size=1000)
    grid = np.linspace(0, 4, 401)
    for level in (0.1, 0.5, 0.9):
        losses = [_numpy_pinball(draws, np.array([[c]]), np.array(level)) for c in grid]
        best = grid[int(np.argmin(losses))]
        assert best == pytest.approx(np.quantile(draws, level), abs=0.02)
    with pytest.raises(ValueError, match="PinballLoss"):
        PinballLoss([0.0, 0.5])
    # a prediction per quantile, not one broadcast over all of them
    with pytest.raises(ValueError, match=r"PinballLoss.*y_pred"):
        PinballLoss(q.tolist())(y, f[..., :1])
    with pytest.raises(ValueError, match=r"PinballLoss.*y_pred"):
        PinballLoss(q.tolist())(y, f[..., 0])


def test_quantiles_never_cross():
    model = seqkeras.models.forecaster(12, 3, backbone="gru", quantiles=[0.1, 0.5, 0.9])
    rng = np.random.default_rng(1)
    model.set_weights([rng.normal(0, 2, w.shape) for w in model.get_weights()])
    out = np.asarray(model(rng.normal(size=(16, 12, 1)).astype("float32")))
    assert out.shape == (16, 3, 1, 3)
    assert np.all(np.diff(out, axis=-1) >= 0)


def test_learns_intervals_with_their_coverage(tmp_path):
    """y = mean of the window + Gaussian noise (sd 1): the learned 10-90%
    interval should cover about 80% of fresh data."""
    rng = np.random.default_rng(2)

    def data(n):
        x = rng.normal(size=(n, 8, 1)).astype("float32")
        y = (x.mean(1, keepdims=True) + rng.normal(size=(n, 1, 1))).astype("float32")
        return x, y

    x, y = data(4000)
    model = seqkeras.models.forecaster(8, 1, backbone="gru", units=16, quantiles=[0.1, 0.5, 0.9])
    seqkeras.training.compile_model(model, learning_rate=1e-2, jit_compile=False)
    assert isinstance(model.loss, PinballLoss)
    model.fit(x, y, epochs=8, batch_size=128, verbose=0)
    xt, yt = data(2000)
    f = np.asarray(model.predict(xt, verbose=0))
    covered = np.mean((yt[..., 0] >= f[..., 0, 0]) & (yt[..., 0] <= f[..., 0, 2]))
    assert 0.72 <= covered <= 0.88, covered
    path = str(tmp_path / "q.keras")
    model.save(path)
    import keras

    loaded = keras.saving.load_model(path)
    assert loaded.quantiles == [0.1, 0.5, 0.9]
    np.testing.assert_allclose(np.asarray(loaded.predict(xt[:4], verbose=0)), f[:4], atol=1e-5)


@pytest.mark.parametrize("quantiles", [[0.5, 0.1], [0.1, 1.0], [], 0.5, [0.1, 0.1]])
def test_bad_quantiles(quantiles):
    with pytest.raises(ValueError, match="forecaster.*quantiles"):
        seqkeras.models.forecaster(8, 2, quantiles=quantiles)
