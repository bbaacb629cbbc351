"""What a served signature refuses at request time: the checks TF Serving
runs in the graph before the model sees a request, because the values
arrive only then. Each raises InvalidArgument (an `Assert` op) whose
message names the signature, the input, the limit and what was received;
never an answer computed on positions the model never learned, on an
empty text, or on a batch above the one configured.

- `position_limit(model)`: the most positions the model computes (its
  learned positions, a decoder's context length), or None.
- `at_most(where, name, x, limit, axis, what)`: `x` whose `axis` has at
  most `limit` entries.
- `at_least_one(where, name, x, axis)`: `x` has at least one step.
- `no_empty(where, name, x, lengths)`: every row's length is positive.
- `within_positions(model, inputs, where)`: a model's token-id inputs no
  longer than its positions.
- `bounded_batch(where, function, limit)`: a signature function that
  refuses batches of more than `limit` rows.

`tf.debugging.Assert` runs in TF Serving's graph runtime (not under XLA,
which drops asserts: the decoding loops compiled with `jit_compile` are
separate functions these checks run before). TFLite has no Assert op, so
the signatures add none in a TFLite-bound graph (`check=False`).
"""

import tensorflow as tf


def position_limit(model):
    """The most positions `model` computes, or None for no limit: the
    smallest `max_length` of its learned position embeddings (in nested
    models too) and its `max_generation_length` (a decoder's context
    length)."""
    import keras

    from seqkeras.layers.embedding import BertEmbedding
    from seqkeras.layers.positional import PositionalEmbedding

    limits = []
    declared = getattr(model, "max_generation_length", None)
    if declared:
        limits.append(int(declared))

    def visit(layers):
        for layer in layers:
            if isinstance(layer, (PositionalEmbedding, BertEmbedding)):
                limits.append(int(layer.max_length))
            elif isinstance(layer, keras.Model):
                visit(layer.layers)

    visit(model.layers)
    return min(limits) if limits else None


def _checked(x, condition, message, name):
    check = tf.debugging.Assert(condition, message, summarize=1, name=name)
    with tf.control_dependencies([check]):
        return tf.identity(x)


def at_most(where, name, x, limit, axis=1, what="positions"):
    """`x` passed through an assert that its `axis` has at most `limit`
    entries (e.g. the time axis of token ids and the model's learned
    positions)."""
    size = tf.shape(x)[axis]
    return _checked(
        x,
        size <= limit,
        [
            f"`{where}`: input `{name}` is longer than the model computes: at most "
            f"{limit} {what}. Received a length of",
            size,
        ],
        "request_within_limit",
    )


def at_least_one(where, name, x, axis=1, what="token"):
    """`x` passed through an assert that its `axis` is not empty."""
    size = tf.shape(x)[axis]
    return _checked(
        x,
        size > 0,
        [f"`{where}`: input `{name}` needs at least one {what}. Received a length of", size],
        "request_not_empty",
    )


def within_positions(model, inputs, where, limit):
    """`inputs` (a dict by name) with `model`'s token-id inputs (its
    `vocabulary_sizes`) of rank 2 or more passed through `at_most(limit)`
    on their time axis; unchanged when `limit` is None."""
    if limit is None:
        return inputs
    sizes = getattr(model, "vocabulary_sizes", {})
    return {
        key: at_most(where, key, value, limit)
        if key in sizes and value.shape.rank and value.shape.rank >= 2
        else value
        for key, value in inputs.items()
    }


def no_empty(where, name, x, lengths):
    """`x` passed through an assert that every row's `lengths` entry
    (its tokens or words) is positive: an empty text has nothing for the
    model to compute on."""
    empty = tf.where(tf.equal(lengths, 0))[:, 0]
    return _checked(
        x,
        tf.equal(tf.size(empty), 0),
        [
            f"`{where}`: input `{name}` has an empty text (it encodes to no tokens), "
            "which the model cannot answer. Row:",
            tf.concat([empty, tf.constant([-1], tf.int64)], 0)[0],
        ],
        "request_not_empty",
    )


def prompt_lengths(where, lengths, ids):
    """`lengths` passed through an assert that it has one entry per row of
    `ids` (right-padded prompts), each in [1, width]."""
    rows, width = tf.shape(ids)[0], tf.shape(ids)[1]
    ok = tf.logical_and(
        tf.equal(tf.size(lengths), rows),
        tf.reduce_all(tf.logical_and(lengths >= 1, lengths <= width)),
    )
    return _checked(
        lengths,
        ok,
        [
            f"`{where}`: input `prompt_lengths` needs one length in [1, prompt width] per "
            "prompt row. Received lengths",
            lengths,
            "for prompts of shape",
            tf.shape(ids),
        ],
        "request_prompt_lengths",
    )


def bounded_batch(where, function, limit):
    """A `tf.function` with `function`'s input signature that refuses a
    request with more than `limit` rows in any input, then calls
    `function`."""
    signature = function.input_signature
    specs = tf.nest.flatten(signature)

    @tf.function(autograph=False, input_signature=signature)
    def bounded(*args):
        checked = [
            _checked(
                value,
                tf.shape(value)[0] <= limit,
                [
                    f"`{where}`: input `{spec.name}` has more rows than the batch limit: at "
                    f"most max_batch_size={limit}. Received a batch of",
                    tf.shape(value)[0],
                ],
                "request_batch_limit",
            )
            if spec.shape.rank
            else value
            for spec, value in zip(specs, tf.nest.flatten(args))
        ]
        return function(*tf.nest.pack_sequence_as(args, checked))

    return bounded


__all__ = [
    "at_least_one",
    "at_most",
    "bounded_batch",
    "no_empty",
    "position_limit",
    "within_positions",
]
