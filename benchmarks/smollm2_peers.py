"""SmolLM2-135M-Instruct against its peers, each engine in its own process
on the same GGUF weights: a 128-token prompt (the start of
tiny-shakespeare's validation tenth), then 128 greedy tokens, batch 1, 2
threads. Prints prefill tokens/s, decode tokens/s, the process's peak
resident memory, the model's size on disk and how many of the 128 tokens
equal llama.cpp's (Q4_1, the file as shipped).

    python apps/instruct.py export --init smollm2 --out /tmp/phone   # or a fine-tuned model
    python benchmarks/smollm2_peers.py --bundle /tmp/phone
    python benchmarks/smollm2_peers.py --bundle /tmp/phone --engines llama.cpp-q4_1 tflite-int8

Engines (`--engines`, default all):
  llama.cpp-q4_1, llama.cpp-q8_0  `llama-cpp-python` (the `bench` extra): the
        GGUF as shipped (Q4_1) and requantized to Q8_0 by llama.cpp's
        `llama_model_quantize` (a file in the bundle's directory);
        `eval` of the prompt, then one `eval` per token, the last
        position's logits read with `llama_get_logits_ith`.
  transformers-f32, transformers-bf16  `LlamaForCausalLM.generate` from the
        same GGUF (`gguf_file=`), torch float32 and
        `autocast("cpu", bfloat16)`.
  keras-hub-bf16, keras-hub-f32  keras-hub's `LlamaCausalLM.generate`
        (greedy sampler, `jit_compile=True`; `mixed_bfloat16` and float32:
        its two fastest configurations in benchmarks/llama_generate.py).
  ours-xla-f32, ours-xla-bf16  `seqkeras.models.generate(jit_compile=True)`,
        float32 and the model built under `mixed_bfloat16`.
  ours-savedmodel  the SavedModel `generate` signature (the default graph
        TF Serving runs, not XLA), written to the bundle's directory
        (`savedmodel/`) and loaded without seqkeras.
  tflite-f32, tflite-int8  the bundle's `model.tflite` and
        `model_int8.tflite` (XNNPACK, 2 threads) run by its `runner.py`
        (no seqkeras or TensorFlow in that process).
  runner-litert-lm-int8, runner-litert-lm-int4  the bundle's
        `litert_lm_int8.tflite` / `litert_lm_int4.tflite` (LiteRT-LM's
        layout) run by the bundle's `runner.py`, the caches written in place.
  litert-torch-f32, litert-torch-int8  litert-torch's own conversion of the
        same weights (`litert_torch_f32.tflite`, `litert_torch_q8.tflite` in
        the bundle: `benchmarks/litert_torch_peer.py` writes them), run by
        the bundle's `runner.py` like ours.
  litert-lm-int8, litert-lm-int4  the bundle's `litert_lm_int8.tflite` /
        `litert_lm_int4.tflite` (LiteRT-LM's layout: `apps/instruct.py
        export --litert-lm`) bundled by `litert-lm-builder` into
        `model.litertlm` / `model_int4.litertlm` and timed by LiteRT-LM's own `Benchmark`
        (CPU, 2 threads, 128 prefill and 128 decode tokens), in the
        virtual environment given by `--litert-lm-venv` (`pip install
        litert-lm`: not a seqkeras dependency); its tokens are not compared.

How prefill and decode are timed: engines with a step API (llama.cpp,
LiteRT) time the prompt's pass and the 128 one-token steps apart.
Engines with only a `generate` (transformers, keras-hub, ours) are timed
making 1 and 128 new tokens: prefill tokens/s = 128 / time(1 new token),
decode tokens/s = 127 / (time(128) - time(1)). Each timing is the median
of `--runs` runs after a warm-up (compilation) run. Peak memory is the
engine process's maximum resident set (VmHWM), imports included.
"""

import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

