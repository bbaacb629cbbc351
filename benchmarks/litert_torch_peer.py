"""Our phone files against `litert-torch`'s (Google's PyTorch-to-LiteRT
converter, formerly ai-edge-torch) for SmolLM2-135M-Instruct on the same
weights, every file run by the bundle's runner (`runner.py`: LiteRT's
CompiledModel, 2 threads, the caches in tensor buffers), interleaved
prompt by prompt in one process so that a busy machine slows all alike.

    python apps/instruct.py export --init smollm2 --out /tmp/phone --litert-lm
    python3.11 -m venv /tmp/ltvenv && /tmp/ltvenv/bin/pip install litert-torch==0.10.0
    python benchmarks/litert_torch_peer.py --bundle /tmp/phone --litert-torch-venv /tmp/ltvenv

1. The GGUF's weights, dequantized to float32 by `transformers`
   (`gguf_file=`), written as a Hugging Face safetensors directory (the
   tied output layer left out, as in the original checkpoint).
2. litert-torch's SmolLM2 example (`litert_torch.generative.examples.
   smollm.convert_v2_to_tflite`) converts it in its own environment at
   `--quantize none` and `dynamic_int8` (its default), with our bundle's
   prefill lengths (32, 128) and cache length (`chat.json`'s
   `max_length`); wall time and the process's peak memory are printed.
   litert-torch 0.10.0 imports `tensorflow.lite.python.schema_py_generated`
   without depending on TensorFlow: where its environment has no
   TensorFlow, a stand-in module re-exports `ai_edge_litert`'s schema.
3. The 16 chat prompts of `apps/instruct.py export`'s check, 32 greedy
   tokens each, through every file: tokens equal to our float32 file's
   (which equals Keras'), median prefill and decode tokens/s, size.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_utils import cpu_name  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUANTIZATIONS = {"none": "f32", "dynamic_int8": "q8"}


def write_hf_checkpoint(out):
    """SmolLM2's GGUF as a float32 safetensors directory (`transformers`)."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    import seqkeras.pretrained as sp

    path = sp.smollm2_path()
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), dtype="float32"
    )
    os.makedirs(out, exist_ok=True)
    weights = {
        k: v.detach().clone().contiguous()
        for k, v in model.state_dict().items()
        if k != "lm_head.weight"  # tied to the embedding
    }
    save_file(weights, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(out)


def schema_stand_in(venv, work):
    """A folder for PYTHONPATH holding `tensorflow.lite.python.
    schema_py_generated` (ai_edge_litert's), or None where the
    environment has TensorFlow."""
    python = os.path.join(venv, "bin", "python")
    if subprocess.run([python, "-c", "import tensorflow"], capture_output=True).returncode == 0:
        return None
    package = os.path.join(work, "stand_in", "tensorflow", "lite", "python")
    os.makedirs(package, exist_ok=True)
    for folder in ("tensorflow", "tensorflow/lite", "tensorflow/lite/python"):
        open(os.path.join(work, "stand_in", folder, "__init__.py"), "w").close()
    with open(os.path.join(package, "schema_py_generated.py"), "w") as f:
        f.write("from ai_edge_litert.schema_py_generated import *  # noqa: F401,F403\n")
    return os.path.join(work, "stand_in")


def convert(venv, checkpoint, out, quantize, max_length, work):
    """litert-torch's SmolLM2 conversion; `(path, seconds, peak MB)`."""
    command = [
        os.path.join(venv, "bin", "python"),
        "-m",
        "litert_torch.generative.examples.smollm.convert_v2_to_tflite",
        f"--checkpoint_path={checkpoint}",
        f"--output_path={out}",
        "--prefill_seq_lens=32",
        "--prefill_seq_lens=128",
        f"--kv_cache_max_len={max_length}",
        f"--quantize={quantize}",
    ]
    env = dict(os.environ)
    stand_in = schema_stand_in(venv, work)
    if stand_in:
        env["PYTHONPATH"] = stand_in
    start = time.perf_counter()
    timed = ["/usr/bin/time", "-f", "PEAK_KB %M"] if os.path.exists("/usr/bin/time") else []
    result = subprocess.run(timed + command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if result.returncode:
        sys.exit(f"litert-torch's conversion failed: {result.stderr[-2000:]}")
    peak = [line for line in result.stderr.splitlines() if line.startswith("PEAK_KB")]
    tag = QUANTIZATIONS[quantize]
    path = os.path.join(out, f"smollm2_{tag}_ekv{max_length}.tflite")
    return path, seconds, int(peak[-1].split()[1]) / 1024 if peak else None


def check_prompts():
    """`apps/instruct.py export`'s check prompts."""
    sys.path.insert(0, os.path.join(ROOT, "apps"))
    from instruct import CHECK_PROMPTS

    return CHECK_PROMPTS


def time_files(bundle, files, tokens=32, threads=2):
    """Each file through the bundle's runner, interleaved prompt by prompt:
    `{file: (equal to the first file's tokens, prefill, decode tokens/s)}`."""
    sys.path.insert(0, bundle)
    import runner  # the bundle's own runner.py

    loaded = {f: runner.load(bundle, f, threads) for f in files}
    ids = {f: [] for f in files}
    speed = {f: [] for f in files}
    for prompt in check_prompts():
        for f in files:
            prefill, decode, tokenizer, chat = loaded[f]
            prompt_ids = runner.prompt_ids(tokenizer, chat, prompt)
            new, first, rest = runner.generate(prefill, decode, chat, prompt_ids, tokens)
            ids[f].append(new)
            speed[f].append((len(prompt_ids) / first, len(new) / rest if rest else 0.0))
    reference = ids[files[0]]
    table = {}
    for f in files:
        equal = sum(a == b for a, b in zip(ids[f], reference))
        prefill, decode = np.median(np.array(speed[f]), axis=0)
        table[f] = (equal, float(prefill), float(decode))
    return table


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True, help="apps/instruct.py export --litert-lm's folder")
    p.add_argument("--litert-torch-venv", required=True, help="an environment with litert-torch")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reconvert", action="store_true", help="convert again files already there")
    p.add_argument("--json", help="write the numbers here too")
    args = p.parse_args()
    bundle = os.path.abspath(args.bundle)
    with open(os.path.join(bundle, "chat.json"), encoding="utf-8") as f:
        max_length = json.load(f)["max_length"]
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; {args.threads} threads")
    result = {"cpu": cpu_name(), "conversions": {}, "files": {}}
    missing = [
        q
        for q, tag in QUANTIZATIONS.items()
        if args.reconvert or not os.path.exists(os.path.join(bundle, f"litert_torch_{tag}.tflite"))
    ]
    with tempfile.TemporaryDirectory() as work:
        checkpoint = os.path.join(work, "hf")
        if missing:
            write_hf_checkpoint(checkpoint)
        for quantize in missing:
            path, seconds, peak = convert(
                args.litert_torch_venv, checkpoint, work, quantize, max_length, work
            )
            name = f"litert_torch_{QUANTIZATIONS[quantize]}.tflite"
            os.replace(path, os.path.join(bundle, name))
            result["conversions"][name] = {"seconds": seconds, "peak_mb": peak}
            print(f"litert-torch --quantize {quantize}: {seconds:.0f} s, peak {peak:.0f} MB")
    files = [
        "model.tflite",
        "litert_torch_f32.tflite",
        "litert_lm_int8.tflite",
        "litert_torch_q8.tflite",
        "model_int8.tflite",
    ]
    table = time_files(bundle, files, threads=args.threads)
    print("| file | size | tokens equal to model.tflite's | prefill tokens/s | decode tokens/s |")
    print("|---|---|---|---|---|")
    for f, (equal, prefill, decode) in table.items():
        size = os.path.getsize(os.path.join(bundle, f)) / 1e6
        result["files"][f] = {"mb": size, "equal": equal, "prefill": prefill, "decode": decode}
        print(f"| `{f}` | {size:.0f} MB | {equal} / 16 | {prefill:.0f} | {decode:.1f} |")
    for ours, peer in (
        ("model.tflite", "litert_torch_f32.tflite"),
        ("litert_lm_int8.tflite", "litert_torch_q8.tflite"),
    ):
        a, b = result["files"][ours], result["files"][peer]
        print(
            f"{ours} / {peer}: prefill {a['prefill'] / b['prefill']:.2f}x, "
            f"decode {a['decode'] / b['decode']:.2f}x, size {a['mb'] / b['mb']:.2f}x"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
