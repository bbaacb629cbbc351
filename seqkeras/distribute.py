"""Training on more than one device or machine: `tf.distribute` on
TensorFlow, `keras.distribution` on JAX (imported on demand).

On JAX, `get_distribution("data")` replicates the model on every device
and splits each batch; `get_distribution("model", model)` also splits the
weights of attention, feed-forward, embedding, recurrent and output
layers over a `"model"` axis of the device mesh (`layout_map`). Build the
model (e.g. `with_lora`'s copy), compile and fit inside its scope:

    distribution = seqkeras.distribute.get_distribution("model", base)
    with distribution.scope():
        lm = seqkeras.models.with_lora(base, 8)   # its weights laid out
        lm.compile(...)
        lm.fit(...)

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

__all__ = [
    "DISTRIBUTIONS",
    "STRATEGIES",
    "cluster_spec",
    "distributes",
    "get_distribution",
    "get_strategy",
    "is_chief",
    "layout_map",
    "worker_path",
]

#: The names `get_strategy` takes.
STRATEGIES = ("default", "mirrored", "multiworker", "tpu")

#: The names `get_distribution` takes.
DISTRIBUTIONS = ("data", "model")


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


# -- keras.distribution (JAX) --------------------------------------------------

#: `(pattern, axis)`: a weight whose path matches `pattern` (its layer's
#: and its own name) is split along `axis` over the mesh's model axis:
#: attention heads (query/key/value kernels and biases, the output
#: projection's input), the feed-forward's hidden units (Megatron's split:
#: the first projections by their outputs, the last by its inputs), the
#: vocabulary of embeddings and output layers, the gates of recurrent cells.
_SPLITS = (
    (r".*/(query|key|value)_kernel", 1),  # (d, heads, head_dim); 2-D: (d, units)
    (r".*/(query|key|value)_bias", 0),
    (r".*/output_kernel", 0),  # (heads, head_dim, d)
    (r".*/(gate|up)_kernel", 1),
    (r".*/down_kernel", 0),
    (r".*feedforward_intermediate_dense/kernel", 1),
    (r".*feedforward_intermediate_dense/bias", 0),
    (r".*feedforward_output_dense/kernel", 0),
    (r".*/embeddings", 0),
    (r".*cell[^/]*/(kernel|recurrent_kernel)", -1),
    (r".*cell[^/]*/bias", 0),
    (r".*logits[^/]*/kernel", 1),
    (r".*logits[^/]*/bias", 0),
)


def _keras_model(where, model):
    import keras

    if not isinstance(model, keras.Model) or not model.weights:
        raise TypeError(
            f"`{where}` expects `model` to be a built keras.Model (its weights' shapes "
            f"choose the layout). Received: {type(model).__name__}"
            + (" without weights" if isinstance(model, keras.Model) else "")
        )
    return model


def layout_map(model, device_mesh, axis="model"):
    """A `keras.distribution.LayoutMap` that splits `model`'s large weights
    over the mesh axis `axis` (tensor parallelism, as Megatron-LM and
    keras-hub's `get_layout_map` do): attention heads, feed-forward hidden
    units, embedding and output vocabularies, recurrent gates. A weight is
    split only where its dimension divides by the axis size; the others,
    LoRA adapters and norms are replicated.

    Args:
        model: a built model of `seqkeras.models` or `seqkeras.pretrained`
            (the map names its weights' paths; `with_lora`'s copy keeps
            them).
        device_mesh: a `keras.distribution.DeviceMesh` with an axis named
            `axis`.
        axis: the mesh axis the weights are split over.

    Returns:
        The `LayoutMap`, for `keras.distribution.ModelParallel`.

    Raises:
        TypeError: a `model` that is not a built keras.Model, or a
            `device_mesh` that is not a `DeviceMesh`.
        ValueError: an `axis` the mesh does not have.

    Examples:
        >>> import keras, seqkeras
        >>> lm = seqkeras.models.decoder_language_model(
        ...     vocab_size=40, hidden_dim=16, num_layers=1, num_heads=2,
        ...     intermediate_dim=32)
        >>> mesh = keras.distribution.DeviceMesh(
        ...     (1, 1), ("batch", "model"), keras.distribution.list_devices()[:1])
        >>> layouts = seqkeras.distribute.layout_map(lm, mesh)
        >>> layouts["decoder_block_0/attention/query_kernel"].axes
        (None, 'model', None)
    """
    import re

    import keras

    _keras_model("layout_map", model)
    if not isinstance(device_mesh, keras.distribution.DeviceMesh):
        raise TypeError(
            "`layout_map` expects `device_mesh` to be a keras.distribution.DeviceMesh. "
            f"Received: {type(device_mesh).__name__}"
        )
    names = list(device_mesh.axis_names)
    if axis not in names:
        raise ValueError(
            f"`layout_map` expects `axis` to be one of the mesh's axes {names}. "
            f"Received: axis={axis!r}"
        )
    size = device_mesh.shape[names.index(axis)]
    layouts, done = keras.distribution.LayoutMap(device_mesh), set()
    for variable in model.weights:
        shape = tuple(variable.shape)
        for pattern, along in _SPLITS:
            if shape and re.fullmatch(pattern, variable.path):
                along %= len(shape)
                if shape[along] % size == 0 and variable.path not in done:
                    done.add(variable.path)  # (a tied weight is listed twice)
                    layouts[variable.path] = tuple(
                        axis if i == along else None for i in range(len(shape))
                    )
                break
    return layouts


def get_distribution(name, model=None, devices=None, model_devices=None):
    """A `keras.distribution.Distribution` by name (JAX): build, compile and
    fit the model inside its `scope()`.

    Args:
        name: `"data"` (`DataParallel`: the model on every device, each
            batch split) or `"model"` (`ModelParallel`: the weights split
            over a `"model"` mesh axis by `layout_map(model, ...)`, each
            batch split over the `"batch"` axis).
        model: for `"model"`, the built model whose weights' paths and
            shapes choose the layouts (a model rebuilt from it, such as
            `with_lora`'s, keeps the paths).
        devices: the devices (default `keras.distribution.list_devices()`).
        model_devices: for `"model"`, the size of the model axis, dividing
            the number of devices (default: all of them; the batch axis
            takes the rest).

    Returns:
        The distribution.

    Raises:
        ValueError: an unknown `name`, a backend other than JAX, or a
            `model_devices` that does not divide the devices.
        TypeError: `"model"` without a built `model`.

    Examples:
        >>> import seqkeras.distribute
        >>> seqkeras.distribute.DISTRIBUTIONS
        ('data', 'model')
    """
    import keras

    if name not in DISTRIBUTIONS:
        raise ValueError(
            "`get_distribution` received an invalid value for `name`: expected one of "
            f"{DISTRIBUTIONS}. Received: name={name!r}"
        )
    if name == "model":
        _keras_model("get_distribution", model)
    devices = list(devices) if devices is not None else keras.distribution.list_devices()
    count = len(devices)
    size = count if model_devices is None else model_devices
    if isinstance(size, bool) or not isinstance(size, int) or size < 1 or count % size:
        raise ValueError(
            f"`get_distribution` expects `model_devices` to be a positive int dividing the "
            f"{count} devices. Received: model_devices={model_devices!r}"
        )
    if keras.backend.backend() != "jax":
        raise ValueError(
            "`get_distribution` (keras.distribution) needs the JAX backend; with "
            'TensorFlow use `get_strategy("mirrored")` for data parallelism. Received: '
            f"backend={keras.backend.backend()!r}"
        )
    if name == "data":
        return keras.distribution.DataParallel(devices=devices)
    mesh = keras.distribution.DeviceMesh((count // size, size), ("batch", "model"), devices)
    return keras.distribution.ModelParallel(
        layout_map=layout_map(model, mesh), batch_dim_name="batch"
    )
