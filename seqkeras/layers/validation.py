"""Argument checks shared by every seqkeras layer.

Messages follow one shape (Keras core's): "`GRUCell` received an invalid
value for `units`: expected a positive integer. Received: units=0".
"""

import numbers
import os
import warnings

import keras
import numpy as np


def _invalid(layer, arg, expected, value, error=ValueError):
    return error(
        f"`{layer}` received an invalid value for `{arg}`: expected "
        f"{expected}. Received: {arg}={value!r}"
    )


def is_integer(value):
    """A Python or NumPy integer (not a bool)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_finite_number(value):
    """A finite Python or NumPy real number (not a bool, NaN or inf)."""
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, (bool, np.bool_))
        and bool(np.isfinite(value))
    )


def positive_int(layer, arg, value):
    if not is_integer(value):
        raise _invalid(layer, arg, "a positive integer", value, TypeError)
    if value <= 0:
        raise _invalid(layer, arg, "a positive integer", value)
    return int(value)


def int_list(layer, arg, values, low=1, high=None):
    """`values` (a non-empty list, tuple or 1-D array of integers, each in
    [`low`, `high`]; `high` None: no upper bound) as a list of ints;
    otherwise a TypeError (not a list of integers) or ValueError (out of
    range) naming `layer` and `arg`."""
    expected = f"a non-empty list of integers in [{low}, {'inf' if high is None else high}]"
    if isinstance(values, np.ndarray) and values.ndim == 1:
        values = values.tolist()
    if not isinstance(values, (list, tuple)) or not values:
        raise _invalid(layer, arg, expected, values, TypeError)
    if not all(is_integer(v) for v in values):
        raise _invalid(layer, arg, expected, values, TypeError)
    if any(v < low or (high is not None and v > high) for v in values):
        raise _invalid(layer, arg, expected, values)
    return [int(v) for v in values]


def seed(layer, arg, value):
    """A random seed: None or an integer >= 0 (NumPy's `default_rng`
    takes no other); a TypeError or ValueError naming `layer` and `arg`."""
    if value is None:
        return None
    return non_negative_int(layer, arg, value)


def finite_number(layer, arg, value, low=None):
    """A finite Python or NumPy number (not a bool, NaN or inf), at least
    `low` when given, as a float; a TypeError or ValueError naming
    `layer` and `arg`."""
    expected = "a finite number" + ("" if low is None else f" >= {low}")
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        raise _invalid(layer, arg, expected, value, TypeError)
    if not is_finite_number(value) or (low is not None and value < low):
        raise _invalid(layer, arg, expected, value)
    return float(value)


def non_negative_int(layer, arg, value):
    if not is_integer(value):
        raise _invalid(layer, arg, "an integer >= 0", value, TypeError)
    if value < 0:
        raise _invalid(layer, arg, "an integer >= 0", value)
    return int(value)


def position(layer, arg, value):
    """A position argument (e.g. `start_index`): a Python or NumPy integer
    >= 0, or an integer tensor (a traced decoding index); raises a
    TypeError naming `layer` and `arg` for anything else (a string, a
    float, a bool)."""
    if is_integer(value):
        return non_negative_int(layer, arg, value)
    if "int" not in str(getattr(value, "dtype", "")):  # a str, float or bool has no int dtype
        raise _invalid(layer, arg, "an integer >= 0 (or an integer tensor)", value, TypeError)
    return value


def path(layer, arg, value, described="a path"):
    """`value` as a str (`os.fspath`): a TypeError naming `layer` and
    `arg` unless it is a str or os.PathLike (bytes and bools refused), a
    ValueError when it is empty. `described`: what the path names, e.g.
    "a SavedModel directory"."""
    if isinstance(value, (bytes, bool)) or not isinstance(value, (str, os.PathLike)):
        raise _invalid(layer, arg, f"{described} (a str or os.PathLike)", value, TypeError)
    if not os.fspath(value):
        raise _invalid(layer, arg, f"{described} (a non-empty path)", value)
    return os.fspath(value)


def rate(layer, arg, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _invalid(layer, arg, "a float in [0, 1)", value, TypeError)
    if not 0.0 <= value < 1.0:
        raise _invalid(layer, arg, "a float in [0, 1)", value)
    return float(value)


def greater_than(layer, arg, value, bound):
    """A real number strictly greater than `bound`, returned as float."""
    expected = f"a number > {bound}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _invalid(layer, arg, expected, value, TypeError)
    if not value > bound:
        raise _invalid(layer, arg, expected, value)
    return float(value)


def choice(layer, arg, value, options):
    if value not in options:
        names = ", ".join(repr(o) for o in options)
        raise _invalid(layer, arg, f"one of {names}", value)
    return value


def boolean(layer, arg, value):
    if not isinstance(value, bool):
        raise _invalid(layer, arg, "a bool", value, TypeError)
    return value


# ---- call-time checks (static shapes only: free, also when traced) ----


#: What a renamed argument's old name means when it is not given.
UNSET = object()


def renamed(where, new, value, old, old_value, default=None, stacklevel=3):
    """The value of argument `new` when its old name `old` may be given
    instead: `old_value` (with a DeprecationWarning naming `where`) when
    it is not `UNSET`, else `value` (`default` when that is `UNSET`). Both
    given (`value` neither `UNSET` nor `default`): a ValueError.

    The old names keep working for one release (CHANGELOG, "one name per
    concept")."""
    if old_value is UNSET:
        return default if value is UNSET else value
    if value is not UNSET and value is not default and value != default:
        raise ValueError(
            f"`{where}` received both `{new}` and its old name `{old}`; pass `{new}` only"
        )
    warnings.warn(
        f"`{where}`: `{old}` is deprecated; pass `{new}`. The old name goes in the next release.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return old_value


def static_shape(x):
    """The static shape of `x` (a tensor, array or nested list) as a tuple
    of ints and None (unknown)."""
    shape = getattr(x, "shape", None)
    if shape is None:
        shape = np.shape(x)
    return tuple(None if d is None else int(d) for d in shape)


def numeric(layer, arg, x):
    """Raises a TypeError naming `layer` and `arg` for string or other
    non-numeric tensors (before a backend cast fails obscurely), and for
    a plain string or bytes."""
    if isinstance(x, (str, bytes)):
        raise TypeError(
            f"`{layer}` expects numeric `{arg}`. Received: {arg}={x!r:.40}; encode text to ids "
            "(and embed them) first"
        )
    dtype = str(getattr(x, "dtype", ""))  # "string" (TF), "<U3", "|S3"
    if "str" in dtype or dtype == "object" or dtype.startswith(("<U", "|S")):
        raise TypeError(
            f"`{layer}` expects numeric `{arg}`. Received: {arg} with dtype "
            f"{dtype}; encode text to ids (and embed them) first"
        )


def floating(layer, arg, x):
    """Raises a TypeError naming `layer` and `arg` unless `x` is a float
    tensor (features, not ids: an integer query would attend in integer
    arithmetic and return integers)."""
    numeric(layer, arg, x)
    dtype = keras.backend.standardize_dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)
    if not keras.backend.is_float_dtype(dtype):
        raise TypeError(
            f"`{layer}` expects float `{arg}` (features; embed ids first). Received: "
            f"{arg} with dtype {dtype}"
        )


def numeric_arguments(layer, names, args, kwargs):
    """`numeric` on a layer's call arguments before `Layer.__call__`
    converts them to backend tensors (on JAX, converting a string array
    fails first, with a bare NumPy error): the positional `args` and the
    `kwargs` named in `names` (the call's argument names, in order)."""
    given = dict(zip(names, args))
    given.update({k: v for k, v in kwargs.items() if k in names})
    for arg, x in given.items():
        if isinstance(x, np.ndarray):
            numeric(layer, arg, x)


def concrete_values(x):
    """`x` as a NumPy array, or None when it is symbolic or traced (a
    Keras tensor, a tf.function or JAX trace), whose values cannot be
    checked."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (list, tuple, int, float, np.generic)):
        try:
            return np.asarray(x)
        except (ValueError, TypeError):
            return None
    if isinstance(x, keras.KerasTensor):
        return None
    try:
        return np.asarray(keras.ops.convert_to_numpy(x))
    except Exception:  # a graph or traced tensor: no values to check
        return None


def ids_in_range(layer, arg, x, size=None):
    """Raises a ValueError naming `layer` and `arg` when concrete `x` has
    an id outside [0, size) (`size` None: a negative id; symbolic or
    traced `x` pass unchecked)."""
    values = concrete_values(x)
    if values is None or not values.size:
        return
    low, high = int(values.min()), int(values.max())
    if size is None and low < 0:
        raise ValueError(f"`{layer}` received `{arg}` with the id {low}; token ids are >= 0")
    if size is not None and (low < 0 or high >= size):
        bad = low if low < 0 else high
        raise ValueError(
            f"`{layer}` received `{arg}` with the id {bad}, outside "
            f"[0, {size}); `{arg}` holds ids from 0 to {size - 1}"
        )


def features(layer, arg, x, expected):
    """Raises when the last dimension of `x` is known and differs from the
    size the layer was built for."""
    shape = static_shape(x)
    if expected is not None and shape and shape[-1] is not None and (shape[-1] != expected):
        raise ValueError(
            f"`{layer}` was built for `{arg}` with {expected} features. "
            f"Received: {arg}.shape={shape}"
        )


def same_dims(layer, arg, x, expected, described):
    """Raises unless `x` has rank `len(expected)` and agrees with
    `expected` wherever both dimensions are known."""
    if x is None:
        return
    shape = static_shape(x)
    if len(shape) != len(expected) or any(
        a is not None and b is not None and a != b for a, b in zip(shape, expected)
    ):
        raise ValueError(
            f"`{layer}` received an invalid `{arg}`: expected shape "
            f"{described} = {tuple(expected)}. Received: {arg}.shape={shape}"
        )


def whole_numbers(layer, arg, x):
    """Raises a TypeError naming `layer` and `arg` when concrete float `x`
    holds a value that is no whole number (ids given as floats must hold
    integers, as Keras' `Embedding` accepts them); symbolic or traced `x`
    pass unchecked."""
    if "float" not in str(getattr(x, "dtype", "")):
        return
    values = concrete_values(x)
    if values is None or not values.size:
        return
    values = values.astype("float64")
    bad = values[~np.isfinite(values) | (values != np.round(values))]
    if bad.size:
        raise TypeError(
            f"`{layer}` expects integer ids in `{arg}`. Received: {arg} with the value "
            f"{bad.flat[0]!r} ({x.dtype})"
        )
