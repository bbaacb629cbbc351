"""Argument checks shared by every seqkeras layer.

Messages follow one shape (Keras core's): "`GRUCell` received an invalid
value for `units`: expected a positive integer. Received: units=0".
"""

import numbers


def _invalid(layer, arg, expected, value, error=ValueError):
    return error(
        f"`{layer}` received an invalid value for `{arg}`: expected "
        f"{expected}. Received: {arg}={value!r}"
    )


def positive_int(layer, arg, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _invalid(layer, arg, "a positive integer", value, TypeError)
    if value <= 0:
        raise _invalid(layer, arg, "a positive integer", value)
    return int(value)


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
