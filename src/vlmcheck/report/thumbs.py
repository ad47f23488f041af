"""The images a report shows: links to the files themselves (a URL relative to the page), never copies, so a
report adds no file per image (docs/usage.md, "Reports").  The format is told from the file's first bytes, not
its name, and not by decoding it; a file whose pixels turn out unreadable is a note in the page (``onerror``).
Only a format no browser shows (TIFF) gets a small JPEG, embedded in the row as a ``data:`` URL.
"""

from __future__ import annotations

import base64
import io
import os
import posixpath
from pathlib import Path
from typing import Any
from urllib.parse import quote

THUMB = 96  # px: the embedded thumbnail of a format browsers do not show
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8\xff", "jpeg"), (b"GIF87a", "gif"), (b"GIF89a", "gif"),
          (b"BM", "bmp"))


def browser_format(head: bytes) -> str | None:
    """The format of a file a browser shows as it is, from its first 12 bytes; None for any other."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return next((name for magic, name in _MAGIC if head.startswith(magic)), None)


class _Thumbs:
    """What a report shows for an image, in its row and in the lightbox (``full``): the file itself where a
    browser shows it, a small embedded JPEG otherwise, None where the path is missing or no image.  Each
    distinct path is looked at once per report."""

    def __init__(self, out_dir: Path) -> None:
        # out_dir: the report's files folder; links are made relative to the folder of the page (its parent)
        self.page_dir = Path(os.path.abspath(Path(out_dir).parent))
        self._page = str(self.page_dir)
        self.done: dict[str, str | None] = {}
        self._dir_urls: dict[str, str | None] = {}  # a folder of images: its URL relative to the page, made once

    def __call__(self, path: Path | str | None) -> str | None:
        if not path:
            return None
        p = os.path.abspath(path)
        if p not in self.done:
            try:
                with open(p, "rb", buffering=0) as f:  # unbuffered: 12 bytes read, not a buffer's 8 kB
                    head = f.read(12)
            except OSError:
                self.done[p] = None
            else:
                self.done[p] = self._url(p) if browser_format(head) else _embedded_thumbnail(p)
        return self.done[p]

    full = __call__  # the lightbox opens what the row shows

    def _url(self, p: str) -> str:
        """``p`` (absolute) as a URL relative to the page: its folder's relative path worked out once per folder
        (``os.path.relpath`` splits and compares both paths: most of the report's time per image of a
        2,000-image run), then the name quoted after it; the same text as the whole path's relative path quoted."""
        folder, name = os.path.split(p)
        if os.path is not posixpath or not name or (self._page + os.sep).startswith(p + os.sep):
            return self._whole_url(p)  # elsewhere, or the page's folder lies inside ``p``: worked out whole
        if folder not in self._dir_urls:
            try:
                rel = os.path.relpath(folder, self._page)
                self._dir_urls[folder] = "" if rel == os.curdir else quote(Path(rel).as_posix()) + "/"
            except ValueError:  # another drive (Windows), a folder whose name is not UTF-8: made whole
                self._dir_urls[folder] = None
        base = self._dir_urls[folder]
        if base is not None:
            try:
                return base + quote(name)
            except ValueError:  # a name that is not UTF-8: as the whole path's link is made (a file URL)
                pass
        return self._whole_url(p)

    def _whole_url(self, p: str) -> str:
        try:
            return quote(Path(os.path.relpath(p, self.page_dir)).as_posix())
        except ValueError:  # another drive (Windows), a name that is not UTF-8: an absolute file URL
            return Path(p).as_uri()

    def image(self, path: Path | str | None, label: str, **extra: Any) -> dict[str, Any]:
        """A row image: what the row shows, what the lightbox opens and what to write under it."""
        link = self(path)
        return {"label": label, "thumb": link, "full": link, **extra}


def _embedded_thumbnail(path: str) -> str | None:
    """A THUMB-px JPEG of an image in a format browsers do not show, as a data: URL; None when unreadable."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            img.thumbnail((THUMB, THUMB))
            buf = io.BytesIO()
            img.convert("RGB").save(buf, format="JPEG", quality=80)
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
