"""Serving speed: an exported `translate` SavedModel in a process without
seqkeras, as a model server would run it, beside CTranslate2 with the
same weights.

    python benchmarks/serving.py saved_models/translate/transformer/export/translate/1 \
        --sentences ../shared/data/multi30k/val.de --seconds 300
    python benchmarks/serving.py saved_models/translate/transformer/export/translate/1 \
        --sentences ../shared/data/multi30k/val.de --seconds 0 \
        --xla saved_models/translate/transformer/export/translate-xla/1 \
        --peer ctranslate2 --model saved_models/translate/transformer

1. Decoding speed of the signature alone: sentences/s at each of
   `--batches` (default 1 and 32; one thread, after a warm-up call per
   shape; an XLA SavedModel (`--xla`) gets a whole untimed pass first, so
   that every bucket shape is compiled).
   `--bfloat16 PATH`: a SavedModel exported with the decoder in bfloat16
   (issue 27's `apps/translate.py export --bfloat16`, removed in issue
   37; any other SavedModel with a `translate` signature works), timed
   the same way, and its
   translations of all the sentences compared with the float32 export's
   (how many are equal, and BLEU of both with `--references`).
2. `--peer ctranslate2` (needs `--model`, the trained model directory):
   `benchmarks/ctranslate2_peer.py` copies the model's weights into a
   CTranslate2 `TransformerSpec` (in a subprocess that imports seqkeras)
   and writes the sentences as our source tokens; CTranslate2 then
   translates them (tokens in and out, beam as ours, no length penalty,
   2 threads) in float32 and int8 at the same batch sizes, and its float32
   beam translations are compared with our `generate_beam` signature's,
   sentence by sentence (ids up to EOS). Printed: ours-best / peer-best
   per batch size, and batch 32 / batch 1 for ours.
`--signature chat` times a decoder language model's `chat` signature
(`apps/instruct.py serve`: a message in, the reply out) the same way.

3. Load (`--seconds` > 0): 8 threads send one-sentence requests for
   `--seconds` (it stops by itself; in-process calls of the loaded
   signature, no network), each thread walking the sentences from its own
   offset. Checked: no request fails, the same sentence always gets the
   same answer (the first answer per sentence is kept and every later one
   compared), and resident memory (VmRSS) is flat after the warm-up:
   sampled every 10 s, first and last sample and the largest printed.
   Printed: p50/p99 latency, sentences/s, errors, mismatches.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.modules["seqkeras"] = None  # a server has no seqkeras
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the TF Text ops)


def growth_after(memory, seconds):
    """Resident memory's relative growth from the first sample at or after
    `seconds` to the largest after it (None when the run is shorter)."""
    later = [m for t, m in memory if t >= seconds]
    return (max(later) - later[0]) / later[0] if len(later) > 1 else None


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def speed(call, sentences, batch, count=None):
    """Sentences/s of `call(list of strings)` at `batch` per call."""
    n = min(len(sentences), count or (256 if batch == 1 else max(1024, 8 * batch)))
    call(sentences[:batch])  # warm-up
    start = time.perf_counter()
    for i in range(0, n, batch):
        call(sentences[i : i + batch])
    return n / (time.perf_counter() - start)


def compare_outputs(call, other, sentences, references=None):
    """How many of `other`'s translations equal `call`'s (batches of 64),
    and both BLEU scores (sacrebleu) when `references` (a file) is given."""
    ours, theirs = [], []
    for i in range(0, len(sentences), 64):
        ours += call(sentences[i : i + 64])
        theirs += other(sentences[i : i + 64])
    same = sum(a == b for a, b in zip(ours, theirs))
    found = {"bfloat16_equal": f"{same}/{len(ours)}"}
    print(f"bfloat16 decoder: {same}/{len(ours)} translations equal to the float32 export's")
    if references:
        import sacrebleu

        with open(references, encoding="utf-8") as f:
            refs = [s.rstrip("\r\n") for s in f][: len(ours)]
        for name, out in (("float32", ours), ("bfloat16", theirs)):
            found[f"bleu_{name}"] = sacrebleu.corpus_bleu(out, [refs]).score
            print(f"BLEU ({name} decoder) = {found[f'bleu_{name}']:.2f}")
    return found


def ctranslate2_peer(model_dir, sentences):
    """`(model directory, source tokens per sentence, target vocabulary)`:
    the CTranslate2 copy of our model, written by
    `benchmarks/ctranslate2_peer.py` in a subprocess (it imports seqkeras)."""
    out = tempfile.mkdtemp(prefix="ct2-")
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(out, "sentences.txt"), "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in sentences))
    subprocess.run(
        [sys.executable, os.path.join(here, "ctranslate2_peer.py"), "--model", model_dir]
        + ["--out", out, "--tokenize", os.path.join(out, "sentences.txt")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    with open(os.path.join(out, "tokens.json"), encoding="utf-8") as f:
        tokens = json.load(f)
    return out, tokens["source"], tokens["target_vocabulary"]


def compare_ctranslate2(args, loaded, sentences, table):
    """Times CTranslate2 (float32, int8) with our weights at `args.batches`
    into `table`; returns the agreement of its float32 beam translations
    with our `generate_beam` signature's."""
    import ctranslate2

    out, source, target_vocabulary = ctranslate2_peer(args.model, sentences)
    with open(os.path.join(args.model, "config.json"), encoding="utf-8") as f:
        max_length = json.load(f)["target_length"]
    index = {t: i for i, t in enumerate(target_vocabulary)}
    tokens = [row["tokens"] for row in source]
    found = {"ctranslate2_version": ctranslate2.__version__}
    translators = {}
    for compute_type in ("float32", "int8"):
        engine = f"ctranslate2-{compute_type}"
        # its best of 1 and 2 threads per batch size: on this 2-core machine
        # 2 OpenMP threads run batch 1 at a sixth of 1 thread's speed
        for threads in (1, 2):
            translator = ctranslate2.Translator(
                out, device="cpu", compute_type=compute_type, inter_threads=1, intra_threads=threads
            )
            translators[compute_type, threads] = translator

            def call(batch, translator=translator):
                return translator.translate_batch(
                    batch,
                    beam_size=args.beam,
                    length_penalty=0.0,
                    max_decoding_length=max_length - 1,
                )

            for batch in args.batches:
                rate = speed(call, tokens, batch)
                found[f"{engine}_threads{threads}_batch{batch}"] = rate
                print(f"{engine}, {threads} threads, batch {batch}: {rate:.1f} sentences/s")
                table[engine, batch] = max(table.get((engine, batch), 0), rate)
    # like for like: CTranslate2 float32 against our generate_beam, every sentence
    beam = loaded.signatures["generate_beam"]
    same, differ = 0, []
    for i in range(0, len(source), 32):
        rows = source[i : i + 32]
        width = max(len(r["ids"]) for r in rows)
        ids = np.zeros((len(rows), width), "int32")
        for j, r in enumerate(rows):
            ids[j, : len(r["ids"])] = r["ids"]
        ours = beam(source_ids=tf.constant(ids))["ids"].numpy()
        theirs = translators["float32", 1].translate_batch(
            [r["tokens"] for r in rows],
            beam_size=args.beam,
            length_penalty=0.0,
            max_decoding_length=max_length - 1,
        )
        for j, r in enumerate(theirs):
            mine = list(ours[j, 1:])
            mine = mine[: mine.index(2)] if 2 in mine else [t for t in mine if t]  # up to EOS
            peer = [index[t] for t in r.hypotheses[0]]
            if mine == peer:
                same += 1
            else:
                differ.append((sentences[i + j], mine, peer))
    found["ctranslate2_equal"] = f"{same}/{len(source)}"
    print(
        f"CTranslate2 float32 beam-{args.beam} translations equal to our generate_beam's: "
        f"{same}/{len(source)} ({100 * same / len(source):.1f}%)"
    )
    for text, mine, peer in differ[:3]:
        print(f"differs: {text!r}: ours {mine}, CTranslate2 {peer}")
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("savedmodel")
    p.add_argument("--sentences", required=True, help="a UTF-8 file, one source sentence per line")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    p.add_argument(
        "--signature",
        default="translate",
        choices=["translate", "chat"],
        help="chat: a decoder LM's `chat` signature (text in, reply out)",
    )
    p.add_argument("--xla", help="a SavedModel written with jit_compile=True, timed beside")
    p.add_argument("--bfloat16", help="a SavedModel whose decoder runs in bfloat16, timed beside")
    p.add_argument("--references", help="reference translations of --sentences (for BLEU)")
    p.add_argument("--peer", choices=["ctranslate2"], help="time this engine beside ours")
    p.add_argument("--model", help="the trained model directory (for --peer)")
    p.add_argument("--beam", type=int, default=4, help="the peer's beam (ours: the export's)")
    p.add_argument(
        "--tf-threads",
        type=int,
        help="TensorFlow's intra- and inter-op threads (default: one per core)",
    )
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--json", help="write the numbers here too")
    p.add_argument("--plot", help="a PNG of resident memory over the load test")
    args = p.parse_args(argv)
    if args.peer and not args.model:
        p.error("--peer needs --model (the trained model directory the export came from)")

    with open(args.sentences, encoding="utf-8") as f:
        sentences = [s.rstrip("\r\n") for s in f if s.strip()]
    if args.tf_threads:  # TF Serving's --tensorflow_{intra,inter}_op_parallelism
        tf.config.threading.set_intra_op_parallelism_threads(args.tf_threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.tf_threads)
    loaded = tf.saved_model.load(args.savedmodel)
    fn = loaded.signatures[args.signature]
    output = {"translate": "text", "chat": "reply"}[args.signature]

    def caller(signature):
        def call(texts):
            out = signature(text=tf.constant(texts))[output].numpy()
            return [t.decode("utf-8") for t in out]

        return call

    call = caller(fn)
    result = {"savedmodel": args.savedmodel, "threads": args.threads, "seconds": args.seconds}
    table = {}  # (engine, batch) -> sentences/s
    for batch in args.batches:  # decoding speed, one thread
        table["ours", batch] = result[f"sentences_per_s_batch{batch}"] = speed(
            call, sentences, batch
        )
        print(
            f"{args.signature} signature, batch {batch}: {table['ours', batch]:.1f} sentences/s",
            flush=True,
        )
    if args.bfloat16:  # before the XLA model: a process that ran XLA's loops runs
        # the other graphs slower afterwards (41.1 against 29.9 sentences/s at batch 1)
        bf16_call = caller(tf.saved_model.load(args.bfloat16).signatures["translate"])
        for batch in args.batches:
            table["ours-bfloat16", batch] = speed(bf16_call, sentences, batch)
            print(
                f"translate signature (bfloat16 decoder), batch {batch}: "
                f"{table['ours-bfloat16', batch]:.1f} sentences/s",
                flush=True,
            )
        result.update(compare_outputs(call, bf16_call, sentences, args.references))
    if args.xla:
        xla_call = caller(tf.saved_model.load(args.xla).signatures["translate"])
        for batch in args.batches:
            for i in range(0, len(sentences), batch):  # compiles every bucket shape
                xla_call(sentences[i : i + batch])
            table["ours-xla", batch] = speed(xla_call, sentences, batch)
            print(
                f"translate signature (XLA), batch {batch}: {table['ours-xla', batch]:.1f} "
                "sentences/s",
                flush=True,
            )
    if args.peer == "ctranslate2":
        result.update(compare_ctranslate2(args, loaded, sentences, table))
    peers = {
        b: max([v for (e, bb), v in table.items() if bb == b and not e.startswith("ours")] or [0])
        for b in args.batches
    }
    for b in args.batches:
        if peers[b]:
            for engine in sorted({e for e, _ in table}):
                if engine.startswith("ours"):
                    ratio = table[engine, b] / peers[b]
                    result[f"{engine}_over_peer_best_batch{b}"] = ratio
                    print(f"batch {b}: {engine} / peer best = {ratio:.2f}x")
    if 1 in args.batches and 32 in args.batches:
        for engine in sorted({e for e, _ in table}):
            print(f"{engine}: batch 32 / batch 1 = {table[engine, 32] / table[engine, 1]:.2f}x")
    result["table"] = {f"{e}@{b}": v for (e, b), v in table.items()}
    if args.seconds <= 0:
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
        return 0

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
            "memory_samples_s_mb": memory,
            "rss_growth_after_120s": growth_after(memory, 120.0),
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
    if result["rss_growth_after_120s"] is not None:
        print(f"growth after the first 120 s: {100 * result['rss_growth_after_120s']:.2f}%")
    print("memory samples (s, MB): " + ", ".join(f"({t:.0f}, {m:.0f})" for t, m in memory))
    for e in errors[:3]:
        print("error:", e)
    for m in mismatches[:3]:
        print("mismatch:", m)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if args.plot:
        plot_memory(memory, args, result)
    return 0 if not errors and not mismatches else 1


def plot_memory(memory, args, result):
    """Resident memory against time, sampled each 10 s under the load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds, mb = zip(*memory)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(np.array(seconds) / 60, mb, marker=".", markersize=3)
    ax.set_xlabel("minutes of load")
    ax.set_ylabel("resident memory (MB)")
    ax.set_ylim(0, max(mb) * 1.1)
    ax.set_title(
        f"{args.signature}, {args.threads} threads: {result['requests']} requests, "
        f"{result['errors']} errors"
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
