"""Language-model generation against its peers: one GPT-2-shaped model
(random weights, tied output) written once as a Hugging Face checkpoint
(`save_checkpoint`) and as our SavedModel, then timed by each engine in
its own process on the same weights and prompts.

    # 1. the model, its checkpoint, our export and the prompts
    python benchmarks/lm_peers.py prepare --config gpt2-6 --out /tmp/lmp/gpt2-6
    # 2. every engine, one process each
    python benchmarks/lm_peers.py time /tmp/lmp/gpt2-6

Configurations (`--config`):
- `gpt2-6`: 6 layers, d 384, 6 heads, FFN 1,536, vocabulary 50,257; a
  32-token prompt, then 64 greedy tokens; batches 1 and 8.
- `gpt2-124m`: GPT-2 small's shape (12 layers, d 768, 12 heads).
- `small-1000`, `small-50257`: 4 layers, d 128, 4 heads, FFN 512, 256
  positions, vocabulary 1,000 or 50,257; a 16-token prompt, then 240
  greedy tokens; batch 8 (`benchmarks/decoding.py`'s anchor).

Engines (`--engines`):
- `served`: our SavedModel's `generate` signature (the default graph) in
  a process where seqkeras cannot be imported, as TF Serving runs it;
- `xla`: `seqkeras.models.generate(..., jit_compile=True)` (Keras);
- `torch`, `torch-bf16`: `transformers`' `GPT2LMHeadModel.generate`,
  float32 and under `torch.autocast(bfloat16)`;
- `ct2`, `ct2-int8`: CTranslate2's `Generator` on the same weights
  (converted with its own `GPT2Loader`), float32 and int8.

No end token: every row generates every new token. Prints new tokens/s
(the whole batch; the best of `--rounds` after one warm-up call) and
ours-best / peer-best, and counts the rows whose ids equal the served
export's (greedy on random weights: float rounding can flip a near tie).
"""

import argparse
import json
import os
import subprocess
import sys

CONFIGS = {
    "gpt2-6": dict(
        arch=dict(num_layers=6, hidden_dim=384, num_heads=6, intermediate_dim=1536),
        vocab=50257,
        positions=1024,
        prompt=32,
        new=64,
        batches=[1, 8],
    ),
    "gpt2-124m": dict(
        arch=dict(num_layers=12, hidden_dim=768, num_heads=12, intermediate_dim=3072),
        vocab=50257,
        positions=1024,
        prompt=32,
        new=64,
        batches=[1, 8],
    ),
    "tiny": dict(  # a smoke run
        arch=dict(num_layers=2, hidden_dim=32, num_heads=2, intermediate_dim=64),
        vocab=100,
        positions=64,
        prompt=8,
        new=8,
        batches=[2],
    ),
    "small-1000": dict(
        arch=dict(num_layers=4, hidden_dim=128, num_heads=4, intermediate_dim=512),
        vocab=1000,
        positions=256,
        prompt=16,
        new=240,
        batches=[8],
    ),
    "small-50257": dict(
        arch=dict(num_layers=4, hidden_dim=128, num_heads=4, intermediate_dim=512),
        vocab=50257,
        positions=256,
        prompt=16,
        new=240,
        batches=[8],
    ),
}
ENGINES = ("served", "xla", "torch", "torch-bf16", "ct2", "ct2-int8")
OURS = ("served", "xla")


def architecture(config):
    c = CONFIGS[config]
    return dict(
        model_type="gpt2",
        vocab_size=c["vocab"],
        max_length=c["positions"],
        dropout=0.0,
        **c["arch"],
    )


def prepare(args):
    import keras
    import numpy as np

    import seqkeras.pretrained as sp
    from seqkeras.export import saved_model
    from seqkeras.export.signatures import Generate

    c = CONFIGS[args.config]
    arch = architecture(args.config)
    keras.utils.set_random_seed(0)
    model = sp.gpt2_language_model(arch)
    # GPT-2's initialisation scale (0.02): logits spread as a trained model's
    rng = np.random.default_rng(0)
    model.set_weights(
        [
            (rng.normal(0, 0.02, w.shape) if w.ndim > 1 else w).astype(np.float32)
            for w in model.get_weights()
        ]
    )
    os.makedirs(args.out, exist_ok=True)
    sp.save_checkpoint(model, os.path.join(args.out, "hf"), arch)
    signature = Generate(c["prompt"] + c["new"])
    signature.eos_id = None  # no end token: every row runs every step
    saved_model(model, os.path.join(args.out, "served", "1"), [signature], overwrite=True)
    prompts = rng.integers(0, c["vocab"], size=(max(c["batches"]), c["prompt"]), dtype=np.int32)
    np.save(os.path.join(args.out, "prompts.npy"), prompts)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump({"config": args.config, **c}, f)
    print(args.out)


