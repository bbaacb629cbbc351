"""Synthetic sequence tasks, generated locally (nothing is downloaded)."""

import numpy as np


def adding_problem(n, steps, seed=None):
    """The adding problem (Hochreiter & Schmidhuber 1997).

    Each sequence has `steps` steps of two features: a value drawn from
    U(0, 1) and a marker that is 1 at exactly two steps, one in each half of
    the sequence. The target is the sum of the two marked values. Predicting
    the mean gives a mean squared error of about 1/6; solving the task needs
    memory across the whole sequence.

    Args:
        n: number of sequences.
        steps: sequence length, at least 2.
        seed: NumPy seed.

    Returns:
        `(x, y)`: float32 arrays of shapes (n, steps, 2) and (n, 1).
    """
    if n <= 0 or steps < 2:
        raise ValueError(
            "`adding_problem` needs n > 0 and steps >= 2. Received: "
            f"n={n}, steps={steps}"
        )
    rng = np.random.default_rng(seed)
    values = rng.uniform(size=(n, steps)).astype("float32")
    half = steps // 2
    first = rng.integers(0, half, size=n)
    second = rng.integers(half, steps, size=n)
    markers = np.zeros((n, steps), "float32")
    markers[np.arange(n), first] = 1.0
    markers[np.arange(n), second] = 1.0
    x = np.stack([values, markers], axis=-1)
    y = (values * markers).sum(axis=1, keepdims=True).astype("float32")
    return x, y
