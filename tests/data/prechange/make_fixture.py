"""Made ``run/store.sqlite`` here with the code of commit c8743cd, before images were sent as their files'
bytes (issue 21): a describe run of ``manifest.jsonl`` (an RGB PNG, an RGB JPEG, an RGBA PNG, a greyscale PNG)
against the fake OpenAI server.  ``tests/test_transport.py`` resumes it with today's code and asks for 0 calls:
the cache key hashes pixels, so the transport encoding must never change it.  Kept to show how it was made;
running it again overwrites the fixture.

    cd tests/data/prechange && python make_fixture.py
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from vlmcheck import RunOptions, run_task
from vlmcheck.methods.describe import DescribeSpec, DescribeTask

here = Path(__file__).parent
rng = np.random.default_rng(7)
pixels = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
(here / "imgs").mkdir(exist_ok=True)
Image.fromarray(pixels).save(here / "imgs/rgb.png")
Image.fromarray(pixels[::-1]).save(here / "imgs/rgb.jpg", quality=90)
Image.fromarray(np.dstack([pixels, pixels[..., :1]])).save(here / "imgs/rgba.png")
Image.fromarray(pixels[..., 1]).save(here / "imgs/grey.png")
(here / "manifest.jsonl").write_text("".join(
    f'{{"id": "{n}", "image": "imgs/{n}"}}\n' for n in ("rgb.png", "rgb.jpg", "rgba.png", "grey.png")))

server = subprocess.Popen([sys.executable, "-m", "vlmcheck.testing.fake_openai", "--port", "0"],
                          stdout=subprocess.PIPE, text=True)
try:
    port = int(server.stdout.readline())
    shutil.rmtree(here / "run", ignore_errors=True)
    task = DescribeTask(DescribeSpec(vlm=f"openai:fake@http://127.0.0.1:{port}/v1", data="manifest.jsonl"))
    os.chdir(here)
    run_task(task, "run", RunOptions(progress=False, report=False, preflight=False))
finally:
    server.kill()
for extra in (here / "run").iterdir():
    if extra.name != "store.sqlite":
        shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
