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
