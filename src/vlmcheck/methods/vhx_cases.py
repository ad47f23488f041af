"""VHExpansion's test cases: yes/no questions on images, from a JSONL or CSV file (a local path or an fsspec
URL), a world dataset folder, or a benchmark release the dataset layer reads (records.vhx_cases)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ..core import remote
from ..core.dataset_files import within_window
from ..core.files import InputFileError, iter_jsonl_objects, read_text_input, require_str
from ..core.inputs import dataset_path
from .vhx_case import Case  # noqa: F401 - the case type is part of this module's API


def load_cases(source: str | Path) -> list[Case]:
    """Cases from a JSONL (image, question, answer[, id]), a CSV with those columns (VHTest/MMVP-style,
    headers matched case-insensitively, 'correct answer' accepted), or a world dataset folder; images stay inside
    the cases file's folder (an fsspec URL's: its folder URL, core/remote.py)."""
    if remote.is_url(source):
        return _url_cases(str(source))
    from .records import for_limit

    return for_limit(lambda: _local_cases(source))  # --limit N: the rows it needs (core/dataset_files.py)


def _local_cases(source: str | Path) -> list[Case]:
    from .records import dataset_for, vhx_cases

    ds = dataset_for(source)  # a benchmark release, a Hub copy, a TSV, NAME:PATH (methods/records.py)
    if ds is not None:
        return vhx_cases(ds)
    src = Path(source)
    if src.is_dir() and not (src / "manifest.jsonl").is_file():
        raise InputFileError(f"{src}: a folder that is neither a world folder nor a benchmark release vlmcheck "
                             "reads (docs/datasets.md); give a world folder, a .jsonl or .csv of cases, or the "
                             "release's folder")
    if src.is_dir():
        cases = []
        for _, row in iter_jsonl_objects(src / "manifest.jsonl", "world manifest"):
            for k, q in enumerate(x for x in row.get("questions", []) if x["type"] == "yesno"):
                cases.append(Case(id=f"{row['id']}-q{k}", image=str(src / row["image"]), question=q["question"],
                                  answer=q["answer"], meta={"category": row.get("category"), "kind": q["kind"]}))
    elif src.suffix.lower() == ".csv":
        cases = _csv_cases(src, src.parent, read_text_input(src, "cases file"))
    else:
        cases = _jsonl_cases(src, src.parent, within_window(iter_jsonl_objects(src, "cases file")))
    return _rooted(cases, str(src if src.is_dir() else src.parent), src)


def _rooted(cases: list[Case], root: str, src: Any) -> list[Case]:
    if not cases:
        raise InputFileError(f"{src}: no yes/no cases in it")
    for c in cases:
        c.root = root
    return cases


def _url_cases(url: str) -> list[Case]:
    """Cases from a JSONL or CSV at a URL; the images' confinement is the file's folder URL."""
    base = remote.parent(url)
    text = remote.read_text(url, "cases file")
    if url.lower().endswith(".csv"):
        cases = _csv_cases(url, base, text)
    else:
        cases = _jsonl_cases(url, base, iter_jsonl_objects(url, "cases file", text=text))
    return _rooted(cases, base, url)


def _csv_cases(src: Any, base: Any, text: str) -> list[Case]:
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    norm = [{(k or "").strip().lower(): v for k, v in r.items()} for r in rows]
    if norm and "options" in norm[0] and "image" not in norm[0]:
        raise InputFileError(f"{src}: MMVP's layout (Questions.csv with 'MMVP Images/' beside it) is read from a "
                             "local folder only")
    out = []
    for i, r in enumerate(norm):
        img = r.get("image") or r.get("image_path") or r.get("path")
        ans = r.get("answer") or r.get("correct answer")
        if not img or not r.get("question") or ans is None:
            raise InputFileError(f"{src}: row {i + 2} needs image, question and answer")
        out.append(Case(id=r.get("id") or r.get("index") or str(i), image=dataset_path(base, img),
                        question=r["question"], answer=_answer(ans, f"{src}: row {i + 2}")))
    return out


def _jsonl_cases(src: Any, base: Any, rows) -> list[Case]:
    out = []
    for n, row in rows:
        where = f"{src}:{n}"
        img, question = require_str(row, "image", where), require_str(row, "question", where)
        if "answer" not in row:
            raise InputFileError(f"{where}: needs image, question and answer")
        meta = {k: v for k, v in row.items() if k not in ("id", "image", "question", "answer")}
        out.append(Case(id=str(row.get("id", n)), image=dataset_path(base, img), question=question,
                        answer=_answer(row["answer"], where), meta=meta))
    return out


def _answer(value: Any, where: str) -> str:
    v = str(value).strip().lower()
    if v in ("yes", "y", "true", "1"):
        return "yes"
    if v in ("no", "n", "false", "0"):
        return "no"
    raise InputFileError(f"{where}: answer {value!r} is not yes/no")


#: the task name VHExpansion's runs record (its task class's ``name``; kept here so that its fine-tuning steps
#: check a run without importing the method's image corruptions)
VHX_TASK = "vhexpansion"


def require_vhx_run(results: dict[str, Any], folder: Any, step: str) -> None:
    """Refuse a run that is not VHExpansion's, in one sentence naming ``step`` (``vhx dataset``, ``vhx compare``)
    and what it takes instead."""
    if results.get("task") != VHX_TASK:
        raise InputFileError(f"{folder}: a {results.get('task')!r} run; {step}")
