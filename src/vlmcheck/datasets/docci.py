"""DOCCI (Onoe et al., 2024) as released: ``docci_descriptions.jsonlines`` (example_id, split, image_file,
description) beside ``images/``.  One record per example.  The split read is ``train`` unless another is named
(``all``: every split), on every route (:data:`RULE`): the CAST authors drew their pairs from DOCCI's train split
(CAST paper, section 4.1 and appendix E).  Examples of the splits not read are counted as left out."""

from __future__ import annotations

from pathlib import Path

from ._release import json_lines, once, refuse
from .base import Benchmark, Dataset, Record, register_benchmark, register_form

FILE = "docci_descriptions.jsonlines"
#: the split CAST drew its pairs from
SPLIT = "train"

RULE = register_benchmark(Benchmark("docci", hub=("google/docci",), split=SPLIT,
                            recognise=lambda ds: {"example_id", "description"} <= {c.lower() for c in ds.columns}))


def _file(path: Path) -> Path:
    return path / FILE if path.is_dir() else path


def detect(path: Path) -> bool:
    return _file(path).name == FILE and _file(path).is_file()


@register_form("docci", detect=detect, benchmarks=("docci",),
               schema="google/docci (storage.googleapis.com/docci/data: docci_descriptions.jsonlines + images/)",
               carries=('images', 'descriptions'))
def read(path: Path, *, benchmark: str | None = None, split: str = SPLIT, **_) -> Dataset:
    file = _file(path)
    expected = "DOCCI's docci_descriptions.jsonlines (example_id, split, image_file, description)"
    rows = json_lines(file, expected)
    folder = file.parent / "images"
    if not folder.is_dir():
        raise refuse(file, "DOCCI's images/ folder beside it")
    every = split == "all"
    ds = Dataset("docci", "docci", str(file), [], splits=[] if every else [split])
    unique = once(file, "one line per example_id")
    for n, r in rows:
        if not every and r.get("split") != split:
            ds.skipped.append((f"line {n}", f"in split {r.get('split')!r}, not {split!r} (pass ?split=NAME or "
                                            "?split=all)"))
            continue
        eid, name, desc = r.get("example_id"), r.get("image_file"), r.get("description")
        if not all(isinstance(x, str) and x for x in (eid, name, desc)):
            ds.skipped.append((f"line {n}", "needs example_id, image_file and description"))
            continue
        unique(eid, eid, f" at line {n}")
        img = folder / name
        if not img.is_file():
            ds.skipped.append((eid, f"image images/{name} not found"))
            continue
        ds.records.append(Record(id=eid, images=[str(img)], description=desc, split=r.get("split"),
                                 root=str(file.parent)))
    if not ds.records:
        raise refuse(file, expected + ("" if every else f" in split {split!r}") + " whose images exist")
    if not every:
        ds.notes.append(f"split {split!r} read" + (" (CAST's: the authors drew their pairs from DOCCI's train split)"
                                                   if split == SPLIT else ""))
    return ds
