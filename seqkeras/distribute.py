"""Training on more than one device or machine with `tf.distribute`
(TensorFlow-specific, like `seqkeras.export`; imported on demand).

Build and compile the model inside the strategy's scope; `model.fit` does
the rest (Keras splits each global batch across the replicas and sums the
gradients):

    strategy = seqkeras.distribute.get_strategy("multiworker")
    with strategy.scope():
        model = seqkeras.models.tagger(...)
        seqkeras.training.compile_model(model)
    model.fit(dataset_of_global_batches, ...)
    model.save(seqkeras.distribute.worker_path("model.keras"))

`compile_model(jit_compile="auto")` turns XLA off under a strategy with
more than one replica or worker (as Keras' own `"auto"` does): XLA does not
compile TensorFlow's cross-replica collectives on the CPU.

A cluster is described to each process by the `TF_CONFIG` environment
variable (https://www.tensorflow.org/guide/distributed_training): the same
`cluster` on every worker, and the process's own `task`, e.g. on worker 1
of 2:

    TF_CONFIG='{"cluster": {"worker": ["host0:12345", "host1:12345"]},
                "task": {"type": "worker", "index": 1}}'

Worker 0 is the chief: it writes the checkpoints that count; the others
write theirs to temporary directories (`worker_path`), as
`MultiWorkerMirroredStrategy` needs every worker to take part in saving.
"""

import json
import os
import tempfile

__all__ = ["STRATEGIES", "cluster_spec", "distributes", "get_strategy", "is_chief", "worker_path"]

#: The names `get_strategy` takes.
STRATEGIES = ("default", "mirrored", "multiworker", "tpu")


def _tf():
    import keras

    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            "`seqkeras.distribute` needs the TensorFlow backend (tf.distribute"
            "); with JAX use `keras.distribution`. Received: backend="
            f"{keras.backend.backend()!r}"
        )
    import tensorflow as tf

    return tf


def cluster_spec(environ=None):
    """The parsed `TF_CONFIG` of this process, or None when it is unset.

    Args:
        environ: the environment to read (default `os.environ`).

    Returns:
        The config dict (`cluster`, `task`), or None.

    Raises:
        ValueError: `TF_CONFIG` is not JSON, has no `cluster` with a
            `worker` list, or its `task` does not name one of the workers.
    """
    environ = os.environ if environ is None else environ
    raw = environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(
            "`seqkeras.distribute`: the environment variable `TF_CONFIG` is "
            f"not valid JSON ({e.msg}). Received: TF_CONFIG={raw!r}"
        ) from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task", {}) if isinstance(config, dict) else {}
    workers = (cluster or {}).get("chief", []) + (cluster or {}).get("worker", [])
    if not isinstance(cluster, dict) or not workers:
        raise ValueError(
            "`seqkeras.distribute`: `TF_CONFIG` must hold a `cluster` with a "
            '`worker` list of "host:port" addresses. Received: '
            f"TF_CONFIG={raw!r}"
        )
    kind, index = task.get("type"), task.get("index")
    if kind not in cluster or not isinstance(index, int) or not (0 <= index < len(cluster[kind])):
        raise ValueError(
            "`seqkeras.distribute`: the `task` in `TF_CONFIG` must name one "
            'of the cluster\'s tasks, e.g. {"type": "worker", "index": '
            f"0}}. Received: task={task!r}, cluster={cluster!r}"
        )
    return config


