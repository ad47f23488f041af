"""Outputs at scale: `vlmcheck merge` of a synthetic N-sample describe run, its time and peak memory.

Two shard stores with the real schema are written straight into SQLite (a describe sample per image with an
answer of ~1,200 characters, and its call in the cache, as a real run leaves them), then ``vlmcheck merge
--no-report`` builds the merged store, samples.jsonl and results.json.  Prints the wall time and the peak RSS
of the merge process (from wait4; the stores are made in a child, so no parent's RSS is a floor under it) and
their ratios to issue 37's goals at 1M samples: <= 5 min and <= 1 GB.

    python bench/outputs.py [--n 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("a red square sits left of a small blue circle near the top edge while two green triangles overlap "
         "below it on a grey background with soft light from the right and a thin shadow under each shape").split()


def make_stores(folder: Path, n: int) -> list[Path]:
    """Two shard folders of an n-sample describe run (every sample done), written directly into SQLite."""
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask
    from vlmcheck.run.runner import KEY_VERSION, RunOptions, in_shard, run_spec, select_samples
    from vlmcheck.store.db import RunStore

    manifest = folder / "manifest.jsonl"
    with open(manifest, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"s{i:07d}", "image": f"img/{i:07d}.png"}) + "\n")
    rng = random.Random(0)
    shards = []
    for k in range(2):
        task = DescribeTask(DescribeSpec(vlm="openai:fake@http://127.0.0.1:9/v1", data=str(manifest)))
        options = RunOptions(progress=False, report=False, shard=(k, 2))
        samples = select_samples(task, options)
        out = folder / f"shard{k}"
        with RunStore(out) as store:
            store.set_meta("spec", run_spec(task, samples, options))
            store.set_meta("key_version", KEY_VERSION)
            store.set_meta("sessions", [])
        (out / ".vlmcheck-run").write_text("")
        db = sqlite3.connect(out / "store.sqlite")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")
        now = time.time()

        def rows():
            for s in samples:
                answer = " ".join(rng.choice(WORDS) for _ in range(230))[:1200]
                digest = f"{s.seq:064x}"
                request = {"config": {"max_tokens": 512, "temperature": 0.0}, "messages": [{"role": "user", "content": [
                    {"type": "image", "file_sha256": digest, "size": [256, 256]},
                    {"type": "text", "text": "Describe this image in detail."}]}]}
                gen = {"text": answer, "finish_reason": "stop", "usage": {"input_tokens": 300, "output_tokens": 260}}
                result = {"image": s.id, "image_path": f"img/{s.seq:07d}.png", "image_sha256": digest, "category": None,
                          "prompt": "Describe this image in detail.", "answer": answer, "answer_status": "ok",
                          "finish_reason": "stop", "usage": gen["usage"]}
                yield (f"k{s.seq:063x}", json.dumps(request), json.dumps(gen), now), \
                      ("describe", s.id, s.seq, json.dumps(result), now)

        batch_c, batch_s = [], []
        for c, smp in rows():
            batch_c.append(c)
            batch_s.append(smp)
            if len(batch_c) >= 10_000:
                _flush(db, batch_c, batch_s)
        _flush(db, batch_c, batch_s)
        db.close()
        assert all(in_shard(s.id, (k, 2)) for s in samples[:10])
        shards.append(out)
    return shards


def _flush(db: sqlite3.Connection, calls: list, samples: list) -> None:
    with db:
        db.executemany("INSERT INTO calls(key, role, model, request, status, response, attempts, input_tokens, "
                       "output_tokens, created_at) VALUES (?, 'vlm', 'openai:fake', ?, 'ok', ?, 1, 300, 260, ?)", calls)
        db.executemany("INSERT INTO samples(task, sample_id, seq, status, result, updated_at) "
                       "VALUES (?, ?, ?, 'done', ?, ?)", samples)
    calls.clear()
    samples.clear()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--make", metavar="FOLDER", help=argparse.SUPPRESS)  # the child that writes the stores
    a = ap.parse_args()
    if a.make:
        make_stores(Path(a.make), a.n)
        return 0
    with tempfile.TemporaryDirectory(prefix="vlmcheck-outputs-") as tmp:
        t = Path(tmp)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--n", str(a.n), "--make", str(t)], check=True)
        made = time.perf_counter() - t0
        size = sum((t / f"shard{k}" / "store.sqlite").stat().st_size for k in range(2))
        print(f"N = {a.n:,} samples in 2 shard stores ({size / 1e9:.2f} GB), made in {made:.0f} s")
        cmd = [sys.executable, "-m", "vlmcheck.cli", "merge", str(t / "merged"), str(t / "shard0"),
               str(t / "shard1"), "--no-report"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err = proc.stderr.read().decode(errors="replace")
        if os.waitstatus_to_exitcode(status):
            print(f"merge failed: {err.strip().splitlines()[-1:]}")
            return 1
        rss = usage.ru_maxrss * 1024
        lines = sum(1 for _ in open(t / "merged" / "samples.jsonl", "rb"))
        results = json.loads((t / "merged" / "results.json").read_text())
        print(f"merge (--no-report): {wall:.1f} s, peak RSS {rss / 1e6:.0f} MB; samples.jsonl {lines:,} lines "
              f"({(t / 'merged' / 'samples.jsonl').stat().st_size / 1e9:.2f} GB), results: "
              f"{results['counts']['done']:,} done")
        scale = 1_000_000 / a.n
        print(f"goal at 1M (linear from N where N < 1M): time {wall * scale / 300:.2f} of 5 min, "
              f"peak RSS {rss * (scale if scale > 1 else 1) / 1e9:.2f} of 1 GB"
              + ("" if a.n >= 1_000_000 else " (RSS scaled linearly: an upper bound if memory is bounded)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
