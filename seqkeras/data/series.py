"""Time series from CSV files, rolling-origin windows, the seasonal-naive
forecast and the error measures a forecast is judged by."""

import csv
import io
import math

import numpy as np

from seqkeras.data.pipelines import read_text


def read_series_csv(path, name="read_series_csv"):
    """`(dates, values)` from a UTF-8 CSV file with a header line and two
    columns, a date (any text, e.g. `1949-01`) and a number; fields may be
    quoted, lines end in LF or CRLF.

    Raises a one-line `ValueError` (file and line number) for bytes that
    are not UTF-8, an empty file, a line without exactly two columns, a
    missing value, a value that is not a finite number, and a file with
    a header only.

    Args:
        path: the CSV file.
        name: the function named in error messages (a caller's own).

    Returns:
        `(dates, values)`: a list of strings and a float array.

    Examples:
        >>> import tempfile, os
        >>> from seqkeras.data import read_series_csv
        >>> path = os.path.join(tempfile.mkdtemp(), "series.csv")
        >>> with open(path, "w") as f:
        ...     _ = f.write('"Month","Passengers"\\r\\n"1949-01",112\\r\\n'
        ...                 '"1949-02",118')
        >>> read_series_csv(path)
        (['1949-01', '1949-02'], array([112., 118.], dtype=float32))
    """
    text = read_text(path, name)
    rows = list(csv.reader(io.StringIO(text)))
    while rows and not any(cell.strip() for cell in rows[-1]):
        rows.pop()
    if not rows:
        raise ValueError(
            f"`{name}`: {path} is empty (expected a header "
            "line `date,value` and one row per time step)"
        )
    dates, values = [], []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != 2:
            raise ValueError(
                f"`{name}`: {path} line {number}: expected 2 columns (a "
                f"date and a value), got {len(row)}: {','.join(row)[:80]!r}"
            )
        date, cell = row[0].strip(), row[1].strip()
        if not cell:
            raise ValueError(f"`{name}`: {path} line {number}: the value of {date!r} is missing")
        try:
            value = float(cell)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value):
            raise ValueError(
                f"`{name}`: {path} line {number}: the value "
                f"of {date!r} is not a finite number: "
                f"{cell[:40]!r}"
            )
        dates.append(date)
        values.append(value)
    if not values:
        raise ValueError(f"`{name}`: {path} has a header but no rows")
    return dates, np.asarray(values, "float32")


def rolling_windows(
    values, input_steps, horizon, first_origin=None, last_origin=None, name="rolling_windows"
):
    """The windows of a rolling-origin evaluation: for each origin `t` (the
    first forecast step) from `first_origin` to `last_origin` (default:
    every origin with a full window before it and a full horizon after),
    the `input_steps` values before `t` and the `horizon` values from `t`.

    Returns:
        `(x, y, origins)`: float32 (n, input_steps, 1), (n, horizon, 1)
        and int (n,).

    Examples:
        >>> import numpy as np
        >>> from seqkeras.data.series import rolling_windows
        >>> x, y, t = rolling_windows(np.arange(10.0), 4, 2, first_origin=6)
        >>> t.tolist(), x[0, :, 0].tolist(), y[-1, :, 0].tolist()
        ([6, 7, 8], [2.0, 3.0, 4.0, 5.0], [8.0, 9.0])
    """
    values = np.asarray(values, "float32").reshape(-1)
    low = input_steps if first_origin is None else max(first_origin, input_steps)
    high = len(values) - horizon if last_origin is None else min(last_origin, len(values) - horizon)
    if high < low:
        raise ValueError(
            f"`{name}`: a series of {len(values)} steps has no window of "
            f"{input_steps} steps followed by {horizon} forecast steps "
            f"with origins from {low} (it needs at least "
            f"{low + horizon} steps)"
        )
    origins = np.arange(low, high + 1)
    x = np.stack([values[t - input_steps : t] for t in origins])[..., None]
    y = np.stack([values[t : t + horizon] for t in origins])[..., None]
    return x, y, origins


def seasonal_naive(values, origins, horizon, season):
    """The seasonal-naive forecast ("same as last season") from each
    origin: step `k` (1-based) of the horizon repeats the value `season *
    ceil(k / season)` steps before it, the last observed one of its
    season.

    Returns:
        float32 (len(origins), horizon, 1).

    Examples:
        >>> import numpy as np
        >>> from seqkeras.data.series import seasonal_naive
        >>> seasonal_naive(np.arange(10.0), [6], 3, 2)[0, :, 0].tolist()
        [4.0, 5.0, 4.0]
    """
    values = np.asarray(values, "float32").reshape(-1)
    k = np.arange(1, horizon + 1)
    back = season * np.ceil(k / season).astype(int)
    index = np.asarray(origins)[:, None] + k[None] - 1 - back[None]
    if index.min() < 0:
        raise ValueError(
            f"`seasonal_naive` needs a full season ({season} steps) before "
            f"the first origin; it is {int(np.min(origins))}"
        )
    return values[index][..., None]


