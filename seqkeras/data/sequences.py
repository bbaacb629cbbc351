"""Array helpers that turn sequences into training pairs: teacher forcing,
truncated-BPTT windows, forecasting windows."""

import numpy as np

from seqkeras.data.tokens import BOS, EOS, PAD
from seqkeras.layers import validation


def teacher_forcing(targets, bos_id=BOS, eos_id=EOS, pad_id=PAD):
    """Decoder inputs for teacher forcing: the targets shifted right by one
    behind a BOS token.

    `targets` end with EOS then padding; the decoder input at step t is the
    true token t-1 (BOS at t=0), and the EOS that would be fed after the
    last step becomes padding, so input and target are non-padding at
    exactly the same positions (one mask serves both).

    Args:
        targets: int array (batch, time), right-padded with `pad_id`.
        bos_id: the first input of every row.
        eos_id: the end token, fed as padding when it is the last target.
        pad_id: the padding id.

    Returns:
        int32 array (batch, time).

    Examples:
        >>> import numpy as np
        >>> from seqkeras.data import teacher_forcing
        >>> teacher_forcing(np.array([[5, 6, 2, 0]])).tolist()
        [[1, 5, 6, 0]]
    """
    targets = np.asarray(targets)
    validation.numeric("teacher_forcing", "targets", targets)
    validation.whole_numbers("teacher_forcing", "targets", targets)
    if targets.ndim != 2:
        raise ValueError(
            "`teacher_forcing` expects `targets` of shape "
            f"(batch, time). Received: shape={targets.shape}"
        )
    validation.ids_in_range("teacher_forcing", "targets", targets)
    for arg, value in (("bos_id", bos_id), ("eos_id", eos_id), ("pad_id", pad_id)):
        validation.non_negative_int("teacher_forcing", arg, value)
    inputs = np.full(targets.shape, pad_id, "int32")
    inputs[:, 0] = bos_id
    inputs[:, 1:] = targets[:, :-1]
    inputs[:, 1:][targets[:, :-1] == eos_id] = pad_id
    inputs[targets == pad_id] = pad_id
    return inputs


def tbptt_windows(ids, batch_size, window):
    """Cuts one long token stream into windows for truncated BPTT.

    The stream is split into `batch_size` contiguous lanes; window k of
    lane i continues window k-1 of lane i. Rows are ordered so that
    `fit(x, y, batch_size=batch_size, shuffle=False)` feeds batch k = window
    k of every lane, which is what a stateful recurrent model needs to
    carry its state from one batch to the next.

    Args:
        ids: 1-D int array, the corpus.
        batch_size: number of lanes (the model's fixed batch size).
        window: steps per window (the truncation length).

    Returns:
        `(x, y)`: int32 arrays (num_windows * batch_size, window), y being x
        shifted by one token.

    Examples:
        >>> import numpy as np
        >>> from seqkeras.data import tbptt_windows
        >>> x, y = tbptt_windows(np.arange(13), batch_size=2, window=3)
        >>> x.tolist()
        [[0, 1, 2], [6, 7, 8], [3, 4, 5], [9, 10, 11]]
    """
    ids = np.asarray(ids)
    batch_size = validation.positive_int("tbptt_windows", "batch_size", batch_size)
    window = validation.positive_int("tbptt_windows", "window", window)
    validation.numeric("tbptt_windows", "ids", ids)
    validation.whole_numbers("tbptt_windows", "ids", ids)
    if ids.ndim != 1:
        raise ValueError(
            "`tbptt_windows` expects `ids` of shape (tokens,): one token stream. "
            f"Received: ids.shape={ids.shape}"
        )
    lane = (len(ids) - 1) // batch_size
    num_windows = lane // window
    if num_windows == 0:
        raise ValueError(
            f"`tbptt_windows`: a corpus of {len(ids)} tokens is too short "
            f"for batch_size={batch_size} and window={window}"
        )
    used = num_windows * window
    lanes_x = np.stack([ids[i * lane : i * lane + used] for i in range(batch_size)])
    lanes_y = np.stack([ids[i * lane + 1 : i * lane + used + 1] for i in range(batch_size)])

    def order(lanes):  # (batch, windows, window) -> (windows * batch, window)
        w = lanes.reshape(batch_size, num_windows, window)
        return w.transpose(1, 0, 2).reshape(-1, window).astype("int32")

    return order(lanes_x), order(lanes_y)


