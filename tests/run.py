"""Runs the fast test suite as several pytest processes, two at a time.

    python tests/run.py [pytest arguments]
    python tests/run.py --slow [pytest arguments]   # the slow tests


Why not one `pytest` process: TensorFlow keeps memory for every model a
test compiles (traced functions and XLA executables outlive
`keras.backend.clear_session()` and `gc.collect()`: ~100 MB per compiled
seq2seq `fit`, measured), so one process grew past 7 GB over the suite.
Here each group (test files of one directory, about 16 KB of source) runs
in a fresh process, two groups at a time: XLA compiles on one thread, so
two processes keep both cores of a small machine busy. The arguments go to
every pytest call (`-k`, `-x`, `-m slow`, ...). The `tests/jax` group runs
with `KERAS_BACKEND=jax` (its modules skip on other backends). Each
group's output is printed when it ends; then a table of the groups and
the wall time and peak memory of all test processes together (their
summed resident set size, sampled twice a second), and each group's own
peak. Exit status 0 when
every group passed (a group with no selected tests counts as passed).

`--slow` runs the slow tests instead (`-m slow`): one process per module
that has any, two at a time while their declared peaks fit the memory
budget together (`SLOW_BUDGET_MB`), the heaviest first: a module that
fits beside few others starts while light ones are left to go beside it
(longest first left the heavy ones waiting and a core idle: 1,121 s
against 1,094 s in a simulation with the measured times). A module declares what
its slow tests took when measured, `SLOW_SECONDS = 187` and
`SLOW_PEAK_MB = 1917` (the summary prints what they took this time, so a
stale declaration shows); undeclared ones count as `SLOW_DEFAULT`.
"""

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
PARALLEL = 2
NO_TESTS = 5  # pytest's exit status when nothing was selected


CHUNK_BYTES = 16_000  # test source per process: bounds its memory


def _chunks(files):
    """Consecutive files, about CHUNK_BYTES of test source per chunk."""
    chunks, current, size = [], [], 0
    for path in files:
        if current and size + os.path.getsize(path) > CHUNK_BYTES:
            chunks.append(current)
            current, size = [], 0
        current.append(path)
        size += os.path.getsize(path)
    return chunks + [current] * bool(current)


ALONE_MARK = "RUN_ALONE = True"  # a test module that starts its own
# processes (e.g. the multi-worker tf.distribute test: two TensorFlow
# workers) runs in a group of its own with no other group beside it, so
# the processes together stay inside the memory budget.


OWN_MARK = "OWN_GROUP = True"  # a heavy module (it compiles and exports
# many models, and checks them in fresh processes) is a group of its own,
# beside one other group as usual, so that no group of modules adds up to
# more than the memory budget's half.


def runs_alone(path):
    with open(path, encoding="utf-8") as f:
        return any(line.startswith(ALONE_MARK) for line in f)


def owns_group(path):
    with open(path, encoding="utf-8") as f:
        return any(line.startswith(OWN_MARK) for line in f)


def _test_files():
    """(directory, its test files) for every directory under tests/, in a
    fixed order."""
    for root, dirs, files in os.walk(TESTS):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        yield (
            root,
            [
                os.path.join(root, f)
                for f in sorted(files)
                if f.startswith("test_") and f.endswith(".py")
            ],
        )


def groups():
    """The test files in groups of about CHUNK_BYTES of source, one
    directory per group at most, largest groups first (a rough stand-in
    for duration); the end-to-end `test_package.py` alone and first (it
    holds the longest tests). Modules marked `OWN_GROUP = True` are groups
    of their own; modules marked `RUN_ALONE = True` are left out: see
    `alone_groups`."""
    found = []
    for root, tests in _test_files():
        package = [f for f in tests if f.endswith(os.sep + "test_package.py") and root == TESTS]
        own = [f for f in tests if owns_group(f) and not runs_alone(f)]
        tests = [f for f in tests if f not in package + own and not runs_alone(f)]
        found += [package] * bool(package) + _chunks(tests) + [[f] for f in own]
    weight = {id(g): sum(os.path.getsize(f) for f in g) for g in found}
    found.sort(key=lambda g: (not g[0].endswith("test_package.py"), -weight[id(g)]))
    return [[os.path.relpath(f, ROOT) for f in g] for g in found]


def alone_groups():
    """One group per module marked `RUN_ALONE = True`."""
    return [
        [os.path.relpath(f, ROOT)] for _, tests in _test_files() for f in tests if runs_alone(f)
    ]


SLOW_MARKS = ("mark.slow", "needs_smollm2()")  # a module with slow tests
SLOW_DEFAULT = {"SLOW_SECONDS": 60, "SLOW_PEAK_MB": 2000}
SLOW_BUDGET_MB = 5600  # the CI budget is 6 GB for every process together


