"""A run's artifacts: the images it made (a generator's, a perturbation's), as PNG files under ``artifacts/``
named by their pixel hash, each with a row in the store's ``artifacts`` table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from .._lazy import lazy_module
from ..core.files import write_bytes_atomic
from ..core.images import TRANSPORT_PNG_LEVEL, encode_image, image_hash, transport_bytes

Image = lazy_module("PIL.Image")  # Pillow on first use (vlmcheck/_lazy.py)

SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    sha256 TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    width INTEGER,
    height INTEGER,
    created_at REAL NOT NULL
);
"""


def artifact_path(digest: str) -> str:
    """Where the artifact with this pixel hash lives, relative to the run folder (content-addressed)."""
    return f"artifacts/{digest[:2]}/{digest}.png"


class Artifacts:
    """The artifacts of a store with ``folder`` and ``_exec`` (RunStore)."""

    folder: Path
    _exec: Any

    def put_image(self, img: Image.Image) -> str:
        """Save ``img`` losslessly under ``artifacts/``; return its path relative to the run folder."""
        digest = image_hash(img)
        rel = artifact_path(digest)
        # PNG level 1, as sent to a model: the bytes are then the ones a request with this image sends
        # (transport_bytes keeps them), so a perturbed image is encoded once, not once here and once to send
        self._write_file(rel, lambda: transport_bytes(img, digest, "PNG") if img.mode == "RGB" else
                         encode_image(img, "PNG", compress_level=TRANSPORT_PNG_LEVEL))
        self._add_artifact(digest, rel, img.size)
        return rel

    def _write_file(self, rel: str, data: Callable[[], bytes]) -> None:
        """Write ``data()`` at ``rel`` unless a file is there, whole or not at all."""
        target = self.folder / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(target, data())

    def _add_artifact(self, digest: str, rel: str, size: tuple[int, int]) -> None:
        self._exec("INSERT OR IGNORE INTO artifacts(sha256, path, width, height, created_at) VALUES (?, ?, ?, ?, ?)",
                   (digest, rel, size[0], size[1], time.time()))

    def image_path(self, rel: str) -> Path:
        return self.folder / rel

    def put_artifact_bytes(self, rel: str, data: bytes) -> None:
        """Save an artifact another process made (a Ray worker's PNG), at its content-addressed path."""
        digest = Path(rel).stem
        if rel != artifact_path(digest) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"not an artifact path: {rel!r}")
        self._write_file(rel, lambda: data)
        with Image.open(self.folder / rel) as img:
            self._add_artifact(digest, rel, img.size)
