"""`SmoothedTokenCrossEntropy`: NumPy, Keras' one-hot
`CategoricalCrossentropy(label_smoothing=)` over the valid tokens, the
unsmoothed case equal to `SparseCategoricalCrossentropy(ignore_class=0)`,
a finite-difference gradient, mixed precision and serialization."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqkeras.training import SmoothedTokenCrossEntropy, compile_model


def _numpy(y, logits, e, pad=0):
    z = logits - logits.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    v = logits.shape[-1]
    target = np.full(logits.shape, e / v)
    np.put_along_axis(target, y[..., None], 1 - e + e / v, axis=-1)
    per = -(target * log_p).sum(-1)
    mask = y != pad
    return per[mask].mean()


@pytest.fixture
def batch():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 7)).astype("float32") * 3
    y = rng.integers(1, 7, (3, 5))
    y[0, 3:] = 0
    y[2, 1:] = 0
    return y, logits


@pytest.mark.parametrize("e", [0.0, 0.1, 0.3])
def test_equals_numpy_and_keras_one_hot(batch, e):
    y, logits = batch
    got = float(SmoothedTokenCrossEntropy(e)(y, logits))
    assert got == pytest.approx(_numpy(y, logits, e), rel=1e-5)
    mask = y != 0
    one_hot = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=e)(
        np.eye(7)[y[mask]], logits[mask]
    )
    assert got == pytest.approx(float(one_hot), rel=1e-5)
    if e == 0.0:
        sparse = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)(
            y, logits
        )
        assert got == pytest.approx(float(sparse), rel=1e-5)


def test_padding_changes_nothing_and_gradient_matches(batch):
    y, logits = batch
    loss = SmoothedTokenCrossEntropy(0.2)
    wider = np.concatenate([logits, np.full((3, 2, 7), 9.0, "float32")], 1)
    y_wide = np.concatenate([y, np.zeros((3, 2), y.dtype)], 1)
    assert float(loss(y_wide, wider)) == pytest.approx(float(loss(y, logits)), rel=1e-6)
    x = tf.Variable(logits.astype("float64"))
    with tf.GradientTape() as tape:
        value = loss(y, tf.cast(x, "float32"))
    grad = tape.gradient(value, x).numpy()
    h = 1e-3
    for idx in [(0, 0, 1), (1, 4, 6), (0, 4, 2)]:  # (0, 4, .) is padding
        up, down = logits.astype("float64").copy(), logits.astype("float64").copy()
        up[idx] += h
        down[idx] -= h
        fd = (_numpy(y, up, 0.2) - _numpy(y, down, 0.2)) / (2 * h)
        assert grad[idx] == pytest.approx(fd, abs=1e-4)
    assert grad[0, 4].tolist() == [0.0] * 7


def test_mixed_precision_serialization_and_errors(batch):
    y, logits = batch
    loss = SmoothedTokenCrossEntropy(0.1)
    got = loss(y, tf.cast(logits, "bfloat16"))
    assert got.dtype == "float32" and np.isfinite(float(got))
    again = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(again, SmoothedTokenCrossEntropy)
    assert again.label_smoothing == 0.1 and again.pad_id == 0
    with pytest.raises(ValueError, match="label_smoothing` in \\[0, 1\\)"):
        SmoothedTokenCrossEntropy(1.0)
    import seqkeras

    clf = seqkeras.models.classifier(20, 2, backbone="gru", units=4, embedding_dim=4)
    with pytest.raises(ValueError, match='"tokens" task only'):
        compile_model(clf, label_smoothing=0.1)
    lm = seqkeras.models.recurrent_language_model(20, 4, cell="gru")
    compile_model(lm, label_smoothing=0.1)
    assert isinstance(lm.loss, SmoothedTokenCrossEntropy)
