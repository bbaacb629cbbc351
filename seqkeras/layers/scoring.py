"""Attention score functions: (query, key) -> logits (batch, Tq, Tk).

The seed notes' table of scoring functions, as plain functions of tensors
and weights (the layers own the weights):

| name         | score(q, k)                           | weights        |
|--------------|---------------------------------------|----------------|
| `dot`        | q . k                                 | -              |
| `scaled_dot` | q . k / sqrt(d_k)                     | -              |
| `general`    | q W k  (Luong et al. 2015, bilinear)  | W (d_q, d_k)   |
| `additive`   | v . tanh(q W1 + k W2) (Bahdanau 2014) | W1, W2, v      |
| `cosine`     | cos(q, k) / temperature               | log temperature|

Queries are (batch, Tq, d_q) and keys (batch, Tk, d_k).
"""

from keras import ops

SCORES = ("dot", "scaled_dot", "general", "additive", "cosine")


def dot(query, key):
    return ops.matmul(query, ops.swapaxes(key, -1, -2))


def scaled_dot(query, key):
    depth = ops.cast(ops.shape(key)[-1], query.dtype)
    return dot(query, key) / ops.sqrt(depth)


def _project(x, kernel):
    # einsum, not matmul: TF lowers a rank-3 by rank-2 matmul to tensordot,
    # whose gradient inside a while loop (the recurrent attention decoder)
    # has a non-constant transpose that XLA rejects.
    return ops.einsum("btd,du->btu", x, kernel)


def general(query, key, kernel, projected_key=None):
    """`projected_key`: `key @ kernel^T`, computed once for many queries;
    then the score is `query . projected_key`."""
    if projected_key is not None:
        return dot(query, projected_key)
    return dot(_project(query, kernel), key)


def additive(query, key, query_kernel, key_kernel, v, projected_key=None):
    """`projected_key`: `key @ key_kernel`, when computed once for many
    queries (a decoder attending to one memory at every step)."""
    q = ops.expand_dims(_project(query, query_kernel), -2)  # (B, Tq, 1, u)
    if projected_key is None:
        projected_key = _project(key, key_kernel)
    k = ops.expand_dims(projected_key, -3)  # (B, 1, Tk, u)
    # A broadcast multiply-sum, not matmul(., v) (tensordot, as above).
    return ops.sum(ops.tanh(q + k) * v, axis=-1)  # (B, Tq, Tk)


def _l2_normalize(x, eps=1e-6):
    # In float32: a float16 sum of squares overflows beyond |x| ~ 256.
    x32 = ops.cast(x, "float32")
    norm = ops.sqrt(ops.sum(x32 * x32, axis=-1, keepdims=True))
    return ops.cast(x32 / ops.maximum(norm, eps), x.dtype)


def cosine(query, key, log_temperature):
    scores = dot(_l2_normalize(query), _l2_normalize(key))
    return scores * ops.cast(ops.exp(-log_temperature), scores.dtype)
