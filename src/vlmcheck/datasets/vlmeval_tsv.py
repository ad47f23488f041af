"""VLMEvalKit's TSV form (``LMUData/<DATASET>.tsv``): MMBench, ScienceQA, SEED-Bench, MME, POPE, MMVP, ...

Schema (VLMEvalKit ``vlmeval/dataset/image_base.py`` and ``image_mcq.py``): ``index``; ``image`` holding the
image as base64, a list of them (``"['...', '...']"``), or, for a row that shares another row's image, that
row's ``index`` (a field of at most 64 characters); or an ``image_path`` column naming files (relative to the
TSV's folder, confined to it); ``question``; options in columns ``A``..``Z`` (blank cells are no option);
``answer`` (a letter, or Yes/No); ``hint``; ``category``, ``l2-category``, ``split``.  Which rows are a
benchmark's items (MMBench's circular copies, rows with ``index`` >= 1,000,000) is its own module's rule
(:mod:`.mmbench`), applied by :func:`~.base.load` on this route as on the Hub's.

Fields of any size are read (the ``csv`` module's 128-kB field limit is lifted: an MMBench image is often
larger); base64 images go to the content store in the bytes they encode (:mod:`.imagestore`), one file per
distinct image, written by temp file and rename and compared with the bytes on reuse.
"""

from __future__ import annotations

import ast
import base64
import binascii
import csv
import sys
from pathlib import Path
from typing import Any

from .base import Dataset, DatasetFormError, register_form
from .columns import Columns, blank, check_unique, record
from .imagestore import ImageStore

SCHEMA = "VLMEvalKit vlmeval/dataset/image_base.py (ImageBaseDataset.prepare_tsv / dump_image) and " \
         "image_mcq.py (ImageMCQDataset.build_prompt): index, image (base64 | index of another row), " \
         "image_path, question, hint, A..Z, answer, category, l2-category, split"


def _lift_field_limit() -> None:
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:
            limit //= 2


def is_tsv(path: Path) -> bool:
    if not (path.is_file() and path.suffix.lower() == ".tsv"):
        return False
    with path.open("rb") as fh:
        head = fh.read(4096).split(b"\n", 1)[0].decode("utf-8", "replace").strip("\r\ufeff")
    cols = {c.strip().lower() for c in head.split("\t")}
    return "index" in cols and ("question" in cols or "image" in cols)


def _index(v: str, where: str) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v).strip()
    return str(int(f)) if f.is_integer() else str(v).strip()


def _decode(field: str) -> list[bytes]:
    text = field.strip()
    items = ast.literal_eval(text) if text.startswith("[") else [text]
    return [base64.b64decode(x, validate=False) for x in items]


@register_form("vlmeval-tsv", detect=is_tsv, schema=SCHEMA, options=("*_column",))
def read_tsv(path: Path, *, benchmark: str | None = None, **params: Any) -> Dataset:
    _lift_field_limit()
    store = ImageStore()
    try:
        fh = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise DatasetFormError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with fh:
        reader = csv.DictReader(fh, delimiter="\t")
        names = [n for n in reader.fieldnames or [] if n is not None]
        if "index" not in names:
            raise DatasetFormError(f"{path}: expected a VLMEvalKit TSV with an 'index' column (found: "
                                   f"{', '.join(names) or 'no header'})")
        cols = Columns(names, {k: str(v) for k, v in params.items() if k.endswith("_column")},
                       skip=("index", "image", "image_path"))
        rows: list[tuple[int, dict[str, Any]]] = []
        images: dict[str, list[str]] = {}
        from_files: set[str] = set()  # rows whose images are files named by image_path
        refs: dict[str, str] = {}
        skipped: list[tuple[str, str]] = []
        try:
            for n, row in enumerate(reader, 2):
                idx = _index(row.get("index"), f"{path}:{n}")
                cell = row.get("image")
                if not blank(cell):
                    if len(cell) <= 64:  # another row's index (VLMEvalKit's convention for a shared image)
                        refs[idx] = _index(cell, f"{path}:{n}")
                    else:
                        try:
                            images[idx] = [store.put(b) for b in _decode(cell)]
                        except (ValueError, SyntaxError, binascii.Error):
                            skipped.append((f"line {n}", "image field is neither base64 nor another row's index"))
                            continue
                        except OSError as exc:
                            skipped.append((f"line {n}", f"image not stored ({exc.strerror or exc})"))
                            continue
                elif not blank(row.get("image_path")):
                    p = str(row["image_path"]).strip()
                    names_ = ast.literal_eval(p) if p.startswith("[") else [p]
                    images[idx] = [str(path.parent / x) for x in names_]
                    from_files.add(idx)
                row.pop("image", None)
                rows.append((n, row))
        except csv.Error as exc:
            raise DatasetFormError(f"{path}: not a readable TSV ({exc})") from None
    records = []
    for n, row in rows:
        idx = _index(row.get("index"), f"{path}:{n}")
        owner = refs.get(idx, idx)
        if idx in refs:
            target = refs[idx]
            if target not in images:
                skipped.append((f"line {n}", f"image names row {target!r}, which has no image"))
                continue
            imgs = images[target]
        else:
            imgs = images.get(idx, [])
        records.append(record(row, cols, idx, imgs, str(path.parent) if owner in from_files else str(store.root)))
    if not records:
        raise DatasetFormError(f"{path}: no rows" + (f" that could be read ({len(skipped)} skipped: {skipped[0][1]})"
                                                     if skipped else ""))
    check_unique(records, str(path), "index")
    notes = [f"columns: {cols.describe()}"]
    no_image = sum(1 for r in records if not r.images)
    if no_image:
        notes.append(f"{no_image} rows without an image")
    return Dataset(form="vlmeval-tsv", benchmark=benchmark, source=str(path), records=records, skipped=skipped,
                   notes=notes, columns=names)
