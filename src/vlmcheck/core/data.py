"""Image datasets from folders and JSONL manifests.

* A folder: every image file below it; the first sub-folder level, if any,
  is the item's category (MME's layout).  Ids are paths relative to the folder.
* A folder holding a ``manifest.jsonl`` (e.g. from ``vlmcheck world make``):
  that manifest.
* A JSONL manifest: one object per line with ``image`` (or ``path``; relative
  to the manifest's folder), optional ``id``, ``category`` and any other fields
  (kept in ``meta``).

Loading a dataset never opens the images: a broken file becomes that sample's
error when it is used, not a crash at start-up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .images import iter_image_files


class ImageItem(BaseModel):
    id: str
    path: str
    category: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)


class DatasetError(ValueError):
    pass


def load_image_dataset(source: str | Path) -> list[ImageItem]:
    src = Path(source)
    if src.is_dir() and (src / "manifest.jsonl").is_file():
        return _load_jsonl(src / "manifest.jsonl")
    if src.is_dir():
        items = []
        for path in iter_image_files(src):
            rel = path.relative_to(src)
            category = rel.parts[0] if len(rel.parts) > 1 else None
            items.append(ImageItem(id=rel.as_posix(), path=str(path), category=category))
        if not items:
            raise DatasetError(f"{src}: no image files found")
        return items
    if src.is_file() and src.suffix.lower() in (".jsonl", ".ndjson"):
        return _load_jsonl(src)
    raise DatasetError(f"{src}: expected an image folder or a .jsonl manifest")


def _load_jsonl(path: Path) -> list[ImageItem]:
    items: list[ImageItem] = []
    seen: set[str] = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from exc
        image = row.pop("image", None) or row.pop("path", None)
        if not isinstance(image, str):
            raise DatasetError(f"{path}:{lineno}: missing 'image' (or 'path') field")
        full = Path(image) if Path(image).is_absolute() else path.parent / image
        item_id = str(row.pop("id", image))
        if item_id in seen:
            raise DatasetError(f"{path}:{lineno}: duplicate id {item_id!r}")
        seen.add(item_id)
        category = row.pop("category", None)
        items.append(ImageItem(id=item_id, path=str(full), category=category, meta=row))
    if not items:
        raise DatasetError(f"{path}: manifest is empty")
    return items
