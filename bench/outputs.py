"""Outputs at scale: `vlmcheck merge` of a synthetic N-sample describe (or VHExpansion) run, its time and peak memory.

Two shard stores with the real schema are written straight into SQLite (a describe sample per image with an
answer of ~1,200 characters, and its call in the cache, as a real run leaves them; with ``--task vhexpansion`` a
VHExpansion case per question, three questions per image, each with its negation asked on the original and the
four preset perturbations, ~2 kB a record, whose summary is folded per image), then ``vlmcheck merge
--no-report`` builds the merged store, samples.jsonl and results.json, ``vlmcheck export --format parquet``
writes its sample table.  Prints the wall time and the peak RSS
of the merge process (from wait4; the stores are made in a child, so no parent's RSS is a floor under it) and
their ratios to issue 37's goals at 1M samples: <= 5 min and <= 1 GB.

    python bench/outputs.py [--n 1000000] [--task vhexpansion] [--no-report]
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


PERTURB = ("vhx_gaussian_noise", "vhx_brightness", "vhx_defocus_blur", "vhx_jpeg")


def _vhx_result(i: int, rng: random.Random) -> dict:
    """A VHExpansion case as a real run records it (methods/vhexpansion.py), its answers drawn at random."""
    answer = "yes" if i % 2 else "no"
    other = "no" if answer == "yes" else "yes"

    def variant(name: str) -> dict:
        said, neg = rng.choice(("yes", "no")), rng.choice(("yes", "no"))
        v = {"answer": said.capitalize() + ".", "correct": said == answer, "neg_answer": neg.capitalize() + ".",
             "neg_correct": neg == other, "neg_parsed": neg, "params": {}, "parsed": said}
        if name != "original":
            v["image"] = f"artifacts/{i:02x}/{i:064x}.png"[:80]
            v["params"] = {"corruption": name, "seed": 891210871 ^ i, "severity": 1}
        return v

    return {"answer": answer, "image": f"img/{i // 3:07d}.png", "meta": {"category": "existence", "kind": "existence"},
            "negation": {"answer": other, "ok": True, "problems": [], "question": "Is there no pink hexagon in the image?"},
            "question": "Is there a pink hexagon in the image?",
            "variants": {name: variant(name) for name in ("original", *PERTURB)}}


def make_stores(folder: Path, n: int, kind: str = "describe") -> list[Path]:
    """Two shard folders of an n-sample describe or VHExpansion run (every sample done), written directly into
    SQLite."""
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec
    from vlmcheck.run.runner import KEY_VERSION, RunOptions, in_shard, run_spec, select_samples
    from vlmcheck.store.db import RunStore

    manifest = folder / "manifest.jsonl"
    with open(manifest, "w") as fh:
        for i in range(n):
            row = {"id": f"s{i:07d}", "image": f"img/{i:07d}.png"}
            if kind == "vhexpansion":
                row.update(image=f"img/{i // 3:07d}.png", question="Is there a pink hexagon in the image?",
                           answer="yes" if i % 2 else "no")
            fh.write(json.dumps(row) + "\n")
    rng = random.Random(0)
    shards = []
    for k in range(2):
        if kind == "vhexpansion":
            task = VHExpansionTask(VHXSpec(vlm="openai:fake@http://127.0.0.1:9/v1", cases=str(manifest)))
        else:
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
                if kind == "vhexpansion":
                    result = _vhx_result(s.seq, rng)
                yield (f"k{s.seq:063x}", json.dumps(request), json.dumps(gen), now), \
                      (task.name, s.id, s.seq, json.dumps(result), now)

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
    ap.add_argument("--task", choices=("describe", "vhexpansion"), default="describe")
    ap.add_argument("--no-report", action="store_true", help="merge and export only")
    ap.add_argument("--make", metavar="FOLDER", help=argparse.SUPPRESS)  # the child that writes the stores
    a = ap.parse_args()
    if a.make:
        make_stores(Path(a.make), a.n, a.task)
        return 0
    with tempfile.TemporaryDirectory(prefix="vlmcheck-outputs-") as tmp:
        t = Path(tmp)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--n", str(a.n), "--task", a.task, "--make", str(t)], check=True)
        made = time.perf_counter() - t0
        size = sum((t / f"shard{k}" / "store.sqlite").stat().st_size for k in range(2))
        print(f"N = {a.n:,} {a.task} samples in 2 shard stores ({size / 1e9:.2f} GB), made in {made:.0f} s")
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
        export = _timed([sys.executable, "-m", "vlmcheck.cli", "export", str(t / "merged"), "--out", str(t / "tables"),
                         "--format", "parquet"])
        if export is None:
            return 1
        table = t / "tables" / "merged.parquet"
        print(f"export (parquet): {export[0]:.1f} s, peak RSS {export[1] / 1e6:.0f} MB; {table.name} "
              f"{table.stat().st_size / 1e6:.0f} MB")
        if a.task == "vhexpansion":
            orig = results["metrics"]["variants"]["original"]
            print(f"results.json: original accuracy {orig['accuracy']:.4f} on {orig['intervals']['accuracy']['n_units']:,} "
                  f"images, headline {results['metrics']['headline']['value']:.4f}")
        report = None if a.no_report else _report(t / "merged")
        if report is None and not a.no_report:
            return 1
        scale = 1_000_000 / a.n
        print(f"goal at 1M (linear from N where N < 1M): time {wall * scale / 300:.2f} of 5 min, "
              f"peak RSS {rss * (scale if scale > 1 else 1) / 1e9:.2f} of 1 GB"
              + ("" if a.n >= 1_000_000 else " (RSS scaled linearly: an upper bound if memory is bounded)"))
        if report is None:
            return 0
        print(f"goal: report's first page {report['page_mb']:.2f} MB ({report['page_mb'] / 5:.2f} of 5 MB), opens in "
              f"{report['open_s']:.2f} s ({report['open_s'] / 3:.2f} of 3 s), a samples page deep in the run in "
              f"{report['page_s']:.2f} s ({report['page_s'] / 2:.2f} of 2 s); the search found one deep in the run in "
              f"{report.get('search_s', float('nan')):.2f} s")
    return 0


def _timed(cmd: list[str]) -> tuple[float, int] | None:
    """(wall s, peak RSS bytes) of a command run in a child process, or None (said) when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status):
        print(f"{cmd[3]} failed: {proc.stderr.read().decode(errors='replace').strip().splitlines()[-1:]}")
        return None
    return wall, usage.ru_maxrss * 1024