PROMPT_TOKENS = 128
NEW_TOKENS = 128
THREADS = 2
ENGINES = (
    "llama.cpp-q4_1",
    "llama.cpp-q8_0",
    "transformers-f32",
    "transformers-bf16",
    "keras-hub-bf16",
    "keras-hub-f32",
    "ours-xla-f32",
    "ours-xla-bf16",
    "ours-savedmodel",
    "tflite-f32",
    "tflite-int8",
    "runner-litert-lm-int8",
    "runner-litert-lm-int4",
    "litert-torch-f32",
    "litert-torch-int8",
    "litert-lm-int8",
    "litert-lm-int4",
)
LABELS = {
    "llama.cpp-q4_1": "llama.cpp, Q4_1 (as shipped)",
    "llama.cpp-q8_0": "llama.cpp, Q8_0 (requantized)",
    "transformers-f32": "transformers, torch float32",
    "transformers-bf16": "transformers, torch bfloat16 autocast",
    "keras-hub-bf16": "keras-hub, mixed_bfloat16, XLA",
    "keras-hub-f32": "keras-hub, float32, XLA",
    "ours-xla-f32": "ours, Keras generate, float32, XLA",
    "ours-xla-bf16": "ours, Keras generate, mixed_bfloat16, XLA",
    "ours-savedmodel": "ours, SavedModel generate (default graph)",
    "tflite-f32": "ours, LiteRT float32",
    "tflite-int8": "ours, LiteRT dynamic-range int8",
    "runner-litert-lm-int8": "ours, int8 in LiteRT-LM's layout, our runner",
    "runner-litert-lm-int4": "ours, int4 in LiteRT-LM's layout, our runner",
    "litert-torch-f32": "litert-torch 0.10.0, float32, our runner",
    "litert-torch-int8": "litert-torch 0.10.0, dynamic_int8, our runner",
    "litert-lm-int8": "ours, int8, LiteRT-LM runtime (.litertlm)",
    "litert-lm-int4": "ours, int4, LiteRT-LM runtime (.litertlm)",
}


def smollm2():
    import seqkeras.pretrained as sp

    return sp.smollm2_path()


def prompt_ids(path):
    """The first 128 ids of tiny-shakespeare's last tenth (SmolLM2's
    tokenizer, as ours and llama.cpp read it)."""
    from seqkeras.data import ByteLevelBPETokenizer
    from seqkeras.data.text import shared_data_dir

    root = shared_data_dir()
    with open(os.path.join(root, "tinyshakespeare", "input.txt"), encoding="utf-8") as f:
        text = f.read()
    text = text[int(0.9 * len(text)) :][:4000]  # the validation tenth, as the apps split it
    ids = ByteLevelBPETokenizer.load(path).encode([text]).to_list()[0]
    return ids[:PROMPT_TOKENS]


def peak_bytes():
    """This process's peak resident memory: /proc/self/status' VmHWM (the
    high-water mark of this program's memory since exec; `ru_maxrss` would
    report at least the parent's, which Linux carries across fork and exec)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def size_on_disk(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


def median_time(run, runs):
    """`run()` once to compile / warm up, then `runs` times: (median
    seconds, the first run's output)."""
    out = run()
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        again = run()
        seconds.append(time.perf_counter() - start)
        if list(again) != list(out):
            print("warning: a timed run's tokens differ from the warm-up's", file=sys.stderr)
    return statistics.median(seconds), out


def by_difference(generate, runs):
    """Engines with only a `generate(new_tokens) -> ids`: (prefill s,
    decode s for NEW_TOKENS - 1 tokens, the ids)."""
    one, _ = median_time(lambda: generate(1), runs)
    full, ids = median_time(lambda: generate(NEW_TOKENS), runs)
    return one, full - one, [int(i) for i in ids]


# -- llama.cpp -------------------------------------------------------------------


def q8_0_path(bundle, gguf):
    """SmolLM2's GGUF requantized to Q8_0 by llama.cpp (from its Q4_1
    values: the speed of Q8_0, the weights of the shipped file)."""
    import llama_cpp

    path = os.path.join(bundle, "smollm2-q8_0.gguf")
    if not os.path.exists(path):
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
        params.allow_requantize = True
        params.nthread = THREADS
        status = llama_cpp.llama_model_quantize(gguf.encode(), (path + ".tmp").encode(), params)
        if status != 0:
            raise SystemExit(f"llama_model_quantize to Q8_0 failed ({status})")
        os.replace(path + ".tmp", path)
    return path


def run_llama(path, ids, runs):
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(
        model_path=path,
        n_threads=THREADS,
        n_threads_batch=THREADS,
        n_ctx=512,
        n_batch=512,
        verbose=False,
    )
    vocab = llm.n_vocab()

    def once():
        llm.reset()
        start = time.perf_counter()
        llm.eval(ids)
        prefill = time.perf_counter() - start
        new = []
        start = time.perf_counter()
        for _ in range(NEW_TOKENS):
            # the last position's logits (`llm.scores` stays zeros without
            # logits_all, which would compute every prompt position's)
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), (vocab,))
            token = int(np.argmax(logits))
            new.append(token)
            llm.eval([token])
        return prefill, time.perf_counter() - start, new

    once()  # warm-up
    found = [once() for _ in range(runs)]
    return (
        statistics.median(f[0] for f in found),
        statistics.median(f[1] for f in found),
        found[0][2],
    )


