"""Error inputs of `seqkeras.distribute`: a `TF_CONFIG` that is not the
cluster description `tf.distribute` needs, and arguments of the wrong
kind."""

from seqkeras import distribute
from tests.error_inputs import entry, opt_out

P = "seqkeras.distribute."
WORKERS = '{"cluster": {"worker": ["a:1", "b:1"]}, '
BAD = {
    "not JSON": "{",
    "no cluster": '{"task": {"type": "worker", "index": 0}}',
    "a task outside the cluster": WORKERS + '"task": {"type": "worker", "index": 2}}',
}
for what, config in BAD.items():
    environ = {"TF_CONFIG": config}
    entry(
        P + "cluster_spec",
        "TF_CONFIG",
        lambda e=environ: distribute.cluster_spec(e),
        named="seqkeras.distribute",
    )
    entry(
        P + "is_chief",
        "TF_CONFIG",
        lambda e=environ: distribute.is_chief(e),
        named="seqkeras.distribute",
    )
entry(P + "get_strategy", "name", lambda: distribute.get_strategy("gpu"))
entry(P + "get_strategy", "TF_CONFIG", lambda: distribute.get_strategy("multiworker"))
entry(P + "worker_path", "path", lambda: distribute.worker_path(3))
entry(P + "distributes", "strategy", lambda: distribute.distributes("mirrored"))
opt_out(P + "STRATEGIES", "a constant: the tuple of names get_strategy takes")


def _lm():
    import seqkeras

    return seqkeras.models.decoder_language_model(
        vocab_size=8, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=8
    )


def _mesh():
    import keras

    return keras.distribution.DeviceMesh((1, 2), ("batch", "model"), ["cpu:0", "cpu:1"])


entry(P + "layout_map", "model", lambda: distribute.layout_map("lm", _mesh()))
entry(P + "layout_map", "model", lambda: distribute.layout_map(_lm, _mesh()))
entry(P + "layout_map", "device_mesh", lambda: distribute.layout_map(_lm(), (1, 2)))
entry(P + "layout_map", "axis", lambda: distribute.layout_map(_lm(), _mesh(), axis="tensor"))
entry(P + "get_distribution", "name", lambda: distribute.get_distribution("tensor"))
entry(P + "get_distribution", "model", lambda: distribute.get_distribution("model"))
entry(
    P + "get_distribution",
    "model_devices",
    lambda: distribute.get_distribution("model", _lm(), model_devices=3),
)
entry(
    P + "get_distribution",
    "model_devices",
    lambda: distribute.get_distribution("data", model_devices=0),
)
# this registry runs on TensorFlow: keras.distribution is JAX's here
entry(P + "get_distribution", "backend", lambda: distribute.get_distribution("data"))
opt_out(P + "DISTRIBUTIONS", "a constant: the tuple of names get_distribution takes")
