"""Synthetic sequence tasks, generated locally (nothing is downloaded)."""

import numpy as np

from seqkeras.data.tokens import EOS, FIRST_ID, PAD
from seqkeras.layers import validation


def adding_problem(n, steps, seed=None):
    """The adding problem (Hochreiter & Schmidhuber 1997).

    Each sequence has `steps` steps of two features: a value drawn from
    U(0, 1) and a marker that is 1 at exactly two steps, one in each half of
    the sequence. The target is the sum of the two marked values. Predicting
    the mean gives a mean squared error of about 1/6; solving the task needs
    memory across the whole sequence.

    Args:
        n: number of sequences.
        steps: sequence length, at least 2.
        seed: NumPy seed.

    Returns:
        `(x, y)`: float32 arrays of shapes (n, steps, 2) and (n, 1).
    """
    for arg, value, low in (("n", n, 1), ("steps", steps, 2)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"`adding_problem` expects an int `{arg}`. Received: {arg}={value!r}")
    if n <= 0 or steps < 2:
        raise ValueError(
            f"`adding_problem` needs n > 0 and steps >= 2. Received: n={n}, steps={steps}"
        )
    rng = np.random.default_rng(validation.seed("adding_problem", "seed", seed))
    values = rng.uniform(size=(n, steps)).astype("float32")
    half = steps // 2
    first = rng.integers(0, half, size=n)
    second = rng.integers(half, steps, size=n)
    markers = np.zeros((n, steps), "float32")
    markers[np.arange(n), first] = 1.0
    markers[np.arange(n), second] = 1.0
    x = np.stack([values, markers], axis=-1)
    y = (values * markers).sum(axis=1, keepdims=True).astype("float32")
    return x, y


# Ids every token task here shares with `seqkeras.data.text.CharVocabulary`.
FIRST_SYMBOL = FIRST_ID  # 3 is the vocabulary's unknown token


def copy_task(n, min_length, max_length, num_symbols=10, reverse=False, seed=None):
    """Copy (or reverse) random symbol strings: the classic probe of an
    encoder-decoder's memory.

    Each source is `L ~ U{min_length, max_length}` symbols with ids
    `4 .. 4 + num_symbols - 1`, right-padded with 0; the target is the same
    symbols (reversed if `reverse`) followed by EOS (id 2).

    Args:
        n: number of pairs.
        min_length, max_length: source length range, 1 <= min <= max.
        num_symbols: alphabet size; the vocabulary is `num_symbols + 4`.
        reverse: reverse the target.
        seed: NumPy seed.

    Returns:
        `(source, target)`: int32 arrays (n, max_length) and
        (n, max_length + 1).

    Examples:
        >>> from seqkeras.data import copy_task
        >>> src, tgt = copy_task(2, 3, 3, reverse=True, seed=0)
        >>> bool((tgt[:, :3] == src[:, ::-1]).all()), tgt[:, 3].tolist()
        (True, [2, 2])
    """
    for arg, value in (("n", n), ("min_length", min_length), ("max_length", max_length)):
        validation.positive_int("copy_task", arg, value)
    validation.positive_int("copy_task", "num_symbols", num_symbols)
    seed = validation.seed("copy_task", "seed", seed)
    if n <= 0 or not 1 <= min_length <= max_length or num_symbols <= 0:
        raise ValueError(
            "`copy_task` needs n > 0, 1 <= min_length <= max_length and "
            f"num_symbols > 0. Received: n={n}, min_length={min_length}, "
            f"max_length={max_length}, num_symbols={num_symbols}"
        )
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_length, max_length + 1, size=n)
    symbols = rng.integers(FIRST_SYMBOL, FIRST_SYMBOL + num_symbols, size=(n, max_length))
    source = np.where(np.arange(max_length) < lengths[:, None], symbols, PAD)
    target = np.zeros((n, max_length + 1), "int32")
    for i, length in enumerate(lengths):
        row = source[i, :length]
        target[i, :length] = row[::-1] if reverse else row
        target[i, length] = EOS
    return source.astype("int32"), target


