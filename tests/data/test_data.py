import datetime

import numpy as np
import pytest

from seqkeras import data as D
from seqkeras.data.text import shared_data_dir


def test_dates_targets_match_their_sources():
    src, tgt = D.dates(3000, seed=0)
    months = [
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
    forms = set()
    for s, t in zip(src, tgt):
        d = datetime.date.fromisoformat(t)  # a valid ISO date
        low = s.lower()
        assert str(d.year) in s
        assert months[d.month - 1][:3].lower() in low
        assert str(d.day) in s
        if d.strftime("%A") in s or d.strftime("%a") + " " in s:
            assert d.strftime("%a") in s  # weekdays are the right ones
        forms.add("".join("9" if c.isdigit() else c for c in s).split(" ")[0][:3])
    assert len(forms) > 10  # many surface forms
    assert D.dates(5, seed=1) == D.dates(5, seed=1)


def test_copy_and_reverse():
    src, tgt = D.copy_task(50, 2, 9, num_symbols=5, seed=0)
    rsrc, rtgt = D.copy_task(50, 2, 9, num_symbols=5, reverse=True, seed=0)
    np.testing.assert_array_equal(src, rsrc)
    for s, t, r in zip(src, tgt, rtgt):
        n = int((s != 0).sum())
        assert 2 <= n <= 9 and np.all(s[:n] >= 4) and np.all(s[n:] == 0)
        np.testing.assert_array_equal(t[:n], s[:n])
        np.testing.assert_array_equal(r[:n], s[:n][::-1])
        assert t[n] == D.EOS and np.all(t[n + 1 :] == 0)


def test_teacher_forcing_aligns_with_targets():
    tgt = np.array([[5, 6, 2, 0], [7, 2, 0, 0]])
    dec = D.teacher_forcing(tgt)
    np.testing.assert_array_equal(dec, [[1, 5, 6, 0], [1, 7, 0, 0]])
    np.testing.assert_array_equal(dec != 0, (tgt != 0) & True)


def test_tbptt_windows_continue_each_lane():
    ids = np.arange(1000)
    x, y = D.tbptt_windows(ids, batch_size=4, window=7)
    np.testing.assert_array_equal(y, x + 1)
    for lane in range(4):
        rows = x[lane::4]  # batch k, row `lane`
        np.testing.assert_array_equal(rows[1:, 0], rows[:-1, -1] + 1)
    with pytest.raises(ValueError, match="too short"):
        D.tbptt_windows(np.arange(10), batch_size=4, window=7)


def test_forecast_windows_and_seasonal_series():
    series = D.multi_seasonal_series(
        2400, periods=(24, 120), amplitudes=(1.0, 0.5), trend=0.0, noise=0.0, seed=0
    )
    spectrum = np.abs(np.fft.rfft(series))
    peaks = set(np.argsort(spectrum)[-2:])
    assert peaks == {2400 // 24, 2400 // 120}
    x, y = D.forecast_windows(series, 48, 12, stride=4)
    np.testing.assert_array_equal(x[1, :, 0], series[4:52])
    np.testing.assert_array_equal(y[1, :, 0], series[52:64])


def test_char_vocabulary_round_trip():
    vocab = D.CharVocabulary.from_texts(["hello", "world"])
    ids = vocab.encode(["hold", "hi"], max_length=6, add_bos=True, add_eos=True)
    assert ids[0, 0] == D.BOS and ids[0, 5] == D.EOS
    assert vocab.decode(ids) == ["hold", "h?"]  # 'i' is unknown
    clone = D.CharVocabulary.from_config(vocab.get_config())
    assert clone.tokens == vocab.tokens
    with pytest.raises(ValueError, match="max_length=2"):
        vocab.encode(["hello"], max_length=2)


def test_tinyshakespeare_split():
    if shared_data_dir() is None:
        pytest.skip("../shared/data (tiny-shakespeare) is not present")
    train, val = D.read_tinyshakespeare()
    assert len(train) + len(val) == 1115394
    assert len(val) == 1115394 - int(0.9 * 1115394)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: D.copy_task(0, 1, 2), "copy_task"),
        (lambda: D.copy_task(5, 3, 2), "min_length <= max_length"),
        (lambda: D.dates(0), "dates"),
        (lambda: D.multi_seasonal_series(10, periods=(0,), amplitudes=(1,)), "periods > 0"),
        (lambda: D.forecast_windows(np.arange(5.0), 4, 3), "too short"),
        (lambda: D.teacher_forcing(np.arange(3)), "batch, time"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_language_model_windows_cover_every_target_once():
    from seqkeras.data import language_model_windows

    ids = np.arange(4, 15)  # 11 tokens: 10 targets
    x, y = language_model_windows(ids, block=4)
    assert x.shape == (3, 4) and x.dtype == np.int32
    targets = y[y != 0]
    np.testing.assert_array_equal(targets, ids[1:])  # each target once, in order
    np.testing.assert_array_equal(x[x != 0], ids[:-1])
    with pytest.raises(ValueError, match="language_model_windows"):
        language_model_windows([5], block=4)


def test_random_windows_are_shifted_slices_of_the_stream():
    from seqkeras.data import random_windows_dataset

    ids = np.arange(50) * 3
    x, y = next(iter(random_windows_dataset(ids, block=5, batch_size=16, seed=3)))
    x, y = x.numpy(), y.numpy()
    for row_x, row_y in zip(x, y):
        start = int(np.flatnonzero(ids == row_x[0])[0])
        np.testing.assert_array_equal(row_x, ids[start : start + 5])
        np.testing.assert_array_equal(row_y, ids[start + 1 : start + 6])
    with pytest.raises(ValueError, match="random_windows_dataset"):
        random_windows_dataset(np.arange(6), block=5, batch_size=2)


def test_length_batches_place_every_row_once_in_few_widths():
    from seqkeras.data import length_batches

    rng = np.random.default_rng(0)
    rows = [list(rng.integers(1, 50, n)) for n in rng.integers(1, 25, 23)]
    seen = []
    for indices, x in length_batches(rows, batch_size=5, max_width=24):
        longest = max(len(rows[i]) for i in indices)
        assert x.shape == (len(indices), min(24, max(8, -(-longest // 8) * 8)))
        for i, row in zip(indices, x):
            np.testing.assert_array_equal(row[: len(rows[i])], rows[i])
            assert np.all(row[len(rows[i]) :] == 0)
        seen += list(indices)
    assert sorted(seen) == list(range(23))  # every row once
    lengths = [len(rows[i]) for i in seen]
    assert lengths == sorted(lengths)  # shortest first: little padding
    with pytest.raises(ValueError, match="length_batches.*max_width=4"):
        next(length_batches(rows, batch_size=5, max_width=4))
    with pytest.raises(ValueError, match="length_batches.*batch_size"):
        next(length_batches(rows, batch_size=0))
    with pytest.raises(ValueError, match="random_windows_dataset.*block"):
        D.random_windows_dataset(np.arange(50), block=0, batch_size=2)
    with pytest.raises(TypeError, match="language_model_windows.*block"):
        D.language_model_windows(np.arange(50), block=2.5)
