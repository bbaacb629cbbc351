"""The torch peers of the benchmarks, timed in their own process.

Run by `bench_utils.torch_times`, never imported next to TensorFlow: after
TensorFlow's oneDNN kernels ran in the same process, torch float32 was
measured 20x slower (its threads and TensorFlow's compete). Takes one JSON
argument, `{"model": ..., "shape": {...}, "rounds": R, "iters": I}`, and
prints `{"torch float32": seconds, "torch bf16 autocast": seconds}` (median
seconds per training step) as the last line.

Models: "lstm", "gru", "rnn" (`torch.nn.LSTM/GRU/RNN`, batch_first, MSE on
all outputs, SGD), "encoder" (`torch.nn.TransformerEncoderLayer`, post-LN,
relu, no dropout; its attention runs `scaled_dot_product_attention`; MSE,
SGD), "seq2seq" (bentrevett/pytorch-seq2seq's attention model, on
`seq2seq.py`'s batch; cross-entropy over real tokens, Adam), and the
linear recurrences' peers (`linear_recurrences.py`; MSE, SGD):
"mamba_transformers" (`transformers`' `MambaBlock`, its pure-torch path),
"mamba_mambapy" (mambapy's one-layer `Mamba`, its parallel scan) and
"mingru_pytorch" (mingru-pytorch's `minGRU`, its log-space scan).
"""

import json
import os
import statistics
import sys
import time

import numpy as np
import torch


def build(model, shape):
    """`(module, forward, loss, optimizer class)`: `forward()` runs under
    autocast, `loss(out)` in float32 after it."""
    rng = np.random.default_rng(0)

    def normal(*dims):
        return torch.from_numpy(rng.normal(size=dims).astype("float32"))

    def mse(y):
        return lambda out: torch.mean((out.float() - y) ** 2)

    if model in ("lstm", "gru", "rnn"):
        cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[model]
        net = cls(shape["features"], shape["units"], batch_first=True)
        x = normal(shape["batch"], shape["steps"], shape["features"])
        y = normal(shape["batch"], shape["steps"], shape["units"])
        return net, (lambda: net(x)[0]), mse(y), torch.optim.SGD
    if model == "encoder":
        net = torch.nn.TransformerEncoderLayer(
            shape["dim"], shape["heads"], shape["ffn"], dropout=0.0, batch_first=True
        )
        x = normal(shape["batch"], shape["steps"], shape["dim"])
        y = normal(shape["batch"], shape["steps"], shape["dim"])
        return net, (lambda: net(x)), mse(y), torch.optim.SGD
    if model == "seq2seq":
        from seq2seq import batch  # the batch ours trains on

        net = seq2seq_model(**shape["dims"])
        src, tgt_in, tgt_out = (
            torch.from_numpy(a).long() for a in batch(0, shape["batch"], shape["steps"])
        )
        ce = torch.nn.CrossEntropyLoss(ignore_index=0)
        vocab = shape["dims"]["tgt_vocab"]
        return (
            net,
            (lambda: net(src, tgt_in)),
            (lambda out: ce(out.float().reshape(-1, vocab), tgt_out.reshape(-1))),
            torch.optim.Adam,
        )
    if model in ("mamba_transformers", "mamba_mambapy", "mingru_pytorch"):
        dim = shape["dim"]
        x = normal(shape["batch"], shape["steps"], dim)
        y = normal(shape["batch"], shape["steps"], dim)
        if model == "mamba_transformers":  # its pure-torch path (no CUDA kernels here)
            import transformers
            from transformers.models.mamba.modeling_mamba import MambaBlock

            config = transformers.MambaConfig(hidden_size=dim, state_size=16, expand=2)
            net = MambaBlock(config, layer_idx=0)
            return net, (lambda: net(x)), mse(y), torch.optim.SGD
        if model == "mamba_mambapy":  # its parallel (Blelloch) scan
            from mambapy.mamba import Mamba, MambaConfig

            net = Mamba(MambaConfig(d_model=dim, n_layers=1, d_state=16, expand_factor=2))
            return net, (lambda: net(x)), mse(y), torch.optim.SGD
        from minGRU_pytorch.minGRU import minGRU

        net = minGRU(dim)
        return net, (lambda: net(x)), mse(y), torch.optim.SGD
    raise ValueError(f"unknown model {model!r}")


def seq2seq_model(src_vocab, tgt_vocab, emb, enc, dec):
    """bentrevett/pytorch-seq2seq's attention model (notebook 3): a
    bidirectional GRU encoder, its final states through tanh(Linear) into
    a GRU decoder, additive attention over the encoder outputs at every
    step, logits from [decoder state; context]; teacher forcing."""
    nn = torch.nn

    class Encoder(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(src_vocab, emb, padding_idx=0)
            s.rnn = nn.GRU(emb, enc, bidirectional=True, batch_first=True)
            s.fc = nn.Linear(2 * enc, dec)

        def forward(s, src):
            out, h = s.rnn(s.emb(src))
            return out, torch.tanh(s.fc(torch.cat([h[-2], h[-1]], 1)))

    class Attention(nn.Module):
        def __init__(s):
            super().__init__()
            s.attn = nn.Linear(2 * enc + dec, dec)
            s.v = nn.Linear(dec, 1, bias=False)

        def forward(s, hidden, out, mask):
            h = hidden.unsqueeze(1).expand(-1, out.shape[1], -1)
            e = s.v(torch.tanh(s.attn(torch.cat([h, out], 2)))).squeeze(2)
            return torch.softmax(e.masked_fill(~mask, -1e10), 1)

    class Decoder(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(tgt_vocab, emb, padding_idx=0)
            s.attention = Attention()
            s.rnn = nn.GRUCell(emb + 2 * enc, dec)
            s.fc = nn.Linear(dec + 2 * enc, tgt_vocab)

        def forward(s, tokens, hidden, out, mask):
            a = s.attention(hidden, out, mask)
            context = torch.bmm(a.unsqueeze(1), out).squeeze(1)
            hidden = s.rnn(torch.cat([s.emb(tokens), context], 1), hidden)
            return s.fc(torch.cat([hidden, context], 1)), hidden

    class Seq2Seq(nn.Module):
        def __init__(s):
            super().__init__()
            s.encoder, s.decoder = Encoder(), Decoder()

        def forward(s, src, tgt_in):
            out, hidden = s.encoder(src)
            mask = src != 0
            logits = []
            for t in range(tgt_in.shape[1]):  # teacher forcing
                y, hidden = s.decoder(tgt_in[:, t], hidden, out, mask)
                logits.append(y)
            return torch.stack(logits, 1)

    return Seq2Seq()


def main(spec):
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    torch.manual_seed(0)
    net, forward, loss, optimizer = build(spec["model"], spec["shape"])
    opt = optimizer(net.parameters(), lr=1e-3)
    result = {}
    for name, bf16 in (("torch float32", False), ("torch bf16 autocast", True)):

        def step():
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = forward()
            loss(out).backward()
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
