"""MMVP (Tong et al., 2024) as released: ``Questions.csv`` (Index, Question, Options "(a) x (b) y", Correct
Answer) beside ``MMVP Images/<Index>.jpg``.  Rows 2k-1 and 2k ask the same question of the two images of a
CLIP-blind pair, which the authors score together: the record's ``group`` is "pair-k".  No categories."""

from __future__ import annotations

import re
from pathlib import Path

from ._release import csv_rows, head, image_in, once, refuse
from .base import Benchmark, Dataset, Record, register_benchmark, register_form
from .official import Answer, declare, grouped, per_group, share

COLUMNS = ("Index", "Question", "Options", "Correct Answer")
IMAGES = "MMVP Images"
_OPTION = re.compile(r"\(([a-z])\)\s*(.+?)\s*(?=\([a-z]\)|$)", re.S)


def _csv(path: Path) -> Path:
    return path / "Questions.csv" if path.is_dir() else path


def detect(path: Path) -> bool:
    csv = _csv(path)
    if not csv.is_file() or csv.suffix.lower() != ".csv":
        return False
    first = head(csv).decode("utf-8-sig", "replace").splitlines()[:1]
    cols = [c.strip() for c in first[0].split(",")] if first else []
    return all(c in cols for c in COLUMNS)


def options(text: str) -> list[tuple[str, str]]:
    """``"(a) Open (b) Closed"`` -> ``[("a", "Open"), ("b", "Closed")]``."""
    return [(k, v.strip()) for k, v in _OPTION.findall(text.strip())]


@register_form("mmvp", detect=detect, benchmarks=("mmvp",),
               schema="github.com/tsb0601/MMVP (Questions.csv + MMVP Images/; the MMVP/MMVP Hub dataset files)",
               carries=('images', 'multiple choice'))
def read(path: Path, *, benchmark: str | None = None, **_) -> Dataset:
    csv = _csv(path)
    expected = "MMVP's Questions.csv (columns Index, Question, Options, Correct Answer)"
    rows = csv_rows(csv, expected, COLUMNS)
    folder = csv.parent / IMAGES
    if not folder.is_dir():
        raise refuse(csv, f"the folder '{IMAGES}' beside Questions.csv (MMVP's release layout)")
    ds = Dataset("mmvp", "mmvp", str(csv), [])
    unique = once(csv, "one row per Index")
    for n, r in enumerate(rows, 2):
        idx = r["Index"]
        where = f"row {n} (Index {idx or '?'})"
        if not idx.isdigit():
            ds.skipped.append((where, f"Index {idx!r} is not a number"))
            continue
        unique(idx, f"Index {idx}", f" at row {n}")
        opts = options(r["Options"])
        letter = re.sub(r"[^a-z]", "", r["Correct Answer"].lower())
        letters = [k for k, _ in opts]
        if len(opts) < 2:
            ds.skipped.append((where, f"options {r['Options']!r} are not '(a) ... (b) ...'"))
            continue
        if letter not in letters:
            ds.skipped.append((where, f"answer {r['Correct Answer']!r} is not one of the options {letters}"))
            continue
        img = image_in(folder, idx)
        if img is None:
            ds.skipped.append((where, f"no image {IMAGES}/{idx}.jpg"))
            continue
        ds.records.append(Record(id=idx, images=[str(img)], question=r["Question"], options=[t for _, t in opts],
                                 answer=letters.index(letter), root=str(csv.parent), meta={"letters": letters}))
    if not ds.records:
        raise refuse(csv, f"{expected} with at least one usable row ({len(ds.skipped)} skipped: "
                          f"{ds.skipped[0][1] if ds.skipped else 'no rows'})")
    _pair(ds, [int(r.id) for r in ds.records])
    return ds


def _pair(ds: Dataset, index: list[int]) -> None:
    """Questions ``index`` 2k-1 and 2k share group pair-k; a pair whose two rows ask different questions is said."""
    questions: dict[str, str | None] = {}
    for k, r in zip(index, ds.records):
        r.group = f"pair-{(k + 1) // 2}"
        if questions.setdefault(r.group, r.question) != r.question:
            ds.notes.append(f"{r.group}: its two rows ask different questions")


def pair_hub_copy(ds: Dataset) -> None:
    """MMVP's pairs on a Hub copy, which has no pair column: MMVP defines them by position, questions 2k-1 and
    2k asking the same thing of a CLIP-blind pair of images (the release reader's rule; lmms-eval's mmvp task
    derives ``pair_index = (Index - 1) // 2`` the same way): by the rows' 1-based ``Index`` values, else by the
    rows' order (said in the notes)."""
    index = [r.meta.get("Index", r.id) for r in ds.records] if "Index" in ds.columns else []
    whole = bool(index) and all(str(v).strip().isdigit() and int(v) >= 1 for v in index)
    _pair(ds, [int(v) for v in index] if whole else list(range(1, len(ds.records) + 1)))
    ds.notes.append("MMVP pairs: " + ("Index 2k-1 and 2k" if whole else "rows 2k-1 and 2k (no usable Index column)")
                    + " share pair-k")


# MMVP/MMVP holds the release's own files (read by the form above); lmms-lab-eval/MMVP parquet shards with the
# release's columns (its dataset card), the image embedded, no pair column
register_benchmark(Benchmark("mmvp", hub=("MMVP/MMVP", "lmms-lab-eval/MMVP"),
                             recognise=lambda ds: all(c in ds.columns for c in COLUMNS), hub_copy=pair_hub_copy))


def mmvp_outcomes(answers: list[Answer]) -> dict:
    whole = {g: qs for g, qs in grouped(answers).items() if len(qs) >= 2}
    return {"pair_accuracy": per_group(whole, lambda qs: str(qs[0].group)),
            "accuracy": {str(a.key): (float(a.correct), str(a.group or a.unit)) for a in answers
                         if a.key is not None}}


@declare("mmvp", "MMVP pair accuracy",
         "MMVP's evaluation (github.com/tsb0601/MMVP scripts/evaluate_mllm.py); lmms-eval's mmvp task",
         outcomes=mmvp_outcomes)
def pair_accuracy(answers: list[Answer]) -> dict:
    """The share of MMVP's pairs (the same question of the two images of a CLIP-blind pair) whose two questions
    are both right; a pair with one question answered (the other failed or is missing) is left out and counted.
    Its interval is clustered by pair (a pair is two images asked as one unit).  Question accuracy beside."""
    pairs = grouped(answers)
    whole = {g: qs for g, qs in pairs.items() if len(qs) >= 2}
    out = {"pair_accuracy": share([all(a.correct for a in qs) for qs in whole.values()], list(whole), "pair"),
           "accuracy": share([a.correct for a in answers], [a.group or a.unit for a in answers], "pair")}
    if len(whole) < len(pairs):
        out["notes"] = [f"{len(pairs) - len(whole)} pairs with one question answered, left out of pair accuracy"]
    return out
