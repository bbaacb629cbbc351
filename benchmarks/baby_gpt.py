"""nanoGPT's CPU "baby GPT" on tiny-shakespeare, with
`seqkeras.models.transformer_language_model`.

The configuration of nanoGPT's README CPU run (`train.py
config/train_shakespeare_char.py --device=cpu --compile=False
--eval_iters=20 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
--n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0`):
4 layers, 4 heads, 128 dims, context 64, batch 12, 2000 iterations, AdamW
(lr 1e-3, 100 warm-up steps, cosine decay to 1e-4, beta2 0.99, weight
decay 0.1 on matrices, gradient clipping 1.0), characters as tokens, first
90% train / last 10% validation. nanoGPT's figure on this machine: val
loss 1.886 after 121 s wall.

    python benchmarks/baby_gpt.py                 # needs ../shared/data
    python benchmarks/baby_gpt.py --iters 200     # a quick look

Prints the validation loss (mean over `--eval-batches` random windows,
nanoGPT's estimator with more batches) and the wall time of training
(compilation included) and of the whole script.
"""

import argparse
import os
import time

START = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import seqkeras  # noqa: E402
from seqkeras.data import CharVocabulary, read_tinyshakespeare  # noqa: E402

NANOGPT_VAL_LOSS, NANOGPT_SECONDS = 1.886, 121.0


def windows(ids, n, block, rng):
    starts = rng.integers(0, len(ids) - block - 1, size=n)
    idx = starts[:, None] + np.arange(block + 1)
    chunk = ids[idx]
    return chunk[:, :-1], chunk[:, 1:]


def build(vocab_size, args):
    model = seqkeras.models.transformer_language_model(
        vocab_size,
        args.block,
        num_layers=args.layers,
        num_heads=args.heads,
        hidden_dim=args.dim,
        dropout=0.0,
    )
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0,
        args.iters - args.warmup,
        alpha=args.min_lr / args.lr,
        warmup_target=args.lr,
        warmup_steps=args.warmup,
    )
    optimizer = keras.optimizers.AdamW(
        schedule, weight_decay=0.1, beta_1=0.9, beta_2=0.99, global_clipnorm=1.0
    )
    # nanoGPT decays matrices only: not biases, LayerNorm or positions'
    # 1-D parameters.
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    seqkeras.training.compile_model(
        model, optimizer=optimizer, steps_per_execution=args.steps_per_call
    )
    return model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="tiny-shakespeare input.txt")
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=200)
    p.add_argument("--steps-per-call", type=int, default=50)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument(
        "--prompt", default="ROMEO:\n", help="generate from this prompt with each strategy"
    )
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument(
        "--quick", action="store_true", help="a smoke run: 20 iterations, 1 layer, 3 new tokens"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.iters, args.eval_batches, args.layers = 20, 2, 1
        args.steps_per_call, args.warmup, args.new_tokens = 10, 5, 3

    keras.utils.set_random_seed(args.seed)
    train_text, val_text = read_tinyshakespeare(args.data)
    vocab = CharVocabulary.from_texts([train_text + val_text])
    train, val = vocab.encode_text(train_text), vocab.encode_text(val_text)
    rng = np.random.default_rng(args.seed)
    x, y = windows(train, args.iters * args.batch, args.block, rng)
    xv, yv = windows(val, args.eval_batches * args.batch, args.block, rng)
    model = build(len(vocab), args)
    start = time.perf_counter()
    model.fit(x, y, batch_size=args.batch, epochs=1, shuffle=False, verbose=0)
    train_s = time.perf_counter() - start
    val_loss = model.evaluate(xv, yv, batch_size=args.batch * 10, verbose=0, return_dict=True)[
        "loss"
    ]
    total_s = time.perf_counter() - START
    print(
        f"baby GPT ({args.layers} layers, {args.heads} heads, {args.dim} "
        f"dims, context {args.block}, batch {args.batch}, {args.iters} "
        f"iterations), {model.count_params()} parameters, vocabulary "
        f"{len(vocab)}; {os.cpu_count()} CPU cores"
    )
    print(f"{'':12}{'val loss':>10}{'train s':>10}{'total s':>10}")
    print(f"{'seqkeras':12}{val_loss:>10.3f}{train_s:>10.1f}{total_s:>10.1f}")
    print(f"{'nanoGPT':12}{NANOGPT_VAL_LOSS:>10.3f}{'':>10}{NANOGPT_SECONDS:>10.1f}")
    samples = {}
    if args.prompt and args.new_tokens > 0:
        samples = generate_samples(model, vocab, args)
    return {
        "val_loss": val_loss,
        "train_s": train_s,
        "total_s": total_s,
        "model": model,
        "vocab": vocab,
        "samples": samples,
    }


STRATEGIES = {
    "greedy": {"strategy": "greedy"},
    "beam (4, alpha 0.6)": {"strategy": "beam", "beam_width": 4, "length_penalty_alpha": 0.6},
    "top-k 10": {"strategy": "sample", "top_k": 10, "seed": 1},
    "top-p 0.9": {"strategy": "sample", "top_p": 0.9, "seed": 1},
    "temperature 0.7": {"strategy": "sample", "temperature": 0.7, "seed": 1},
}


def generate_samples(model, vocab, args):
    """Continues `args.prompt` with each decoding strategy (the context is
    the model's `block` positions, so prompt + new tokens must fit)."""
    prompt = vocab.encode_text(args.prompt)[None]
    length = min(args.block, prompt.shape[1] + args.new_tokens)
    print(f"generated from {args.prompt!r} ({length - prompt.shape[1]} new characters):")
    samples = {}
    for name, kwargs in STRATEGIES.items():
        out = seqkeras.models.generate(
            model, prompt=prompt, max_length=length, eos_id=None, **kwargs
        )
        ids = np.asarray(out[0] if isinstance(out, tuple) else out)[0]
        text = "".join(vocab.tokens[i] for i in ids[prompt.shape[1] :])
        samples[name] = text
        print(f"--- {name}\n{args.prompt}{text}")
    return samples


if __name__ == "__main__":
    main()
