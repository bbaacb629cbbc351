"""Attention seq2seq training speed: seqkeras vs PyTorch, same shapes.

    python benchmarks/seq2seq.py [--quick] [--rounds N]

The model is the shape of bentrevett/pytorch-seq2seq's attention model
(notebook 3, Bahdanau et al.): embedding 256, bidirectional GRU encoder of
256 per direction, its final states through tanh(Linear) into a GRU
decoder of 512, additive attention (hidden 512) over the encoder outputs
at every step, logits from [decoder state; context]. Batch 128,
Multi30k-like lengths (10-30 tokens per side, right-padded to 30),
vocabularies 7,800 (source) and 5,900 (target), teacher forcing, Adam,
cross-entropy over the real target tokens.

Peers, each in the configurations a user would pick:
- seqkeras `models.seq2seq(..., attention="additive")`: float32 and
  mixed_bfloat16, each with and without XLA (`compile_model`'s "auto"
  picks XLA for float32 and no XLA for mixed_bfloat16 on CPUs);
- torch float32 and `torch.autocast("cpu", torch.bfloat16)`, in its own
  process (TensorFlow's threads disturb it in one process).

Prints target tokens per second for each and ours-best / torch-best.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

B, T, SRC_V, TGT_V = 128, 30, 7800, 5900
EMB, ENC, DEC = 256, 256, 512


def batch(seed=0, batch_size=B, steps=T):
    rng = np.random.default_rng(seed)
    src = rng.integers(4, SRC_V, (batch_size, steps)).astype("int32")
    tgt = rng.integers(4, TGT_V, (batch_size, steps + 1)).astype("int32")
    for rows, n in ((src, steps), (tgt, steps + 1)):
        lengths = rng.integers(10, n + 1, batch_size)
        rows[np.arange(n)[None] >= lengths[:, None]] = 0
    tgt[:, 0] = 1  # BOS
    return src, tgt[:, :-1], tgt[:, 1:]


def seqkeras_step(policy, jit, batch_size, steps):
    import keras

    import seqkeras

    keras.mixed_precision.set_global_policy(policy)
    model = seqkeras.models.seq2seq(
        SRC_V, TGT_V, embedding_dim=EMB, units=DEC, encoder_units=ENC,
        cell="gru", attention="additive", attention_units=DEC,
        bidirectional=True)
    seqkeras.models.compile_model(model, optimizer=keras.optimizers.Adam(
        1e-3), jit_compile=jit)
    src, tgt_in, tgt_out = batch(0, batch_size, steps)
    x = {"source_ids": src, "target_ids": tgt_in}
    model.train_on_batch(x, tgt_out)  # compile
    keras.mixed_precision.set_global_policy("float32")
    return lambda: model.train_on_batch(x, tgt_out)


TORCH = r'''
import json, sys, time
import numpy as np, torch, torch.nn as nn
torch.set_num_threads(int(sys.argv[2]))
B, T, SRC_V, TGT_V, EMB, ENC, DEC, rounds, iters = json.loads(sys.argv[1])

class Encoder(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(SRC_V, EMB, padding_idx=0)
        s.rnn = nn.GRU(EMB, ENC, bidirectional=True, batch_first=True)
        s.fc = nn.Linear(2 * ENC, DEC)
    def forward(s, src):
        out, h = s.rnn(s.emb(src))
        return out, torch.tanh(s.fc(torch.cat([h[-2], h[-1]], 1)))

class Attention(nn.Module):
    def __init__(s):
        super().__init__()
        s.attn = nn.Linear(2 * ENC + DEC, DEC)
        s.v = nn.Linear(DEC, 1, bias=False)
    def forward(s, hidden, out, mask):
        h = hidden.unsqueeze(1).expand(-1, out.shape[1], -1)
        e = s.v(torch.tanh(s.attn(torch.cat([h, out], 2)))).squeeze(2)
        return torch.softmax(e.masked_fill(~mask, -1e10), 1)

class Decoder(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(TGT_V, EMB, padding_idx=0)
        s.attention = Attention()
        s.rnn = nn.GRUCell(EMB + 2 * ENC, DEC)
        s.fc = nn.Linear(DEC + 2 * ENC, TGT_V)
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

rng = np.random.default_rng(0)
src = rng.integers(4, SRC_V, (B, T)); tgt = rng.integers(4, TGT_V, (B, T + 1))
for rows, n in ((src, T), (tgt, T + 1)):
    lengths = rng.integers(10, n + 1, B)
    rows[np.arange(n)[None] >= lengths[:, None]] = 0
tgt[:, 0] = 1
src, tgt_in, tgt_out = (torch.tensor(a) for a in (src, tgt[:, :-1], tgt[:, 1:]))
model = Seq2Seq()
opt = torch.optim.Adam(model.parameters(), 1e-3)
loss_fn = nn.CrossEntropyLoss(ignore_index=0)
result = {}
for name, bf16 in (("torch float32", False), ("torch bf16 autocast", True)):
    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt_in)
        loss = loss_fn(logits.float().reshape(-1, TGT_V), tgt_out.reshape(-1))
        loss.backward()
        opt.step()
    step()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iters):
            step()
        times.append((time.perf_counter() - start) / iters)
    result[name] = float(np.median(times))
print(json.dumps(result))
'''


def torch_times(rounds, iters, batch_size, steps, threads):
    args = json.dumps([batch_size, steps, SRC_V, TGT_V, EMB, ENC, DEC,
                       rounds, iters])
    out = subprocess.run([sys.executable, "-c", TORCH, args, str(threads)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="batch 16, length 12, 1 round: checks that it runs")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--no-torch", action="store_true")
    args = p.parse_args(argv)
    batch_size, steps = (16, 12) if args.quick else (B, T)
    rounds, iters = (1, 1) if args.quick else (args.rounds, args.iters)
    threads = len(os.sched_getaffinity(0))
    from bench_utils import time_rounds

    tokens = batch_size * steps
    results = {}
    if not args.no_torch:
        results.update(torch_times(rounds, iters, batch_size, steps,
                                   threads))
    steps_fns = {
        f"seqkeras {policy}, {'jit' if jit else 'no jit'}": seqkeras_step(
            policy, jit, batch_size, steps)
        for policy in ("float32", "mixed_bfloat16") for jit in (True, False)}
    results.update(time_rounds(steps_fns, rounds, iters))
    if not args.no_torch:  # torch again, after the Keras rounds
        again = torch_times(rounds, iters, batch_size, steps, threads)
        results = {k: min(v, again.get(k, v)) for k, v in results.items()}
    print(f"attention seq2seq training, batch {batch_size}, length "
          f"{steps}, {threads} threads; target tokens/s (median)")
    for name, seconds in results.items():
        print(f"  {name:28s} {tokens / seconds:10.0f}")
    ours = max(tokens / s for k, s in results.items()
               if k.startswith("seqkeras"))
    peer = [tokens / s for k, s in results.items() if k.startswith("torch")]
    if peer:
        print(f"ours-best / torch-best = {ours / max(peer):.2f}x")
    return results


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    start = time.perf_counter()
    main()
    print(f"wall {time.perf_counter() - start:.0f} s")
