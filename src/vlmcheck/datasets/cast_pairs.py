"""The CAST authors' pairs (Dagan et al., 2024; github.com/gautierdag/cast, ``SimilarityPairDataset``):
``data/<i>.json`` (id, docci_idx_0/1, img_pair_similarity, desc_pair_similarity, description_0/1) and
``data/imgs/<i>_0.jpg``, ``<i>_1.jpg``, ``<i>`` the JSON file's name as it is (padded with spaces as released).
Two records per pair, side 0 then side 1, sharing the pair's id as ``group``; a side's id is its image's name
unpadded, its DOCCI index and the authors' similarities in ``meta``."""

from __future__ import annotations

from pathlib import Path
from ._release import found, json_file, refuse
from .base import Dataset, Record, register_form


def _folder(path: Path) -> Path:
    return path / "data" if (path / "data" / "imgs").is_dir() else path


def detect(path: Path) -> bool:
    folder = _folder(path)
    return path.is_dir() and (folder / "imgs").is_dir() and any(
        (folder / "imgs" / f"{p.stem}_0.jpg").is_file() for p in folder.glob("*.json"))


@register_form("cast-pairs", detect=detect, benchmarks=("cast",),
               schema="github.com/gautierdag/cast data/<i>.json + data/imgs/<i>_{0,1}.jpg (consistency/dataset.py)",
               carries=('images', 'descriptions', 'scene pairs'))
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
        for k in (0, 1):
            ds.records.append(Record(id=f"{rid}_{k}", images=[str(imgs[k])], description=p[f"description_{k}"],
                                     group=rid, root=str(folder), meta={
                                         "docci_idx": p.get(f"docci_idx_{k}"), "image_cosine": p.get(
                                             "img_pair_similarity"), "text_cosine": p.get("desc_pair_similarity")}))
    return found(folder, ds, "CAST pairs whose images exist")

