"""MMBench (Liu et al., 2023): which rows are its items on every route (its release is VLMEvalKit's TSV; its Hub
copies hold the same rows), and its official figure.  Row ``index + k x 1,000,000`` is CircularEval's copy k of
question ``index``, options rotated k places (VLMEvalKit ``vlmeval/dataset/utils/multiple_choice.py``): it is
marked as such (``meta["circular_copy"]``, ``group`` the question) and never rotated again; a copy whose question
is not in the data is left out (VLMEvalKit scores copies only with their question)."""

from __future__ import annotations

from .base import Benchmark, Dataset, Record, register_benchmark
from .official import Answer, declare, grouped, per_group, per_question, share

#: a circular copy's index is its question's + k x COPY
COPY = 1_000_000


def _number(r: Record) -> int | None:
    v = r.meta.get("index", r.id)  # a Hub copy whose index repeats keeps it in meta (ids are then row numbers)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() else None


def select(ds: Dataset) -> None:
    numbers = [_number(r) for r in ds.records]
    questions = {n for n in numbers if n is not None and n < COPY}
    keep, copies = [], 0
    for r, n in zip(ds.records, numbers):
        if n is not None and n >= COPY:
            if n % COPY not in questions:
                ds.skipped.append((r.id, "circular copy whose question is not in the data"))
                continue
            r.meta["circular_copy"] = n // COPY
            r.group = str(n % COPY)
            copies += 1
        elif n is not None:
            r.group = str(n)
        keep.append(r)
    ds.records = keep
    if copies:
        ds.notes.append(f"circular copies: {len(keep) - copies} questions with {copies} copies (index + k x "
                        "1,000,000, options already rotated): a question is right when all its copies are")


def recognise(ds: Dataset) -> bool:
    """A table with an ``index`` column holding circular copies of its own questions."""
    if "index" not in (c.lower() for c in ds.columns):
        return False
    numbers = {_number(r) for r in ds.records} - {None}
    return any(n >= COPY and n % COPY in numbers for n in numbers)


RULE = register_benchmark(Benchmark(
    "mmbench", select, hub=("lmms-lab/MMBench", "lmms-lab/MMBench_EN", "lmms-lab/MMBench_CN", "HuggingFaceM4/MMBench"),
    tsv=("MMBench",), recognise=recognise, config="en", split="dev", carries=("images", "multiple choice")))


def mmbench_outcomes(answers: list[Answer]) -> dict:
    circ = {g: qs for g, qs in grouped(answers).items() if len(qs) > 1}
    return {"vanilla_accuracy": per_question([a for a in answers if a.copy == 0]),
            **({"circular_accuracy": per_group(circ)} if circ else {})}


@declare("mmbench", "MMBench circular and vanilla accuracy",
         "VLMEvalKit vlmeval/dataset/utils/multiple_choice.py (CircularEval: a question counts only when every "
         "circular copy is right; VanillaEval: the questions themselves, copy 0)", outcomes=mmbench_outcomes)
def circular_vanilla(answers: list[Answer]) -> dict:
    """CircularEval (the MMBench paper's figure): the share of questions whose every circular copy was answered
    right; VanillaEval: the share of the questions themselves (copy 0) answered right.  Both clustered by image.
    A run that asked no copies has no circular accuracy (said in the notes)."""
    groups = grouped(answers)
    circ = {g: qs for g, qs in groups.items() if len(qs) > 1}
    first = [a for a in answers if a.copy == 0]
    out: dict = {"vanilla_accuracy": share([a.correct for a in first], [a.unit for a in first])}
    if circ:
        out["circular_accuracy"] = share([all(a.correct for a in qs) for qs in circ.values()],
                                         [qs[0].unit for qs in circ.values()])
    notes = []
    if not circ:
        notes.append("no circular copies asked (a VanillaEval run): no circular accuracy")
    elif len(circ) < len(groups):
        notes.append(f"{len(groups) - len(circ)} questions with one copy answered, left out of circular accuracy")
    if notes:
        out["notes"] = notes
    return out