# Each engine: a program run as `python -c PROGRAM DIR BATCH ROUNDS`,
# printing {"seconds": best, "ids": new ids}.
_COMMON = r"""
import json, os, sys, time
import numpy as np
out, batch, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
config = json.load(open(os.path.join(out, "config.json")))
prompts = np.load(os.path.join(out, "prompts.npy"))[:batch]
new = config["new"]
def timed(fn):
    ids = fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    print(json.dumps({"seconds": best, "ids": np.asarray(ids)[:, -new:].tolist()}))
"""

_PROGRAMS = {
    "served": r"""
sys.modules["seqkeras"] = None
import tensorflow as tf
fn = tf.saved_model.load(os.path.join(out, "served", "1")).signatures["generate"]
timed(lambda: fn(prompt_ids=tf.constant(prompts))["ids"].numpy())
""",
    "xla": r"""
import seqkeras, seqkeras.pretrained as sp
arch = dict(model_type="gpt2", vocab_size=config["vocab"], max_length=config["positions"],
            dropout=0.0, **config["arch"])
model = sp.gpt2_language_model(arch)
sp.load_pretrained(model, os.path.join(out, "hf"))
total = config["prompt"] + new
timed(lambda: np.asarray(seqkeras.models.generate(
    model, prompt=prompts, max_length=total, eos_id=None, jit_compile=True)))
""",
    "torch": r"""
import torch, transformers
model = transformers.GPT2LMHeadModel.from_pretrained(os.path.join(out, "hf")).eval()
x = torch.tensor(prompts, dtype=torch.long)
def run():
    with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=BF16):
        return model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new,
                              min_new_tokens=new, do_sample=False, pad_token_id=0,
                              eos_token_id=None).numpy()
timed(run)
""",
    "ct2": r"""
import tempfile, ctranslate2, transformers
from ctranslate2.converters.transformers import GPT2Loader
model = transformers.GPT2LMHeadModel.from_pretrained(os.path.join(out, "hf")).eval()
loader = GPT2Loader()
spec = loader.get_model_spec(model)
tokens = [f"t{i}" for i in range(config["vocab"])]
loader.set_vocabulary(spec, tokens)
spec.config.bos_token, spec.config.eos_token, spec.config.unk_token = "t1", "t2", "t3"
spec.validate()
spec.optimize(quantization=QUANTIZATION)
where = tempfile.mkdtemp()
spec.save(where)
generator = ctranslate2.Generator(where, device="cpu", inter_threads=1, intra_threads=2)
start = [[tokens[i] for i in row] for row in prompts]
index = {t: i for i, t in enumerate(tokens)}
def run():
    results = generator.generate_batch(start, max_length=new, min_length=new, sampling_topk=1,
                                       include_prompt_in_result=False, end_token=[])
    return np.array([r.sequences_ids[0] for r in results])
timed(run)
""",
}


def program(engine):
    if engine.startswith("torch"):
        body = _PROGRAMS["torch"].replace("BF16", str(engine == "torch-bf16"))
    elif engine.startswith("ct2"):
        q = "'int8'" if engine == "ct2-int8" else "None"
        body = _PROGRAMS["ct2"].replace("QUANTIZATION", q)
    else:
        body = _PROGRAMS[engine]
    return _COMMON + body


def run_engine(engine, out, batch, rounds):
    result = subprocess.run(
        [sys.executable, "-c", program(engine), out, str(batch), str(rounds)],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if result.returncode:
        print(f"{engine}: failed\n{result.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def time_engines(args):
    with open(os.path.join(args.out, "config.json")) as f:
        c = json.load(f)
    batches = args.batches or c["batches"]
    summary = {}
    for batch in batches:
        results = {e: run_engine(e, args.out, batch, args.rounds) for e in args.engines}
        reference = results.get("served")
        print(f"\n{c['config']}, batch {batch}, {c['prompt']}-token prompt, {c['new']} new tokens")
        speeds = {}
        for engine, r in results.items():
            if r is None:
                continue
            speeds[engine] = batch * c["new"] / r["seconds"]
            same = ""
            if reference is not None and engine != "served":
                rows = sum(a == b for a, b in zip(r["ids"], reference["ids"]))
                same = f"  ({rows}/{batch} rows = served ids)"
            print(f"  {engine:11s} {speeds[engine]:9.1f} tokens/s{same}")
        ours = [speeds[e] for e in OURS if e in speeds]
        peers = {e: s for e, s in speeds.items() if e not in OURS}
        if ours and peers:
            best = max(peers, key=peers.get)
            print(f"  ours-best / peer-best ({best}): {max(ours) / peers[best]:.2f}x")
        summary[batch] = speeds
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("prepare")
    m.add_argument("--config", choices=sorted(CONFIGS), required=True)
    m.add_argument("--out", required=True)
    t = sub.add_parser("time")
    t.add_argument("out")
    t.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    t.add_argument("--batches", type=int, nargs="+")
    t.add_argument("--rounds", type=int, default=3)
    t.add_argument("--json")
    args = p.parse_args(argv)
    {"prepare": prepare, "time": time_engines}[args.command](args)


if __name__ == "__main__":
    main()
