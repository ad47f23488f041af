"""``hfds:`` on a Hub copy that repeats its images: cache bytes against the distinct images' own bytes, time and
peak RSS per row.

A Hub snapshot is built in a temp folder as lmms-lab's copies are laid out (``README.md`` with ``configs`` +
``data/test-NNNNN-of-NNNNN.parquet``, the Image column's bytes repeated on every question row): ``--images``
distinct JPEGs (``--size`` px, photo-like: smooth colour fields plus noise, quality 90), each on
``--rows / --images`` rows (POPE's Hub copy: 18 rows per COCO image).  Each contender runs in its own process
(peak RSS is the process's), on an empty cache, then once more on the filled cache (the reuse path, where every
stored file is compared with the row's bytes):

* ``vlmcheck``: ``load("hfds:SNAPSHOT")`` (datasets/hub.py) and GenCeption's items (methods/records.py);
* ``--before SRC``: the same rows as a ``save_to_disk`` folder (the only Hub form the old reader opened) read by
  ``vlmcheck.core.data.load_image_dataset`` of the checkout at SRC (one PNG per row).

Reported: rows, distinct images, their own bytes, cache files and bytes, cache bytes / own bytes (the issue's
bound: <= 1.1), wall time and time per row, peak RSS and RSS per row (the peak over the interpreter's baseline,
taken after the imports), and the load (``os.getloadavg``) beside the figures.

    python bench/hfds.py [--rows 10000] [--images 1000] [--size 256] [--before /work/main/src]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, os, sys, time
from pathlib import Path
def hwm():  # this process's own peak RSS in kB (VmHWM; ru_maxrss would carry the parent's peak across fork)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
mode, source, src = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, src)
if mode == "vlmcheck":
    from vlmcheck.datasets import load
    from vlmcheck.methods.records import image_items
else:
    from vlmcheck.core.data import load_image_dataset
import pyarrow, PIL.Image  # noqa: the imports' memory is the baseline
base = hwm()
t = time.perf_counter()
if mode == "vlmcheck":
    ds = load(source)
    items = image_items(ds)
    rows, distinct = len(ds.records), ds.distinct_images
else:
    items = load_image_dataset(source)
    rows, distinct = len(items), len({it.path for it in items})
wall = time.perf_counter() - t
peak = hwm()
print(json.dumps({"rows": rows, "items": len(items), "distinct": distinct, "wall_s": wall,
                  "peak_rss_mb": peak / 1024, "rss_over_base_mb": (peak - base) / 1024}))
"""


def photo(i: int, size: int) -> bytes:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(i)
    y, x = np.mgrid[0:size, 0:size] / size
    c = rng.uniform(0, 255, (3, 3))
    img = np.stack([c[k, 0] * x + c[k, 1] * y + c[k, 2] * (1 - x) * y for k in range(3)], -1) / 2
    img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def build(folder: Path, n_rows: int, n_images: int, size: int) -> tuple[int, list[bytes]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    images = [photo(i, size) for i in range(n_images)]
    per = n_rows // n_images
    (folder / "data").mkdir(parents=True)
    shard_rows, shards = 1000, (n_rows + 999) // 1000
    rows = [{"question_id": f"{i // per:06d}.jpg", "image": {"bytes": images[i // per], "path": f"{i // per}.jpg"},
             "question": f"Is there a thing {i % per} in the image?", "answer": "yes" if i % 2 else "no",
             "category": f"c{(i // per) % 10}"} for i in range(per * n_images)]
    for s in range(shards):
        chunk = rows[s * shard_rows:(s + 1) * shard_rows]
        if chunk:
            pq.write_table(pa.Table.from_pylist(chunk), folder / "data" / f"test-{s:05d}-of-{shards:05d}.parquet")
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n"
                                      "    path: data/test-*\n---\n")
    return len(rows), images


def cache_size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def run(mode: str, source: str, src: str, cache: Path) -> dict:
    env = {**os.environ, "VLMCHECK_CACHE": str(cache), "PYTHONPATH": src}
    out = subprocess.run([sys.executable, "-c", CHILD, mode, source, src], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{mode}: {(out.stderr.strip().splitlines() or ['exit ' + str(out.returncode)])[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--before", metavar="SRC", help="a checkout's src folder to measure the old reader on")
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        n_rows, images = build(tmp / "snapshot", args.rows, args.images, args.size)
        own = sum(len(b) for b in images)
        print(f"{n_rows} rows over {len(images)} distinct JPEGs ({args.size} px), {own / 1e6:.1f} MB of their own "
              f"bytes; load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
        contenders = [("vlmcheck", f"hfds:{tmp / 'snapshot'}", here)]
        if args.before:
            import datasets

            ds = datasets.Dataset.from_parquet(sorted(str(p) for p in (tmp / "snapshot" / "data").glob("*.parquet")),
                                               cache_dir=str(tmp / "hf-cache"))
            ds = ds.cast_column("image", datasets.Image())
            ds.save_to_disk(str(tmp / "saved"))
            contenders.append(("before", f"hfds:{tmp / 'saved'}", args.before))
        result = {"rows": n_rows, "distinct_images": len(images), "own_bytes": own, "size_px": args.size}
        for name, source, src in contenders:
            cache = tmp / f"cache-{name}"
            cold = run("vlmcheck" if name == "vlmcheck" else "before", source, src, cache)
            files, nbytes = cache_size(cache)
            warm = run("vlmcheck" if name == "vlmcheck" else "before", source, src, cache)
            result[name] = {
                "items": cold["items"], "distinct_paths": cold["distinct"], "cache_files": files, "cache_bytes": nbytes,
                "cache_over_own": nbytes / own, "cold_s": cold["wall_s"], "cold_ms_per_row": 1e3 * cold["wall_s"] / n_rows,
                "warm_s": warm["wall_s"], "warm_ms_per_row": 1e3 * warm["wall_s"] / n_rows,
                "peak_rss_mb": cold["peak_rss_mb"], "rss_kb_per_row": 1024 * cold["rss_over_base_mb"] / n_rows,
            }
            r = result[name]
            print(f"{name:9s} items {r['items']:6d}  cache {r['cache_files']} files {nbytes / 1e6:7.1f} MB "
                  f"({r['cache_over_own']:.3f}x own)  cold {r['cold_s']:.2f} s ({r['cold_ms_per_row']:.3f} ms/row)  "
                  f"warm {r['warm_s']:.2f} s ({r['warm_ms_per_row']:.3f} ms/row)  peak RSS {r['peak_rss_mb']:.0f} MB "
                  f"({r['rss_kb_per_row']:.2f} kB/row over the baseline)", file=sys.stderr)
        result["loadavg"] = os.getloadavg()[0]
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
