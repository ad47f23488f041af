"""Shared fixtures.

Two lanes: `make test` runs every test (CI runs it); `make test-fast` runs those not marked slow, the developer's
loop.  Both run on every core (pytest-xdist, ``-n auto`` in the Makefile), so a test keeps to its own tmp_path
and asks the OS for a port (port 0).

A test that uses more than about 2 s of CPU gets ``@pytest.mark.slow`` (a module whose every test is slow:
``pytestmark = pytest.mark.slow`` with the reason beside it); an unmarked test over ``--cpu-budget`` (3 s of CPU:
the rule's 2 s and a margin for a loaded machine, whose shared caches and cores make the same work cost more CPU)
fails.  The budget counts CPU, not wall time, so the rule holds on a loaded machine: the process's CPU (all its
threads) plus its waited-for subprocesses', over the test's setup and call, less what went into importing modules
and setting up fixtures shared by several tests (a session's world, a module's run), which the first test to ask
would otherwise pay for, and less what threads older than the test used meanwhile (an earlier test's left-over
server or pool).  What is slow: a subprocess per case, a run on the reference world, Ray,
transformers or diffusers models, the demo.  The CLI runs in the test's process through ``run_cli`` (or the
``cli`` fixture); ``CLI`` starts it as a process of its own only where that is the point (kill -9, Ctrl-C,
permissions, memory peaks, start-up, real servers).  ``--cpu-report N`` lists the N tests that used
the most CPU.
"""

import contextlib
import importlib._bootstrap
import io
import json
import logging
import os
import resource
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)  # tests/test_lanes.py runs this file's hooks on tests of its own

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One math thread a process (torch, OpenMP, BLAS; inherited by the CLI and servers the tests start): the suite is
# parallel across processes (xdist, one worker a core), and a second pool of threads a worker would only contend
# for the same cores, its threads spinning while they wait (the demo took 2.3 times the CPU on a loaded machine).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def pytest_addoption(parser):
    parser.addoption("--cpu-budget", type=float, default=3.0,
                     help="CPU seconds an unmarked test may use before it fails for lack of a slow marker (0: no limit)")
    parser.addoption("--cpu-report", type=int, default=0, metavar="N",
                     help="list the N tests that used the most CPU")


