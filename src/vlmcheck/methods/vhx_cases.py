"""VHExpansion's test cases: yes/no questions on images, from a JSONL or CSV file (a local path or an fsspec
URL), a world dataset folder, or a benchmark release the dataset layer reads (datasets/: MMVP's Questions.csv +
``MMVP Images/``, POPE's ``coco_pope_*.json``, VHTest's workbooks, ...).

Multiple-choice records become ONE binary case each, as VHExpansion counts them (Table 1: MMVP, 300 questions,
300 cases; section 3: "non-binary question-answer pairs can be rewritten as binary counterparts"): a question
whose options are Yes/No is asked as it is; any other asks whether the first option is the answer
("<question> Is the answer '<option a>'?", yes when (a) is right).  Asking about the same option on both images
of an MMVP pair keeps the pair's two answers opposite, as MMVP built them.  The record's pair id travels in the
case's ``meta["pair"]`` so that MMVP's pair accuracy is reported beside symmetric accuracy."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path
from typing import Any

from dataclasses import dataclass, field

from ..core import remote
from ..core.files import InputFileError, iter_jsonl_objects, read_text_input, require_str
from ..core.inputs import dataset_path

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Case:
    """A yes/no test case.  A slotted dataclass: a million of them are a run's sample list (about 0.5 kB each,
    against 1.1 kB as a pydantic model), and Ray's workers find the image it names (run/ray_worker.py)."""
    id: str
    image: str
    question: str
    answer: str
    meta: dict[str, Any] = field(default_factory=dict)
    root: str | None = None  # the folder the image must stay inside (core/inputs.py)


def _yesno(value: Any) -> str:
    v = str(value).strip().lower()
    if v in ("yes", "y", "true", "1"):
        return "yes"
    if v in ("no", "n", "false", "0"):
        return "no"
    raise ValueError(f"answer {value!r} is not yes/no")


def load_cases(source: str | Path) -> list[Case]:
    """Cases from a JSONL (image, question, answer[, id]), a CSV with those columns (VHTest/MMVP-style,
    headers matched case-insensitively, 'correct answer' accepted), or a world dataset folder.
    Images stay inside the folder of the cases file (or the world folder).  A cases file at an fsspec URL
    (``s3://.../pope.jsonl``) names its images relative to its folder URL (core/remote.py)."""
    if remote.is_url(source):
        return _url_cases(str(source))
    src = Path(source)
    release = _release(src)
    if release is not None:
        return cases_from_dataset(release)
    root = str(src if src.is_dir() else src.parent)
    cases = _load_cases(src)
    if not cases:
        raise InputFileError(f"{src}: no yes/no cases in it")
    return _rooted(cases, root)


def _rooted(cases: list[Case], root: str) -> list[Case]:
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
    if not cases:
        raise InputFileError(f"{url}: no yes/no cases in it")
    return _rooted(cases, base)


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


def _load_cases(src: Path) -> list[Case]:
    if src.is_dir():
        out = []
        for _, row in iter_jsonl_objects(src / "manifest.jsonl", "world manifest"):
            for k, q in enumerate(x for x in row.get("questions", []) if x["type"] == "yesno"):
                out.append(Case(id=f"{row['id']}-q{k}", image=str(src / row["image"]), question=q["question"],
                                answer=q["answer"], meta={"category": row.get("category"), "kind": q["kind"]}))
        return out
    if src.suffix.lower() == ".csv":
        return _csv_cases(src, src.parent, read_text_input(src, "cases file"))
    return _jsonl_cases(src, src.parent, iter_jsonl_objects(src, "cases file"))


def _answer(value: Any, where: str) -> str:
    try:
        return _yesno(value)
    except ValueError as exc:
        raise InputFileError(f"{where}: {exc}") from None


def _release(src: Path):
    """The benchmark release at ``src`` read by the dataset layer, or None for this module's own forms (a world
    folder, a JSONL or CSV of cases; a ``.json`` that no release form claims is read as JSON Lines)."""
    from ..datasets import DatasetFormError, detect
    from ..datasets import mmvp

    suffix = src.suffix.lower()
    if src.is_dir() and (src / "manifest.jsonl").is_file():
        return None
    if suffix in (".jsonl", ".ndjson") or (suffix == ".csv" and not mmvp.detect(src)):
        return None
    try:
        form = detect(src)
    except DatasetFormError:
        if src.is_file() and suffix != ".xlsx":
            return None  # a cases file under another name: read as JSON Lines, with that reader's messages
        raise InputFileError(f"{src}: a folder this command cannot read; give a world folder, a .jsonl or .csv of "
                             "cases, or a benchmark release (MMVP, POPE, VHTest)") from None
    return form.read(src, benchmark=None)


def binary_question(question: str, option: str) -> str:
    """A multiple-choice question asked as yes/no about one option (module docstring)."""
    q = question.strip()
    if not q.endswith(("?", ".")):
        q += "?"
    return f"{q} Is the answer '{option.strip()}'?"


def cases_from_dataset(ds) -> list[Case]:
    """One yes/no case per record of a dataset (datasets.base.Dataset); records that cannot be one are refused
    together in one sentence when none is left, else listed in the dataset's ``skipped``."""
    out: list[Case] = []
    for r in ds.records:
        where = f"{ds.source}: record {r.id}"
        if len(r.images) != 1 or not r.question:
            ds.skipped.append((r.id, "a yes/no case needs one image and a question"))
            continue
        meta: dict[str, Any] = {"source": ds.benchmark or ds.form}
        for key in ("category", "split"):
            if getattr(r, key):
                meta[key] = getattr(r, key)
        if r.options:
            said = [o.strip().lower().rstrip(".") for o in r.options]
            if not isinstance(r.answer, int) or not 0 <= r.answer < len(said):
                ds.skipped.append((r.id, f"answer {r.answer!r} is not an option index"))
                continue
            if sorted(said) == ["no", "yes"]:
                question, answer = r.question, said[r.answer]
            else:
                question, answer = binary_question(r.question, r.options[0]), "yes" if r.answer == 0 else "no"
                meta["asked_option"] = r.options[0]
            meta["options"] = list(r.options)
            meta["correct_option"] = r.options[r.answer]
        else:
            question, answer = r.question, _answer(r.answer, where)
        if r.group and ds.benchmark == "mmvp":
            meta["pair"] = r.group
        out.append(Case(id=r.id, image=r.images[0], question=question, answer=answer, meta=meta,
                        root=r.root or str(Path(ds.source).parent)))
    if not out:
        why = ds.skipped[0][1] if ds.skipped else "no records"
        raise InputFileError(f"{ds.source}: no yes/no cases in it ({why})")
    if ds.skipped:
        log.warning("%s: %d row(s) left out, e.g. %s: %s", ds.source, len(ds.skipped), *ds.skipped[0])
    return out
