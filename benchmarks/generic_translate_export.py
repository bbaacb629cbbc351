"""The `translate` SavedModel as it was served before issue 27, for the
profile and the speed table: a trained model's `translate` signature
decoding through the generic `seqkeras.decoding` loop
(`Translate(..., serving_decoder=False)`: fixed-length caches written
with `TensorScatterUpdate`, every cache leaf reordered per beam step),
no XLA.

    python benchmarks/generic_translate_export.py --model saved_models/translate/transformer \\
        --out /tmp/translate-generic/1
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="an apps/translate.py train directory")
    p.add_argument("--out", required=True, help="the SavedModel version directory to write")
    p.add_argument("--beam", type=int, default=4)
    args = p.parse_args(argv)

    import translate

    from seqkeras.export import saved_model
    from seqkeras.export.signatures import Translate, generation

    model, src, tgt, config = translate.load(args.model)
    length = config["target_length"]
    signatures = [Translate(src, tgt, length, beam_width=args.beam, serving_decoder=False)]
    signatures += generation(length, beam_width=args.beam, serving_decoder=False)
    print(saved_model(model, args.out, signatures, overwrite=True))


if __name__ == "__main__":
    main()
