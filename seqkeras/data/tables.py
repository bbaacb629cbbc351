"""Lookup tables made once, eagerly, without leaving TensorFlow a warning
for every later export."""

import tensorflow as tf


def static_table(keys, values, default_value):
    """A `tf.lookup.StaticHashTable` of `keys` -> `values`.

    Made eagerly, TensorFlow adds the table's initializer (None when eager)
    to the global graph's `table_initializer` collection; every later
    `tf.function` graph copies that collection, and freezing one for TFLite
    or ONNX (`export_meta_graph`) then logs "Issue encountered when
    serializing table_initializer ... 'NoneType' object has no attribute
    'name'". The None is removed here: an eager table needs no initializer
    op. (`tf.compat.v1`'s graph collections are the only API to that
    collection: tests/test_private_apis.py fails loudly if they go.)"""
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(keys, values), default_value=default_value
    )
    if tf.executing_eagerly():
        key = tf.compat.v1.GraphKeys.TABLE_INITIALIZERS
        collection = tf.compat.v1.get_default_graph().get_collection_ref(key)
        collection[:] = [op for op in collection if op is not None]
    return table
