"""What the default report costs (issue 51 item 1): `vlmcheck describe` as a user runs it (report included)
against the same command with `--no-report`, interleaved, on distinct photos that exist on disk.

A fake OpenAI-compatible server (its own process, fixed latency) answers every request.  Per round, in turn:
the default command into a fresh folder, then `--no-report` into another; medians over ``--rounds``.  Printed:
wall time and CPU (user + system, from wait4) of each, their ratio, the report's share of the run (default wall
minus `--no-report` wall, over the latter), `vlmcheck report RUN` alone on the finished run, and what the
report leaves on disk: files in ``report.html`` + ``report_files/`` per 100 samples and their bytes against the
images' bytes.  Goals (issue 51): wall ratio <= 1.25 at 1,000 photos; at 100,000 the report <= 0.25x the run's
own time, <= 1 file per 100 samples, <= 5 % of the images' bytes.

The photos: up to 1,000 distinct crops of scikit-image's bundled photographs (bench/api_throughput.py's
``make_images``, 256 px PNG by default); beyond that each file is one of them with a text chunk naming its
index, so every file has its own bytes (its own cache key: no request is served from the cache) without
encoding 100,000 PNGs.

    python bench/report_cost.py [--n 1000] [--size 256] [--rounds 3] [--latency 0.05] [--concurrency N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

BENCH = Path(__file__).resolve().parent
DISTINCT = 1000


def _png_with_text(data: bytes, text: str) -> bytes:
    """The PNG ``data`` with a tEXt chunk after its header chunk: other bytes, the same pixels."""
    body = b"Comment\x00" + text.encode("latin-1")
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    end = 8 + 4 + 4 + 13 + 4  # signature, IHDR's length, type, data, crc
    return data[:end] + chunk + data[end:]


def make_photos(tmp: Path, n: int, size: int) -> tuple[Path, int]:
    """``n`` photo files and their manifest; returns (manifest, the images' total bytes)."""
    folder = tmp / "imgs"
    subprocess.run([sys.executable, str(BENCH / "api_throughput.py"), "--worker", "images", "--folder", str(folder),
                    "--n", str(min(n, DISTINCT)), "--size", str(size)], check=True)
    rows = [json.loads(x) for x in (tmp / "manifest.jsonl").read_text().splitlines() if x.strip()]
    if n > DISTINCT:
        sources = [(folder / f"{i:05d}.png").read_bytes() for i in range(DISTINCT)]
        for i in range(DISTINCT, n):
            (folder / f"{i:06d}.png").write_bytes(_png_with_text(sources[i % DISTINCT], f"copy {i}"))
            rows.append({"id": f"s{i:06d}", "image": f"imgs/{i:06d}.png", "prompt": rows[0]["prompt"]})
        (tmp / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp / "manifest.jsonl", sum(f.stat().st_size for f in folder.iterdir())


def timed(cmd: list[str]) -> dict:
    """Wall and CPU (the process and its children, from wait4) of ``cmd``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code:
        last = err.decode(errors="replace").strip().splitlines()[-1:]
        raise SystemExit(f"{' '.join(cmd[:4])} failed (exit {code}): {last}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime}


def report_footprint(run: Path) -> tuple[int, int]:
    """(files, bytes) of the run's report: report.html and everything under report_files/."""
    files = [run / "report.html", *[p for p in (run / "report_files").rglob("*") if p.is_file()]]
    files = [p for p in files if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=None,
                    help="requests in flight (default: vlmcheck's own default, passed as no flag: the command a "
                         "user types)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = ap.parse_args()
    from api_throughput import default_concurrency, vlmcheck_flags  # bench/ is this script's folder

    args.concurrency = args.concurrency or default_concurrency()
    tmp = Path(tempfile.mkdtemp(prefix="vlmcheck-report-cost-"))
    manifest, image_bytes = make_photos(tmp, args.n, args.size)
    server = subprocess.Popen([sys.executable, "-m", "vlmcheck.testing.fake_openai", "--port", "0", "--latency",
                               str(args.latency)], stdout=subprocess.PIPE, text=True)
    vlmcheck = [str(Path(sys.executable).parent / "vlmcheck")]  # the command a user types
    try:
        base_url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"

        def command(out: Path, *extra: str) -> list[str]:
            return [*vlmcheck, "describe", "--vlm", f"openai:fake@{base_url}", "--data", str(manifest),
                    "--out", str(out), *vlmcheck_flags(args.concurrency, report=True), *extra]

        runs: dict[str, list[dict]] = {"default": [], "--no-report": []}
        last = None
        for r in range(args.rounds):  # interleaved: both under the same load
            for name, extra in (("default", ()), ("--no-report", ("--no-report",))):
                out = tmp / f"{name.strip('-')}-{r}"
                runs[name].append(timed(command(out, *extra)))
                if name == "default":
                    last = out
                else:
                    shutil.rmtree(out)  # disk: a 100,000-sample store each
            if r < args.rounds - 1:
                shutil.rmtree(tmp / f"default-{r}")
        # the report of the finished run, by itself, written where the run's own is
        alone = timed([*vlmcheck, "report", str(last), "-o", str(last / "report.html")])
    finally:
        server.kill()
    files, size = report_footprint(last)
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("wall", "cpu")} for k, v in runs.items()}
    d, b = med["default"], med["--no-report"]
    load = os.getloadavg()
    print(f"N = {args.n} distinct {args.size}-px PNG photos ({image_bytes / 1e6:.1f} MB), concurrency "
          f"{args.concurrency}, latency {args.latency * 1000:.0f} ms, {args.rounds} interleaved rounds (medians); "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    for name, m in med.items():
        print(f"  {name:12} wall {m['wall']:8.2f} s   CPU {m['cpu']:8.2f} s   ({1000 * m['cpu'] / args.n:.2f} ms a sample)")
    share = (d["wall"] - b["wall"]) / b["wall"]
    print(f"  vlmcheck report RUN alone: wall {alone['wall']:.2f} s, CPU {alone['cpu']:.2f} s")
    print(f"  report folder: {files} files ({100 * files / args.n:.3f} per 100 samples), {size / 1e6:.2f} MB "
          f"({100 * size / image_bytes:.2f} % of the images' bytes)")
    goals = [("default wall / --no-report wall", d["wall"] / b["wall"], 1.25, args.n <= 10_000),
             ("report's time / the run's own (default - --no-report, over --no-report)", share, 0.25, True),
             ("report alone / the run's own time", alone["wall"] / b["wall"], 0.25, args.n > 10_000),
             ("report files per 100 samples", 100 * files / args.n, 1.0, args.n >= 10_000),
             ("report bytes / images' bytes", size / image_bytes, 0.05, True)]
    ok = True
    for what, ratio, limit, applies in goals:
        met = ratio <= limit
        ok = ok and (met or not applies)
        print(f"goal: {what} {ratio:.3f} (<= {limit}){'' if applies else ' [not a goal at this size]'}: "
              f"{'met' if met else 'NOT met'}")
    if args.keep:
        print(f"kept: {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
