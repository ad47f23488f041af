"""One image, one file: embedded images (parquet/arrow bytes, base64 in a TSV) written once per distinct content,
named by the SHA-256 of their bytes and kept in the bytes they came in; a file already there is compared with the
bytes before reuse, so a damaged copy is rewritten, never sent.  The store is ``$VLMCHECK_CACHE/hfds``, the
folder Ray's workers fetch dataset files from."""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterable, Iterator

from ..core.data import hfds_cache_root
from ..core.files import write_bytes_atomic

#: magic bytes -> file suffix; anything else is stored as ``.bin`` and fails its own sample when read
_MAGIC = ((b"\xff\xd8\xff", ".jpg"), (b"\x89PNG\r\n\x1a\n", ".png"), (b"GIF87a", ".gif"), (b"GIF89a", ".gif"),
          (b"BM", ".bmp"), (b"II*\x00", ".tif"), (b"MM\x00*", ".tif"))


def suffix_of(data: bytes) -> str:
    """The file suffix of an image's bytes, from their first bytes (``.bin`` when no known format)."""
    for magic, suffix in _MAGIC:
        if data.startswith(magic):
            return suffix
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return ".bin"


#: inside :func:`read_only` (no store writes): the path each embedded image would have -> why it cannot be opened
_CHECKED: ContextVar[dict[str, str | None] | None] = ContextVar("vlmcheck_image_store_checked", default=None)


@contextmanager
def read_only() -> Iterator[dict[str, str | None]]:
    """No store writes inside (``data inspect``); it yields the embedded images met: path -> why not openable."""
    checked: dict[str, str | None] = {}
    token = _CHECKED.set(checked)
    try:
        yield checked
    finally:
        _CHECKED.reset(token)


def image_problem(data: bytes, label: str) -> str | None:
    """Why ``data`` cannot be opened as a run opens it, or None."""
    from ..core.images import decode_image
    from ..core.probe import probe

    try:
        if not probe(data, label).sendable:
            decode_image(data, label)
    except Exception as exc:  # every way an image fails: the run fails the sample with this message
        return str(exc) or type(exc).__name__
    return None


def unopenable(paths: Iterable[str], embedded: dict[str, str | None] | None = None) -> list[tuple[str, str]]:
    """(path, why) of each distinct image that cannot be opened as a run opens it (``data inspect``); ``embedded``:
    the verdicts on embedded images, checked from their bytes as the reader met them."""
    from ..core import remote
    from ..core.images import BadImageError, read_file_bytes

    embedded = embedded or {}
    bad: list[tuple[str, str]] = []
    for p in dict.fromkeys(paths):
        if p in embedded:
            why = embedded[p]
        elif remote.is_url(p):
            continue  # a URL is fetched by the run, not here (data inspect never goes on the network)
        else:
            try:
                why = image_problem(read_file_bytes(p), p)
            except BadImageError as exc:
                why = str(exc)
        if why:
            bad.append((p, why))
    return bad


class ImageStore:
    """Writes images by content into ``root`` (inside :func:`read_only` only says where they would go)."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else hfds_cache_root()
        self.checked = _CHECKED.get()
        self.write = self.checked is None
        self._known: dict[str, str] = {}  # sha -> path, checked this process

    def put(self, data: bytes) -> str:
        """The path of the file holding ``data`` (written if missing or different)."""
        sha = hashlib.sha256(data).hexdigest()
        if sha in self._known:
            return self._known[sha]
        path = self.root / sha[:2] / f"{sha}{suffix_of(data)}"
        if self.checked is None:
            try:
                same = path.stat().st_size == len(data) and path.read_bytes() == data
            except OSError:
                same = False
            if not same:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_bytes_atomic(path, data)
        else:
            self.checked[str(path)] = image_problem(data, "embedded image")
        self._known[sha] = str(path)
        return str(path)
