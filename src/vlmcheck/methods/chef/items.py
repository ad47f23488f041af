"""ChEF's item results as columns: what its summary and headline read of each finished item (about 20 bytes a
setting and 30 an item, against 2-11 kB for a record).  The turn scenarios keep each item's turns and the language
desideratum its judgements (without free text), which their metrics read whole.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ...metrics.clusters import Units

_COLUMNS = {"correct": "b", "extracted": "b", "rule": "b", "unread": "b", "pred": "q", "conf": "d", "has_conf": "b",
            "ans0": "b"}
_TURN_FIELDS = ("role", "correct", "label", "values", "pred")  # what methods/chef/turns.summarize_turns reads
_PRIMARY = ("original", "standard", "shots=0")


def primary_setting(names: Sequence[str]) -> str:
    """The setting a desideratum's own metric reads (and the blind control is compared with), by name, never by
    position (docs/methods.md, "--blind"): the unmanipulated question, else the first setting but "blind"."""
    for name in _PRIMARY:
        if name in names:
            return name
    return next(n for n in names if n != "blind")


@dataclass
class Items:
    units: np.ndarray  # each item's unit number (labels[i] is its label)
    labels: list[str]
    n_options: np.ndarray
    names: list[str]  # the settings, in the first item's order with "blind" last
    cols: dict[str, dict[str, np.ndarray]]  # setting -> column -> values
    pred0: int  # the code of the prediction 0 (-1: none predicted 0)
    group: np.ndarray  # MMBench CircularEval group number, -1 for none
    rot0: np.ndarray  # the item is rotation 0 (VanillaEval)
    requests: set[str] = field(default_factory=set)  # what the blind setting's requests carried
    turns: list[dict[str, Any]] | None = None
    judge: list[dict[str, Any]] | None = None
    #: setting -> {"openings": {first words: count}, "cut": n} of its unread answers (the warning's hint)
    unread_seen: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.units)

    @property
    def primary(self) -> str:
        return primary_setting(self.names)

    def take(self, idx: np.ndarray) -> Items:
        pick = lambda xs: None if xs is None else [xs[i] for i in idx]  # noqa: E731
        return Items(self.units[idx], self.labels, self.n_options[idx], self.names,
                     {n: {k: v[idx] for k, v in c.items()} for n, c in self.cols.items()}, self.pred0,
                     self.group[idx], self.rot0[idx], self.requests, pick(self.turns), pick(self.judge),
                     self.unread_seen)

    @staticmethod
    def concat(parts: Sequence[Items]) -> Items:
        first = parts[0]
        cat = lambda get: np.concatenate([get(p) for p in parts])  # noqa: E731
        joined = lambda get: None if get(first) is None else [x for p in parts for x in get(p)]  # noqa: E731
        return Items(cat(lambda p: p.units), first.labels, cat(lambda p: p.n_options), first.names,
                     {n: {k: cat(lambda p: p.cols[n][k]) for k in c} for n, c in first.cols.items()}, first.pred0,
                     cat(lambda p: p.group), cat(lambda p: p.rot0), set().union(*(p.requests for p in parts)),
                     joined(lambda p: p.turns), joined(lambda p: p.judge), _merged([p.unread_seen for p in parts]))

    @classmethod
    def of(cls, results: list[dict[str, Any]]) -> Items:
        """The columns of a list of item results (turns and judgements kept where the results have them)."""
        b = ItemsBuilder(keep_turns=any("turns" in s for r in results[:1] for s in r["settings"].values()),
                         keep_judge=any("judge" in r for r in results))
        for r in results:
            b.add(r)
        return b.items()


def opening(text: Any, words: int = 3) -> str:
    """An answer's first words, lower case, without punctuation: what unread answers have in common."""
    return " ".join(re.findall(r"[\w']+", str(text or "").lower())[:words]) or "(empty)"


