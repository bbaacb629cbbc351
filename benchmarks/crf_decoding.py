"""What the CRF adds to a tagger's inference time (issue 14: at most 20%).

The NER app's tagger (word embedding + char CNN + casing, BiLSTM 2x200)
with and without the CRF on top, same weights below the logits, jit
`predict_on_batch` on batches of real CoNLL-2003 validation sentences
(batch 32 and batch 1, width 32); the tagger without CRF decodes by argmax
per token, the CRF tagger by Viterbi. Rounds interleaved, medians.

    python benchmarks/crf_decoding.py
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from bench_utils import time_rounds  # noqa: E402


def main(argv=None):
    import seqkeras
    from seqkeras.data import WordFeatures, read_conll
    from seqkeras.data.text import shared_data_dir

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = shared_data_dir()
    p.add_argument(
        "--data", default=None if root is None else os.path.join(root, "conll2003", "valid.txt")
    )
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    sentences, _ = read_conll(args.data)
    features = WordFeatures.train(sentences)
    arguments = dict(
        backbone="lstm",
        bidirectional=True,
        embedding_dim=100,
        units=200,
        dropout=0.5,
        char_embedding_dim=30,
        char_filters=50,
        casing=True,
        char_vocab_size=features.sizes["char_ids"],
    )
    plain = seqkeras.models.tagger(features.sizes["token_ids"], 10, **arguments)
    crf = seqkeras.models.tagger(features.sizes["token_ids"], 10, crf=True, **arguments)
    crf.set_weights(plain.get_weights() + crf.get_weights()[len(plain.get_weights()) :])
    for m in (plain, crf):
        seqkeras.training.compile_model(m)
    rows = [s[:32] for s in sentences if len(s) >= 8][:32]
    words = np.array([s + [""] * (32 - len(s)) for s in rows], object)
    batch32 = {k: v.numpy() for k, v in features(words).items()}
    batch1 = {k: v[:1] for k, v in batch32.items()}
    print(
        f"tagger: {plain.count_params():,} parameters; CRF adds "
        f"{crf.count_params() - plain.count_params()}"
    )
    results = {}
    for name, batch in (("batch 32", batch32), ("batch 1", batch1)):
        steps = {
            "argmax": lambda b=batch: np.asarray(plain.predict_on_batch(b)).argmax(-1),
            "crf": lambda b=batch: np.asarray(crf.predict_on_batch(b)["tags"]),
        }
        for step in steps.values():
            step()  # compile
        t = time_rounds(steps, args.rounds, 20)
        results[name] = t
        extra = 100 * (t["crf"] / t["argmax"] - 1)
        print(
            f"{name}: argmax {1e3 * t['argmax']:.2f} ms, CRF Viterbi "
            f"{1e3 * t['crf']:.2f} ms: {extra:+.1f}%"
        )
    return results


if __name__ == "__main__":
    main()
