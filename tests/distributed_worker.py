"""One process of the multi-worker training test (tests/models/
test_distribute.py), run as a script.

    python distributed_worker.py OUT_DIR [--strategy multiworker]

Trains a bidirectional-GRU tagger (`compile_model` defaults: Adam with
global-norm clipping) for `STEPS` steps of global batch `GLOBAL_BATCH` on a
fixed synthetic task, from weights seeded alike in every process, and
writes `OUT_DIR/losses-<task>.json` (the loss of each step); the chief also
saves `OUT_DIR/model.keras`. Under `--strategy multiworker` the cluster
comes from `TF_CONFIG`; each worker computes half of each global batch.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import seqkeras  # noqa: E402
import seqkeras.distribute as dist  # noqa: E402

STEPS, GLOBAL_BATCH, LENGTH, VOCAB, TAGS = 6, 16, 12, 20, 4


def data():
    """Tag = token id mod TAGS (+1; 0 is padding). Rows are right-padded
    so that the two halves of each global batch hold equally many real
    tokens: a masked token loss is averaged over each replica's real
    tokens, then over replicas, which equals one process's average over
    all real tokens only then (see `seqkeras.distribute`)."""
    rng = np.random.default_rng(0)
    x = rng.integers(1, VOCAB, (STEPS * GLOBAL_BATCH, LENGTH))
    half = rng.integers(4, LENGTH + 1, (STEPS, GLOBAL_BATCH // 2))
    lengths = np.concatenate([half, half[:, ::-1]], axis=1).reshape(-1)
    x[np.arange(LENGTH)[None] >= lengths[:, None]] = 0
    y = np.where(x > 0, x % TAGS + 1, 0)
    return x.astype("int32"), y.astype("int32")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--strategy", default="default", choices=dist.STRATEGIES)
    args = p.parse_args(argv)
    strategy = dist.get_strategy(args.strategy)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = seqkeras.models.tagger(VOCAB, TAGS + 1, backbone="gru", embedding_dim=16, units=16)
        seqkeras.training.compile_model(model, learning_rate=1e-2)
    x, y = data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options).repeat()
    history = model.fit(dataset, epochs=STEPS, steps_per_epoch=1, verbose=0)
    config = dist.cluster_spec()
    task = "single" if config is None else (f"{config['task']['type']}{config['task']['index']}")
    with open(os.path.join(args.out_dir, f"losses-{task}.json"), "w") as f:
        json.dump(
            {
                "loss": history.history["loss"],
                "jit_compile": bool(model.jit_compile),
                "replicas": strategy.num_replicas_in_sync,
            },
            f,
        )
    model.save(dist.worker_path(os.path.join(args.out_dir, "model.keras")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