def slow_groups():
    """`[(path, seconds, peak MB)]`, one per module with slow tests,
    the heaviest first (then the longest), from each module's
    declarations."""
    found = []
    for _, tests in _test_files():
        for path in tests:
            with open(path, encoding="utf-8") as f:
                source = f.read()
            if not any(mark in source for mark in SLOW_MARKS):
                continue
            declared = dict(SLOW_DEFAULT)
            for name in declared:
                match = re.search(rf"^{name} = (\d+)", source, re.MULTILINE)
                if match:
                    declared[name] = int(match.group(1))
            found.append(
                (os.path.relpath(path, ROOT), declared["SLOW_SECONDS"], declared["SLOW_PEAK_MB"])
            )
    return sorted(found, key=lambda g: (-g[2], -g[1]))


def run_within_budget(found, args, lock, memory, budget_mb=SLOW_BUDGET_MB):
    """Runs `found` (`slow_groups()`), at most PARALLEL at a time, starting
    the first pending module whose declared peak fits beside the running
    ones' (a module that fits nowhere runs alone)."""
    pending, running, results = list(found), {}, []
    with ThreadPoolExecutor(PARALLEL) as pool:
        while pending or running:
            used = sum(running.values())
            fits = [g for g in pending if not running or used + g[2] <= budget_mb]
            if fits and len(running) < PARALLEL:
                path, _, peak = fits[0]
                pending.remove(fits[0])
                running[pool.submit(run_group, [path], args, lock, memory)] = peak
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                results.append(future.result())
                del running[future]
    return results


def _process_table():
    """`{pid: (parent pid, VmRSS in MB)}` of every process, read once."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            rss = 0
            with open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
            table[int(entry)] = (parent, rss / 1024)
        except (OSError, IndexError, ValueError):
            pass
    return table


def _tree_mb(table, root_pid, with_root=False):
    """Summed RSS (MB) in `table` of `root_pid`'s descendants (and of
    `root_pid` itself with `with_root`)."""
    family, grew = {root_pid}, True
    while grew:
        more = {p for p, (parent, _) in table.items() if parent in family}
        grew = bool(more - family)
        family |= more
    members = family if with_root else family - {root_pid}
    return sum(table[p][1] for p in members if p in table)


class PeakMemory(threading.Thread):
    """The peak summed RSS of every test process, and each group's own
    peak (`watch(pid)`: the process tree of one pytest call, sampled while
    it runs), from one read of the process table per sample."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak_mb = 0.0
        self.groups = {}  # pid -> its tree's peak MB
        self.running = os.path.isdir("/proc")

    def watch(self, pid):
        self.groups[pid] = 0.0

    def run(self):
        while self.running:
            table = _process_table()
            self.peak_mb = max(self.peak_mb, _tree_mb(table, os.getpid()))
            for pid, peak in list(self.groups.items()):
                if pid in table:  # a finished group keeps its peak
                    self.groups[pid] = max(peak, _tree_mb(table, pid, with_root=True))
            time.sleep(0.5)


JAX_TESTS = os.path.join("tests", "jax") + os.sep  # run on KERAS_BACKEND=jax


def run_group(paths, args, lock, memory):
    start = time.perf_counter()
    env = dict(os.environ)
    if all(p.startswith(JAX_TESTS) for p in paths):
        env["KERAS_BACKEND"] = "jax"
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", *paths, *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        memory.watch(process.pid)
        status = process.wait()
        out.seek(0)
        text = out.read()
    seconds = time.perf_counter() - start
    with lock:
        print(f"===== {' '.join(paths)}: exit {status}, {seconds:.0f} s =====", flush=True)
        print(text, flush=True)
    return paths, status, seconds, process.pid


def main(args):
    start = time.perf_counter()
    memory = PeakMemory()
    memory.start()
    lock = threading.Lock()
    if args[:1] == ["--slow"]:
        args = ["-m", "slow", *args[1:]]
        results = run_within_budget(slow_groups(), args, lock, memory)
    else:
        results = [run_group(g, args, lock, memory) for g in alone_groups()]
        with ThreadPoolExecutor(PARALLEL) as pool:
            results += list(pool.map(lambda g: run_group(g, args, lock, memory), groups()))
    memory.running = False
    wall = time.perf_counter() - start
    failed = [r for r in results if r[1] not in (0, NO_TESTS)]
    print("===== summary =====")
    for paths, status, seconds, pid in results:
        mb = memory.groups.get(pid, 0.0)
        print(
            f"{'ok  ' if status in (0, NO_TESTS) else 'FAIL'} {seconds:6.0f} s {mb:6.0f} MB  "
            + " ".join(paths)
        )
    print(
        f"test suite: {len(results)} pytest processes, {PARALLEL} at a "
        f"time; wall {wall:.0f} s; peak memory of the test processes "
        f"together {memory.peak_mb / 1024:.2f} GB"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
