"""The torch peers of the benchmarks, timed in their own process.

Run by `bench_utils.torch_times`, never imported next to TensorFlow: after
TensorFlow's oneDNN kernels ran in the same process, torch float32 was
measured 20x slower (its threads and TensorFlow's compete). Takes one JSON
argument, `{"model": ..., "shape": {...}, "rounds": R, "iters": I}`, and
prints `{"torch float32": seconds, "torch bf16 autocast": seconds}` (median
seconds per training step) as the last line.

Models: "lstm", "gru", "rnn" (`torch.nn.LSTM/GRU/RNN`, batch_first, MSE on
all outputs) and "encoder" (`torch.nn.TransformerEncoderLayer`, post-LN,
relu, no dropout; its attention runs `scaled_dot_product_attention`).
"""

import json
import os
import statistics
import sys
import time

import numpy as np
import torch


def build(model, shape):
    if model in ("lstm", "gru", "rnn"):
        cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU,
               "rnn": torch.nn.RNN}[model]
        net = cls(shape["features"], shape["units"], batch_first=True)
        x = (shape["batch"], shape["steps"], shape["features"])
        y = (shape["batch"], shape["steps"], shape["units"])
        return net, (lambda x: net(x)[0]), x, y
    if model == "encoder":
        net = torch.nn.TransformerEncoderLayer(
            shape["dim"], shape["heads"], shape["ffn"], dropout=0.0,
            batch_first=True)
        x = (shape["batch"], shape["steps"], shape["dim"])
        return net, net, x, x
    raise ValueError(f"unknown model {model!r}")


def main(spec):
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    torch.manual_seed(0)
    net, forward, x_shape, y_shape = build(spec["model"], spec["shape"])
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=x_shape).astype("float32"))
    y = torch.from_numpy(rng.normal(size=y_shape).astype("float32"))
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    result = {}
    for name, bf16 in (("torch float32", False),
                       ("torch bf16 autocast", True)):
        def step():
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = forward(x)
            torch.mean((out.float() - y) ** 2).backward()
            opt.step()

        step()
        times = []
        for _ in range(spec["rounds"]):
            start = time.perf_counter()
            for _ in range(spec["iters"]):
                step()
            times.append((time.perf_counter() - start) / spec["iters"])
        result[name] = statistics.median(times)
    print(json.dumps(result))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
