"""VLMEvalKit's TSV form (``LMUData/<DATASET>.tsv``; :data:`SCHEMA`, docs/datasets.md).  ``image`` holds base64,
a list of them, or (a field of at most 64 characters) the ``index`` of the row whose image it shares;
``image_path`` names files beside the TSV.  Rows are read as ``csv`` reads them, in memory bounded by the field
cap (:mod:`.tsv_rows`); a row listing too many images, or one over ``--max-image-mb`` (told from the base64's
length, before decoding), is skipped with its reason.  Which rows are a benchmark's items is its module's rule."""

from __future__ import annotations

import ast
import base64
import binascii
import csv
from pathlib import Path
from typing import Any

from ..core import dataset_files
from ..core.files import InputFileError
from ..core.inputs import active_policy
from ._release import head
from .base import Dataset, DatasetFormError, register_form
from .columns import Columns, Refused, blank, check_unique, record
from .imagestore import ImageStore
from .tsv_rows import TsvRows

SCHEMA = "VLMEvalKit vlmeval/dataset/image_base.py (ImageBaseDataset.prepare_tsv / dump_image) and " \
         "image_mcq.py (ImageMCQDataset.build_prompt): index, image (base64 | index of another row), " \
         "image_path, question, hint, A..Z, answer, category, l2-category, split"


def _image_list(text: str, limits: dataset_files.Limits) -> list[Any]:
    """The entries of an image field (a list, or one entry), at most ``limits.images_per_item`` of them."""
    if not text.startswith("["):
        return [text]
    cap = limits.images_per_item
    too_many = Refused(f"lists more than the {cap} images an item may hold (raise it with "
                        f"{dataset_files.ENV['images_per_item'][0]})")
    if text.count(",") >= 4 * cap:  # far too many, told before the list is parsed (a name may hold a comma)
        raise too_many
    try:
        items = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        raise Refused("image list is not a Python list of strings") from None
    if not isinstance(items, (list, tuple)) or not all(isinstance(x, str) for x in items):
        raise Refused("image list is not a Python list of strings")
    if len(items) > cap:
        raise too_many
    return list(items)


def is_tsv(path: Path) -> bool:
    if not (path.is_file() and path.suffix.lower() == ".tsv"):
        return False
    first = head(path, 4096).split(b"\n", 1)[0].decode("utf-8", "replace").strip("\r\ufeff")
    cols = {c.strip().lower() for c in first.split("\t")}
    return "index" in cols and ("question" in cols or "image" in cols)


def _index(v: str) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v).strip()
    return str(int(f)) if f.is_integer() else str(v).strip()


def _decode(field: str, limits: dataset_files.Limits, max_bytes: int) -> list[bytes]:
    items = _image_list(field.strip(), limits)
    for x in items:  # every image's size told from its base64 before any is decoded
        size = len(x) * 3 // 4
        if size > max_bytes:
            raise Refused(f"image of about {size} bytes exceeds the image file size limit of {max_bytes} bytes "
                           "(--max-image-mb)")
    return [base64.b64decode(x, validate=False) for x in items]


@register_form("vlmeval-tsv", detect=is_tsv, schema=SCHEMA, options=("*_column",))
def read_tsv(path: Path, *, benchmark: str | None = None, **params: Any) -> Dataset:
    limits = dataset_files.limits()
    csv.field_size_limit(limits.field_bytes)
    max_image = active_policy.get().max_file_bytes
    store = ImageStore()
    try:  # streamed a row at a time: no size cap on the file, one on each field
        raw = dataset_files.open_file(path, dataset_files.current_root.get(), "TSV file")
    except InputFileError as exc:
        raise DatasetFormError(str(exc)) from None
    with raw:
        reader = TsvRows(raw, limits.field_bytes)  # csv's rows, in memory bounded by the field cap
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
        window = dataset_files.row_window.get()
        try:
            for n, row in enumerate(reader, 2):
                if window is not None and window.full(len(rows)):
                    break
                idx = _index(row.get("index"))
                cell = row.get("image")
                if not blank(cell):
                    if len(cell) <= 64:  # another row's index (VLMEvalKit's convention for a shared image)
                        refs[idx] = _index(cell)
                    else:
                        try:
                            images[idx] = [store.put(b) for b in _decode(cell, limits, max_image)]
                        except (ValueError, SyntaxError, binascii.Error, OSError) as exc:  # Refused: a ValueError
                            skipped.append((f"line {n}", str(exc) if isinstance(exc, Refused) else
                                            f"image not stored ({exc.strerror or exc})" if isinstance(exc, OSError)
                                            else "image field is neither base64 nor another row's index"))
                            continue
                elif not blank(row.get("image_path")):
                    try:
                        names_ = _image_list(str(row["image_path"]).strip(), limits)
                    except Refused as exc:
                        skipped.append((f"line {n}", f"image_path: {exc}"))
                        continue
                    images[idx] = [str(path.parent / x) for x in names_]
                    from_files.add(idx)
                row.pop("image", None)
                rows.append((n, row))
        except csv.Error as exc:
            if "field larger than field limit" in str(exc):
                raise DatasetFormError(
                    f"{path}: a field near line {reader.line_num} is larger than the {limits.field_bytes} bytes a "
                    f"field may hold (raise it with {dataset_files.ENV['field_bytes'][0]}=MB)") from None
            raise DatasetFormError(f"{path}: not a readable TSV ({exc})") from None
        except UnicodeDecodeError as exc:
            raise DatasetFormError(f"{path}: not UTF-8 text near line {reader.line_num} (byte {exc.start} of a "
                                   "block); save the TSV as UTF-8") from None
        except OSError as exc:
            raise DatasetFormError(f"{path}: cannot read ({exc.strerror or exc})") from None
    records = []
    for n, row in rows:
        idx = _index(row.get("index"))
        owner = refs.get(idx, idx)  # the row whose image this row shares, else itself
        if idx in refs and owner not in images:
            skipped.append((f"line {n}", f"image names row {owner!r}, which has no image"))
            continue
        records.append(record(row, cols, idx, images.get(owner, []),
                              str(path.parent) if owner in from_files else str(store.root)))
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
