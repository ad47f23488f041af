"""Start-up cost of the CLI against a raw aiohttp client's (issue 51, goal 3: <= 1.5x).

    python bench/startup.py [--rounds 15] [--before SRC]

Runs, interleaved round by round (so drift in the machine's load hits every contender alike): ``python -c
"import aiohttp"`` (what a bare client pays before its first request), ``vlmcheck --help`` and ``vlmcheck
version`` from this checkout, and with ``--before SRC`` the same commands from another checkout's ``src/`` folder
(e.g. ``git archive main src | tar -x -C /tmp/before``). Each run's CPU (user + system, from wait4) and wall time;
the medians and the ratio vlmcheck / aiohttp are printed, with the machine's load average beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
CLI = "import sys; from vlmcheck.cli import main; sys.argv[0] = 'vlmcheck'; main()"


def run(cmd: list[str], env: dict) -> tuple[float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"bench failed: {' '.join(cmd)} exited with status {os.waitstatus_to_exitcode(status)}.")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--before", metavar="SRC", help="another checkout's src/ folder, run as 'before'")
    ap.add_argument("--goal", type=float, default=1.5, help="the largest CPU ratio vlmcheck --help / aiohttp met")
    args = ap.parse_args()
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=str(SRC))
    contenders = {"import aiohttp": ([py, "-c", "import aiohttp"], env)}
    for tag, src in [("", SRC), *([("before ", Path(args.before).resolve())] if args.before else [])]:
        e = dict(os.environ, PYTHONPATH=str(src))
        contenders[f"{tag}vlmcheck --help"] = ([py, "-c", CLI, "--help"], e)
        contenders[f"{tag}vlmcheck version"] = ([py, "-c", CLI, "version"], e)
    for cmd, e in contenders.values():  # warm the page cache and the bytecode caches: not counted
        run(cmd, e)
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, (cmd, e) in contenders.items():
            rows[name].append(run(cmd, e))
    load = os.getloadavg()
    print(f"{args.rounds} interleaved rounds, medians; {os.cpu_count()} CPUs, load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"{'':24}{'CPU ms':>8}{'wall ms':>9}{'CPU / aiohttp':>15}")
    base = statistics.median(c for c, _ in rows["import aiohttp"])
    med = {}
    for name, xs in rows.items():
        cpu, wall = statistics.median(c for c, _ in xs), statistics.median(w for _, w in xs)
        med[name] = cpu
        print(f"{name:24}{1000 * cpu:8.0f}{1000 * wall:9.0f}{cpu / base:15.2f}")
    if args.before:
        print(f"vlmcheck --help CPU, after / before: {med['vlmcheck --help'] / med['before vlmcheck --help']:.2f}")
    ratio = med["vlmcheck --help"] / base
    met = ratio <= args.goal
    print(f"goal: vlmcheck --help CPU / import aiohttp's {ratio:.2f} (<= {args.goal}): {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
