"""Flickr30k (or COCO: ``dataset_coco.json``, with ``filepath``) in Karpathy's splits: ``dataset_flickr30k.json``
(``{"images": [{filename, imgid, split, sentences: [{raw, ...}]}]}``) beside ``flickr30k-images/`` or
``images/``.  One record per image of the split (``test`` by default: the 1,000 images retrieval is reported
on), its description the first caption, all of them in ``meta["captions"]``."""

from __future__ import annotations

import re
from pathlib import Path

from ._release import head, json_file, once, refuse
from .base import Dataset, Record, register_form

_NAME = re.compile(r"dataset_(flickr30k|flickr8k|coco)\.json$")


def detect(path: Path) -> bool:
    if path.is_dir():
        return any(_NAME.match(p.name) for p in path.glob("dataset_*.json"))
    return bool(_NAME.match(path.name)) and b'"images"' in head(path, 4096)


def _file(path: Path) -> Path:
    if path.is_file():
        return path
    found = sorted(p for p in path.glob("dataset_*.json") if _NAME.match(p.name))
    if not found:
        raise refuse(path, "a Karpathy split file (dataset_flickr30k.json)")
    return found[0]


@register_form("karpathy", detect=detect, benchmarks=("flickr30k", "coco-karpathy"),
               schema="cs.stanford.edu/people/karpathy/deepimagesent (dataset_flickr30k.json + flickr30k-images/)",
               carries=('images', 'captions', 'descriptions'))
def read(path: Path, *, benchmark: str | None = None, split: str = "test", images: str | None = None,
         **_) -> Dataset:
    file = _file(path)
    data = json_file(file, "Karpathy's split file ({\"images\": [...]})")
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise refuse(file, "Karpathy's split file with a list under \"images\"")
    m = _NAME.match(file.name)
    name = str(data.get("dataset") or (m.group(1) if m else ""))
    folder = Path(images) if images else next(
        (d for d in (file.parent / f"{name}-images", file.parent / "images", file.parent) if d.is_dir()), file.parent)
    ds = Dataset("karpathy", name or None, str(file), [], notes=[f"split {split!r}"])
    unique = once(file, "one entry per imgid")
    for i, im in enumerate(data["images"]):
        if not isinstance(im, dict) or im.get("split") != split:
            continue
        fname = im.get("filename")
        caps = [s.get("raw") for s in im.get("sentences") or [] if isinstance(s, dict) and s.get("raw")]
        rid = str(im.get("imgid", i))
        if not isinstance(fname, str) or not caps:
            ds.skipped.append((rid, "needs a filename and at least one sentence"))
            continue
        unique(rid, rid)
        img = folder / str(im.get("filepath") or "") / fname
        if not img.is_file():
            ds.skipped.append((rid, f"image {fname} not in {folder}"))
            continue
        ds.records.append(Record(id=rid, images=[str(img)], description=caps[0], split=split, root=str(folder),
                                 meta={"captions": caps, "filename": fname}))
    if not ds.records:
        raise refuse(file, f"images of split {split!r} that exist ({len(ds.skipped)} left out)")
    return ds
