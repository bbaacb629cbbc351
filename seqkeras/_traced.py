"""The one cache of traced functions (and the models they call), kept on
the object they belong to.

`generate`'s compiled decoders, an encoder-decoder's encoder models and a
tokenizer's traced `encode` graphs are made once per owner (a model, a
tokenizer) and key (lengths, options) and reused. They live in the
owner's `__dict__` under one attribute, `_seqkeras_traced`, written
there directly, not through `setattr`:

- Keras and `tf.Module` track what `setattr` assigns: a cached
  `tf.function` would become part of the model's weights' structure and
  of every SavedModel the owner is written to, beside the signatures the
  caller asked for;
- the cache goes when its owner goes (a module-level weak dictionary
  would keep the owner alive through any function that refers to it).
"""

import collections

_ATTRIBUTE = "_seqkeras_traced"


def cached(owner, name, key, make, max_size=None):
    """The value cached on `owner` for `(name, key)`; `make()` the first
    time.

    Args:
        owner: the object the value belongs to (a model, a tokenizer).
        name: which cache (e.g. `"generate"`).
        key: a hashable key within it.
        make: zero-argument callable that makes the value.
        max_size: keep only the `max_size` most recently used values of
            this cache (None: all).

    Returns:
        The cached or new value.
    """
    caches = owner.__dict__.setdefault(_ATTRIBUTE, {})
    cache = caches.setdefault(name, collections.OrderedDict())
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    value = cache[key] = make()
    while max_size is not None and len(cache) > max_size:
        cache.popitem(last=False)
    return value


def entries(owner, name):
    """The values cached on `owner` under `name`, oldest first (a copy)."""
    return list(owner.__dict__.get(_ATTRIBUTE, {}).get(name, {}).values())