def length_batches(rows, batch_size, max_width=None, fill=PAD, dtype="int32"):
    """Batches for inference over sequences of different lengths: `rows`
    (lists of ids, or of strings with `fill=""`, `dtype=object`) sorted by
    length (stable), `batch_size` at a time, each batch right-padded with
    `fill` to a multiple of 8 (at least 8, at most `max_width`): few padded
    shapes, so few compiled programs, and little padding. A row longer
    than `max_width` is a ValueError (cut the rows first).

    Args:
        rows: lists of ids (or strings).
        batch_size: rows per batch, a positive int.
        max_width: the widest batch (None: no bound).
        fill: the padding value.
        dtype: the arrays' dtype.

    Yields:
        `(indices, x)`: the rows' positions in `rows`, and their padded
        array (len(indices), width).

    Examples:
        >>> from seqkeras.data import length_batches
        >>> for indices, x in length_batches([[5] * 10, [6], [7, 8]], batch_size=2):
        ...     print(indices.tolist(), x.shape)
        [1, 2] (2, 8)
        [0] (1, 16)
    """
    batch_size = validation.positive_int("length_batches", "batch_size", batch_size)
    if max_width is not None:
        max_width = validation.positive_int("length_batches", "max_width", max_width)
    try:
        lengths = [len(r) for r in rows]
    except TypeError:
        raise TypeError(
            "`length_batches` expects `rows` as a list of sequences (lists of ids). "
            f"Received: {str(rows)[:80]}"
        ) from None
    if max_width is not None and lengths and max(lengths) > max_width:
        raise ValueError(
            f"`length_batches`: row {int(np.argmax(lengths))} has {max(lengths)} items, more "
            f"than max_width={max_width}; cut the rows first"
        )
    # a generator of its own, so that the checks above raise at the call,
    # not at the first `next`
    return _length_batches(rows, lengths, batch_size, max_width, fill, dtype)


def _length_batches(rows, lengths, batch_size, max_width, fill, dtype):
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(rows), batch_size):
        chunk = order[start : start + batch_size]
        width = max(8, -(-max(lengths[i] for i in chunk) // 8) * 8)
        width = width if max_width is None else min(max_width, width)
        x = np.full((len(chunk), width), fill, dtype)
        for j, i in enumerate(chunk):
            x[j, : lengths[i]] = rows[i]
        yield chunk, x


def language_model_windows(ids, block):
    """Consecutive `(inputs, targets)` windows of `block` tokens over one
    token stream, for scoring a language model on a whole text: every
    token after the first is a target exactly once; the last window is
    right-padded with PAD (0), which the masked losses skip.

    Args:
        ids: 1-D int array, at least 2 tokens.
        block: tokens per window (the model's context).

    Returns:
        `(x, y)`: int32 arrays (windows, block), `y` being `x` shifted by
        one token.

    Examples:
        >>> from seqkeras.data import language_model_windows
        >>> x, y = language_model_windows([5, 6, 7, 8, 9, 10], block=3)
        >>> x.tolist(), y.tolist()
        ([[5, 6, 7], [8, 9, 0]], [[6, 7, 8], [9, 10, 0]])
    """
    block = validation.positive_int("language_model_windows", "block", block)
    ids = np.asarray(ids)
    if ids.ndim != 1 or len(ids) < 2:
        raise ValueError(
            "`language_model_windows` needs 1-D `ids` of at least 2 tokens. "
            f"Received: ids.shape={ids.shape}"
        )
    if ids.dtype.kind not in "iu":
        raise TypeError(
            f"`language_model_windows` expects integer token `ids`. Received: dtype {ids.dtype}"
        )
    n = len(ids) - 1
    rows = -(-n // block)
    x = np.zeros((rows, block), "int32")
    y = np.zeros((rows, block), "int32")
    for r in range(rows):
        a, b = r * block, min((r + 1) * block, n)
        x[r, : b - a] = ids[a:b]
        y[r, : b - a] = ids[a + 1 : b + 1]
    return x, y


def forecast_windows(series, input_steps, horizon, stride=1):
    """Sliding windows for multi-step forecasting.

    Args:
        series: array (time,) or (time, features).
        input_steps: steps the model sees.
        horizon: steps it predicts.
        stride: steps between window starts.

    Returns:
        `(x, y)`: float32 arrays (n, input_steps, features) and
        (n, horizon, features).

    Examples:
        >>> import numpy as np
        >>> from seqkeras.data import forecast_windows
        >>> x, y = forecast_windows(np.arange(10.0), 4, 2)
        >>> x.shape, y.shape, y[0, :, 0].tolist()
        ((5, 4, 1), (5, 2, 1), [4.0, 5.0])
    """
    name = "forecast_windows"
    validation.numeric(name, "series", np.asarray(series))
    series = np.asarray(series, "float32")
    if series.ndim not in (1, 2):
        raise ValueError(
            f"`{name}` expects `series` of shape (time,) or (time, features). "
            f"Received: series.shape={series.shape}"
        )
    if series.ndim == 1:
        series = series[:, None]
    input_steps = validation.positive_int(name, "input_steps", input_steps)
    horizon = validation.positive_int(name, "horizon", horizon)
    stride = validation.positive_int(name, "stride", stride)
    n = (len(series) - input_steps - horizon) // stride + 1
    if n <= 0:
        raise ValueError(
            f"`forecast_windows`: a series of {len(series)} steps is too "
            f"short for input_steps={input_steps} and horizon={horizon}"
        )
    starts = np.arange(n) * stride
    x = np.stack([series[s : s + input_steps] for s in starts])
    y = np.stack([series[s + input_steps : s + input_steps + horizon] for s in starts])
    return x, y
