"""POPE (Li et al., 2023) as released: ``output/coco/coco_pope_{random,popular,adversarial}.json``, JSON Lines
despite the suffix, one question per line: ``{"question_id", "image" (a COCO val2014 file name), "text",
"label" ("yes"/"no")}``; the images are COCO's, wherever the user keeps them.

One record per question, its answer the label, its split from the file name, its group the image (POPE asks
six questions of each of its 500 images).  ``question_id`` restarts in each split file, so a record's id is
``<split>-<question_id>``.  A folder holding the split files reads all of them (3 x 3000 questions, the 9,000
test cases of VHExpansion's Table 1); ``split=random`` reads one.

The images are looked for in ``images=DIR`` if given, else beside the file, in ``val2014/`` or ``images/``
beside it, or in ``val2014/`` one folder up.
"""

from __future__ import annotations

import re
from pathlib import Path

from ._release import first_json_keys, json_lines, refuse
from .base import Dataset, Record, register_form

KEYS = {"question_id", "image", "text", "label"}
_NAME = re.compile(r"(?:.*_)?pope_(random|popular|adversarial)\.jsonl?$", re.I)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if _NAME.match(p.name) and p.is_file())
    return [path]


def detect(path: Path) -> bool:
    files = _files(path)
    return bool(files) and all(_NAME.match(f.name) for f in files) and KEYS <= first_json_keys(files[0])


def _image_folder(file: Path, first_image: str, images: str | Path | None) -> Path:
    if images:
        return Path(images)
    here = file.parent
    for folder in (here, here / "val2014", here / "images", here.parent / "val2014"):
        if (folder / first_image).is_file():
            return folder
    raise refuse(file, f"the COCO images it names (e.g. {first_image}) beside it, in val2014/ or images/ beside "
                       "it, or in ../val2014/ (or give images=DIR)")


@register_form("pope", detect=detect, carries=('images', 'yes/no'), benchmarks=("pope",),
               schema="github.com/AoiDragon/POPE output/coco/coco_pope_*.json (question_id, image, text, label)")
def read(path: Path, *, benchmark: str | None = None, images: str | Path | None = None,
         split: str | None = None, **_) -> Dataset:
    files = _files(path)
    if split:
        files = [f for f in files if (m := _NAME.match(f.name)) and m.group(1).lower() == split]
    if not files:
        raise refuse(path, "POPE's coco_pope_{random,popular,adversarial}.json" + (f" (split {split!r})" if split
                                                                                   else ""))
    ds = Dataset("pope", "pope", str(path), [])
    for file in files:
        m = _NAME.match(file.name)
        name = m.group(1).lower() if m else file.stem
        expected = "POPE's JSON Lines (question_id, image, text, label)"
        rows = json_lines(file, expected)
        missing = KEYS - set(rows[0][1])
        if missing:
            raise refuse(file, f"{expected}; line {rows[0][0]} lacks {', '.join(sorted(missing))}")
        folder = _image_folder(file, str(rows[0][1]["image"]), images)
        seen: set[str] = set()
        for n, r in rows:
            where = f"{file.name}:{n}"
            rid = f"{name}-{r.get('question_id')}"
            if rid in seen:
                raise refuse(file, f"one line per question_id ({r.get('question_id')} is repeated at line {n})")
            seen.add(rid)
            label = str(r.get("label", "")).strip().lower()
            if label not in ("yes", "no") or not isinstance(r.get("image"), str) or not r.get("text"):
                ds.skipped.append((where, f"needs an image, a text and a yes/no label (label {r.get('label')!r})"))
                continue
            img = folder / r["image"]
            if not img.is_file():
                ds.skipped.append((where, f"image {r['image']} not in {folder}"))
                continue
            ds.records.append(Record(id=rid, images=[str(img)], question=str(r["text"]), answer=label, split=name,
                                     group=r["image"], root=str(folder)))
        if images is None and folder != file.parent:
            ds.notes.append(f"{file.name}: images read from {folder}")
    if not ds.records:
        raise refuse(path, f"POPE questions whose images exist ({len(ds.skipped)} left out, e.g. "
                           f"{ds.skipped[0][1] if ds.skipped else 'none'})")
    return ds
