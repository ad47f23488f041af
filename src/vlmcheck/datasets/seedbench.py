"""SEED-Bench (Li et al., 2023) as released: ``SEED-Bench.json`` (``{"questions": [...], "question_type": {name:
id}}``: question_id, question, choice_a..d, answer letter, data_id, data_type, question_type_id) beside
``SEED-Bench-image/``, and SEED-Bench-2's ``SEED-Bench_v2_level1_2_3.json`` whose data_id may list several images
(``image/SEED-Bench-2-image/`` or ``image/cc3m-image/``).  One record per image question, options the non-empty
choices (as ChEF's loader drops SEED-Bench-2's empty ones), category the question type's name.  On every route
(:data:`RULE`) a question whose ``data_type`` is not an image type is left out and counted: the Hub copy keeps a
video's frames in the same ``image`` list, so only ``data_type`` tells them apart."""

from __future__ import annotations

from pathlib import Path

from ._release import json_file, named_file, once, refuse
from .base import Benchmark, Dataset, Record, register_benchmark, register_form
from .official import accuracy, accuracy_outcomes, declare

FILES = ("SEED-Bench.json", "SEED-Bench_v2_level1_2_3.json")
IMAGE_TYPES = ("image", "Single Image", "Multiple Images")


def left_out(data_type: object) -> str | None:
    """Why a question of this ``data_type`` is no item (None: it is one); the same words on every route."""
    if data_type is None or str(data_type) in IMAGE_TYPES:
        return None
    return f"not an image question (data_type {data_type}): vlmcheck evaluates images"


def select(ds: Dataset) -> None:
    ds.skipped += [(r.id, why) for r in ds.records if (why := left_out(r.meta.get("data_type")))]
    ds.records = [r for r in ds.records if not left_out(r.meta.get("data_type"))]


RULE = register_benchmark(Benchmark(
    "seedbench", select, hub=("lmms-lab/SEED-Bench", "lmms-lab/SEED-Bench-2"), tsv=("SEEDBench",),
    recognise=lambda ds: {"data_type", "question_type_id"} <= {c.lower() for c in ds.columns}))


def _image_dir(folder: Path, q: dict) -> Path:
    if q.get("data_source") == "cc3m":
        return folder / "image" / "cc3m-image"
    for d in (folder / "SEED-Bench-image", folder / "image" / "SEED-Bench-2-image"):
        if d.is_dir():
            return d
    return folder / "SEED-Bench-image"


@register_form("seedbench", detect=lambda p: named_file(p, FILES) is not None, benchmarks=("seedbench", "seed-bench"),
               schema="github.com/AILab-CVC/SEED-Bench (SEED-Bench.json + SEED-Bench-image/; SEED-Bench-2 "
                      "SEED-Bench_v2_level1_2_3.json + image/)",
               carries=('images', 'multiple choice'))
def read(path: Path, *, benchmark: str | None = None, **_) -> Dataset:
    file = named_file(path, FILES)
    if file is None:
        raise refuse(path, f"SEED-Bench's {' or '.join(FILES)}")
    data = json_file(file, "SEED-Bench's JSON ({\"questions\": [...]})")
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise refuse(file, "SEED-Bench's JSON with a list under \"questions\"")
    types = data.get("question_type") if isinstance(data.get("question_type"), dict) else {}
    names = {str(v): k for k, v in types.items()}
    folder = file.parent
    ds = Dataset("seedbench", "seedbench", str(file), [])
    unique = once(file, "one question per question_id")
    for i, q in enumerate(data["questions"]):
        if not isinstance(q, dict):
            ds.skipped.append((f"questions[{i}]", "not an object"))
            continue
        qid = str(q.get("question_id", i))
        why = left_out(q.get("data_type"))
        if why:
            ds.skipped.append((qid, why))
            continue
        unique(qid, qid)
        choices = [str(q.get(f"choice_{c}") or "").strip() for c in "abcd"]
        letter = str(q.get("answer", "")).strip().upper()
        if letter not in "ABCD" or not letter or not choices["ABCD".index(letter)]:
            ds.skipped.append((qid, f"answer {q.get('answer')!r} is not a letter A-D naming a choice"))
            continue
        right = choices["ABCD".index(letter)]
        options = [c for c in choices if c]
        ids = q.get("data_id")
        ids = ids if isinstance(ids, list) else [ids]
        if not ids or not all(isinstance(x, str) and x for x in ids):
            ds.skipped.append((qid, "data_id names no image"))
            continue
        where = _image_dir(folder, q)
        missing = [x for x in ids if not (where / x).is_file()]
        if missing:
            ds.skipped.append((qid, f"image {missing[0]} not in {where.relative_to(folder)}"))
            continue
        tid = q.get("question_type_id")
        ds.records.append(Record(id=qid, images=[str(where / x) for x in ids], question=str(q.get("question", "")),
                                 options=options, answer=options.index(right),
                                 category=names.get(str(tid), None if tid is None else str(tid)), root=str(folder),
                                 meta={"data_type": q.get("data_type")}))
    if not ds.records:
        raise refuse(file, f"SEED-Bench image questions whose images exist ({len(ds.skipped)} left out)")
    return ds


declare("seedbench", "SEED-Bench accuracy",
        "SEED-Bench's eval (github.com/AILab-CVC/SEED-Bench): share of its image questions answered right",
        outcomes=accuracy_outcomes)(accuracy)