def get_strategy(name="default"):
    """A `tf.distribute.Strategy` by name.

    Args:
        name: `"default"` (no distribution: the strategy in effect),
            `"mirrored"` (`MirroredStrategy`: every local GPU, or the CPU),
            `"multiworker"` (`MultiWorkerMirroredStrategy` over the cluster
            in `TF_CONFIG`, which must be set) or `"tpu"` (`TPUStrategy`
            on the TPU the environment names; not tested here, as no TPU
            was available).

    Returns:
        The strategy. Build and compile the model inside `strategy.scope()`.

    Examples:
        >>> import seqkeras.distribute
        >>> strategy = seqkeras.distribute.get_strategy("mirrored")
        >>> strategy.num_replicas_in_sync >= 1
        True
    """
    if name not in STRATEGIES:
        raise ValueError(
            "`get_strategy` received an invalid value for `name`: expected "
            f"one of {STRATEGIES}. Received: name={name!r}"
        )
    tf = _tf()
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        if cluster_spec() is None:
            raise ValueError(
                '`get_strategy("multiworker")` needs the cluster in the '
                "`TF_CONFIG` environment variable (see "
                "`seqkeras.distribute`'s documentation). Received: TF_CONFIG "
                "is not set"
            )
        return _multi_worker_strategy_class()()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _multi_worker_strategy_class():
    """`MultiWorkerMirroredStrategy` whose `reduce` accepts a nested
    structure, as `MirroredStrategy`'s does.

    Why: Keras 3's TensorFlow `fit` passes a whole (x, y) batch to
    `strategy.reduce` to learn the input shapes before the first step;
    `MultiWorkerMirroredStrategy.reduce` takes one value only and fails
    with "Attempt to convert a value (PerReplica...) to a Tensor"
    (keras-team/keras#20585, tensorflow/tensorflow#72388: the multi-worker
    Keras tutorial fails the same way). Reducing each value of the nest
    with the strategy's own `reduce` is what that call needs. Keras also
    reduces each step's scalar metrics with `axis=0`, which fails on a 0-d
    value ("Invalid reduction dimension 0 for input with 0 dimensions");
    for a scalar, the mean over replicas is the reduction with
    `axis=None`.
    """
    import tensorflow as tf

    class NestReducingMultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
        def reduce(self, reduce_op, value, axis):
            base = super(NestReducingMultiWorkerMirroredStrategy, self)
            if tf.nest.is_nested(value):
                return tf.nest.map_structure(lambda v: self.reduce(reduce_op, v, axis), value)
            local = self.experimental_local_results(value)
            if axis is not None and local and local[0].shape.rank == 0:
                axis = None
            return base.reduce(reduce_op, value, axis)

    return NestReducingMultiWorkerMirroredStrategy


def is_chief(environ=None):
    """Whether this process writes the checkpoints that count: no
    `TF_CONFIG`, or its task is the chief or worker 0.

    Args:
        environ: the environment to read (default `os.environ`).

    Returns:
        A bool.

    Raises:
        ValueError: a `TF_CONFIG` that `cluster_spec` refuses.

    Examples:
        >>> from seqkeras.distribute import is_chief
        >>> is_chief({}), is_chief({"TF_CONFIG": '{"cluster": {"worker": ["a:1", "b:1"]}, '
        ...                                      '"task": {"type": "worker", "index": 1}}'})
        (True, False)
    """
    config = cluster_spec(environ)
    if config is None:
        return True
    task = config["task"]
    return task["type"] == "chief" or (
        task["type"] == "worker" and task["index"] == 0 and "chief" not in config["cluster"]
    )


def worker_path(path, environ=None):
    """`path` on the chief; on another worker, the same file name in a new
    temporary directory (every worker must save, only the chief's copy is
    kept).

    Args:
        path: the file the chief writes (a str or os.PathLike).
        environ: the environment to read (default `os.environ`).

    Returns:
        A path.

    Raises:
        TypeError: a `path` that is not a path.
    """
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            "`worker_path` expects `path` to be a file path (a str or os.PathLike). "
            f"Received: path={path!r} ({type(path).__name__})"
        )
    if is_chief(environ):
        return path
    return os.path.join(tempfile.mkdtemp(prefix="seqkeras-worker-"), os.path.basename(path))


def distributes(strategy=None):
    """Whether `strategy` (default: the one in scope) runs more than one
    replica or worker, so that gradients are reduced across them.

    Args:
        strategy: a `tf.distribute.Strategy`, or None.

    Returns:
        A bool.

    Raises:
        TypeError: a `strategy` that is not a `tf.distribute.Strategy`.
    """
    tf = _tf()
    if strategy is not None and not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(
            "`distributes` expects `strategy` to be a tf.distribute.Strategy or None. "
            f"Received: strategy={strategy!r} ({type(strategy).__name__})"
        )
    strategy = strategy or tf.distribute.get_strategy()
    return strategy.num_replicas_in_sync > 1 or isinstance(
        strategy, tf.distribute.MultiWorkerMirroredStrategy
    )
