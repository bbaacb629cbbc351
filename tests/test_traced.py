"""`seqkeras._traced`, the one cache of traced functions: per owner and
key, bounded where asked, invisible to Keras' and tf.Module's tracking,
and gone with its owner."""

import gc
import weakref

import keras
import numpy as np
import tensorflow as tf

from seqkeras import _traced


def test_values_are_made_once_per_key_and_the_oldest_evicted():
    class Owner:
        pass

    owner, made = Owner(), []

    def make(key):
        made.append(key)
        return key * 10

    assert [_traced.cached(owner, "a", k, lambda k=k: make(k), max_size=2) for k in (1, 2, 1)] == [
        10,
        20,
        10,
    ]
    assert made == [1, 2]
    _traced.cached(owner, "a", 3, lambda: make(3), max_size=2)  # evicts 2, the least recent
    assert _traced.entries(owner, "a") == [10, 30]
    assert _traced.cached(owner, "b", 1, lambda: "other") == "other"  # caches are apart
    assert _traced.entries(owner, "missing") == []


def test_a_cached_function_is_not_tracked_and_goes_with_its_owner(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    weights = len(model.weights)
    fn = _traced.cached(model, "f", 0, lambda m=model: tf.function(m.__call__))
    np.testing.assert_allclose(fn(np.ones((1, 3), "float32")), model(np.ones((1, 3), "float32")))
    assert len(model.weights) == weights
    module = tf.Module()
    module.v = tf.Variable(1.0)
    _traced.cached(module, "f", 0, lambda: tf.function(lambda: module.v * 2))
    tf.saved_model.save(module, str(tmp_path / "m"))
    assert not hasattr(tf.saved_model.load(str(tmp_path / "m")), "_seqkeras_traced")
    ref = weakref.ref(model)
    del model, fn
    gc.collect()
    assert ref() is None  # the function refers to the model: a cycle, collected
