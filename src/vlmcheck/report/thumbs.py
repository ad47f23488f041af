"""Image thumbnails (and full-size copies for the lightbox) of a report, written once into its files folder."""

from __future__ import annotations

import hashlib
import io
import os
from collections import deque
from pathlib import Path
from typing import Any

from PIL import Image

from ..core.files import write_bytes_atomic
from ..core.images import read_file_bytes

THUMB = 96
FULL = 1024  # the lightbox's copy: large enough to read a scene's text
_COPYABLE = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp", "GIF": ".gif"}  # formats every browser shows


class _Thumbs:
    """Thumbnails (and, for the lightbox, full-size copies up to FULL px) written once into the report's
    files folder; the page loads them lazily.

    Once per distinct image and size in a report, whichever runs show it; once across reports too: a file's
    name hashes its path, size, modification time and length, so a report made again beside the same files
    folder reuses what is there.  With ``parallel``, the header is read at once (a file that is no image gets
    no thumbnail) and the resizing goes to a thread pool, at most :data:`PENDING` images waiting for it (a
    million rows never queue a million images); :meth:`wait` before the page is written."""

    PENDING = 64

    def __init__(self, out_dir: Path, rel: str, parallel: bool = False) -> None:
        self.dir, self.rel = out_dir, rel
        self.done: dict[tuple[str, int], str | None] = {}
        self.pool = None
        self.jobs: deque[Any] = deque()
        if parallel:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)),
                                           thread_name_prefix="vlmcheck-thumbs")

    def _write(self, path: Path | str | None, size: int) -> str | None:
        if not path:
            return None
        p = Path(path)
        key = (str(p.resolve()), size)
        if key in self.done:
            return self.done[key]
        try:
            st = p.stat()
            stem = hashlib.sha256(f"{key[0]}|{size}|{st.st_mtime_ns}|{st.st_size}".encode("utf-8", "surrogatepass")
                                  ).hexdigest()[:16]
            with Image.open(p) as img:  # the header only, and the file closed again
                fmt = img.format
                # already small enough: the file's bytes, not a re-encoding (a PNG encode of each full-size copy
                # made the report of 2,000 photos take a minute)
                copy = fmt in _COPYABLE and max(img.size) <= size and not getattr(img, "is_animated", False)
        except (OSError, ValueError):
            self.done[key] = None
            return None
        name = f"{stem}{_COPYABLE[fmt]}" if copy else f"{stem}.png"
        self.done[key] = f"{self.rel}/{name}"
        if not (self.dir / name).exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            if self.pool is None:
                if not self._make(p, copy, size, name):
                    self.done[key] = None
            else:
                self.jobs.append(self.pool.submit(self._make, p, copy, size, name))
                while len(self.jobs) > self.PENDING:
                    self.jobs.popleft().result()
        return self.done[key]

    def _make(self, p: Path, copy: bool, size: int, name: str) -> bool:
        try:
            if copy:
                data = read_file_bytes(p)
            else:
                with Image.open(p) as img:
                    img.thumbnail((size, size))
                    buf = io.BytesIO()
                    img.convert("RGB").save(buf, format="PNG", compress_level=1)
                data = buf.getvalue()
        except (OSError, ValueError):
            # a file whose header read but whose pixels do not (a truncated photo): the synchronous path shows
            # no thumbnail; a row made before the pool found out already links this name, so it gets a
            # placeholder that says so instead of a broken image
            if self.pool is None:
                return False
            data = _unreadable_placeholder(size)
        write_bytes_atomic(self.dir / name, data)  # a killed report never leaves half an image
        return True

    def wait(self) -> None:
        """Every thumbnail asked for is on disk (or failed); the pool is shut down."""
        if self.pool is not None:
            while self.jobs:
                self.jobs.popleft().result()
            self.pool.shutdown()

    def __call__(self, path: Path | str | None) -> str | None:
        return self._write(path, THUMB)

    def full(self, path: Path | str | None) -> str | None:
        return self._write(path, FULL)

    def image(self, path: Path | str | None, label: str, **extra: Any) -> dict[str, Any]:
        """A row image: its thumbnail, its full-size copy and what to write under it."""
        return {"label": label, "thumb": self(path), "full": self.full(path), **extra}


def _unreadable_placeholder(size: int) -> bytes:
    """A grey PNG crossed out, standing for an image whose pixels could not be read."""
    from PIL import ImageDraw

    side = min(size, 96)
    img = Image.new("RGB", (side, side), (225, 225, 225))
    draw = ImageDraw.Draw(img)
    draw.line((0, 0, side - 1, side - 1), fill=(170, 60, 60), width=3)
    draw.line((0, side - 1, side - 1, 0), fill=(170, 60, 60), width=3)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()