# -- transformers ------------------------------------------------------------------


def run_transformers(gguf, ids, runs, bfloat16):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(THREADS)
    folder, name = os.path.split(gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    model.generation_config.eos_token_id = None
    prompt = torch.tensor([ids], dtype=torch.long)
    context = (
        (lambda: torch.autocast("cpu", dtype=torch.bfloat16))
        if bfloat16
        else contextlib.nullcontext
    )

    def generate(new):
        with torch.inference_mode(), context():
            out = model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )
        return out[0, len(ids) :].tolist()

    return by_difference(generate, runs)


# -- keras-hub ---------------------------------------------------------------------


def run_keras_hub(gguf, ids, runs, dtype):
    import keras_hub
    from llama_generate import keras_hub_backbone  # this folder's script

    import seqkeras.pretrained as sp

    backbone = keras_hub_backbone(sp.read_checkpoint(gguf), dtype)
    lm = keras_hub.models.LlamaCausalLM(backbone, preprocessor=None)
    lm.compile(sampler="greedy", jit_compile=True)

    def generate(new):
        length = len(ids) + new
        buffer = np.zeros((1, length), "int32")
        buffer[0, : len(ids)] = ids
        mask = np.zeros((1, length), bool)
        mask[0, : len(ids)] = True
        out = lm.generate({"token_ids": buffer, "padding_mask": mask}, stop_token_ids=None)
        return np.asarray(out["token_ids"])[0, len(ids) :]

    return by_difference(generate, runs)


# -- ours ----------------------------------------------------------------------------


def language_model(gguf, dtype="float32"):
    import keras

    import seqkeras.pretrained as sp

    checkpoint = sp.read_checkpoint(gguf)
    old = keras.config.dtype_policy()
    keras.config.set_dtype_policy(dtype)
    try:
        model = sp.llama_language_model(checkpoint.architecture)
    finally:
        keras.config.set_dtype_policy(old)
    missing = sp.load_pretrained(model, checkpoint)
    if missing:
        raise SystemExit(f"SmolLM2's checkpoint left {missing} unset")
    return model


def run_ours_xla(gguf, ids, runs, dtype):
    import seqkeras

    model = language_model(gguf, dtype)
    prompt = np.array([ids], "int32")

    def generate(new):
        out = seqkeras.models.generate(
            model, prompt=prompt, max_length=len(ids) + new, eos_id=None, jit_compile=True
        )
        return np.asarray(out)[0, len(ids) :]

    return by_difference(generate, runs)


