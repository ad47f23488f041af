"""Start-up cost of the CLI against a raw aiohttp client's (issue 51, goal 3: <= 1.5x).

    python bench/startup.py [--rounds 15] [--quick] [--before SRC]

Runs, interleaved round by round (so drift in the machine's load hits every contender alike): ``python -c
"import aiohttp"`` (what a bare client pays before its first request), ``vlmcheck --help`` and ``vlmcheck
version`` from this checkout; then a one-image run: raw aiohttp reading one 256-px PNG, base64-encoding it and
POSTing one chat request to a local fake server (``vlmcheck.testing.fake_openai``, no latency), against the
command a user types for the same image, ``vlmcheck describe --vlm openai:fake@URL --data ONE.jsonl --out DIR``
(preflight, store, results and report as by default); with ``--before SRC`` the vlmcheck commands from another
checkout's ``src/`` folder too (e.g. ``git archive main src | tar -x -C /tmp/before``). Each run's CPU (user +
system, from wait4: the fake server is not counted) and wall time; the medians and the ratios vlmcheck / aiohttp
are printed, with the machine's load average beside them. Every contender runs with its bytecode cached (as after ``pip
install``, which compiles it): ``PYTHONDONTWRITEBYTECODE`` is dropped and ``PYTHONPYCACHEPREFIX`` points into the
bench's temporary folder, which the uncounted warm-up run fills; without it, a checkout's modules would be compiled
from source on every run (about 0.3 s of a one-image run here), a cost no installed copy pays.  Goals: ``--help`` CPU / ``import aiohttp`` and the
one-image run's CPU / raw aiohttp's one request, each <= 1.5.  Also printed, not a goal: the same one request from
a process that first loads the libraries vlmcheck stands on (pydantic with one model, typer, jinja2), the floor
under any command built on them, and the one-image run's CPU against that floor (what vlmcheck's own work adds).
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

SRC = Path(__file__).resolve().parents[1] / "src"
CLI = "import sys; from vlmcheck.cli import main; sys.argv[0] = 'vlmcheck'; main()"
RAW_ONE = """
import asyncio, base64, json, sys
import aiohttp

async def main(url, path):
    body = {"model": "fake", "max_tokens": 512, "temperature": 0.0, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(open(path, "rb").read()).decode()}},
        {"type": "text", "text": "Describe this image in detail."}]}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/chat/completions", json=body) as resp:
            print(json.loads(await resp.read())["choices"][0]["message"]["content"])

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""
#: the same request from a process that first loads, at their first-use cost, the libraries a vlmcheck run stands
#: on: pydantic with one model (its schema machinery and its scan for plugins come with the first model), typer,
#: jinja2; then, as the CLI does at start-up (cli/_common.freeze), what exists is frozen out of the collector's
#: walks and the young generation's threshold raised, so that the floor is not raised by collections vlmcheck does
#: not make.  Not a goal: the floor under any CLI built on these libraries, printed so that the one-image run's
#: ratio can be read as libraries plus vlmcheck's own work.
LIBS_ONE = """
import gc, pydantic, typer, jinja2

gc.freeze()
gc.set_threshold(7000, *gc.get_threshold()[1:])

class First(pydantic.BaseModel):
    n: int = 0

First(n=1)
""" + RAW_ONE


def _env(src: Path, tmp: Path) -> dict:
    """The contenders' environment: ``src`` first on the path, bytecode cached under ``tmp`` (see the docstring)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return dict(env, PYTHONPATH=str(src), PYTHONPYCACHEPREFIX=str(tmp / "pycache"))


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
    ap.add_argument("--quick", action="store_true", help="5 rounds")
    ap.add_argument("--before", metavar="SRC", help="another checkout's src/ folder, run as 'before'")
    ap.add_argument("--goal", type=float, default=1.5, help="the largest CPU ratio vlmcheck --help / aiohttp met")
    args = ap.parse_args()
    if args.quick:
        args.rounds = min(args.rounds, 5)
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="vlmcheck-startup-"))
    server = subprocess.Popen([py, "-m", "vlmcheck.testing.fake_openai", "--port", "0", "--latency", "0"],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(SRC)))
    try:
        return _bench(args, py, tmp, f"http://127.0.0.1:{int(server.stdout.readline())}/v1")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _bench(args, py: str, tmp: Path, url: str) -> int:
    from PIL import Image

    image = tmp / "one.png"
    Image.effect_mandelbrot((256, 256), (-2, -1.5, 1, 1.5), 64).convert("RGB").save(image)
    manifest = tmp / "one.jsonl"
    manifest.write_text(json.dumps({"id": "one", "image": "one.png", "prompt": "Describe this image in detail."}) + "\n")
    env = _env(SRC, tmp)
    contenders = {"import aiohttp": ([py, "-c", "import aiohttp"], env)}
    runs = {"counter": 0}

    def one_image_run(e: dict) -> list[str]:  # a fresh folder each time: a first run, not a resume
        runs["counter"] += 1
        return [py, "-c", CLI, "describe", "--vlm", f"openai:fake@{url}", "--data", str(manifest), "--out",
                str(tmp / f"run-{runs['counter']}")]

    contenders["raw aiohttp, one request"] = ([py, "-c", RAW_ONE, url, str(image)], env)
    contenders["its libraries, one request"] = ([py, "-c", LIBS_ONE, url, str(image)], env)
    for tag, src in [("", SRC), *([("before ", Path(args.before).resolve())] if args.before else [])]:
        e = _env(src, tmp)
        contenders[f"{tag}vlmcheck --help"] = ([py, "-c", CLI, "--help"], e)
        contenders[f"{tag}vlmcheck version"] = ([py, "-c", CLI, "version"], e)
        contenders[f"{tag}vlmcheck one-image run"] = (None, e)
    for name, (cmd, e) in contenders.items():  # warm the page cache and the bytecode caches: not counted
        run(cmd or one_image_run(e), e)
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, (cmd, e) in contenders.items():
            rows[name].append(run(cmd or one_image_run(e), e))
    load = os.getloadavg()
    print(f"{args.rounds} interleaved rounds, medians; {os.cpu_count()} CPUs, load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"{'':32}{'CPU ms':>8}{'wall ms':>9}{'CPU / aiohttp':>15}")
    base = statistics.median(c for c, _ in rows["import aiohttp"])
    base_one = statistics.median(c for c, _ in rows["raw aiohttp, one request"])
    med = {}
    for name, xs in rows.items():
        cpu, wall = statistics.median(c for c, _ in xs), statistics.median(w for _, w in xs)
        med[name] = cpu
        ref = base_one if "one" in name else base
        print(f"{name:32}{1000 * cpu:8.0f}{1000 * wall:9.0f}{cpu / ref:15.2f}")
    print(f"one-image run CPU / its libraries' one request (pydantic, typer, jinja2 loaded first; not a goal): "
          f"{med['vlmcheck one-image run'] / med['its libraries, one request']:.2f}")
    if args.before:
        print(f"vlmcheck --help CPU, after / before: {med['vlmcheck --help'] / med['before vlmcheck --help']:.2f}")
        print(f"one-image run CPU, after / before: "
              f"{med['vlmcheck one-image run'] / med['before vlmcheck one-image run']:.2f}")
    ok = True
    for what, ratio in (("vlmcheck --help CPU / import aiohttp's", med["vlmcheck --help"] / base),
                        ("one-image run CPU / raw aiohttp's one request", med["vlmcheck one-image run"] / base_one)):
        met = ratio <= args.goal
        ok = ok and met
        print(f"goal: {what} {ratio:.2f} (<= {args.goal}): {'met' if met else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
