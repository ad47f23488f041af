"""Throughput of the runner against an OpenAI-compatible server with fixed latency.

Starts the fake server (separate process, 127.0.0.1) with an injected latency,
runs N describe calls at a given concurrency through the full stack (openai
SDK, scheduler, SQLite store, journal), and prints

    efficiency = ideal / actual,   ideal = N x latency / concurrency

(target >= 0.85).  Then reruns the finished run: model calls must be 0.

Two peers are measured in the same run, against the same server, with the same
N, concurrency and request bodies (an image and a prompt each), so the figure
can be read on any machine:

* ``bare SDK``: the openai SDK's ``post()`` alone (the transport vlmcheck uses),
  no store, no cache, no journal: the most any runner built on the SDK can reach
  on this machine;
* ``bare aiohttp``: raw HTTP POSTs: what the server and loopback allow.

``vlmcheck / bare SDK`` is the share of the SDK's throughput that vlmcheck keeps.

    python bench/api_throughput.py [--n 2000] [--concurrency 64] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from vlmcheck import RunOptions, run_task
from vlmcheck.core.images import load_image
from vlmcheck.core.messages import Message, to_openai
from vlmcheck.methods.describe import DescribeSpec, DescribeTask


def _bodies(folder: Path, n: int, prompt: str, max_tokens: int) -> list[dict]:
    # Distinct from the run's requests (the server's answers do not depend on it, but
    # no peer should be served by anything vlmcheck cached).
    return [{"model": "fake", "messages": to_openai([Message.user(load_image(folder / f"{i}.png"), f"{prompt} #{i}")]),
             "max_tokens": max_tokens, "temperature": 0.0} for i in range(n)]


async def _bare_sdk(base_url: str, bodies: list[dict], concurrency: int) -> float:
    import openai

    client = openai.AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0,
                                http_client=openai.DefaultAioHttpClient())
    sem = asyncio.Semaphore(concurrency)

    async def one(body: dict) -> None:
        async with sem:
            json.loads(await client.post("/chat/completions", cast_to=bytes, body=body))

    t0 = time.perf_counter()
    await asyncio.gather(*(one(b) for b in bodies))
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed


async def _bare_aiohttp(base_url: str, bodies: list[dict], concurrency: int) -> float:
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:
        async def one(body: dict) -> None:
            async with sem:
                async with http.post(base_url + "/chat/completions", json=body) as resp:
                    json.loads(await resp.read())

        t0 = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--target", type=float, default=0.85)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="vlmcheck-bench-"))
    server = subprocess.Popen([sys.executable, "-m", "vlmcheck.testing.fake_openai", "--port", "0",
                               "--latency", str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        base_url = f"http://127.0.0.1:{port}/v1"
        (tmp / "img").mkdir()
        rows = []
        for i in range(args.n):
            Image.new("RGB", (8, 8), (i % 256, (i // 256) % 256, 7)).save(tmp / "img" / f"{i}.png")
            rows.append(json.dumps({"id": f"s{i}", "image": f"img/{i}.png"}))
        (tmp / "m.jsonl").write_text("\n".join(rows) + "\n")
        spec = DescribeSpec(vlm=f"openai:fake@{base_url}", data=str(tmp / "m.jsonl"))
        options = RunOptions(max_concurrency=args.concurrency, progress=False, report=False)  # the report is not API work

        bodies = _bodies(tmp / "img", args.n, spec.prompt, spec.max_tokens)
        peer_http = asyncio.run(_bare_aiohttp(base_url, bodies, args.concurrency))
        peer_sdk = asyncio.run(_bare_sdk(base_url, bodies, args.concurrency))

        task = DescribeTask(spec)  # model clients are built before the clock starts
        t0 = time.perf_counter()
        first = run_task(task, tmp / "run", options)
        actual = time.perf_counter() - t0
        done = first.results["counts"]["done"]

        t1 = time.perf_counter()
        again = run_task(DescribeTask(spec), tmp / "run", options.model_copy(update={"resume": True}))
        rerun_s = time.perf_counter() - t1
        calls = again.results["session"]["model_calls"]
    finally:
        server.kill()

    ideal = args.n * args.latency / args.concurrency
    efficiency = ideal / actual
    print(f"N={args.n} concurrency={args.concurrency} latency={args.latency * 1000:.0f} ms; ideal {ideal:.2f} s")
    print(f"{'':14}{'actual':>9}{'efficiency':>12}")
    for name, secs in (("bare aiohttp", peer_http), ("bare SDK", peer_sdk), ("vlmcheck", actual)):
        print(f"{name:14}{secs:8.2f}s{ideal / secs:12.3f}")
    print(f"completed {done}/{args.n}")
    print(f"efficiency = ideal/actual = {efficiency:.3f} (target >= {args.target})")
    print(f"vlmcheck / bare SDK = {peer_sdk / actual:.3f} (the share of the SDK's own throughput kept)")
    print(f"rerun of the finished run: {calls} model calls in {rerun_s:.2f} s (target 0)")
    ok = efficiency >= args.target and calls == 0 and done == args.n
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
