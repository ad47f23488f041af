"""The CAST authors' pairs (Dagan et al., 2024; github.com/gautierdag/cast): ``data/<i>.json``, one pair per
file (id, docci_idx_0, docci_idx_1, img_pair_similarity, desc_pair_similarity, description_0, description_1),
its images ``data/imgs/<i>_0.jpg`` and ``data/imgs/<i>_1.jpg`` where ``<i>`` is the JSON file's name without
``.json`` as it is (the release pads it with spaces: ``"  0.json"``, ``"  0_0.jpg"``), as the authors'
``SimilarityPairDataset`` reads them.

One record per pair: its two images in order, the two descriptions in ``meta["descriptions"]``, each side's
DOCCI index as that side's id (``meta["side_ids"]``), the authors' image and description similarities.
:func:`pairs` gives CAST's own pair objects (``a``/``b`` with id, image, description).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._release import json_file, refuse
from .base import Dataset, Record, register_form


def _folder(path: Path) -> Path:
    return path / "data" if (path / "data" / "imgs").is_dir() else path


def detect(path: Path) -> bool:
    folder = _folder(path)
    return path.is_dir() and (folder / "imgs").is_dir() and any(
        (folder / "imgs" / f"{p.stem}_0.jpg").is_file() for p in folder.glob("*.json"))


@register_form("cast-pairs", detect=detect, benchmarks=("cast",),
               schema="github.com/gautierdag/cast data/<i>.json + data/imgs/<i>_{0,1}.jpg (consistency/dataset.py)")
def read(path: Path, *, benchmark: str | None = None, **_) -> Dataset:
    folder = _folder(path)
    files = sorted(folder.glob("*.json"), key=lambda p: (p.stem.strip().isdigit(), int(p.stem) if
                                                         p.stem.strip().isdigit() else 0, p.stem))
    if not files:
        raise refuse(folder, "the CAST authors' pair files (<i>.json beside imgs/)")
    ds = Dataset("cast-pairs", "cast", str(folder), [])
    seen: set[str] = set()
    for f in files:
        expected = "a CAST pair (description_0, description_1)"
        p = json_file(f, expected)
        if not isinstance(p, dict) or not all(isinstance(p.get(k), str) and p[k] for k in
                                              ("description_0", "description_1")):
            ds.skipped.append((f.name, f"not {expected}"))
            continue
        rid = str(p.get("id", f.stem.strip()))
        if rid in seen:
            raise refuse(f, f"one pair per id ({rid} is also in another file)")
        seen.add(rid)
        imgs = [folder / "imgs" / f"{f.stem}_{k}.jpg" for k in (0, 1)]
        missing = [i.name for i in imgs if not i.is_file()]
        if missing:
            ds.skipped.append((f.name, f"image imgs/{missing[0]} not found"))
            continue
        side = [str(p.get(f"docci_idx_{k}", f"{rid}_{k}")) for k in (0, 1)]
        ds.records.append(Record(id=rid, images=[str(i) for i in imgs], root=str(folder), meta={
            "descriptions": [p["description_0"], p["description_1"]], "side_ids": side,
            "image_cosine": p.get("img_pair_similarity"), "text_cosine": p.get("desc_pair_similarity")}))
    if not ds.records:
        raise refuse(folder, f"CAST pairs whose images exist ({len(ds.skipped)} left out, e.g. "
                             f"{ds.skipped[0][1] if ds.skipped else 'none'})")
    return ds


def pairs(ds: Dataset) -> list[dict[str, Any]]:
    """CAST's pair objects (methods/cast.py) from the records: ``{id, a: {id, image, description, root}, b}``
    plus the authors' similarities."""
    out = []
    for r in ds.records:
        sides = [{"id": r.meta["side_ids"][k], "image": r.images[k], "description": r.meta["descriptions"][k],
                  "root": r.root} for k in (0, 1)]
        pair: dict[str, Any] = {"id": r.id, "a": sides[0], "b": sides[1]}
        for key in ("image_cosine", "text_cosine"):
            if r.meta.get(key) is not None:
                pair[key] = r.meta[key]
        out.append(pair)
    return out
