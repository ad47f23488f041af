"""DOCCI (Onoe et al., 2024) as released: ``docci_descriptions.jsonlines`` (one object per line: example_id,
split, image_file, description) beside ``images/`` (the images tarball).

One record per example, its description the long human description (CAST samples its pairs from these), its
split DOCCI's (train, test, qual_dev, qual_test).  ``split=test`` reads one split.
"""

from __future__ import annotations

from pathlib import Path

from ._release import json_lines, refuse
from .base import Dataset, Record, register_form

FILE = "docci_descriptions.jsonlines"


def _file(path: Path) -> Path:
    return path / FILE if path.is_dir() else path


def detect(path: Path) -> bool:
    return _file(path).name == FILE and _file(path).is_file()


@register_form("docci", detect=detect, benchmarks=("docci",),
               schema="google/docci (storage.googleapis.com/docci/data: docci_descriptions.jsonlines + images/)")
def read(path: Path, *, benchmark: str | None = None, split: str | None = None, **_) -> Dataset:
    file = _file(path)
    expected = "DOCCI's docci_descriptions.jsonlines (example_id, split, image_file, description)"
    rows = json_lines(file, expected)
    folder = file.parent / "images"
    if not folder.is_dir():
        raise refuse(file, "DOCCI's images/ folder beside it")
    ds = Dataset("docci", "docci", str(file), [])
    seen: set[str] = set()
    for n, r in rows:
        if split and r.get("split") != split:
            continue
        eid, name, desc = r.get("example_id"), r.get("image_file"), r.get("description")
        if not all(isinstance(x, str) and x for x in (eid, name, desc)):
            ds.skipped.append((f"line {n}", "needs example_id, image_file and description"))
            continue
        if eid in seen:
            raise refuse(file, f"one line per example_id ({eid} is repeated at line {n})")
        seen.add(eid)
        img = folder / name
        if not img.is_file():
            ds.skipped.append((eid, f"image images/{name} not found"))
            continue
        ds.records.append(Record(id=eid, images=[str(img)], description=desc, split=r.get("split"),
                                 root=str(file.parent)))
    if not ds.records:
        raise refuse(file, expected + (f" in split {split!r}" if split else "") + " whose images exist")
    return ds