def savedmodel_path(bundle, gguf, ids):
    """The SavedModel with `generate_1` and `generate` (1 and 128 new
    tokens after a prompt of this length, no end token), written once."""
    from seqkeras.export import saved_model
    from seqkeras.export.signatures import Functions, Generate

    class Named(Generate):
        def __init__(self, max_length, name):
            super().__init__(max_length)
            self.eos_id = None  # every token made, as the other engines
            self.names = (name,)

        def build(self, model, check=True):
            return Functions({self.names[0]: super().build(model, check)["generate"]})

    path = os.path.join(bundle, "savedmodel")
    if not os.path.exists(path):
        model = language_model(gguf)
        signatures = [Named(len(ids) + 1, "generate_1"), Named(len(ids) + NEW_TOKENS, "generate")]
        saved_model(model, path, signatures)
    return path


def run_ours_savedmodel(path, ids, runs):
    import tensorflow as tf

    loaded = tf.saved_model.load(path)
    prompt = tf.constant([ids], tf.int32)

    def generate(new):
        key = "generate_1" if new == 1 else "generate"
        out = loaded.signatures[key](prompt_ids=prompt)["ids"]
        return out.numpy()[0, len(ids) :]

    return by_difference(generate, runs)


# -- LiteRT --------------------------------------------------------------------------


def run_tflite(bundle, name, ids, runs):
    sys.modules["seqkeras"] = None  # the runner needs only ai_edge_litert and tokenizers
    sys.path.insert(0, bundle)
    import runner

    prefill, decode, _, chat = runner.load(bundle, name)
    chat = dict(chat, end_ids=[])  # every new token, as llama.cpp's loop
    runner.generate(prefill, decode, chat, ids[:8], 2)  # warm-up
    found = [runner.generate(prefill, decode, chat, ids, NEW_TOKENS) for _ in range(runs)]
    return (
        statistics.median(f[1] for f in found),
        statistics.median(f[2] for f in found),
        found[0][0],
    )


# -- LiteRT-LM ---------------------------------------------------------------------

LITERT_LM_BENCHMARK = """
import json, sys, litert_lm
runs = []
for _ in range(int(sys.argv[2])):
    info = litert_lm.Benchmark(sys.argv[1], backend=litert_lm.Backend.CPU(thread_count=2),
                               prefill_tokens=128, decode_tokens=128, cache_dir=":nocache").run()
    runs.append([info.last_prefill_tokens_per_second, info.last_decode_tokens_per_second])
with open("/proc/self/status") as f:  # VmHWM: this program's peak (see peak_bytes)
    peak = next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmHWM:"))
print(json.dumps([runs, peak]))
"""


def litert_lm_path(bundle, venv, quantize="int8"):
    """The bundle's `model.litertlm` (int8) or `model_int4.litertlm`, built
    by `litert-lm-builder` from `litert_lm_<quantize>.tflite`,
    `litert_lm.pbtxt` and `tokenizer.json`."""
    name = "model.litertlm" if quantize == "int8" else f"model_{quantize}.litertlm"
    path = os.path.join(bundle, name)
    if not os.path.exists(path):
        model = os.path.join(bundle, f"litert_lm_{quantize}.tflite")
        if not os.path.exists(model):
            raise SystemExit(f"{bundle} has no {os.path.basename(model)}: export with --litert-lm")
        files = {n: os.path.join(bundle, n) for n in ("litert_lm.pbtxt", "tokenizer.json")}
        subprocess.run(
            [
                os.path.join(venv, "bin", "litert-lm-builder"),
                "llm_metadata",
                "--path",
                files["litert_lm.pbtxt"],
                "tflite_model",
                "--path",
                model,
                "--model_type",
                "prefill_decode",
                "hf_tokenizer",
                "--path",
                files["tokenizer.json"],
                "output",
                "--path",
                path,
                "--validate-metadata",
            ],
            check=True,
        )
    return path


def run_litert_lm(path, venv, runs):
    """(prefill tokens/s, decode tokens/s, peak bytes): medians of
    LiteRT-LM's `Benchmark` runs, in the LiteRT-LM environment."""
    out = subprocess.run(
        [os.path.join(venv, "bin", "python"), "-c", LITERT_LM_BENCHMARK, path, str(runs)],
        capture_output=True,
        text=True,
        check=True,
    )
    found, peak = json.loads(out.stdout.strip().splitlines()[-1])
    return statistics.median(r[0] for r in found), statistics.median(r[1] for r in found), peak


