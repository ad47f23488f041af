"""The offline demo's wall time against issue 36's limit of 120 s, optionally against another checkout.

Runs ``vlmcheck demo --no-screenshots`` (what ``make demo`` runs) into a fresh folder, ``--rounds`` times; with
``--before SRC`` (the ``src/`` folder of another checkout, e.g. a ``git worktree`` of an older commit) the two
alternate, each in its own process, so both see the machine in the same state.  Prints each run's wall time,
the median's ratio to the limit, and whether every run's metrics are the same as the other code's.

    python bench/demo_time.py [--rounds 3] [--before ../old/src]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIMIT_S = 120.0


def run_demo(src: Path | None, out: Path) -> float:
    """Seconds for one demo into ``out`` (made anew), with the vlmcheck of ``src`` (None: this one)."""
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(src)) if src else None
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "vlmcheck.cli", "demo", "--out", str(out), "--no-screenshots"],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def metrics(out: Path) -> dict[str, object]:
    return {str(p.parent.relative_to(out)): json.loads(p.read_text())["metrics"]
            for p in sorted(out.glob("**/results.json"))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", metavar="SRC", help="another checkout's src/ folder, run alternately with this one")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="vlmcheck-demo-bench-"))
    who = {"after": None, **({"before": Path(args.before).resolve()} if args.before else {})}
    times: dict[str, list[float]] = {name: [] for name in who}
    same = True
    try:
        for r in range(args.rounds):
            for name in reversed(list(who)):  # "before" first in each round
                times[name].append(run_demo(who[name], tmp / name))
                print(f"round {r + 1} {name:6}: {times[name][-1]:6.1f} s", flush=True)
            if args.before:
                same = same and metrics(tmp / "before") == metrics(tmp / "after")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{os.cpu_count()} CPUs; load average before the last run's end: {os.getloadavg()[0]:.2f}")
    for name, ts in times.items():
        print(f"{name:6}: median {statistics.median(ts):.1f} s ({', '.join(f'{t:.1f}' for t in ts)})")
    ratio = statistics.median(times["after"]) / LIMIT_S
    print(f"goal: demo wall time / {LIMIT_S:.0f} s = {ratio:.2f} (<= 1): {'met' if ratio <= 1 else 'NOT met'}")
    if args.before:
        print(f"after / before: {statistics.median(times['after']) / statistics.median(times['before']):.2f}; "
              f"metrics of every run {'identical' if same else 'DIFFERENT'}")
    return 0 if ratio <= 1 and same else 1


if __name__ == "__main__":
    sys.exit(main())