_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def _ordinal(day):
    if day in (11, 12, 13):
        return f"{day}th"
    return f"{day}" + {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _date_forms(d):
    """Surface forms of a `datetime.date`; each names day, month and year
    unambiguously (no 2-digit years, no d/m vs m/d numerals)."""
    month, short = _MONTHS[d.month - 1], _MONTHS[d.month - 1][:3]
    weekday = d.strftime("%A")
    day, year = d.day, d.year
    return [
        f"{_ordinal(day)} of {month} {year}",
        f"the {_ordinal(day)} of {month}, {year}",
        f"{month} {_ordinal(day)}, {year}",
        f"{month} {day}, {year}",
        f"{day} {month} {year}",
        f"{day} {short} {year}",
        f"{short} {day} {year}",
        f"{short}. {day}, {year}",
        f"{weekday}, {month} {day}, {year}",
        f"{weekday[:3]} {day} {short} {year}",
        f"{day:02d} {short.upper()} {year}",
        f"{month.lower()} {day} {year}",
        f"{day}-{short}-{year}",
        f"{year} {month} {day}",
    ]


def dates(n, seed=None, first_year=1950, last_year=2049):
    """Date normalisation: free-form dates to ISO 8601.

    "3rd of March 2021", "Wed 3 Mar 2021", "march 3 2021", ... ->
    "2021-03-03". Dates are uniform over `first_year .. last_year`, the
    surface form uniform over 14 forms (ordinals, full, short and upper-case
    month names, weekdays, several separators).

    Args:
        n: number of pairs.
        seed: NumPy seed.
        first_year, last_year: the year range.

    Returns:
        `(sources, targets)`: two lists of `n` strings.

    Examples:
        >>> from seqkeras.data import dates
        >>> src, tgt = dates(1, seed=3)
        >>> len(tgt[0]), tgt[0][4], tgt[0][7]
        (10, '-', '-')
    """
    import datetime

    n = validation.positive_int("dates", "n", n)
    first_year = validation.positive_int("dates", "first_year", first_year)
    last_year = validation.positive_int("dates", "last_year", last_year)
    seed = validation.seed("dates", "seed", seed)
    if first_year > last_year or last_year > 9999:
        raise ValueError(
            "`dates` needs 1 <= first_year <= last_year <= 9999. "
            f"Received: n={n}, first_year={first_year}, "
            f"last_year={last_year}"
        )
    rng = np.random.default_rng(seed)
    start = datetime.date(first_year, 1, 1).toordinal()
    stop = datetime.date(last_year, 12, 31).toordinal()
    days = rng.integers(start, stop + 1, size=n)
    forms = rng.integers(0, len(_date_forms(datetime.date(2000, 1, 1))), size=n)
    sources, targets = [], []
    for day, form in zip(days, forms):
        d = datetime.date.fromordinal(int(day))
        sources.append(_date_forms(d)[form])
        targets.append(d.isoformat())
    return sources, targets


def multi_seasonal_series(
    length, periods=(24, 168), amplitudes=(1.0, 0.5), trend=0.0005, noise=0.1, seed=None
):
    """A synthetic series with several seasonalities, e.g. hourly data with
    daily (24) and weekly (168) cycles, a linear trend and Gaussian noise:
    `sum_k a_k sin(2 pi t / p_k + phi_k) + trend * t + noise * e_t`.

    Args:
        length: number of steps.
        periods: the seasonal periods, in steps.
        amplitudes: one amplitude per period.
        trend: slope per step.
        noise: standard deviation of the noise.
        seed: NumPy seed (also draws the phases).

    Returns:
        float32 array (length,).

    Examples:
        >>> from seqkeras.data import multi_seasonal_series
        >>> multi_seasonal_series(500, seed=0).shape
        (500,)
    """
    name = "multi_seasonal_series"
    length = validation.positive_int(name, "length", length)
    trend = validation.finite_number(name, "trend", trend)
    noise = validation.finite_number(name, "noise", noise, low=0)
    seed = validation.seed(name, "seed", seed)
    if len(periods) != len(amplitudes) or not periods:
        raise ValueError(
            "`multi_seasonal_series` needs length > 0 and one amplitude per "
            f"period. Received: length={length}, periods={periods}, "
            f"amplitudes={amplitudes}"
        )
    if any(p <= 0 for p in periods):
        raise ValueError(f"`multi_seasonal_series` needs periods > 0. Received: periods={periods}")
    rng = np.random.default_rng(seed)
    t = np.arange(length, dtype="float64")
    series = trend * t + noise * rng.normal(size=length)
    for period, amplitude in zip(periods, amplitudes):
        phase = rng.uniform(0, 2 * np.pi)
        series += amplitude * np.sin(2 * np.pi * t / period + phase)
    return series.astype("float32")
