"""Runs a marked shell block of a Markdown page as a reader would, from a
folder that stands for the root of a clone (`apps/` linked in), with the
page's `.venv/bin/` meaning the fresh environment's `bin/`.

Usage: readme_shell.py PAGE MARKER ENV_BIN WORK_DIR
       readme_shell.py --extras PAGE MARKER   (prints the extras its install names)

The block is the first ```sh block after the line `<!-- MARKER -->`. A
first line that installs (`.venv/bin/pip install ...`) is not run: the
caller made ENV_BIN's environment with exactly what that line names. A `docker run` of
`tensorflow/serving` and the `curl` after it are not run either (CI has no
Docker): the curl's request body goes instead to the signature it names
in the newest version under the folder the docker command mounts, in a
new process without seqkeras (`seqkeras.export.fresh_signature`, the
signature as TF Serving runs it), which must answer every instance
(texts not empty). Every other line runs in bash and must succeed; its output is
printed.
"""

import json
import os
import re
import shlex
import subprocess
import sys


def block(page, marker):
    text = open(page, encoding="utf-8").read()
    found = re.search(rf"<!-- {re.escape(marker)} -->\s*```sh\n(.*?)```", text, re.S)
    if not found:
        sys.exit(f"{page}: no ```sh block after <!-- {marker} -->")
    commands, current = [], ""
    for line in found.group(1).splitlines():
        current += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            commands.append(current.strip())
            current = ""
    return commands


def served_request(docker, curl, env_bin, work):
    """What `curl` asks of the model `docker` mounts, answered by the
    SavedModel's signature in a new process."""
    source = re.search(r'source="?\$PWD/([^",]+)"?', docker).group(1)
    words = shlex.split(curl, comments=True)
    body = json.loads(words[words.index("-d") + 1])
    base = os.path.join(work, source)
    version = max((v for v in os.listdir(base) if v.isdigit()), key=int)
    inputs = {key: [row[key] for row in body["instances"]] for key in body["instances"][0]}
    # TF Serving reads JSON numbers as the signature's input types
    code = (
        "import json, os, sys\n"
        "import numpy as np, tensorflow as tf\n"
        "from tensorflow.core.protobuf import saved_model_pb2\n"
        "from seqkeras.export import fresh_signature\n"
        "path, signature, inputs = json.loads(sys.argv[1])\n"
        "proto = saved_model_pb2.SavedModel()\n"
        "proto.ParseFromString(open(os.path.join(path, 'saved_model.pb'), 'rb').read())\n"
        "spec = proto.meta_graphs[0].signature_def[signature].inputs\n"
        "typed = {k: v if isinstance(v[0], str) else\n"
        "         np.asarray(v, tf.as_dtype(spec[k].dtype).as_numpy_dtype)\n"
        "         for k, v in inputs.items()}\n"
        "outputs, _ = fresh_signature(path, signature, **typed)\n"
        "print(json.dumps(outputs))\n"
    )
    job = json.dumps([os.path.join(base, version), body["signature_name"], inputs])
    result = subprocess.run(
        [os.path.join(env_bin, "python"), "-c", code, job], capture_output=True, text=True
    )
    if result.returncode:
        sys.exit(f"the curl request failed: {result.stderr[-2000:]}")
    outputs = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"$ {curl}\n(answered by {body['signature_name']} of {source}/{version}) {outputs}")
    if not outputs or not all(len(v) == len(body["instances"]) for v in outputs.values()):
        sys.exit(f"the curl request got no answer for each instance: {outputs}")
    if any(isinstance(v, str) and not v for values in outputs.values() for v in values):
        sys.exit(f"the curl request got an empty text: {outputs}")


def run(page, marker, env_bin, work):
    """Runs the block (see the module docstring)."""
    commands = block(page, marker)
    if commands[0].startswith(".venv/bin/pip install"):
        commands = commands[1:]  # the caller's environment holds what it names
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    pending_docker = None
    for command in commands:
        if command.startswith("docker run") and "tensorflow/serving" in command:
            pending_docker = command
            continue
        if command.startswith("curl "):
            served_request(pending_docker, command, env_bin, work)
            continue
        line = command.replace(".venv/bin/", env_bin.rstrip("/") + "/")
        print(f"$ {command}", flush=True)
        result = subprocess.run(
            ["bash", "-c", line], cwd=work, env=env, text=True, capture_output=True
        )
        print(result.stdout, flush=True)
        if result.returncode:
            sys.exit(f"failed ({result.returncode}): {command}\n{result.stderr[-3000:]}")


def main():
    if sys.argv[1] == "--extras":
        install = block(*sys.argv[2:4])[0]
        print(re.search(r'pip install "\.\[([\w,]+)\]"', install).group(1))
        return
    run(*sys.argv[1:5])


if __name__ == "__main__":
    main()
