"""The served pretrained classifier against `transformers` (torch) on the
same checkpoint, tokenizer included on both sides, each in its own
process, at one batch size.

    python benchmarks/pretrained_serving.py \\
        --savedmodel runs/sst2-minilm/export/sentiment/1 \\
        --checkpoint checkpoints/all-MiniLM-L6-v2 \\
        --data ../shared/data/sst2/dev.tsv --batch 32

Ours: the exported `serve_text` signature (raw strings in, probabilities
out, the WordPiece tokenizer in the graph), loaded in a process without
seqkeras (TensorFlow and TF Text only). The peer: `transformers`'
`AutoTokenizer` (the fast Rust tokenizer) and `AutoModel` on the
checkpoint directory, mean pooling and a linear head, in float32 and
under `torch.autocast(bfloat16)`, `torch.set_num_threads` = the cores.
Each side tokenizes and runs every sentence of `--data` in batches of
`--batch`, after one warm-up pass, for at least `--seconds`; printed:
sentences/s per configuration and ours-best / peer-best.
"""

import argparse
import json
import os
import subprocess
import sys

OURS = r"""
import json, os, sys, time
sys.modules["seqkeras"] = None  # a server has no seqkeras
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf, tensorflow_text  # noqa
texts, batch, seconds = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
serve = tf.saved_model.load(sys.argv[4]).signatures["serve_text"]
batches = [tf.constant(texts[i:i + batch]) for i in range(0, len(texts), batch)]
for b in batches:
    serve(text=b)["probabilities"].numpy()
n, start = 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    for b in batches:
        serve(text=b)["probabilities"].numpy()
    n += len(texts)
print(json.dumps({"ours serve_text (TF, float32)": n / (time.perf_counter() - start)}))
"""

PEER = r"""
import json, os, sys, time
import torch, transformers
texts, batch, seconds = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
torch.set_num_threads(os.cpu_count())
tok = transformers.AutoTokenizer.from_pretrained(sys.argv[4])
model = transformers.AutoModel.from_pretrained(sys.argv[4]).eval()
head = torch.nn.Linear(model.config.hidden_size, 2)
def run(chunk, bf16):
    enc = tok(chunk, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
        h = model(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1)
        return torch.softmax(head(pooled.float()).float(), -1).numpy()
out = {}
for bf16 in (False, True):
    chunks = [texts[i:i + batch] for i in range(0, len(texts), batch)]
    for c in chunks:
        run(c, bf16)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for c in chunks:
            run(c, bf16)
        n += len(texts)
    name = "transformers (torch " + ("autocast bfloat16" if bf16 else "float32") + ")"
    out[name] = n / (time.perf_counter() - start)
print(json.dumps(out))
"""


def read_sentences(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()[1:]
    return [line.split("\t")[0] for line in lines if line.strip()]


def child(code, texts, args, directory):
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(texts), str(args.batch), str(args.seconds)]
        + [directory],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    if result.returncode:
        raise SystemExit(result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--savedmodel", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data", required=True, help="an SST-2 style TSV (sentence, label)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--limit", type=int, default=None, help="use the first N sentences")
    args = p.parse_args(argv)
    texts = read_sentences(args.data)[: args.limit]
    ours = child(OURS, texts, args, args.savedmodel)
    peers = child(PEER, texts, args, args.checkpoint)
    print(f"{len(texts)} sentences, batch {args.batch}, {os.cpu_count()} cores")
    for name, rate in sorted({**ours, **peers}.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<42} {rate:8.1f} sentences/s")
    print(f"ours-best / peer-best = {max(ours.values()) / max(peers.values()):.2f}x")


if __name__ == "__main__":
    main()