def _cpu() -> float:
    """CPU seconds of this process (every thread) and of its children that ended and were waited for."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _other_threads() -> dict[int, float]:
    """CPU seconds of each thread of this process but the calling one (Linux; empty elsewhere)."""
    import threading

    me, out = threading.get_native_id(), {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
    return out


def _older_threads_since(before: dict[int, float]) -> float:
    """CPU that threads older than a test (another test's left-over server or pool) used during it."""
    now = _other_threads()
    return sum(max(0.0, now[tid] - cpu) for tid, cpu in before.items() if tid in now)


class _Shared:
    """CPU spent on what the whole process shares: first imports of a module and fixtures of a wider scope than
    one test.  Only the outermost of nested ones counts (an import inside a session fixture counts once)."""

    spent = 0.0
    depth = 0

    @classmethod
    def measure(cls, fn, *args):
        if cls.depth:
            return fn(*args)
        cls.depth += 1
        start = _cpu()
        try:
            return fn(*args)
        finally:
            cls.spent += _cpu() - start
            cls.depth -= 1


_find_and_load = importlib._bootstrap._find_and_load


def _find_and_load_measured(name, import_):
    return _Shared.measure(_find_and_load, name, import_)


# the import system calls importlib._bootstrap._find_and_load by name for a module not yet in sys.modules
importlib._bootstrap._find_and_load = _find_and_load_measured


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    if fixturedef.scope == "function" or _Shared.depth:
        yield
        return
    _Shared.depth += 1
    start = _cpu()
    try:
        yield
    finally:
        _Shared.spent += _cpu() - start
        _Shared.depth -= 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    item._cpu_start = (_cpu(), _Shared.spent, _other_threads())
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    start = getattr(item, "_cpu_start", None)
    if call.when != "call" or start is None:
        return
    used = (_cpu() - start[0]) - (_Shared.spent - start[1]) - _older_threads_since(start[2])
    slow = item.get_closest_marker("slow") is not None
    report.user_properties.append(("cpu_s", round(used, 3)))
    report.user_properties.append(("marked_slow", slow))
    budget = item.config.getoption("cpu_budget")
    if budget and used > budget and not slow and report.passed:
        report.over_budget = used


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Runs a test as pytest does; an unmarked test over its CPU budget runs once more, and fails when it is over
    again: the first run may have paid what a process pays once (a library's first call, a lazy cache), which
    falls to whichever test comes first in this worker."""
    from _pytest.runner import runtestprotocol

    if not item.config.getoption("cpu_budget") or item.get_closest_marker("slow") is not None:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    # the test's own fixtures go after each run; its module's and session's stay for a second one
    reports = runtestprotocol(item, nextitem=item.parent, log=False)
    if any(getattr(r, "over_budget", None) for r in reports):
        reports = runtestprotocol(item, nextitem=item.parent, log=False)
    item.session._setupstate.teardown_exact(nextitem)
    for report in reports:
        used = getattr(report, "over_budget", None)
        if used:
            budget = item.config.getoption("cpu_budget")
            report.outcome = "failed"
            report.longrepr = (f"{item.nodeid} used {used:.1f} s of CPU (twice), over the {budget:g} s budget of an "
                               "unmarked test: mark it @pytest.mark.slow or make it cheaper (tests/conftest.py)")
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


#: what orders the test files for the workers (below): a slow test, a test, a fixture its module shares
_COST_SLOW, _COST_TEST, _COST_SHARED = 20, 1, 60
#: the files that cost the most wall time in the slow lane (the demo made once, Ray clusters, tiny transformers
#: attacks, the world's meta-evaluation, a served checkpoint), dearest first: they go before every other file.  A
#: stale entry costs only balance between the workers, never a result.
_DEAREST = ("test_demo_describe.py", "test_ray.py", "test_vhexpansion.py", "test_world.py", "test_real_server.py",
            "test_not_measured.py", "test_user_data.py", "test_folded_summaries.py", "test_track.py", "test_docs.py")


@pytest.hookimpl(trylast=True)  # after `-m` has deselected: the cost of what will run
def pytest_collection_modifyitems(session, config, items):
    """The dearest test files first, each file's tests in their own order.  The Makefile runs one file to a worker
    (``--dist loadfile --no-loadscope-reorder``), and a worker takes the next file as it finishes one; a heavy file
    that came last (xdist's own order puts files with few tests last, such as a module that makes the demo once)
    would keep one core busy alone at the end.  First the files measured dearest (``_DEAREST``), then the others by
    an estimate: each slow test, each test, and each fixture of a module's scope its tests share.  Only in an
    xdist worker (whose order the scheduler reads): a run in one process keeps the order it was given."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    cost: dict[str, float] = {}
    shared: dict[str, set] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        cost[path] = cost.get(path, 0) + (_COST_SLOW if item.get_closest_marker("slow") else _COST_TEST)
        info = getattr(item, "_fixtureinfo", None)
        for name, defs in (info.name2fixturedefs.items() if info else ()):
            if defs and defs[-1].scope in ("module", "package"):
                shared.setdefault(path, set()).add(name)
    for path, names in shared.items():
        cost[path] += _COST_SHARED * len(names)
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(item.nodeid.split("::", 1)[0], i)

    def key(item):
        path = item.nodeid.split("::", 1)[0]
        name = path.rsplit("/", 1)[-1]
        return (_DEAREST.index(name) if name in _DEAREST else len(_DEAREST), -cost[path], first[path])

    items.sort(key=key)


_cpu_seen: list[tuple[float, str]] = []


def pytest_runtest_logreport(report):
    props = dict(report.user_properties)
    if report.when == "call" and "cpu_s" in props:
        _cpu_seen.append((props["cpu_s"], report.nodeid + ("  [slow]" if props.get("marked_slow") else "")))


def pytest_terminal_summary(terminalreporter, config):
    n = config.getoption("cpu_report")
    if n and _cpu_seen:
        terminalreporter.section(f"the {n} tests that used the most CPU (seconds)")
        for cpu, nodeid in sorted(_cpu_seen, reverse=True)[:n]:
            terminalreporter.write_line(f"{cpu:7.2f}  {nodeid}")


class HalfThenFull:
    """A file written to a full disk: the first write lands half its bytes, then fails with ENOSPC; everything
    else is the wrapped file's."""

    def __init__(self, fh):
        self.fh = fh

    def write(self, data):
        import errno

        self.fh.write(data[:len(data) // 2])
        self.fh.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()

    def __getattr__(self, name):
        return getattr(self.fh, name)


#: the CLI as a real process: for what only a process shows (kill -9, Ctrl-C, permissions, start-up, real servers)
CLI = [sys.executable, "-m", "vlmcheck.cli"]


class _Stream(io.TextIOWrapper):
    """A captured standard stream: text over bytes (``.buffer`` works), never a terminal."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8", errors="replace")


@contextlib.contextmanager
def _process_state(env, cwd, umask):
    """What a subprocess would have had of its own, set for one in-process call and restored after: the
    environment, the working folder, the umask, the signal handlers and the CLI's process-wide settings."""
    import signal

    from vlmcheck.cli import _common
    from vlmcheck.core import files
    from vlmcheck.report import terminal

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    frozen = set(_common._FROZEN)
    # gc.freeze() and the CLI's collector threshold are for a process that ends with the command
    _common._FROZEN.update({"start-up", "run"})
    consoles = [(c, c._made, c._quiet) for c in (terminal.console, terminal.stdout)]
    for c, _, _ in consoles:  # made again for this call: rich reads COLUMNS and the streams when it makes one
        object.__setattr__(c, "_made", None)
        object.__setattr__(c, "_quiet", False)
    old_mask = os.umask(umask) if umask is not None else None
    files._umask.cache_clear()  # the process's umask, read once a process
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update({k: str(v) for k, v in env.items()})
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        if old_mask is not None:
            os.umask(old_mask)
        files._umask.cache_clear()
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        _common._FROZEN.clear()
        _common._FROZEN.update(frozen)
        for c, made, quiet in consoles:
            object.__setattr__(c, "_made", made)
            object.__setattr__(c, "_quiet", quiet)


def run_cli(*args, env=None, cwd=None, input=None, umask=None, check=False, timeout=None):
    """``vlmcheck ARGS`` run in this process through the console script's own ``main`` (its exit codes and
    one-sentence errors), answering as ``subprocess.run(CLI + args, capture_output=True, text=True)`` would:
    a CompletedProcess with returncode, stdout and stderr (a traceback there, exit 1, for an uncaught error).
    ``env`` replaces the environment for the call, as a subprocess's would; ``timeout`` is pytest-timeout's."""
    from vlmcheck import cli

    argv = [str(a) for a in args]
    out, err = _Stream(), _Stream()
    log = logging.StreamHandler(err)
    log.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log.setLevel(logging.WARNING)
    root = logging.getLogger()
    saved = (sys.argv, sys.stdin, sys.stdout, sys.stderr, root.level)
    code = 0
    with _process_state(env, cwd, umask), warnings.catch_warnings():
        # a process's own warning filters and stderr, not pytest's capture
        warnings.resetwarnings()
        for kind in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", kind)
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: err.write(
            warnings.formatwarning(message, category, filename, lineno, line))
        sys.argv, sys.stdin, sys.stdout, sys.stderr = ["vlmcheck", *argv], io.StringIO(input or ""), out, err
        # the CLI's logging.basicConfig finds pytest's handlers and adds none: this one stands for it
        root.addHandler(log)
        root.setLevel(logging.WARNING)
        try:
            cli.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if isinstance(exc.code, str):
                err.write(exc.code + "\n")
        except Exception:  # noqa: BLE001 - a process would print it and exit 1 (pytest's own outcomes pass)
            err.write(traceback.format_exc())
            code = 1
        finally:
            root.removeHandler(log)
            sys.argv, sys.stdin, sys.stdout, sys.stderr, level = saved
            root.setLevel(level)
    done = subprocess.CompletedProcess(["vlmcheck", *argv], code, out.text(), err.text())
    if check:
        done.check_returncode()
    return done


@pytest.fixture
def cli():
    """The CLI run in this process: ``cli("describe", "--vlm", ...)`` -> CompletedProcess (see run_cli)."""
    return run_cli


class FakeServer:
    def __init__(self, latency: float, tmp: Path, *extra: str) -> None:
        self.log = tmp / "server-log.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vlmcheck.testing.fake_openai", "--port", "0", "--latency", str(latency),
             "--log", str(self.log), *extra], stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def fake_server(tmp_path):
    server = FakeServer(0.0, tmp_path)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def world_of(tmp_path_factory):
    """``world_of(n=..., seed=..., size=...)``: the folder of ``make_world`` with those arguments, made once per
    test run: the workers of an xdist run share it (the first to ask makes it, under a lock).  For tests that
    only read the world; one that writes into its world makes its own."""
    import fcntl

    from vlmcheck.world.make import make_world

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    made: dict[tuple, Path] = {}

    def get(n: int = 200, seed: int = 0, size: int = 384) -> Path:
        out = root / f"world-n{n}-seed{seed}-size{size}"
        if (n, seed, size) not in made:
            with open(f"{out}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (out / "manifest.jsonl").exists():  # make_world stages its folder: complete or absent
                    make_world(out, n=n, seed=seed, size=size)
            made[n, seed, size] = out
        return out

    return get


def distinct_images(folder: Path, n: int, colour=lambda i: (40 * i, 255 - 30 * i, 100), name="img{i}.png") -> Path:
    """``n`` small RGB images that differ in size and colour, in ``folder``."""
    from PIL import Image

    folder.mkdir()
    for i in range(n):
        Image.new("RGB", (16 + i, 16), colour(i)).save(folder / name.format(i=i))
    return folder


@pytest.fixture
def image_folder(tmp_path):
    """Six small distinct RGB images in a folder."""
    return distinct_images(tmp_path / "imgs", 6)


def seen_by_another_process(folder) -> set[str]:
    """The call keys another connection (as another process would) sees committed in a run's store."""
    import sqlite3

    con = sqlite3.connect(Path(folder) / "store.sqlite")
    try:
        return {k for (k,) in con.execute("SELECT key FROM calls")}
    finally:
        con.close()


def put_call(store, key: str) -> None:
    """One stored call whose request and answer are its key."""
    store.put_call(key, role="vlm", model="m", request={"q": key}, response={"text": key}, attempts=1)


def isolate_registry(monkeypatch, registry, loaded: bool | None = None) -> None:
    """What a test registers in ``registry`` (core/registry.py) goes with the test (``loaded=False``: its ``load``,
    the plugins' scan, runs again)."""
    for attr in ("_entries", "_origins"):
        monkeypatch.setattr(registry, attr, dict(getattr(registry, attr)))
    if loaded is not None:
        monkeypatch.setattr(registry, "_loaded", loaded)
