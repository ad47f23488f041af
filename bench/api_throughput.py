"""Throughput of the runner against an OpenAI-compatible server with fixed latency.

Starts the fake server (separate process, 127.0.0.1) with an injected latency,
runs N describe calls at a given concurrency through the full stack (openai
SDK, scheduler, SQLite store, journal), and prints

    efficiency = ideal / actual,   ideal = N x latency / concurrency

(target >= 0.85).  Then reruns the finished run: model calls must be 0.

    python bench/api_throughput.py [--n 2000] [--concurrency 64] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from vlmcheck import RunOptions, run_task
from vlmcheck.methods.describe import DescribeSpec, DescribeTask


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
        (tmp / "img").mkdir()
        rows = []
        for i in range(args.n):
            Image.new("RGB", (8, 8), (i % 256, (i // 256) % 256, 7)).save(tmp / "img" / f"{i}.png")
            rows.append(json.dumps({"id": f"s{i}", "image": f"img/{i}.png"}))
        (tmp / "m.jsonl").write_text("\n".join(rows) + "\n")
        spec = DescribeSpec(vlm=f"openai:fake@http://127.0.0.1:{port}/v1", data=str(tmp / "m.jsonl"))
        options = RunOptions(max_concurrency=args.concurrency, progress=False, report=False)  # the report is not API work

        task = DescribeTask(spec)  # model clients are built before the clock starts
        t0 = time.perf_counter()
        first = run_task(task, tmp / "run", options)
        actual = time.perf_counter() - t0
        ideal = args.n * args.latency / args.concurrency
        efficiency = ideal / actual
        done = first.results["counts"]["done"]

        t1 = time.perf_counter()
        again = run_task(DescribeTask(spec), tmp / "run", options.model_copy(update={"resume": True}))
        rerun_s = time.perf_counter() - t1
        calls = again.results["session"]["model_calls"]
    finally:
        server.kill()

    print(f"N={args.n} concurrency={args.concurrency} latency={args.latency * 1000:.0f} ms")
    print(f"completed {done}/{args.n}; ideal {ideal:.2f} s, actual {actual:.2f} s")
    print(f"efficiency = ideal/actual = {efficiency:.3f} (target >= {args.target})")
    print(f"rerun of the finished run: {calls} model calls in {rerun_s:.2f} s (target 0)")
    ok = efficiency >= args.target and calls == 0 and done == args.n
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
