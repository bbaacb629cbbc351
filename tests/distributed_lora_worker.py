"""One process of the distributed LoRA test (tests/models/
test_distributed_lora.py), run as a script with `python -P`:

    KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        python -P distributed_lora_worker.py OUT.json
    KERAS_BACKEND=tensorflow python -P distributed_lora_worker.py OUT.json

Fine-tunes rank-2 LoRA adapters of a tiny Llama-family language model
(random weights, seeded) for `STEPS` steps of global batch `BATCH` on
a fixed token-to-token map, first on one device, then distributed: on JAX under
`get_distribution("data")` (8 devices) and `get_distribution("model")` (a
2 x 4 mesh: the weights split over 4 devices), on TensorFlow under
`MirroredStrategy` over two logical CPUs. Writes each run's loss on a
fixed evaluation batch before and after training and its weights'
layouts to OUT; on JAX also the losses of an LSTM tagger and a Transformer
seq2seq trained on one device and under `get_distribution("model")`.
"""

import json
import os
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

STEPS, BATCH, LENGTH = 20, 8, 12
ARCH = dict(
    vocab_size=64,
    hidden_dim=16,
    num_layers=2,
    num_heads=4,
    num_key_value_heads=2,
    intermediate_dim=32,
    max_length=32,
)


def data():
    """Random tokens, each to be mapped to (3 token + 1) mod vocabulary:
    something the adapters learn within `STEPS` steps."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, ARCH["vocab_size"], (STEPS * BATCH + BATCH, LENGTH)).astype("int32")
    return x, (3 * x + 1) % ARCH["vocab_size"]


def run(scope_of):
    """`([evaluation loss before, after], {path: layout axes or None})` of one
    run whose adapted copy is built, compiled and fitted inside
    `scope_of(base)`, the base model's scope."""
    import seqkeras.pretrained as sp
    from seqkeras.models import with_lora

    keras.utils.set_random_seed(0)
    base = sp.llama_language_model(ARCH)
    base(np.zeros((1, LENGTH), "int32"))
    x, y = data()
    with scope_of(base):
        lm = with_lora(base, 2)
        # the adapters' A alike in every run and process (B starts at 0)
        for v in lm.trainable_weights:
            if v.name.endswith("_lora_a"):
                v.assign(np.random.default_rng(zlib.crc32(v.path.encode())).normal(0, 0.1, v.shape))
        lm.compile(
            keras.optimizers.AdamW(3e-2),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        before = float(lm.evaluate(x[-BATCH:], y[-BATCH:], batch_size=BATCH, verbose=0))
        lm.fit(x[:-BATCH], y[:-BATCH], batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        loss = float(lm.evaluate(x[-BATCH:], y[-BATCH:], batch_size=BATCH, verbose=0))
    layouts = {}
    for v in lm.weights:
        sharding = getattr(getattr(v, "value", None), "sharding", None)
        spec = getattr(sharding, "spec", None)
        layouts[v.path] = None if spec is None else [a for a in spec]
    return [before, loss], layouts


def builders():
    """(name, build, x, y): a recurrent and a Transformer builder, tiny."""
    import seqkeras

    M = seqkeras.models
    ids = np.random.default_rng(0).integers(1, 12, (16, 6)).astype("int32")
    return [
        (
            "lstm tagger",
            lambda: M.tagger(12, 4, backbone="lstm", units=8, embedding_dim=8),
            ids,
            ids % 4,
        ),
        (
            "transformer_seq2seq",
            lambda: M.transformer_seq2seq(
                12, 12, 8, num_layers=1, hidden_dim=16, num_heads=4, intermediate_dim=32
            ),
            {"source_ids": ids, "target_ids": ids},
            ids,
        ),
    ]


def fit_builder(build, x, y, distribution=None):
    """The losses of 2 epochs of 4 steps, built and fitted under
    `distribution` (None: one device)."""
    import contextlib

    from seqkeras.training import compile_model

    keras.utils.set_random_seed(0)
    with contextlib.nullcontext() if distribution is None else distribution.scope():
        model = build()
        compile_model(model, jit_compile=True)
        return model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]


def main(out):
    results = {}
    if keras.backend.backend() == "jax":
        import contextlib

        import seqkeras.distribute as dist

        results["one"] = run(lambda base: contextlib.nullcontext())
        results["data"] = run(lambda base: dist.get_distribution("data").scope())
        results["model"] = run(
            lambda base: dist.get_distribution("model", base, model_devices=4).scope()
        )
        results["devices"] = len(keras.distribution.list_devices())
        for name, build, x, y in builders():
            keras.utils.set_random_seed(0)
            shapes = build()
            shapes(x) if isinstance(x, dict) else shapes(x[:1])
            model_parallel = dist.get_distribution("model", shapes, model_devices=4)
            results[name] = [fit_builder(build, x, y), fit_builder(build, x, y, model_parallel)]
    else:
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
        results["one"] = run(lambda base: tf.distribute.get_strategy().scope())
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        results["mirrored"] = run(lambda base: strategy.scope())
        results["devices"] = strategy.num_replicas_in_sync
    with open(out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
