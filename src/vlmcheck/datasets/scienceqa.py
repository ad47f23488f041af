"""ScienceQA (Lu et al., 2022) as released: ``problems.json`` (pid -> question, choices, answer index, hint,
image, subject, ...), ``pid_splits.json`` and ``images/<split>/<pid>/image.png``.  One record per problem of the
split (``test`` by default), its hint kept apart from the question (shown as "Context: ", docs/methods.md), its
category the subject.  Its items on every route (:data:`RULE`) are the image questions, as ChEF's
``VQA_ScienceQA.json`` and lmms-eval's ``scienceqa_img`` hold them; text-only ones are left out and counted."""

from __future__ import annotations

from pathlib import Path

from ._release import json_file, refuse
from .base import Benchmark, Dataset, Record, register_benchmark, register_form
from .official import accuracy, accuracy_outcomes, declare

META = ("topic", "category", "skill", "grade", "task", "lecture", "solution")
TEXT_ONLY = "text-only question (ScienceQA's items are its image questions, as ChEF's and lmms-eval's scienceqa_img)"


def select(ds: Dataset) -> None:
    ds.skipped += [(r.id, TEXT_ONLY) for r in ds.records if not r.images]
    ds.records = [r for r in ds.records if r.images]


RULE = register_benchmark(Benchmark(
    "scienceqa", select, hub=("lmms-lab/ScienceQA", "derek-thomas/ScienceQA"), tsv=("ScienceQA",),
    recognise=lambda ds: {"choices", "lecture", "solution"} <= {c.lower() for c in ds.columns},
    config="ScienceQA-IMG", split="test"))


def _folder(path: Path) -> Path:
    return path.parent if path.is_file() else path


def detect(path: Path) -> bool:
    folder = _folder(path)
    return (folder / "problems.json").is_file() and (folder / "pid_splits.json").is_file() and (
        path.is_dir() or path.name == "problems.json")


@register_form("scienceqa", detect=detect, benchmarks=("scienceqa",),
               schema="github.com/lupantech/ScienceQA data/scienceqa/problems.json, pid_splits.json, "
                      "images/<split>/<pid>/image.png",
               carries=('images', 'multiple choice'))
def read(path: Path, *, benchmark: str | None = None, split: str = "test", **_) -> Dataset:
    folder = _folder(path)
    problems = json_file(folder / "problems.json", "ScienceQA's problems.json (pid -> problem)")
    splits = json_file(folder / "pid_splits.json", "ScienceQA's pid_splits.json (split -> pids)")
    if not isinstance(problems, dict) or not isinstance(splits, dict):
        raise refuse(folder / ("problems.json" if not isinstance(problems, dict) else "pid_splits.json"),
                     "a JSON object (ScienceQA's release)")
    if split not in splits:
        raise refuse(folder / "pid_splits.json", f"a split named {split!r} (it has {', '.join(sorted(splits))})")
    ds = Dataset("scienceqa", "scienceqa", str(folder), [], notes=[f"split {split!r} read: {len(splits[split])} "
                                                                   f"problems of {len(problems)}"], splits=[split])
    for pid in splits[split]:
        pid = str(pid)
        p = problems.get(pid)
        if not isinstance(p, dict):
            ds.skipped.append((pid, "in pid_splits.json but not in problems.json"))
            continue
        choices, answer = p.get("choices"), p.get("answer")
        if not p.get("question") or not isinstance(choices, list) or not isinstance(answer, int) \
                or not 0 <= answer < len(choices):
            ds.skipped.append((pid, "needs a question, a list of choices and an answer index among them"))
            continue
        images: list[str] = []
        if p.get("image"):
            img = folder / "images" / str(p.get("split") or split) / pid / str(p["image"])
            if not img.is_file():
                ds.skipped.append((pid, f"image {img.relative_to(folder)} not found"))
                continue
            images = [str(img)]
        ds.records.append(Record(id=pid, images=images, question=str(p["question"]),
                                 options=[str(c) for c in choices], answer=answer,
                                 hint=(str(p.get("hint")).strip() or None) if p.get("hint") else None,
                                 category=p.get("subject"), split=split, root=str(folder),
                                 meta={k: p[k] for k in META if p.get(k) not in (None, "")}))
    if not ds.records:
        raise refuse(folder / "problems.json", f"ScienceQA problems in split {split!r} "
                                               f"({len(ds.skipped)} left out)")
    return ds


declare("scienceqa", "ScienceQA accuracy",
        "ScienceQA's scoring (github.com/lupantech/ScienceQA); lmms-eval's scienceqa_img: share of questions "
        "answered right", outcomes=accuracy_outcomes)(accuracy)
