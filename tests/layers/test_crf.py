"""`CRF` against a NumPy brute force over every tag sequence (log Z, best
path, marginals, log-likelihood), finite differences, masks, `torchcrf.CRF`
(pytorch-crf) with copied weights, XLA, and the layer contract."""

import itertools

import keras
import numpy as np
import pytest

from seqkeras.layers import CRF
from tests.layer_checks import run_layer_test

K = 3


def _crf(rng, k=K):
    crf = CRF(k)
    crf.build((None, None, k))
    crf.transitions.assign(rng.normal(size=(k, k)).astype("float32"))
    crf.start.assign(rng.normal(size=(k,)).astype("float32"))
    crf.end.assign(rng.normal(size=(k,)).astype("float32"))
    return crf


def _weights(crf):
    return (
        np.asarray(crf.transitions, "float64"),
        np.asarray(crf.start, "float64"),
        np.asarray(crf.end, "float64"),
    )


def _score(e, y, trans, start, end):
    s = start[y[0]] + end[y[-1]] + sum(e[t, y[t]] for t in range(len(y)))
    return s + sum(trans[y[t - 1], y[t]] for t in range(1, len(y)))


def _brute(e, trans, start, end):
    """Every tag sequence of one row e (n, k): log Z, best path, marginals."""
    n, k = e.shape
    paths = list(itertools.product(range(k), repeat=n))
    scores = np.array([_score(e, y, trans, start, end) for y in paths])
    log_z = np.logaddexp.reduce(scores)
    p = np.exp(scores - log_z)
    marg = np.zeros((n, k))
    for y, w in zip(paths, p):
        marg[np.arange(n), list(y)] += w
    return log_z, list(paths[int(np.argmax(scores))]), marg


@pytest.fixture
def case():
    rng = np.random.default_rng(0)
    crf = _crf(rng)
    e = rng.normal(size=(3, 5, K)).astype("float32") * 2
    lengths = [5, 3, 1]
    mask = np.arange(5)[None] < np.array(lengths)[:, None]
    tags = rng.integers(0, K, (3, 5))
    return crf, e, mask, lengths, tags


def test_against_brute_force(case):
    crf, e, mask, lengths, tags = case
    trans, start, end = _weights(crf)
    log_z = np.asarray(crf.log_partition(e, mask))
    best, best_score = (np.asarray(a) for a in crf.viterbi(e, mask))
    marg = np.asarray(crf.marginals(e, mask))
    ll = np.asarray(crf.log_likelihood(e, tags, mask))
    for b, n in enumerate(lengths):
        z, path, m = _brute(e[b, :n].astype("float64"), trans, start, end)
        assert log_z[b] == pytest.approx(z, rel=1e-5)
        assert best[b, :n].tolist() == path and (best[b, n:] == 0).all()
        assert best_score[b] == pytest.approx(_score(e[b, :n], path, trans, start, end), rel=1e-5)
        np.testing.assert_allclose(marg[b, :n], m, atol=1e-5)
        assert (marg[b, n:] == 0).all()
        assert ll[b] == pytest.approx(
            _score(e[b, :n], tags[b, :n], trans, start, end) - z, abs=1e-4
        )
    # the call is Viterbi
    np.testing.assert_array_equal(np.asarray(crf(e, mask=mask)), best)


def test_padding_changes_nothing(case):
    crf, e, mask, lengths, tags = case
    wider = np.concatenate([e, np.full((3, 4, K), 50.0, "float32")], 1)
    wmask = np.concatenate([mask, np.zeros((3, 4), bool)], 1)
    wtags = np.concatenate([tags, np.full((3, 4), 2)], 1)
    np.testing.assert_allclose(
        crf.log_likelihood(wider, wtags, wmask), crf.log_likelihood(e, tags, mask), rtol=1e-6
    )
    np.testing.assert_array_equal(
        np.asarray(crf(wider, mask=wmask))[:, :5], np.asarray(crf(e, mask=mask))
    )
    np.testing.assert_allclose(
        np.asarray(crf.marginals(wider, wmask))[:, :5], crf.marginals(e, mask), atol=1e-6
    )


def test_gradient_against_finite_differences(case):
    import tensorflow as tf

    crf, e, mask, lengths, tags = case

    def nll(e_, trans_):
        crf.transitions.assign(trans_)
        return float(crf.loss(e_, tags, mask))

    x = tf.Variable(e)
    with tf.GradientTape() as tape:
        value = crf.loss(tf.identity(x), tags, mask)
    de, dtrans = tape.gradient(value, [x, crf.transitions])
    base = np.asarray(crf.transitions).copy()
    h = 1e-2
    for idx in [(0, 0, 1), (1, 2, 0), (2, 0, 2)]:
        up, down = e.copy(), e.copy()
        up[idx] += h
        down[idx] -= h
        fd = (nll(up, base) - nll(down, base)) / (2 * h)
        assert float(de[idx]) == pytest.approx(fd, abs=2e-3)
    assert float(np.abs(np.asarray(de)[1, 3:]).max()) == 0.0  # padding
    for idx in [(0, 1), (2, 2)]:
        up, down = base.copy(), base.copy()
        up[idx] += h
        down[idx] -= h
        fd = (nll(e, up) - nll(e, down)) / (2 * h)
        assert float(dtrans[idx]) == pytest.approx(fd, abs=2e-3)
    crf.transitions.assign(base)
    # the gradient of log Z is the marginals (forward-backward)
    with tf.GradientTape() as tape:
        z = tf.reduce_sum(crf.log_partition(tf.identity(x), mask))
    np.testing.assert_allclose(tape.gradient(z, x), crf.marginals(e, mask), atol=1e-5)


