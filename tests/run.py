"""Runs the fast test suite as several pytest processes, two at a time.

    python tests/run.py [pytest arguments]
    python tests/run.py --record                    # and record durations
    python tests/run.py --slow [pytest arguments]   # the slow tests


Why not one `pytest` process: TensorFlow keeps memory for every model a
test compiles (traced functions and XLA executables outlive
`keras.backend.clear_session()` and `gc.collect()`: ~100 MB per compiled
seq2seq `fit`, measured), so one process grew past 7 GB over the suite.
A group's process is forked from a zygote (`tests/zygote.py`, `Zygote`)
that has imported TensorFlow, Keras, seqkeras and pytest once: every
group of the TensorFlow backend with the test XLA flags (the others start
a process of their own). Measured with every test deselected (`-k`), the
30 fast groups took 386 process-seconds as processes of their own and
186 forked. Here each group (test modules of at most GROUP_SECONDS of recorded test
time together) runs in a process of its own, two groups at a time: XLA compiles on one thread, so
two processes keep both cores of a small machine busy. The longest groups
start first, from each module's seconds in `tests/durations.json`
(`--record` writes what the whole fast suite's modules took this time).
The arguments go to every pytest call (`-k`, `-x`, `-m slow`, ...). The
`tests/jax` groups run with `KERAS_BACKEND=jax` (their modules skip on
other backends). Groups run with XLA's backend optimisation off
(`TEST_XLA_FLAGS`: compiling is most of their time), but for the modules
that run the README's default jobs (`DEFAULT_XLA`). Each
group's output is printed when it ends; then a table of the groups and
the wall time and peak memory of all test processes together (their
summed proportional set size: shared pages counted once; see
`PeakMemory`), and each group's own peak. Exit status 0 when
every group passed (a group with no selected tests counts as passed).

`--slow` runs the slow tests instead (`-m slow`): one process per module
that has any (modules of at most SLOW_SMALL declared seconds share
processes of at most SLOW_GROUP_SECONDS), two at a time while their declared peaks fit the memory
budget together (`SLOW_BUDGET_MB`), the module that the fewest others
can run beside first (`_next_module`; with the measured times and peaks
a simulation gives 713 s, against 761 s heaviest first, 726 s longest
first and 680 s for a perfect split of the work). A module declares what
its slow tests took when measured, `SLOW_SECONDS = 187` and
`SLOW_PEAK_MB = 1917` (the summary prints what they took this time, so a
stale declaration shows); undeclared ones count as `SLOW_DEFAULT`.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
PARALLEL = 2
NO_TESTS = 5  # pytest's exit status when nothing was selected


GROUP_SECONDS = 90  # a process's recorded seconds of tests: bounds its
# memory (TensorFlow keeps what each test compiled) while a group's start
# (a fork and pytest's collection) is paid once per group


def _chunks(files, durations):
    """`files` packed into chunks of at most GROUP_SECONDS of recorded
    test time (`_estimate`; a longer module is a chunk of its own): first
    fit, longest module first, so that short modules fill the chunks
    instead of each costing a process start. (Chunks of at most 16 KB of
    test source made 44 processes, 23 of them under a minute.)"""
    chunks = []  # [seconds, files]
    for path in sorted(files, key=lambda p: (-_estimate([p], durations), p)):
        seconds = _estimate([path], durations)
        chunk = next((c for c in chunks if c[0] + seconds <= GROUP_SECONDS), None)
        if chunk is None:
            chunks.append([seconds, [path]])
        else:
            chunk[0] += seconds
            chunk[1].append(path)
    return [sorted(c[1]) for c in chunks]


ALONE_MARK = "RUN_ALONE = True"  # a test module that starts its own
# processes (e.g. the multi-worker tf.distribute test: two TensorFlow
# workers) runs in a group of its own with no other group beside it, so
# the processes together stay inside the memory budget.


OWN_MARK = "OWN_GROUP = True"  # a heavy module (it compiles and exports
# many models, and checks them in fresh processes) is a group of its own,
# beside one other group as usual, so that no group of modules adds up to
# more than the memory budget's half.


ALL_SLOW_MARKS = ("pytestmark = pytest.mark.slow", "pytestmark = needs_smollm2()")
# a module whose tests are all slow is left out of the fast suite's groups
# (alone in a group it cost a process start, about 6 s, to deselect them),
# unless the arguments choose the tests by mark (`-m`)


def _has_mark(path, marks):
    """Whether a line of `path` starts with `marks` (one or a tuple)."""
    with open(path, encoding="utf-8") as f:
        return any(line.startswith(marks) for line in f)


def all_slow(path):
    return _has_mark(path, ALL_SLOW_MARKS)


def runs_alone(path):
    return _has_mark(path, ALONE_MARK)


def owns_group(path):
    return _has_mark(path, OWN_MARK)


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


DURATIONS = os.path.join(TESTS, "durations.json")  # {module: seconds its
# fast tests took, setup and teardown included}, written by `--record`


def _durations():
    try:
        with open(DURATIONS, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _estimate(group, durations):
    """A group's seconds: its modules' recorded durations (a module not
    recorded yet: one second per 170 bytes of source, the suite's mean)."""
    return sum(
        durations.get(os.path.relpath(f, ROOT).replace(os.sep, "/"), os.path.getsize(f) / 170)
        for f in group
    )


def groups(args=()):
    """The test files in chunks of at most GROUP_SECONDS (`_chunks`;
    the `tests/jax` modules, run on JAX, apart from the others), modules
    marked `OWN_GROUP = True` each a group of its own (they export and
    check many models), the longest groups first by the recorded durations
    (`tests/durations.json`), so that the suite ends on short groups and
    both cores stay busy to the end. Modules marked `RUN_ALONE = True` are
    left out (see `alone_groups`); so are modules whose tests are all slow
    (`all_slow`), unless `args` (pytest's) choose tests by mark."""
    tests = [f for _, files in _test_files() for f in files if not runs_alone(f)]
    if "-m" not in args:
        tests = [f for f in tests if not all_slow(f)]
    own = [f for f in tests if owns_group(f)]
    rest = [f for f in tests if f not in own]
    jax = [f for f in rest if os.path.relpath(f, ROOT).startswith(JAX_TESTS)]
    durations = _durations()
    found = [[f] for f in own] + _chunks([f for f in rest if f not in jax], durations)
    found += _chunks(jax, durations)
    found.sort(key=lambda g: -_estimate(g, durations))
    return [[os.path.relpath(f, ROOT) for f in g] for g in found]


def _module_seconds(junit_xml):
    """`{module path: seconds}` from a pytest JUnit XML report (each test
    case's time: setup, call and teardown)."""
    seconds = {}
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        for end in range(len(parts), 0, -1):  # tests.a.test_b[.Class]
            path = "/".join(parts[:end]) + ".py"
            if os.path.isfile(os.path.join(ROOT, path)):
                seconds[path] = seconds.get(path, 0.0) + float(case.get("time", 0))
                break
    return seconds


def alone_groups():
    """One group per module marked `RUN_ALONE = True`."""
    return [
        [os.path.relpath(f, ROOT)] for _, tests in _test_files() for f in tests if runs_alone(f)
    ]


SLOW_MARKS = ("mark.slow", "needs_smollm2()")  # a module with slow tests
SLOW_DEFAULT = {"SLOW_SECONDS": 60, "SLOW_PEAK_MB": 2000}
SLOW_BUDGET_MB = 5600  # the CI budget is 6 GB for every process together


SLOW_SMALL = 45  # declared seconds: a module this short shares a process
SLOW_GROUP_SECONDS = 75  # the declared seconds of one such shared process


def slow_groups():
    """`[(paths, seconds, peak MB)]`, one per module with slow tests, from
    each module's declarations, the short ones (at most SLOW_SMALL s)
    packed first fit into groups of at most SLOW_GROUP_SECONDS (the peak
    of a group: its largest module's), so that each does not pay a process
    start (about 6 s) for a few seconds of tests."""
    small, found = [], []
    for path, seconds, peak in _slow_modules():
        (small if seconds <= SLOW_SMALL else found).append(((path,), seconds, peak))
    shared = []  # [paths, seconds, peak MB]
    for paths, seconds, peak in sorted(small, key=lambda g: (-g[1], g[0])):
        group = next((g for g in shared if g[1] + seconds <= SLOW_GROUP_SECONDS), None)
        if group is None:
            shared.append([paths, seconds, peak])
        else:
            group[0] += paths
            group[1] += seconds
            group[2] = max(group[2], peak)
    return sorted(found + [tuple(g) for g in shared])


def _slow_modules():
    """`[(path, seconds, peak MB)]`, one per module with slow tests, from
    each module's declarations."""
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
    return sorted(found)


def _next_module(fits, pending, budget_mb):
    """Of the modules that fit now, the one with the least work left that
    could run beside it (the seconds of the pending modules whose peaks fit
    beside its own), the longest of those: a module few others can join
    goes while it can, and ones that pair with many are left to fill the
    other core."""

    def partners(g):
        return sum(o[1] for o in pending if o is not g and o[2] + g[2] <= budget_mb)

    return max(fits, key=lambda g: (-partners(g), g[1], g[0]))


def run_within_budget(found, args, lock, memory, budget_mb=SLOW_BUDGET_MB, zygote=None):
    """Runs `found` (`slow_groups()`), at most PARALLEL at a time, starting
    a pending module whose declared peak fits beside the running ones' (a
    module that fits nowhere runs alone), chosen by `_next_module`."""
    pending, running, results = list(found), {}, []
    with ThreadPoolExecutor(PARALLEL) as pool:
        while pending or running:
            used = sum(running.values())
            fits = [g for g in pending if not running or used + g[2] <= budget_mb]
            if fits and len(running) < PARALLEL:
                chosen = _next_module(fits, pending, budget_mb)
                paths, _, peak = chosen
                pending.remove(chosen)
                future = pool.submit(run_group, list(paths), args, lock, memory, zygote)
                running[future] = peak
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                results.append(future.result())
                del running[future]
    return results


def _parents():
    """`{pid: parent pid}` of every process, read once."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return parents


def _family(parents, root_pid):
    """`root_pid` and its descendants in `parents`."""
    family, grew = {root_pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in family}
        grew = bool(more - family)
        family |= more
    return family


def _pss_mb(pid):
    """The proportional set size of `pid` in MB: its private pages plus its
    share of the pages it shares (TensorFlow's libraries, mapped by every
    process of a tree), so that a sum over processes is the memory they
    use together; a sum of resident set sizes counts each shared page
    once per process (SmolLM2's serving test: 5.6 GB summed RSS, 4.6 GB
    summed PSS)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


class PeakMemory(threading.Thread):
    """The peak memory of every test process together, and each group's
    own peak (`watch(pid)`: the process tree of one pytest call, sampled
    while it runs), as summed proportional set sizes (`_pss_mb`), sampled
    twice a second."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak_mb = 0.0
        self.groups = {}  # pid -> its tree's peak MB
        self.running = os.path.isdir("/proc")

    def watch(self, pid):
        self.groups[pid] = 0.0

    def run(self):
        while self.running:
            parents = _parents()
            everyone = _family(parents, os.getpid()) - {os.getpid()}
            pss = {p: _pss_mb(p) for p in everyone}
            self.peak_mb = max(self.peak_mb, sum(pss.values()))
            for pid, peak in list(self.groups.items()):
                if pid in parents:  # a finished group keeps its peak
                    mb = sum(pss.get(p, 0.0) for p in _family(parents, pid))
                    self.groups[pid] = max(peak, mb)
            time.sleep(0.5)


JAX_TESTS = os.path.join("tests", "jax") + os.sep  # run on KERAS_BACKEND=jax
# The tests compile hundreds of tiny models, so compiling is
# most of their XLA time: without LLVM's optimisation of the compiled code
# (XLA's backend level 0; the same graphs, the same ops) test_builders and
# test_mixed_precision took 202 s instead of 273 s (level 1: 242 s), and
# two of test_jax_backend's tests 30 s instead of 44 s (2 cores). The
# modules that run the README's default jobs keep the default: their
# timings are the ones the README states.
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0"
DEFAULT_XLA = (os.path.join("tests", "test_release.py"), os.path.join("tests", "test_package.py"))


ZYGOTE = os.path.join(TESTS, "zygote.py")


class Zygote:
    """A `tests/zygote.py` process for one environment: it imports
    TensorFlow, Keras, seqkeras and pytest once and forks each pytest run
    (`run`), where each group's own process paid those imports again (6 to
    10 s on 2 cores, about 50 times in `.ci/run`). `SEQKERAS_TEST_ZYGOTE=0`
    runs every group as a process of its own instead."""

    def __init__(self, env):
        self.env = env
        self.process = subprocess.Popen(
            [sys.executable, ZYGOTE],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.lock = threading.Lock()
        self.ready = Future()
        self.started = {}  # request id -> Future(child pid)
        self.exits = {}  # child pid -> Future(exit status)
        self.count = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _future(self, table, key):
        with self.lock:
            return table.setdefault(key, Future())

    def _read(self):
        for line in self.process.stdout:
            message = json.loads(line)
            if "ready" in message:
                self.ready.set_result(message["ready"])
            elif "id" in message:
                self._future(self.started, message["id"]).set_result(message["pid"])
            else:
                self._future(self.exits, message["pid"]).set_result(message["status"])
        error = RuntimeError(f"tests/zygote.py ended (exit {self.process.wait()})")
        with self.lock:
            for future in [self.ready, *self.started.values(), *self.exits.values()]:
                if not future.done():
                    future.set_exception(error)

    def run(self, argv, out, started):
        """Forks pytest with `argv`, its output to the file `out`; calls
        `started(pid)` with the child's pid; returns `(pid, exit status)`."""
        self.ready.result()
        with self.lock:
            self.count += 1
            request = self.count
        self.process.stdin.write((json.dumps(dict(id=request, argv=argv, out=out)) + "\n").encode())
        self.process.stdin.flush()
        pid = self._future(self.started, request).result()
        started(pid)
        return pid, self._future(self.exits, pid).result()

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def group_env(paths):
    """The environment of a group's pytest process: JAX for `tests/jax`,
    the test XLA flags but for `DEFAULT_XLA`."""
    return test_env(
        jax=all(p.startswith(JAX_TESTS) for p in paths),
        default_xla=any(p.endswith(DEFAULT_XLA) for p in paths),
    )