def _merged(parts: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for name, seen in part.items():
            o = out.setdefault(name, {"openings": Counter(), "cut": 0})
            o["cut"] += seen["cut"]
            o["openings"].update(seen["openings"])
    return out


class ItemsBuilder:
    """Appends item results as columns.  Builders that share ``units`` and ``codes`` make tables that
    :meth:`Items.concat` can join (the repeats of one run)."""

    def __init__(self, keep_turns: bool = False, keep_judge: bool = False, units: Units | None = None,
                 codes: dict[Any, int] | None = None, groups: Units | None = None) -> None:
        self.units = units if units is not None else Units()
        self.codes = codes if codes is not None else {}  # prediction -> its code
        self.groups = groups if groups is not None else Units()
        self.unit = array("q")
        self.n_options = array("d")
        self.group = array("q")
        self.rot0 = array("b")
        self.names: list[str] | None = None
        self.cols: dict[str, dict[str, array]] = {}
        self.requests: set[str] = set()
        self.turns: list[dict[str, Any]] | None = [] if keep_turns else None
        self.judge: list[dict[str, Any]] | None = [] if keep_judge else None
        self.unread_seen: dict[str, dict[str, Any]] = {}

    def _code(self, pred: Any) -> int:
        try:
            return self.codes.setdefault(pred, len(self.codes))
        except TypeError:  # an unhashable prediction: equal when its text is
            return self.codes.setdefault(repr(pred), len(self.codes))

    def add(self, r: dict[str, Any]) -> None:
        settings = r["settings"]
        if self.names is None:
            self.names = [n for n in settings if n != "blind"] + (["blind"] if "blind" in settings else [])
            self.cols = {n: {k: array(t) for k, t in _COLUMNS.items()} for n in self.names}
        self.unit.append(self.units(str(r.get("image") or r.get("id"))))
        self.n_options.append(r["n_options"])
        meta = r["meta"]
        g = meta.get("group")
        self.group.append(self.groups(str(g)) if g is not None and "rotation" in meta else -1)
        self.rot0.append(meta.get("rotation") == 0)
        for name in self.names:
            x, c = settings[name], self.cols[name]
            c["correct"].append(bool(x["correct"]))
            c["extracted"].append(bool(x.get("extracted", False)))
            c["rule"].append(x.get("extracted_by", "rule") == "rule")
            unread = bool(x.get("unread", not x.get("extracted", False)))  # unread: a generated answer
            c["unread"].append(unread)
            if unread and "answer_text" in x:
                seen = self.unread_seen.setdefault(name, {"openings": Counter(), "cut": 0})
                seen["openings"][opening(x["answer_text"])] += 1
                seen["cut"] += bool(x.get("cut"))
            c["pred"].append(self._code(x.get("pred")))
            conf = x.get("confidence")
            c["conf"].append(float("nan") if conf is None else float(conf))
            c["has_conf"].append(conf is not None)
            c["ans0"].append(x.get("answer") == 0)
        if "blind" in settings:
            self.requests.add("no image" if settings["blind"].get("blind") == "no image" else "grey image")
        if self.turns is not None:
            first = settings[primary_setting(self.names)]
            self.turns.append({"turns": [{k: t[k] for k in _TURN_FIELDS if k in t}
                                         for t in first.get("turns", [])], "meta": meta})
        if self.judge is not None:
            j = r.get("judge", {})
            self.judge.append({k: v for k, v in j.items() if not k.startswith("raw")} if isinstance(j, dict) else j)

    def items(self) -> Items:
        names = self.names or []
        cols = {n: {k: np.array(v, dtype=bool if _COLUMNS[k] == "b" else None) for k, v in c.items()}
                for n, c in self.cols.items()}
        zero = next((code for value, code in self.codes.items() if type(value) is not str and value == 0), -1)
        return Items(np.array(self.unit, dtype=np.int64), self.units.labels(), np.array(self.n_options), names, cols,
                     zero, np.array(self.group, dtype=np.int64), np.array(self.rot0, dtype=bool), set(self.requests),
                     None if self.turns is None else list(self.turns), None if self.judge is None else list(self.judge),
                     _merged([self.unread_seen]))


def first_appearance(units: np.ndarray) -> np.ndarray:
    """The unit numbers present in ``units``, in the order they first appear."""
    present, first = np.unique(units, return_index=True)
    return present[np.argsort(first, kind="stable")]


def unit_counts(units: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per unit present in ``units``, in order of first appearance: the sum of ``values`` and the count."""
    order = first_appearance(units)
    k = np.bincount(units, weights=values.astype(float))[order]
    n = np.bincount(units)[order].astype(float)
    return k, n