def test_against_pytorch_crf(case):
    torch = pytest.importorskip("torch")
    torchcrf = pytest.importorskip("torchcrf")
    crf, e, mask, lengths, tags = case
    ref = torchcrf.CRF(K, batch_first=True)
    with torch.no_grad():
        ref.transitions.copy_(torch.tensor(np.asarray(crf.transitions)))
        ref.start_transitions.copy_(torch.tensor(np.asarray(crf.start)))
        ref.end_transitions.copy_(torch.tensor(np.asarray(crf.end)))
    et, tt = torch.tensor(e), torch.tensor(tags)
    mt = torch.tensor(mask)
    expected = ref(et, tt, mt, reduction="none").detach().numpy()
    np.testing.assert_allclose(crf.log_likelihood(e, tags, mask), expected, rtol=1e-5, atol=1e-5)
    paths = ref.decode(et, mt)
    best = np.asarray(crf(e, mask=mask))
    for b, n in enumerate(lengths):
        assert best[b, :n].tolist() == paths[b]


def _chunks(n, rng):
    """Tags O=0, B=1, I=2: B for token 5, I for a token 4 that follows a B
    or an I, else O. Which tag a 4 gets depends on the tag before it:
    a per-token model cannot know, a CRF's transitions can."""
    x = rng.integers(1, 6, (n, 10))
    x[:, 1:][rng.random((n, 9)) < 0.35] = 4
    y = np.zeros_like(x)
    for t in range(10):
        y[:, t] = np.where(x[:, t] == 5, 1, 0)
        if t:
            y[:, t] = np.where((x[:, t] == 4) & (y[:, t - 1] > 0), 2, y[:, t])
    return x, y


def test_loss_trains_under_xla_beyond_any_per_token_rule():
    rng = np.random.default_rng(1)
    x, y = _chunks(512, rng)
    # the best any per-token rule can do: each token's majority tag
    per_token = sum(np.bincount(y[x == v]).max() for v in range(1, 6))
    per_token /= y.size
    tokens = keras.Input((None,), dtype="int32")
    emissions = keras.layers.Dense(3)(keras.layers.Embedding(6, 8)(tokens))
    crf = CRF(3)
    tags = crf(emissions)

    class M(keras.Model):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            return crf.loss(self.emit(x), y)

    model = M(tokens, tags)
    model.emit = keras.Model(tokens, emissions)
    model.compile(optimizer=keras.optimizers.Adam(0.05), jit_compile=True)
    model.fit(x, y, epochs=20, batch_size=64, verbose=0)
    x_val, y_val = _chunks(256, np.random.default_rng(2))
    accuracy = (np.asarray(model.predict(x_val, verbose=0)) == y_val).mean()
    assert per_token < 0.9 and accuracy >= 0.99, (per_token, accuracy)


def test_contract_and_errors():
    rng = np.random.default_rng(3)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    # outputs are int32 tags: no fit, and mixed precision checked below
    run_layer_test(
        lambda: CRF(4),
        rng.normal(size=(2, 5, 4)).astype("float32"),
        call_kwargs={"mask": mask},
        num_weights=(3, 0),
        mixed_precision=False,
        fit=False,
    )
    crf = CRF(3)
    with pytest.raises(ValueError, match="num_tags=3"):
        crf(np.zeros((1, 4, 2), "float32"))
    with pytest.raises(ValueError, match="`CRF`.*num_tags"):
        CRF(0)
    crf = _crf(np.random.default_rng(0))
    with pytest.raises(ValueError, match="tags"):
        crf.log_likelihood(np.zeros((1, 4, 3), "float32"), np.zeros((1, 3), "int32"))
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        low = CRF(3)
        e = np.random.default_rng(4).normal(size=(2, 4, 3))
        out = low.log_partition(keras.ops.cast(e, "bfloat16"))
    finally:
        keras.config.set_dtype_policy("float32")
    assert low.compute_dtype == "float32" and out.dtype == "float32"
    assert np.isfinite(np.asarray(out)).all()


def test_tag_ids_out_of_range_are_refused():
    import numpy as np
    import pytest

    import seqkeras

    crf = seqkeras.layers.CRF(3)
    e = np.zeros((1, 2, 3), "float32")
    crf(e)
    for tags, bad in (([[0, 3]], "3"), ([[-1, 0]], "-1")):
        with pytest.raises(
            ValueError,
            match=rf"CRF.*tags.*id {bad}, "
            r"outside \[0, 3\)",
        ):
            crf.log_likelihood(e, np.array(tags))
