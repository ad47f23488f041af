"""What users pay per request: vlmcheck against the bare openai SDK and raw aiohttp, on distinct photos.

A fake OpenAI-compatible server (separate process, 127.0.0.1, fixed latency) answers N describe requests,
one distinct image each: crops of scikit-image's bundled photographs, shifted in colour so no two share
pixels, at a realistic size (``--size``: 256 px by default; try ``--size 1024 --n 200``).  Contenders, each
in its own process, interleaved over ``--rounds`` rounds (medians reported):

* ``vlmcheck``: a describe run through the whole stack (images read from disk, cache keys, scheduler,
  SQLite store and journal);
* ``bare SDK``: the openai SDK alone (its aiohttp transport, as vlmcheck uses), the images read and
  encoded to base64 PNG per request, no store: the floor of any runner built on the SDK;
* ``bare aiohttp``: raw HTTP POSTs of the same bodies: what the server and loopback allow.

Per contender: wall time; API phase (first request to last answer, from the server's log); efficiency =
ideal / API phase and ideal / wall with ideal = N x latency / concurrency; mean requests in flight =
N x latency / API phase; client CPU per sample (the process's user + system time over N); peak RSS.  Then
the finished vlmcheck run is run again: 0 model calls.

    python bench/api_throughput.py [--n 2000] [--size 256] [--concurrency 64] [--latency 0.05 0.5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "Describe this image in detail."


def make_images(folder: Path, n: int, size: int) -> Path:
    """``n`` distinct photos: crops of the bundled photographs at ``size`` px, each shifted in colour."""
    import numpy as np
    from PIL import Image

    from vlmcheck.world.photos import PHOTOS, _load

    folder.mkdir(parents=True, exist_ok=True)
    sources = [np.asarray(_load(name).convert("RGB").resize((max(size, 512), max(size, 512)))) for name in PHOTOS]
    rows = []
    for i in range(n):
        src = sources[i % len(sources)]
        off = (i * 37) % (src.shape[0] - size + 1)
        crop = src[off:off + size, off:off + size].astype(np.int16)
        crop = np.clip(crop + [(i * 7) % 23 - 11, (i * 13) % 23 - 11, (i // 23) % 23 - 11], 0, 255).astype(np.uint8)
        Image.fromarray(crop).save(folder / f"{i:05d}.png")
        rows.append(json.dumps({"id": f"s{i:05d}", "image": f"{folder.name}/{i:05d}.png", "prompt": PROMPT}))
    manifest = folder.parent / "manifest.jsonl"
    manifest.write_text("\n".join(rows) + "\n")
    return manifest


# ----------------------------------------------------------------------------- contenders (own processes)


def _bodies(folder: Path, n: int, tag: str):
    from vlmcheck.core.images import load_image
    from vlmcheck.core.messages import Message, to_openai

    for i in range(n):  # read and encoded per request, as a runner without a cache must
        img = load_image(folder / f"{i:05d}.png")
        yield {"model": "fake", "max_tokens": 512, "temperature": 0.0,
               "messages": to_openai([Message.user(img, f"{PROMPT} [{tag} {i}]")])}


async def _sdk(base_url: str, folder: Path, n: int, conc: int, tag: str) -> None:
    import openai

    client = openai.AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0,
                                http_client=openai.DefaultAioHttpClient())
    bodies = _bodies(folder, n, tag)
    it = iter(range(n))

    async def worker() -> None:  # conc workers: conc requests in flight, as a semaphore would allow
        for _ in it:
            await client.chat.completions.create(**next(bodies))

    await asyncio.gather(*(worker() for _ in range(conc)))
    await client.close()


async def _aiohttp(base_url: str, folder: Path, n: int, conc: int, tag: str) -> None:
    import aiohttp

    bodies = _bodies(folder, n, tag)
    it = iter(range(n))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as http:
        async def worker() -> None:
            for _ in it:
                async with http.post(base_url + "/chat/completions", json=next(bodies)) as resp:
                    json.loads(await resp.read())

        await asyncio.gather(*(worker() for _ in range(conc)))


def _vlmcheck(base_url: str, manifest: Path, out: Path, conc: int) -> None:
    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask

    task = DescribeTask(DescribeSpec(vlm=f"openai:fake@{base_url}", data=str(manifest), prompt=PROMPT))
    run_task(task, out, RunOptions(max_concurrency=conc, progress=False, report=False, preflight=False,
                                   resume=(out / "store.sqlite").exists()))


def worker_main(args) -> None:
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    folder = Path(args.folder)
    if args.worker == "vlmcheck":
        _vlmcheck(args.base_url, folder.parent / "manifest.jsonl", Path(args.out), args.concurrency)
    elif args.worker == "sdk":
        asyncio.run(_sdk(args.base_url, folder, args.n, args.concurrency, args.tag))
    else:
        asyncio.run(_aiohttp(args.base_url, folder, args.n, args.concurrency, args.tag))
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"wall": time.perf_counter() - t0,
                      "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
                      "rss_mb": r1.ru_maxrss / 1024}))


# ----------------------------------------------------------------------------- the parent


def run_one(kind: str, base_url: str, folder: Path, n: int, conc: int, out: Path, tag: str, log: Path,
            latency: float) -> dict:
    start = len(log.read_text().splitlines()) if log.exists() else 0
    proc = subprocess.run([sys.executable, __file__, "--worker", kind, "--base-url", base_url, "--folder", str(folder),
                           "--n", str(n), "--concurrency", str(conc), "--out", str(out), "--tag", tag],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed: {proc.stderr.strip().splitlines()[-1:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    seen = [json.loads(x) for x in log.read_text().splitlines()[start:] if x.strip()]
    ts = [r["t"] for r in seen if r.get("path", "").endswith("/chat/completions")]
    res["requests"] = len(ts)
    res["api_phase"] = (max(ts) + latency - min(ts)) if ts else float("nan")  # first request to last answer
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", choices=["vlmcheck", "sdk", "aiohttp"])
    ap.add_argument("--base-url")
    ap.add_argument("--folder")
    ap.add_argument("--out")
    ap.add_argument("--tag", default="")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, nargs="+", default=[0.05, 0.5])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.worker:
        worker_main(args)
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="vlmcheck-bench-"))
    folder = tmp / "imgs"
    make_images(folder, args.n, args.size)
    print(f"N = {args.n} distinct {args.size}-px photos, concurrency {args.concurrency}, {args.rounds} interleaved "
          "rounds (medians)")
    ok = True
    for latency in args.latency:
        log = tmp / f"server-{latency}.jsonl"
        server = subprocess.Popen([sys.executable, "-m", "vlmcheck.testing.fake_openai", "--port", "0", "--latency",
                                   str(latency), "--log", str(log)], stdout=subprocess.PIPE, text=True)
        try:
            base_url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
            results: dict[str, list[dict]] = {"bare aiohttp": [], "bare SDK": [], "vlmcheck": []}
            for r in range(args.rounds):
                for name, kind in (("bare aiohttp", "aiohttp"), ("bare SDK", "sdk"), ("vlmcheck", "vlmcheck")):
                    results[name].append(run_one(kind, base_url, folder, args.n, args.concurrency,
                                                 tmp / f"run-{latency}-{r}", f"{kind}{r}", log, latency))
            t0 = time.perf_counter()
            rerun = run_one("vlmcheck", base_url, folder, args.n, args.concurrency, tmp / f"run-{latency}-0", "rerun",
                            log, latency)
            rerun_s = time.perf_counter() - t0
        finally:
            server.kill()
        ideal = args.n * latency / args.concurrency
        print(f"\nlatency {latency * 1000:.0f} ms: ideal {ideal:.2f} s")
        print(f"{'':14}{'wall s':>8}{'API s':>8}{'eff API':>9}{'eff wall':>9}{'in flight':>10}{'CPU ms/sample':>15}"
              f"{'peak RSS MB':>13}")
        med = {}
        for name, rows in results.items():
            m = {k: statistics.median(x[k] for x in rows) for k in ("wall", "api_phase", "cpu", "rss_mb")}
            med[name] = m
            print(f"{name:14}{m['wall']:8.2f}{m['api_phase']:8.2f}{ideal / m['api_phase']:9.2f}{ideal / m['wall']:9.2f}"
                  f"{args.n * latency / m['api_phase']:10.1f}{1000 * m['cpu'] / args.n:15.2f}{m['rss_mb']:13.0f}")
        sdk, vc = med["bare SDK"], med["vlmcheck"]
        print(f"vlmcheck / bare SDK: CPU per sample {vc['cpu'] / sdk['cpu']:.2f}x, API-phase efficiency "
              f"{sdk['api_phase'] / vc['api_phase']:.2f} of the SDK's")
        print(f"rerun of the finished run: {rerun['requests']} requests in {rerun_s:.2f} s (target 0)")
        ok = ok and rerun["requests"] == 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
