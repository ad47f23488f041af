"""Peak memory of dataset images in flight, against the pixel budget.

Eight 81-megapixel photos (9000 x 9000, 243 MB each once decoded to RGB) are read by eight samples at once
(``--max-concurrency`` 8) through the runner; each sample holds its image for 1 s, as a model call would.
Each budget runs in its own process and reports its peak RSS above the process's baseline and the ratio of
that to the budget plus one decoded image (goal: <= 1.0).  The budget is kept at image granularity - a
sample waits before decoding, and the image being decoded, the PNG bytes and Pillow's buffers come on top -
so one image beyond the budget is the bound.  The unbounded run (budget 100 GB) is the peer measured in the
same run.

Run: ``python bench/input_memory.py`` (about a minute; needs ~3 GB of free memory).
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

N, SIDE = 8, 9000


def _make_images(folder: Path) -> None:
    import numpy as np
    from PIL import Image

    for i in range(N):
        path = folder / f"{i}.png"
        if not path.exists():
            row = np.linspace(0, 255, SIDE, dtype=np.uint8)
            arr = np.broadcast_to(row[None, :, None], (SIDE, SIDE, 3)).copy()
            arr[..., 2] = (i * 30) % 256
            Image.fromarray(arr).save(path, compress_level=1)


def _child(folder: str, budget_mb: float) -> None:
    from vlmcheck.core.inputs import read_image
    from vlmcheck.run.runner import RunOptions, Sample, run_task

    class Hold:
        name = "hold"

        def samples(self):
            return [Sample(f"{i}", Path(folder) / f"{i}.png") for i in range(N)]

        def spec(self):
            return {"folder": folder}

        async def run_sample(self, sample, session):
            img = await read_image(sample.payload)
            await asyncio.sleep(1.0)  # the model call, while the image is held
            return {"size": img.size}

        def summarize(self, records, failed=()):
            return {"n": len(records)}

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with tempfile.TemporaryDirectory() as run:
        res = run_task(Hold(), run, RunOptions(progress=False, report=False, max_concurrency=N,
                                               pixel_budget=int(budget_mb * 1e6)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"budget_mb": budget_mb, "done": res.results["counts"]["done"], "peak_mb": peak - base}))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], float(sys.argv[3]))
        return
    folder = Path(tempfile.gettempdir()) / "vlmcheck-bench-81mp"
    folder.mkdir(exist_ok=True)
    _make_images(folder)
    decoded_mb = SIDE * SIDE * 3 / 1e6
    print(f"{N} images of {SIDE}x{SIDE} ({decoded_mb:.0f} MB each decoded), {N} samples in flight")
    print(f"{'budget':>12} {'done':>5} {'peak RSS above baseline':>24} {'ratio to budget + 1 image':>26}")
    for budget in (500.0, 1000.0, 2000.0, 100_000.0):
        out = subprocess.run([sys.executable, __file__, "--child", str(folder), str(budget)], capture_output=True,
                             text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        ratio = r["peak_mb"] / (budget + decoded_mb)
        label = "unbounded" if budget >= 100_000 else f"{budget:.0f} MB"
        goal = "" if budget >= 100_000 else ("  ok" if ratio <= 1.0 else "  OVER (goal <= 1.0)")
        print(f"{label:>12} {r['done']:>5} {r['peak_mb']:>21.0f} MB {ratio:>26.2f}{goal}")


if __name__ == "__main__":
    main()
