"""Shared fixtures.

Two lanes: `make test` runs every test (CI runs it); `make test-fast` runs those not marked slow, the developer's
loop.  A test that takes more than about 2 s on a quiet 2-core machine gets ``@pytest.mark.slow`` (a module whose
every test is slow: ``pytestmark = pytest.mark.slow`` with the reason beside it).  What is slow: a subprocess of
the CLI or a fake server per case, a run on the reference world, Ray, transformers or diffusers models, the demo.
Time a file with ``pytest tests/test_x.py --durations=0 -q``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class FakeServer:
    def __init__(self, latency: float, tmp: Path, *extra: str) -> None:
        self.log = tmp / "server-log.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vlmcheck.testing.fake_openai", "--port", "0", "--latency", str(latency),
             "--log", str(self.log), *extra], stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def fake_server(tmp_path):
    server = FakeServer(0.0, tmp_path)
    yield server
    server.stop()


def distinct_images(folder: Path, n: int, colour=lambda i: (40 * i, 255 - 30 * i, 100), name="img{i}.png") -> Path:
    """``n`` small RGB images that differ in size and colour, in ``folder``."""
    from PIL import Image

    folder.mkdir()
    for i in range(n):
        Image.new("RGB", (16 + i, 16), colour(i)).save(folder / name.format(i=i))
    return folder


@pytest.fixture
def image_folder(tmp_path):
    """Six small distinct RGB images in a folder."""
    return distinct_images(tmp_path / "imgs", 6)


def seen_by_another_process(folder) -> set[str]:
    """The call keys another connection (as another process would) sees committed in a run's store."""
    import sqlite3

    con = sqlite3.connect(Path(folder) / "store.sqlite")
    try:
        return {k for (k,) in con.execute("SELECT key FROM calls")}
    finally:
        con.close()


def put_call(store, key: str) -> None:
    """One stored call whose request and answer are its key."""
    store.put_call(key, role="vlm", model="m", request={"q": key}, response={"text": key}, attempts=1)
