"""VHExpansion's summary, folded one case at a time: per variant, accuracy and symmetric accuracy (Def. 3) with
clustered Wilson intervals by source image, the yes ratio, the new VH test cases and, with repeats, Table 6e/6f's
spread.  It keeps counters and per source image the sums the intervals need (metrics/clusters.py), so a million
cases fold in tens of MB, not the records' gigabytes.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from ..datasets.official import Tally, answer_of
from ..metrics.clusters import UnitSums, Units
from ..metrics.decisions import proportion_interval_counts
from ..metrics.measured import share_headline, unread_reason
from ..core.answers import read_yes_no
from ..metrics.stats import UNREAD_WARN_SHARE
from .blind import VHXBlind

UNIT = "source image"


class _Variant:
    """One variant's counters and per-image sums."""

    def __init__(self, name: str, units: Units, repeats: int) -> None:
        self.name = name
        self.acc = UnitSums(1, units)  # per image: answers right to the case's question
        self.sym = UnitSums(1, units)  # per image, over cases with a usable negation: both answers right
        self.yes = self.answers = self.neg_wrong = self.unread = 0
        self.reps = [[0, 0, 0, 0] for _ in range(repeats)] if repeats > 1 else None  # n, right, pairs, both right
        self.cosine = array("d")
        self.linf: float | None = None
        self.pairs: dict[str, list[int]] = {}  # MMVP pair -> [questions, answered right]

    def add(self, v: dict[str, Any], unit: str, pair: str | None = None) -> None:
        self.acc.add(unit, float(v["correct"]))
        if pair is not None:
            tally = self.pairs.setdefault(pair, [0, 0])
            tally[0] += 1
            tally[1] += bool(v["correct"])
        self.answers += 1
        self.yes += v["parsed"] == "yes"
        self.unread += read_yes_no(str(v.get("answer", ""))) is None
        if "neg_correct" in v:
            self.sym.add(unit, float(bool(v["correct"] and v["neg_correct"])))
            self.neg_wrong += not v["neg_correct"]
        if "neg_parsed" in v:
            self.answers += 1
            self.yes += v["neg_parsed"] == "yes"
            self.unread += read_yes_no(str(v.get("neg_answer", ""))) is None
        for tally, row in zip(self.reps or (), v.get("repeats", ())):
            tally[0] += 1
            tally[1] += bool(row["correct"])
            if "neg_correct" in row:
                tally[2] += 1
                tally[3] += bool(row["correct"] and row["neg_correct"])
        if self.name.startswith("adv_"):
            self.cosine.append(v["params"]["cosine_final"])
            linf = float(v["params"]["linf"])
            self.linf = linf if self.linf is None else max(self.linf, linf)

    def result(self) -> dict[str, Any]:
        n, right = self.acc.n, self.acc.total()
        # expanded cases: everything but the original question on the original image; the blind control is a
        # control, not an expanded test case
        wrong = 0 if self.name == "blind" else self.neg_wrong + (int(n - right) if self.name != "original" else 0)
        pairs = self.sym.n
        acc_ci, acc_how = proportion_interval_counts(self.acc.sums(), self.acc.sizes(), UNIT)
        sym_ci, sym_how = proportion_interval_counts(self.sym.sums(), self.sym.sizes(), UNIT) if pairs else (None, None)
        entry: dict[str, Any] = {
            "n": n, "accuracy": right / n, "accuracy_ci95": acc_ci,
            "symmetric_accuracy": self.sym.total() / pairs if pairs else None, "symmetric_accuracy_ci95": sym_ci,
            "intervals": {"accuracy": acc_how, "symmetric_accuracy": sym_how}, "n_pairs": pairs,
            "yes_ratio": self.yes / self.answers, "new_vh_cases": wrong,
            # answers whose first sentence had no yes/no word: POPE's rule scored them "yes" (its default)
            "n_answers": self.answers, "unread": self.unread, "unread_share": self.unread / self.answers}
        if self.pairs:  # MMVP's own metric: the share of its pairs whose questions were all answered right
            whole = [right == n for n, right in self.pairs.values() if n >= 2]  # a pair left incomplete: reported
            entry.update(pair_accuracy=sum(whole) / len(whole) if whole else None, n_mmvp_pairs=len(whole),
                         mmvp_pairs_incomplete=len(self.pairs) - len(whole))
        if self.reps is not None:  # each repetition's accuracy and symmetric accuracy, their mean and std (6e/6f)
            acc = [right / n if n else float("nan") for n, right, _, _ in self.reps]
            sym = [both / pairs if pairs else float("nan") for _, _, pairs, both in self.reps]
            entry["repeats"] = {"n": len(self.reps)}
            for key, xs in (("accuracy", acc), ("symmetric_accuracy", sym)):
                entry["repeats"][key] = {"values": xs, "mean": float(np.mean(xs)), "std": float(np.std(xs))}
        if self.name.startswith("adv_"):
            entry["cosine_final_mean"] = float(np.mean(np.frombuffer(self.cosine)))
            entry["linf_max"] = self.linf
        return entry


