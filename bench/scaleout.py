"""Scale-out without a cluster engine: shards + merge, and one model on several endpoints.

Against local fake OpenAI-compatible servers with a fixed latency, N describe calls on N distinct images:

* ``local``: one process, one endpoint, concurrency C;
* ``shards k``: k processes (``--shard i/k``) started together, each at concurrency C, then ``vlmcheck
  merge``; wall time includes the processes' start-up and the merge, which is also printed on its own;
* ``endpoints k``: one process, ``openai:fake@URL1,...,URLk?concurrency=C`` (C per endpoint);
* ``ray-kill``: ``--executor ray --workers 4``; once a tenth of the samples is done one worker process is killed
  (SIGKILL); prints how long the pool took to be back at 4 workers (from ``results.json``'s ``executor``) as a
  ratio of the 30-s goal, and the requests counted against those the server saw (one server of capacity C,
  so its ideal is N x latency / C);
* ``ray k``: ``--executor ray --workers k`` at total concurrency k x C against k endpoints; the wall includes
  starting a local Ray instance, whose fixed cost (start and first dispatch) is printed on its own: a
  one-sample Ray run less a one-sample local run;
* ``outputs``: ``bench/outputs.py --n M`` (``--million``, 1,000,000 by default): merge, results and export of an
  M-sample synthetic store, and its report opened in headless Chromium, each against issue 37's goal; run
  first, so that every goal of the issue is printed by one run of this script.

Every server serves at most C requests at once (``--capacity``; more queue), so k endpoints or k shards (shard i
on server i) add capacity only as far as the client balances its requests over them.  Efficiency = ideal / wall
with ideal = N x latency / (total concurrency); the endpoint rows also print their speed-up over the local row
as a share of linear (goal: >= 0.95 at 500 ms).  On one 2-core machine every process shares the same CPUs, so
shards show their fixed costs and the CPU ceiling rather than a speed-up.

    python bench/scaleout.py [--n 600] [--concurrency 8] [--latency 0.05 0.5] [--million 1000000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

CLI = [sys.executable, "-m", "vlmcheck.cli"]


class Server:
    """A fake server that serves at most ``capacity`` requests at once (the rest queue), as a GPU server does."""

    def __init__(self, latency: float, log: Path, capacity: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "vlmcheck.testing.fake_openai", "--port", "0",
                                      "--latency", str(latency), "--log", str(log), "--capacity", str(capacity)],
                                     stdout=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}/v1"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def describe(spec: str, data: Path, out: Path, conc: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "describe", "--vlm", spec, "--data", str(data), "--out", str(out), "--no-progress",
                             "--max-concurrency", str(conc), "--no-preflight", "--no-report", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait(*procs: subprocess.Popen) -> None:
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"a run failed: {err.strip().splitlines()[-1:]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600)
    # 8 per endpoint: 600 requests are then 19 waves on 4 endpoints, so a speed-up shows the balancing; at 32, 4
    # endpoints are 4.7 waves, whose ramp and last partial wave (and 128 requests in flight on 2 cores shared
    # with 4 servers) hold the row near 0.8 of linear however well the requests are spread
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--latency", type=float, nargs="+", default=[0.05, 0.5])
    setups = ["outputs", "local", "shards", "ray", "ray-kill", "endpoints"]
    ap.add_argument("--setups", nargs="+", default=setups, choices=setups, help="which rows to measure")
    ap.add_argument("--million", type=int, default=1_000_000, metavar="M",
                    help="samples in the synthetic store of the 'outputs' row (bench/outputs.py)")
    ap.add_argument("--size", type=int, default=0,
                    help="photos of this many px (bench/api_throughput.py's) instead of 64x48 flat images")
    a = ap.parse_args()
    if "outputs" in a.setups:
        print(f"outputs at scale (bench/outputs.py --n {a.million:,}):", flush=True)
        if subprocess.run([sys.executable, str(Path(__file__).with_name("outputs.py")), "--n", str(a.million)]).returncode:
            raise SystemExit("bench/outputs.py failed")
        print(flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        data = t / "imgs"
        if a.size:
            sys.path.insert(0, str(Path(__file__).parent))
            from api_throughput import make_images

            make_images(data, a.n, a.size)
        else:
            data.mkdir()
            for i in range(a.n):  # distinct pixels: no image repeats, so the call cache answers nothing
                img = Image.new("RGB", (64, 48), ((13 * i) % 256, (7 * i) % 256, 90))
                img.putpixel((0, 0), (i % 256, i // 256, 0))
                img.save(data / f"{i:05d}.png")
        print(f"N = {a.n} distinct images, concurrency {a.concurrency} per process / endpoint")
        print(f"{'latency':>8} {'setup':<12} {'wall s':>7} {'ideal s':>8} {'efficiency':>10}  note")
        for latency in a.latency:
            servers = [Server(latency, t / f"log{latency}-{k}.jsonl", a.concurrency) for k in range(4)]
            local_wall = None
            try:
                def row(name: str, wall: float, total_conc: int, note: str = "") -> None:
                    ideal = a.n * latency / total_conc
                    print(f"{latency:>8} {name:<12} {wall:>7.1f} {ideal:>8.1f} {ideal / wall:>10.2f}  {note}")

                if "local" in a.setups:
                    t0 = time.monotonic()
                    wait(describe(f"openai:fake@{servers[0].url}", data, t / f"local-{latency}", a.concurrency))
                    local_wall = time.monotonic() - t0
                    row("local", local_wall, a.concurrency)
                for k in (1, 2, 4) if "shards" in a.setups else ():
                    t0 = time.monotonic()
                    wait(*[describe(f"openai:fake@{servers[i].url}", data, t / f"s{k}-{i}-{latency}", a.concurrency,
                                    "--shard", f"{i}/{k}") for i in range(k)])  # shard i on server i
                    runs = time.monotonic() - t0
                    m0 = time.monotonic()
                    subprocess.run([*CLI, "merge", str(t / f"m{k}-{latency}"),
                                    *(str(t / f"s{k}-{i}-{latency}") for i in range(k))], check=True,
                                   capture_output=True)
                    merge = time.monotonic() - m0
                    row(f"shards {k}", runs + merge, k * a.concurrency, f"merge {merge:.1f} s")
                for k in (1, 2, 4) if "ray" in a.setups else ():
                    t0 = time.monotonic()  # k workers on k servers: capacity k x C, as for k shards
                    urls = ",".join(s.url for s in servers[:k])
                    wait(describe(f"openai:fake@{urls}?concurrency={a.concurrency}", data, t / f"r{k}-{latency}",
                                  k * a.concurrency, "--executor", "ray", "--workers", str(k)))
                    row(f"ray {k}", time.monotonic() - t0, k * a.concurrency)
                if "ray" in a.setups:
                    t0 = time.monotonic()
                    wait(describe(f"openai:fake@{servers[0].url}", data, t / f"one-l-{latency}", 1, "--limit", "1"))
                    one_local = time.monotonic() - t0
                    t0 = time.monotonic()
                    wait(describe(f"openai:fake@{servers[0].url}", data, t / f"one-r-{latency}", 1, "--limit", "1",
                                  "--executor", "ray", "--workers", "1"))
                    print(f"{latency:>8} ray fixed cost (start + first dispatch): "
                          f"{time.monotonic() - t0 - one_local:.1f} s")
                if "ray-kill" in a.setups:
                    ray_kill(servers[3], data, t / f"rk-{latency}", a, latency, row)
                fixed = 0.0
                if "endpoints" in a.setups:  # the process's start-up and first request, paid once per run
                    t0 = time.monotonic()
                    wait(describe(f"openai:fake@{servers[0].url}", data, t / f"one-e-{latency}", 1, "--limit", "1"))
                    fixed = max(0.0, time.monotonic() - t0 - latency)
                    print(f"{latency:>8} fixed cost of a run (start-up, imports, first dispatch): {fixed:.1f} s")
                for k in (2, 4) if "endpoints" in a.setups else ():
                    urls = ",".join(s.url for s in servers[:k])
                    t0 = time.monotonic()
                    wait(describe(f"openai:fake@{urls}?concurrency={a.concurrency}", data, t / f"e{k}-{latency}",
                                  k * a.concurrency))
                    wall = time.monotonic() - t0
                    api = (local_wall - fixed) / (wall - fixed) if local_wall else None
                    row(f"endpoints {k}", wall, k * a.concurrency,
                        f"speed-up {local_wall / wall:.2f}x = {local_wall / wall / k:.2f} of linear; start-up "
                        f"excluded {api:.2f}x = {api / k:.2f} of linear" if local_wall else "")
            finally:
                for s in servers:
                    s.stop()


def _done(run: Path) -> int:
    import sqlite3

    try:
        with sqlite3.connect(f"file:{run / 'store.sqlite'}?mode=ro", uri=True) as con:
            return con.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
    except sqlite3.Error:
        return 0


def ray_kill(server: Server, data: Path, out: Path, a, latency: float, row) -> None:
    """4 Ray workers, one killed once a tenth of the samples is done: back to 4 within 30 s?"""
    import json
    import os
    import signal

    log = Path(server.proc.args[server.proc.args.index("--log") + 1])
    before = len(log.read_text().splitlines()) if log.exists() else 0
    t0 = time.monotonic()
    proc = describe(f"openai:fake@{server.url}", data, out, 4 * a.concurrency, "--executor", "ray", "--workers", "4")
    killed = None
    while proc.poll() is None and killed is None:
        if _done(out) >= a.n // 10:
            ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
            pids = [int(line.split()[0]) for line in ps if "ray::SampleWorker" in line]
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed = pids[0]
        time.sleep(0.05)
    wait(proc)
    wall = time.monotonic() - t0
    res = json.loads((out / "results.json").read_text())
    ex, seen = res["executor"], len(log.read_text().splitlines()) - before
    back = ex["replaced_after_s"]
    row("ray-kill 4", wall, a.concurrency,  # one server, serving C at once
        f"killed pid {killed}; lost {ex['lost']}, back to 4 after {back} s = "
        f"{(back[0] / 30 if back else float('nan')):.2f} of the 30-s goal; requests counted "
        f"{res['session']['requests']}, server saw {seen}; done {res['counts']['done']}/{a.n}")


if __name__ == "__main__":
    main()