def test_env(jax=False, default_xla=False):
    env = dict(os.environ)
    if jax:
        env["KERAS_BACKEND"] = "jax"
    if not default_xla:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()
    return env


def run_group(paths, args, lock, memory, zygote=None):
    """Runs pytest on `paths`: forked by `zygote` when the group's
    environment is the zygote's, otherwise as a process of its own."""
    start = time.perf_counter()
    env = group_env(paths)
    report = tempfile.NamedTemporaryFile(suffix=".xml", delete=False)
    report.close()
    argv = [*paths, *args, f"--junitxml={report.name}"]
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as out:
        if zygote is not None and zygote.env == env:
            pid, status = zygote.run(argv, out.name, memory.watch)
        else:
            process = subprocess.Popen(
                [sys.executable, "-m", "pytest", *argv],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
            pid = process.pid
            memory.watch(pid)
            status = process.wait()
        out.seek(0)
        text = out.read()
    seconds = time.perf_counter() - start
    try:
        modules = _module_seconds(report.name)
    except (ElementTree.ParseError, OSError):
        modules = {}  # pytest failed before writing it (the output says why)
    os.unlink(report.name)
    with lock:
        print(f"===== {' '.join(paths)}: exit {status}, {seconds:.0f} s =====", flush=True)
        print(text, flush=True)
    return paths, status, seconds, pid, modules


def main(args):
    start = time.perf_counter()
    memory = PeakMemory()
    memory.start()
    lock = threading.Lock()
    record = "--record" in args
    args = [a for a in args if a != "--record"]
    zygote = None
    if os.environ.get("SEQKERAS_TEST_ZYGOTE", "1") != "0":
        zygote = Zygote(test_env())  # the TensorFlow groups'
    try:
        if args[:1] == ["--slow"]:
            args = ["-m", "slow", *args[1:]]
            results = run_within_budget(slow_groups(), args, lock, memory, zygote=zygote)
        else:
            results = [run_group(g, args, lock, memory, zygote) for g in alone_groups()]
            with ThreadPoolExecutor(PARALLEL) as pool:
                results += list(
                    pool.map(lambda g: run_group(g, args, lock, memory, zygote), groups(args))
                )
    finally:
        if zygote is not None:
            zygote.close()
    memory.running = False
    wall = time.perf_counter() - start
    failed = [r for r in results if r[1] not in (0, NO_TESTS)]
    print("===== summary =====")
    for paths, status, seconds, pid, _ in results:
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
    if record and not args:  # the whole fast suite
        durations = _durations()
        for *_, modules in results:
            durations.update({m: round(t, 1) for m, t in modules.items()})
        with open(DURATIONS, "w", encoding="utf-8") as f:
            json.dump(dict(sorted(durations.items())), f, indent=1)
            f.write("\n")
        print(f"recorded each module's seconds in {os.path.relpath(DURATIONS, ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