def official_answer(rec: dict[str, Any]) -> tuple[str | None, Any] | None:
    """(benchmark, Answer) of a finished case toward its benchmark's official figure (datasets/official.py), or
    None: the case's own question on the original image.  The summary and ``compare`` both read cases so."""
    r = rec.get("result") or {}
    meta = r.get("meta") or {}
    orig = (r.get("variants") or {}).get("original")
    if orig is None or not meta.get("official"):
        return None
    return answer_of(meta, unit=str(r.get("image")), correct=orig["correct"], category=meta.get("category"),
                     said_yes=orig.get("parsed") == "yes", truth_yes=r.get("answer") == "yes",
                     key=str(rec["sample_id"]) if rec.get("sample_id") is not None else None)


class VHXSummary:
    """``add(record)`` each finished case, then ``result(failed)``: the ``metrics`` of results.json."""

    def __init__(self, perturb: list[str], attack: str | None, repeats: int) -> None:
        self.order = ["original", *perturb, f"adv_{attack}", "blind"]
        self.repeats = repeats
        self.units = Units()
        self.variants: dict[str, _Variant] = {}
        self.blind = VHXBlind(self.units)
        self.n = self.neg_ok = self.yes_cases = 0
        self.official = Tally()

    def add(self, rec: dict[str, Any]) -> None:
        r = rec["result"]
        unit = str(r.get("image"))  # the sampled unit: the source image
        self.n += 1
        self.neg_ok += bool(r["negation"].get("ok", False))
        self.yes_cases += r["answer"] == "yes"
        pair = (r.get("meta") or {}).get("pair")
        for name, v in r["variants"].items():
            var = self.variants.get(name)
            if var is None:
                var = self.variants[name] = _Variant(name, self.units, self.repeats)
            var.add(v, unit, None if pair is None else str(pair))
        got = official_answer(rec)
        if got is not None:
            self.official.add(*got)
        self.blind.add(r)

    def result(self, failed: list[dict[str, Any]] = ()) -> dict[str, Any]:
        if not self.n:
            return {"n": 0}
        out: dict[str, Any] = {"n_cases": self.n, "negation": {"ok": self.neg_ok, "failed": self.n - self.neg_ok},
                               "variants": {}, "share_yes_cases": self.yes_cases / self.n}
        for name in self.order:
            if name in self.variants:
                out["variants"][name] = self.variants[name].result()
        out["new_vh_cases_total"] = sum(v["new_vh_cases"] for v in out["variants"].values())
        if "blind" in self.variants:
            out["blind"] = self.blind.result()
        warn = [f"{name}: {v['unread']} of {v['n_answers']} answers"
                for name, v in out["variants"].items() if v["unread_share"] > UNREAD_WARN_SHARE]
        if warn:
            out["unread_warning"] = (
                f"more than {UNREAD_WARN_SHARE:.0%} of the answers held no yes/no word in their first sentence "
                f"({'; '.join(warn)}); POPE's rule scored them 'yes', so these accuracies measure the parser, "
                "not the model")
        official = self.official.result()
        if official is not None:
            out["official"] = official
        orig = out["variants"].get("original") or {}
        if orig.get("symmetric_accuracy") is not None:
            # a measurement only where the parser read the floor's share of the answers (metrics/measured.py):
            # below it, POPE's rule scored most of them "yes" and the figure is the parser's
            sym = self.variants["original"].sym
            out["headline"] = share_headline("symmetric accuracy", sym.sums(), sym.sizes(), UNIT,
                                             unread_reason({"original": 1 - orig["unread_share"]}))
        return out
