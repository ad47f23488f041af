"""Rows of a table (a Hub dataset, a VLMEvalKit TSV) as :class:`~.base.Record` s: which column plays which role
(:data:`DEFAULTS`: the names the published schemas use, docs/datasets.md; ``?ROLE_column=NAME`` names another)."""

from __future__ import annotations

import math
import re
from typing import Any

from .base import DatasetFormError, Record

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

#: role -> the column names that play it, first match wins (case-insensitive)
DEFAULTS: dict[str, tuple[str, ...]] = {
    "id": ("question_id", "id", "index", "data_id", "example_id", "idx", "pid"),
    "question": ("question", "text", "query"),
    "options": ("options", "choices"),
    "answer": ("answer", "label", "correct answer", "correct_answer", "gt_answer"),
    "hint": ("hint",),
    "category": ("category", "l2-category", "question_type", "subject"),
    "split": ("split",),
    "description": ("description", "caption", "captions", "sentences"),
    "group": ("pair_id", "group"),
}


class Refused(ValueError):
    """A row whose images are refused before any is stored (the reason is the message)."""


def blank(v: Any) -> bool:
    """A cell with nothing in it: None, "", "nan" (pandas writes missing cells so) or a float NaN."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    return isinstance(v, str) and v.strip() in ("", "nan", "NaN", "None")


class Columns:
    """The columns of one table resolved to roles once; ``chosen``: the ``ROLE_column`` options the user gave."""

    def __init__(self, names: list[str], chosen: dict[str, str] | None = None, skip: tuple[str, ...] = ()) -> None:
        chosen = chosen or {}
        lower = {n.lower(): n for n in names if n not in skip}
        self.role: dict[str, str | None] = {}
        for role, candidates in DEFAULTS.items():
            named = chosen.get(f"{role}_column")
            if named is not None:
                if named not in names:
                    raise DatasetFormError(f"{role}_column={named!r}: no such column (columns: {', '.join(names)})")
                self.role[role] = named
            else:
                self.role[role] = next((lower[c] for c in candidates if c in lower), None)
        choice = sorted((n for n in names if n.lower().startswith("choice_") and len(n) == 8
                         and n[-1].upper() in LETTERS), key=lambda n: n[-1].upper())
        self.letters = sorted((n for n in names if len(n) == 1 and n in LETTERS), key=LETTERS.index) or choice
        used = {c for c in self.role.values() if c} | set(self.letters) | set(skip)
        self.rest = [n for n in names if n not in used]

    def describe(self) -> str:
        parts = [f"{r}={c}" for r, c in self.role.items() if c]
        if self.letters:
            parts.append(f"options={self.letters[0]}..{self.letters[-1]}")
        return ", ".join(parts)


def answer_index(answer: Any, options: list[str], letters: list[str] | None = None) -> Any:
    """An option index from a letter (``"B"``, ``"(b)"``), an index or an option's text, else the answer as it is."""
    if blank(answer):
        return None
    if isinstance(answer, int):  # an index (or a bool) as it is
        return answer
    a = str(answer).strip()
    letter = a.strip("()").strip().upper()
    if letters and letter in [x[-1].upper() for x in letters]:
        return [x[-1].upper() for x in letters].index(letter)
    if len(letter) == 1 and letter in LETTERS[:len(options)]:
        return LETTERS.index(letter)
    if a in options:
        return options.index(a)
    return a


def record(row: dict[str, Any], cols: Columns, rid: str, images: list[str], root: str | None,
           split: str | None = None) -> Record:
    """One row as a Record (images already resolved to paths by the caller)."""
    g = cols.role
    present = [L for L in cols.letters if not blank(row.get(L))]  # blank letter cells are no option
    options = [str(row[L]) for L in present]
    listed = row.get(g["options"]) if g["options"] and not cols.letters else None
    if isinstance(listed, (list, tuple)):
        options = [str(o) for o in listed]
    elif isinstance(listed, str):  # MMVP: "(a) Open (b) Closed"
        found = re.findall(r"\(([a-z])\)\s*([^()]+?)\s*(?=\([a-z]\)|$)", listed.strip())
        options = [text for _, text in found]
        present = [f"choice_{letter}" for letter, _ in found]
    answer = row.get(g["answer"]) if g["answer"] else None
    answer = answer_index(answer, options, present or None) if options else (None if blank(answer) else answer)
    if isinstance(answer, str):
        answer = answer.strip()

    def text(role: str) -> str | None:
        c = g[role]
        v = row.get(c) if c else None
        return None if blank(v) else str(v)

    desc = row.get(g["description"]) if g["description"] else None
    meta = {k: row[k] for k in cols.rest if isinstance(row.get(k), (str, int, float, bool, list)) and not blank(row[k])}
    if isinstance(desc, list):  # Flickr30k: five captions; the first is the description, all kept in meta
        meta["captions"] = [str(d) for d in desc]
        desc = str(desc[0]) if desc else None
    if g["category"] != "l2-category" and not blank(row.get("l2-category")):
        meta["l2-category"] = str(row["l2-category"])
    return Record(id=rid, images=images, question=text("question"), options=options, answer=answer,
                  hint=text("hint"), category=text("category"), split=text("split") or split, group=text("group"),
                  description=None if blank(desc) else str(desc), meta=meta, root=root)


def check_unique(records: list[Record], source: str, column: str) -> None:
    """Duplicate ids refused, in one sentence."""
    seen: dict[str, int] = {}
    for n, r in enumerate(records):
        if r.id in seen:
            raise DatasetFormError(f"{source}: duplicate id {r.id!r} (rows {seen[r.id] + 1} and {n + 1} of column "
                                   f"{column!r}; name a unique id column with ?id_column=...)")
        seen[r.id] = n