def forecast_errors(y, forecast, naive):
    """`{"mae", "rmse", "mase"}` of point forecasts against the truth `y`
    over every origin and step; MASE is the MAE relative to the
    seasonal-naive forecast `naive` over the same targets (< 1: better
    than "same as last season")."""
    y, f, n = (np.asarray(a, "float64") for a in (y, forecast, naive))
    mae = float(np.mean(np.abs(y - f)))
    return {
        "mae": mae,
        "rmse": float(np.sqrt(np.mean((y - f) ** 2))),
        "mase": mae / float(np.mean(np.abs(y - n))),
    }


def coverage(y, low, high):
    """The share of targets inside [low, high] (an interval's coverage)."""
    y = np.asarray(y)
    return float(np.mean((y >= np.asarray(low)) & (y <= np.asarray(high))))


def sarima_forecasts(values, end, origins, horizon, season, level=0.8):
    """A classical baseline: a statsmodels SARIMAX model fitted on
    `values[:end]`, then forecasting `horizon` steps from each origin with
    the fitted parameters (dynamic prediction: no value after the origin
    is seen). statsmodels comes with the `apps` extra.

    Seasons up to 52: the airline model ARIMA(0,1,1)(0,1,1)s (on
    logarithms when every value is positive); longer seasons (daily data):
    ARIMA(2,0,1) with a constant and 3 pairs of Fourier terms of the
    season.

    Args:
        values: the series (n,).
        end: the rows the model is fitted on (`values[:end]`).
        origins: the steps forecasts start at (each >= 1, and
            `origin + horizon <= n`).
        horizon: steps per forecast, >= 1.
        season: the seasonal period, >= 2.
        level: the prediction interval's coverage, in (0, 1).

    Returns:
        `(name, mean, low, high)`: the model's name and three arrays
        (len(origins), horizon, 1).
    """
    import warnings

    name = "sarima_forecasts"
    values = np.asarray(values, "float64")
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise ValueError(
            f"`{name}` expects `values` (n,) of finite numbers. Received: shape {values.shape}"
        )
    for arg, value, low in (("end", end, 2), ("horizon", horizon, 1), ("season", season, 2)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"`{name}` expects an int `{arg}` >= {low}. Received: {value!r}")
    origins = np.asarray(origins)
    if origins.size and (origins.min() < 1 or origins.max() + horizon > len(values)):
        raise ValueError(
            f"`{name}`: every origin + horizon ({horizon}) must lie in the series of "
            f"{len(values)} values. Received origins {origins.min()}..{origins.max()}"
        )
    if not 0 < level < 1:
        raise ValueError(f"`{name}` expects `level` in (0, 1). Received: {level!r}")
    try:
        from statsmodels.tsa.statespace.sarimax import SARIMAX
    except ImportError:
        raise ImportError(f"`{name}` needs statsmodels: pip install 'seqkeras[apps]'") from None
    log = bool(np.all(values > 0)) and season <= 52
    y = np.log(values) if log else values
    exog = None
    if season <= 52:
        spec = dict(order=(0, 1, 1), seasonal_order=(0, 1, 1, season))
        label = f"SARIMA(0,1,1)(0,1,1,{season}){' on log' if log else ''}"
    else:
        t = np.arange(len(values))[:, None]
        k = np.arange(1, 4)[None]
        angle = 2 * np.pi * k * t / season
        exog = np.concatenate([np.sin(angle), np.cos(angle)], 1)
        spec = dict(order=(2, 0, 1), trend="c")
        label = f"ARIMA(2,0,1) + Fourier(3, {season})"
    with warnings.catch_warnings():  # statsmodels' convergence chatter
        warnings.simplefilter("ignore")
        fitted = SARIMAX(y[:end], exog=None if exog is None else exog[:end], **spec).fit(disp=False)
        full = fitted.apply(y, exog=exog)
        mean, low, high = [], [], []
        for t in origins:
            p = full.get_prediction(start=int(t), end=int(t) + horizon - 1, dynamic=True)
            band = np.asarray(p.conf_int(alpha=1 - level))
            mean.append(np.asarray(p.predicted_mean))
            low.append(band[:, 0])
            high.append(band[:, 1])
    out = [np.asarray(a).reshape(len(origins), horizon)[..., None] for a in (mean, low, high)]
    if log:
        out = [np.exp(a) for a in out]
    return (label, *out)
