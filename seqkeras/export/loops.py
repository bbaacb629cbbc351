"""The decoding runtimes of the export targets: TF Serving graphs run
their decoding loop through `tf.while_loop` whose state may change shape
between iterations (`SERVING`, a `seqkeras.decoding.Runtime` value the
export code passes to `generate`; nothing is registered).

In a graph traced for serving, attention caches grow by one position per
step (`layout="growing"`) and a finished row leaves the decoding state,
so the loop state's batch and time axes are not fixed. Every tensor's dimensions are relaxed
except the last of a tensor of rank >= 2 (features, head size, a
token buffer's width), which stay known to the step's layers.
"""

import tensorflow as tf

from seqkeras import decoding


def _relaxed(x):
    shape = x.shape
    if shape.rank is None or shape.rank == 0:
        return shape
    if shape.rank == 1:
        return tf.TensorShape([None])
    return tf.TensorShape([None] * (shape.rank - 1) + [shape[-1]])


def serving_while_loop(cond, body, loop_vars):
    """`tf.while_loop` over a tuple of nests, with relaxed shape
    invariants (see the module docstring); returns the final loop_vars."""
    loop_vars = tf.nest.map_structure(tf.convert_to_tensor, tuple(loop_vars))
    invariants = tf.nest.map_structure(_relaxed, loop_vars)

    def step(*state):  # lists or tuples in the body's nests: the state's layout
        return tf.nest.pack_sequence_as(loop_vars, tf.nest.flatten(tuple(body(*state))))

    return tf.while_loop(lambda *state: cond(*state), step, loop_vars, shape_invariants=invariants)


#: TF Serving: growing caches, token buffers written with standard scatter
#: ops, the loop above.
SERVING = decoding.Runtime("growing", "scatter", serving_while_loop)


def runtime_for(target):
    """The decoding runtime of an export target: `SERVING` for
    `"serving"`, the default (fixed caches, slice updates, Keras' loop)
    for `"tflite"` and `"xla"`."""
    return SERVING if target == "serving" else decoding.DEFAULT_RUNTIME