# -- one engine per process ------------------------------------------------------------


def model_file(engine, bundle, gguf):
    """The file (or directory) the engine reads its weights from."""
    return {
        "llama.cpp-q8_0": lambda: q8_0_path(bundle, gguf),
        "ours-savedmodel": lambda: os.path.join(bundle, "savedmodel"),
        "tflite-f32": lambda: os.path.join(bundle, "model.tflite"),
        "tflite-int8": lambda: os.path.join(bundle, "model_int8.tflite"),
        "runner-litert-lm-int8": lambda: os.path.join(bundle, "litert_lm_int8.tflite"),
        "runner-litert-lm-int4": lambda: os.path.join(bundle, "litert_lm_int4.tflite"),
        "litert-torch-f32": lambda: os.path.join(bundle, "litert_torch_f32.tflite"),
        "litert-torch-int8": lambda: os.path.join(bundle, "litert_torch_q8.tflite"),
    }.get(engine, lambda: gguf)()


def run_engine(engine, bundle, gguf, ids, runs):
    path = model_file(engine, bundle, gguf)
    if engine.startswith("llama.cpp"):
        return run_llama(path, ids, runs)
    if engine.startswith("transformers"):
        return run_transformers(gguf, ids, runs, bfloat16=engine.endswith("bf16"))
    if engine.startswith("keras-hub"):
        dtype = "mixed_bfloat16" if engine.endswith("bf16") else "float32"
        return run_keras_hub(gguf, ids, runs, dtype)
    if engine.startswith("ours-xla"):
        dtype = "mixed_bfloat16" if engine.endswith("bf16") else "float32"
        return run_ours_xla(gguf, ids, runs, dtype)
    if engine == "ours-savedmodel":
        return run_ours_savedmodel(path, ids, runs)
    return run_tflite(bundle, os.path.basename(path), ids, runs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True, help="apps/instruct.py export's directory")
    p.add_argument("--engines", nargs="*", default=list(ENGINES), choices=ENGINES)
    p.add_argument("--runs", type=int, default=3, help="timed runs after the warm-up")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--litert-lm-venv", help="a virtual environment with `pip install litert-lm`")
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--ids", help=argparse.SUPPRESS)
    p.add_argument("--gguf", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.engine:  # one engine, in this process
        ids = json.loads(args.ids)
        prefill, decode, new = run_engine(args.engine, args.bundle, args.gguf, ids, args.runs)
        print(json.dumps([prefill, decode, [int(i) for i in new], peak_bytes()]))
        return
    print("command:", shlex.join([os.path.relpath(sys.executable), *sys.argv]))
    print(f"{os.cpu_count()} CPU cores; load average at start {os.getloadavg()[0]:.2f}")
    gguf = smollm2()
    ids = prompt_ids(gguf)
    if "ours-savedmodel" in args.engines:  # written in a process of its own
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys, json; sys.path.insert(0, sys.argv[1]); import smollm2_peers as s; "
                "s.savedmodel_path(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))",
                os.path.dirname(os.path.abspath(__file__)),
                args.bundle,
                gguf,
                json.dumps(ids),
            ],
            check=True,
        )
    rows = {}
    for engine in args.engines:
        start = time.perf_counter()
        if engine.startswith("litert-lm-"):
            if not args.litert_lm_venv:
                print(f"{engine}: skipped (no --litert-lm-venv)")
                continue
            path = litert_lm_path(args.bundle, args.litert_lm_venv, engine.split("-")[-1])
            prefill, decode, peak = run_litert_lm(path, args.litert_lm_venv, args.runs)
            rows[engine] = dict(
                prefill_tokens_per_s=prefill,
                decode_tokens_per_s=decode,
                ids=None,
                peak=peak,
                size=os.path.getsize(path),
            )
            print(f"# {engine}: {time.perf_counter() - start:.0f} s", flush=True)
            continue
        out = subprocess.run(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--bundle",
                args.bundle,
                "--engine",
                engine,
                "--ids",
                json.dumps(ids),
                "--gguf",
                gguf,
                "--runs",
                str(args.runs),
            ],
            capture_output=True,
            text=True,
        )
        if out.returncode:
            print(f"{engine}: failed\n{out.stderr[-3000:]}", flush=True)
            continue
        prefill, decode, new, peak = json.loads(out.stdout.strip().splitlines()[-1])
        size = size_on_disk(model_file(engine, args.bundle, gguf))
        rows[engine] = dict(prefill_s=prefill, decode_s=decode, ids=new, peak=peak, size=size)
        print(f"# {engine}: {time.perf_counter() - start:.0f} s", flush=True)
    print(
        f"{len(ids)}-token prompt, {NEW_TOKENS} greedy tokens, batch 1, {THREADS} threads; "
        f"median of {args.runs} runs after a warm-up"
    )
    print(
        f"{'engine':45s} {'on disk':>8s} {'peak RSS':>9s} {'prefill/s':>10s} {'decode/s':>9s}"
        "  tokens equal to llama.cpp Q4_1's"
    )
    reference = rows.get("llama.cpp-q4_1", {}).get("ids")
    for engine, r in rows.items():
        if r["ids"] is not None:
            stepped = ("llama", "tflite", "runner", "litert-torch")  # step APIs: 128 decodes
            decoded = len(r["ids"]) - (0 if engine.startswith(stepped) else 1)
            r["prefill_tokens_per_s"] = len(ids) / r["prefill_s"]
            r["decode_tokens_per_s"] = decoded / r["decode_s"]
        same = "-"
        if reference and r["ids"] is not None and engine != "llama.cpp-q4_1":
            first = next(
                (i for i, (a, b) in enumerate(zip(r["ids"], reference)) if a != b), len(r["ids"])
            )
            same = "all 128" if first == len(r["ids"]) else f"the first {first}"
        print(
            f"{LABELS[engine]:45s} {r['size'] / 1e6:6.0f} MB {r['peak'] / 1e6:6.0f} MB "
            f"{r['prefill_tokens_per_s']:10.1f} {r['decode_tokens_per_s']:9.1f}  {same}"
        )
    pairs = (("runner-litert-lm-int8", "litert-torch-int8"), ("tflite-f32", "litert-torch-f32"))
    for mine, peer in pairs:
        if mine in rows and peer in rows:
            ours, theirs = rows[mine], rows[peer]
            print(
                f"{LABELS[mine]} / {LABELS[peer]}: prefill "
                f"{ours['prefill_tokens_per_s'] / theirs['prefill_tokens_per_s']:.2f}x, decode "
                f"{ours['decode_tokens_per_s'] / theirs['decode_tokens_per_s']:.2f}x, size "
                f"{ours['size'] / theirs['size']:.2f}x"
            )
    for mine in (
        "tflite-int8",
        "runner-litert-lm-int8",
        "runner-litert-lm-int4",
        "litert-lm-int8",
        "litert-lm-int4",
    ):
        if mine in rows and "llama.cpp-q4_1" in rows:
            ours, theirs = rows[mine], rows["llama.cpp-q4_1"]
            print(
                f"{LABELS[mine]} / llama.cpp Q4_1: prefill "
                f"{ours['prefill_tokens_per_s'] / theirs['prefill_tokens_per_s']:.2f}x, decode "
                f"{ours['decode_tokens_per_s'] / theirs['decode_tokens_per_s']:.2f}x"
            )
    torch_best = max(
        (r["decode_tokens_per_s"] for e, r in rows.items() if e.startswith("transformers")),
        default=None,
    )
    if torch_best and "ours-savedmodel" in rows:
        ratio = rows["ours-savedmodel"]["decode_tokens_per_s"] / torch_best
        print(f"SavedModel generate decode / transformers' best decode: {ratio:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
