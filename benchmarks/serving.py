"""Serving under load: an exported `translate` SavedModel in a process
without seqkeras, as a model server would run it.

    python benchmarks/serving.py saved_models/translate/transformer/export/translate/1 \\
        --sentences ../shared/data/multi30k/val.de --seconds 300

1. Decoding speed of the signature alone: sentences/s at batch 1 and 32
   (one thread, after a warm-up call per shape).
2. Load: 8 threads send one-sentence requests for `--seconds` (it stops by
   itself; in-process calls of the loaded signature, no network), each
   thread walking the sentences from its own offset. Checked: no request
   fails, the same sentence always gets the same answer (the first
   answer per sentence is kept and every later one compared), and resident
   memory (VmRSS) is flat after the warm-up: sampled every 10 s, first and
   last sample and the largest printed. Printed: p50/p99 latency,
   sentences/s, errors, mismatches.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.modules["seqkeras"] = None  # a server has no seqkeras
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the TF Text ops)


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("savedmodel")
    p.add_argument("--sentences", required=True, help="a UTF-8 file, one source sentence per line")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--json", help="write the numbers here too")
    args = p.parse_args(argv)

    with open(args.sentences, encoding="utf-8") as f:
        sentences = [s.rstrip("\r\n") for s in f if s.strip()]
    fn = tf.saved_model.load(args.savedmodel).signatures["translate"]

    def call(texts):
        return [t.decode("utf-8") for t in fn(text=tf.constant(texts))["text"].numpy()]

    result = {"savedmodel": args.savedmodel, "threads": args.threads, "seconds": args.seconds}
    for batch in (1, 32):  # decoding speed, one thread
        call(sentences[:batch])  # warm-up (traces nothing: graph is fixed)
        n = min(len(sentences), 256 if batch == 1 else 1024)
        start = time.perf_counter()
        for i in range(0, n, batch):
            call(sentences[i : i + batch])
        speed = n / (time.perf_counter() - start)
        result[f"sentences_per_s_batch{batch}"] = speed
        print(
            f"translate signature, batch {batch}: {speed:.1f} sentences/s (one thread)", flush=True
        )

    answers, lock = {}, threading.Lock()
    latencies, errors, mismatches = [], [], []
    memory = [(0.0, rss_mb())]
    stop = time.perf_counter() + args.seconds
    begin = time.perf_counter()

    def worker(k):
        i = k * len(sentences) // args.threads
        while time.perf_counter() < stop:
            text = sentences[i % len(sentences)]
            i += 1
            t0 = time.perf_counter()
            try:
                (out,) = call([text])
            except Exception as error:  # counted, reported, never hidden
                with lock:
                    errors.append(repr(error)[:200])
                continue
            dt = time.perf_counter() - t0
            with lock:
                latencies.append(dt)
                first = answers.setdefault(text, out)
                if first != out:
                    mismatches.append((text, first, out))

    def sampler():
        while time.perf_counter() < stop:
            time.sleep(min(10, max(0, stop - time.perf_counter())))
            memory.append((time.perf_counter() - begin, rss_mb()))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.threads)] + [
        threading.Thread(target=sampler)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - begin
    lat = np.array(latencies) * 1000
    result.update(
        {
            "requests": len(latencies),
            "errors": len(errors),
            "mismatches": len(mismatches),
            "distinct_sentences": len(answers),
            "p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
            "p99_ms": float(np.percentile(lat, 99)) if len(lat) else None,
            "sentences_per_s": len(latencies) / wall,
            "rss_mb_start": memory[1][1] if len(memory) > 1 else memory[0][1],
            "rss_mb_end": memory[-1][1],
            "rss_mb_max": max(m for _, m in memory[1:] or memory),
            "rss_mb_before_load_test": memory[0][1],
        }
    )
    print(
        f"{args.threads} threads, {wall:.0f} s: {len(latencies)} "
        f"requests, {len(answers)} distinct sentences, "
        f"{len(errors)} errors, {len(mismatches)} answers that differed "
        "from the first answer to the same sentence"
    )
    print(
        f"latency p50 {result['p50_ms']:.1f} ms, p99 "
        f"{result['p99_ms']:.1f} ms; {result['sentences_per_s']:.1f} "
        "sentences/s"
    )
    print(
        f"resident memory: {result['rss_mb_start']:.0f} MB after 10 s, "
        f"{result['rss_mb_end']:.0f} MB at the end, "
        f"{result['rss_mb_max']:.0f} MB at most"
    )
    print("memory samples (s, MB): " + ", ".join(f"({t:.0f}, {m:.0f})" for t, m in memory))
    for e in errors[:3]:
        print("error:", e)
    for m in mismatches[:3]:
        print("mismatch:", m)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0 if not errors and not mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