def _report(run: Path) -> dict | None:
    """`vlmcheck report RUN`: its time and peak RSS; then the page in headless Chromium: the first page's size,
    the time to open it, and to show a samples page in the middle of the run (its rows loaded on demand)."""
    timed = _timed([sys.executable, "-m", "vlmcheck.cli", "report", str(run), "-o", str(run / "report.html")])
    if timed is None:
        return None
    wall, rss = timed
    page = run / "report.html"
    files = sum(p.stat().st_size for p in (run / "report_files").glob("*")) if (run / "report_files").exists() else 0
    print(f"report: {wall:.1f} s, peak RSS {rss / 1e6:.0f} MB; report.html "
          f"{page.stat().st_size / 1e6:.2f} MB, its files {files / 1e6:.0f} MB")
    out = {"page_mb": page.stat().st_size / 1e6, "open_s": float("nan"), "page_s": float("nan")}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("(playwright is not installed: the page was not opened)")
        return out
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
        tab = browser.new_page(viewport={"width": 1440, "height": 900})
        t0 = time.perf_counter()
        tab.goto(page.resolve().as_uri())
        tab.wait_for_selector("body[data-ready='1']")
        tab.wait_for_selector("section#run-0 table.samples tbody tr")
        out["open_s"] = time.perf_counter() - t0
        shot = Path(os.environ.get("OUTPUTS_SHOT", "outputs-report.png"))
        tab.screenshot(path=str(shot))
        # a page in the middle: its chunk of rows loads when it is shown
        label = tab.locator("section#run-0 .page")
        total_pages = int(label.inner_text().split("/")[1].split("(")[0])
        t0 = time.perf_counter()
        for _ in range(3):  # next page x3 from the first: chunk 0 loads (rows 50-199)
            tab.locator("section#run-0 .next").click()
        tab.wait_for_function("() => !document.querySelector('section#run-0 .page').textContent.includes('loading')")
        out["page_s"] = time.perf_counter() - t0
        rows = tab.locator("section#run-0 table.samples tbody tr").count()
        # a sample deep in the run by its id: the index of every row loads, then the chunk that holds it
        wanted = f"s{(total_pages * 50) // 2:07d}"
        t0 = time.perf_counter()
        tab.locator("section#run-0 .search").fill(wanted)
        tab.wait_for_selector(f"section#run-0 table.samples tr[data-id='{wanted}']")
        out["search_s"] = time.perf_counter() - t0
        print(f"opened in Chromium: first page {out['open_s']:.2f} s; page 4 of {total_pages} shown in "
              f"{out['page_s']:.2f} s ({rows} rows); sample {wanted} found by the search in {out['search_s']:.2f} s; "
              f"screenshot {shot}")
        browser.close()
    return out


if __name__ == "__main__":
    sys.exit(main())
