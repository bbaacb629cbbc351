"""Token-id checks: on concrete arrays (`check_token_ids`, NumPy), in
`tf.data` pipelines (`check_token_dataset`) and in serving graphs
(`token_id_asserts`, `checked_inputs`). Models import them from here
(`seqkeras.models.SequenceModel` checks its inputs with them); nothing
here imports a model.

Under XLA an out-of-range id is not an error (the gather clamps it or
reads zeros), and XLA drops `Assert` ops, so the check must run outside
the compiled step: in the input pipeline (`tf.data` runs its map
functions in its own runtime, where asserts hold) and in the exported
serving signatures (plain TensorFlow graphs, no XLA).
"""

import numpy as np
import tensorflow as tf

from seqkeras.layers import validation

#: Marks our messages inside errors raised by input pipelines, so that
#: `fit`/`evaluate`/`predict` can re-raise them as a plain ValueError.
MARKER = "seqkeras token-id check: "


def check_token_ids(where, name, ids, vocab_size):
    """Raises a clear error unless `ids` are integer token ids in
    `[0, vocab_size)`. Symbolic tensors pass unchecked.

    Args:
        where: the function or layer named in the message.
        name: the input's name.
        ids: an array-like of token ids.
        vocab_size: the input's vocabulary size.

    Raises:
        TypeError: strings, booleans, or non-integer values.
        ValueError: ids below 0 or at least `vocab_size`.

    Examples:
        >>> from seqkeras.data import check_token_ids
        >>> check_token_ids("predict", "token_ids", [[1, 2, 0]], 10)
        >>> try:
        ...     check_token_ids("predict", "token_ids", [[1, 25]], 10)
        ... except ValueError as e:
        ...     print(str(e)[:60])
        `predict`: input `token_ids` has token id 25, outside [0, 10
    """
    validation.positive_int("check_token_ids", "vocab_size", vocab_size)
    array = validation.concrete_values(ids)
    if array is None:
        return
    kind = array.dtype.kind
    if kind in "USO":
        raise TypeError(
            f"`{where}`: input `{name}` must hold integer token ids; "
            f"received {array.dtype} values (e.g. {array.flat[0]!r}). "
            "Encode text to ids first (e.g. with the model's vocabulary) "
            "or export with a raw-string signature."
        )
    if kind == "b" or kind == "c":
        raise TypeError(
            f"`{where}`: input `{name}` must hold integer token ids. Received dtype {array.dtype}."
        )
    if array.size == 0:
        return
    if kind == "f":
        finite = np.isfinite(array)
        integral = finite & (np.floor(array) == array)
        if not integral.all():
            bad = array[~integral].flat[0]
            raise TypeError(
                f"`{where}`: input `{name}` must hold integer token ids. "
                f"Received the non-integer value {bad!r} "
                f"(dtype {array.dtype})."
            )
    low, high = array.min(), array.max()
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(
            f"`{where}`: input `{name}` has token id {int(bad)}, outside "
            f"[0, {vocab_size}) (the vocabulary size is {vocab_size}; "
            "0 is padding)."
        )


def token_id_asserts(where, name, ids, vocab_size):
    """`ids` passed through TensorFlow asserts that fail (InvalidArgument,
    with a message naming `where`, the input, the vocabulary size and the
    offending value) unless every id is an integer in [0, vocab_size)."""
    if ids.dtype == tf.string or ids.dtype == tf.bool:
        raise TypeError(
            f"`{where}`: input `{name}` must hold integer token ids. "
            f"Received dtype {ids.dtype.name}."
        )
    checks = []
    if ids.dtype.is_floating:
        checks.append(
            tf.debugging.Assert(
                tf.reduce_all(tf.equal(tf.floor(ids), ids)),
                [
                    f"{MARKER}`{where}`: input `{name}` must hold integer token "
                    "ids. Received non-integer values, e.g.",
                    tf.boolean_mask(ids, tf.not_equal(tf.floor(ids), ids))[:1],
                ],
                name="token_ids_integral",
            )
        )
    low = tf.reduce_min(tf.concat([tf.reshape(ids, [-1]), tf.zeros([1], ids.dtype)], 0))
    high = tf.reduce_max(tf.concat([tf.reshape(ids, [-1]), tf.zeros([1], ids.dtype)], 0))
    bad = tf.where(low < 0, low, high)
    checks.append(
        tf.debugging.Assert(
            tf.logical_and(low >= 0, high < vocab_size),
            [
                f"{MARKER}`{where}`: input `{name}` has a token id outside "
                f"[0, {vocab_size}) (the vocabulary size is {vocab_size}; 0 is "
                "padding). Offending id:",
                bad,
            ],
            summarize=1,
            name="token_ids_in_range",
        )
    )
    with tf.control_dependencies(checks):
        return tf.identity(ids)


def checked_inputs(model, inputs, where, feeds=None):
    """`inputs` (a dict by name) with the token-id inputs of `model` (its
    `vocabulary_sizes`) passed through `token_id_asserts`; `feeds` maps an
    input name to the model input it feeds when they differ (e.g. a
    signature's `prompt_ids` feeds `token_ids`)."""
    sizes = getattr(model, "vocabulary_sizes", {})
    feeds = feeds or {}
    return {
        key: token_id_asserts(where, key, value, sizes[feeds.get(key, key)])
        if feeds.get(key, key) in sizes
        else value
        for key, value in inputs.items()
    }


def check_token_dataset(dataset, model, where="fit"):
    """`dataset` with a map that checks the token-id inputs of `model`
    (a `SequenceModel`) in each element: `(x, y[, w])` tuples or `x`
    alone, `x` a dict by input name, a list in input order or the one
    input.

    Args:
        dataset: a `tf.data.Dataset`.
        model: a built `SequenceModel` (its vocabulary sizes by input).
        where: the call named in the checks' messages (e.g. `"fit"`).

    Returns:
        The mapped dataset: an element with an id outside a vocabulary
        raises InvalidArgument naming `where` and the input.

    Raises:
        TypeError: a `dataset` that is not a `tf.data.Dataset`, or a
            `model` without inputs.
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(
            "`check_token_dataset` expects `dataset` to be a `tf.data.Dataset`. Received: "
            f"{type(dataset).__name__}"
        )
    try:
        inputs = model.inputs
    except AttributeError:
        inputs = None
    if not inputs:
        raise TypeError(
            "`check_token_dataset` expects `model` to be a built `SequenceModel` (with "
            f"`inputs`). Received: {type(model).__name__}"
        )
    names = [t.name for t in inputs]

    def check_x(x):
        if isinstance(x, dict):
            return checked_inputs(model, x, where)
        if isinstance(x, (list, tuple)):
            checked = checked_inputs(model, dict(zip(names, x)), where)
            return type(x)(checked[name] for name in names[: len(x)])
        return checked_inputs(model, {names[0]: x}, where)[names[0]]

    spec = dataset.element_spec
    if (
        isinstance(spec, tuple)
        and len(spec) in (2, 3)
        and not (len(names) > 1 and not isinstance(spec[0], (dict, tuple)))
    ):
        return dataset.map(lambda x, *rest: (check_x(x),) + tuple(rest))
    return dataset.map(check_x)
