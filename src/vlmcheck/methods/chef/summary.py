"""A ChEF run's summary (the ``metrics`` of results.json) from its items' columns (``items.py``): per setting
accuracy with its interval, match ratios and unread answers; the desideratum's metric (supplementary C.1-C.6);
MMBench's CircularEval and VanillaEval; the turn scenarios' metrics; the blind control; the headline.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ...datasets.official import Tally, answer_of
from ...metrics.clusters import UnitSums, Units
from ...metrics.decisions import proportion_interval_counts
from ..blind import blind_block_sums
from ..repeats import spread
from . import metrics as M
from .headline import UNIT, _mr_weighted, _riam, blank_unmeasured, chef_headline, judge_agreement
from .inferencers import INFERENCERS
from .items import Items, ItemsBuilder, primary_setting, unit_counts
from .recipe import POOL_OF_SCENARIO
from .turns import summarize_turns


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x))


#: above this share of a setting's answers that the parser could not read, the summary says so: one
#: unread answer in ten already moves an accuracy by up to 0.1, more than most differences between models
UNREAD_WARN = 0.10


def _inferencer_note(recipe: Any, used: str) -> str | None:
    """What a run gives up when its inferencer is not the recipe's (the paper's) default."""
    default = recipe.inferencer.type
    if used == default:
        return None
    cost = (" - generated answers read by a parser: no confidence, and an answer it cannot read counts as wrong"
            if INFERENCERS[used].generates_answer and not INFERENCERS[default].generates_answer else "")
    return f"the {used} inferencer instead of the recipe's {default}{cost}"


def _unread_warning(per: dict[str, Any], yes_no: bool, seen: dict[str, dict[str, Any]],
                    extractor: str | None) -> str | None:
    """The warning where the parser could not read over ``UNREAD_WARN`` of a setting's answers, with what the
    unread answers have in common (their most common first words) and what would read them."""
    high = {n: v["unread_share"] for n, v in per.items() if v["unread_share"] > UNREAD_WARN}
    if not high:
        return None
    listing = ", ".join(f"{n} {v:.0%}" for n, v in high.items())
    counted = "as POPE's default, yes" if yes_no else "as wrong"
    out = (f"the parser could not read over {UNREAD_WARN:.0%} of the answers ({listing}); they count {counted}, "
           "so the accuracy says as much about the answer format as about the model")
    parts = [seen.get(name) or {} for name in high]
    cut = sum(p.get("cut", 0) for p in parts)
    openings = sum((Counter(p.get("openings") or {}) for p in parts), Counter())
    unread = sum(openings.values())
    if openings:
        top = sorted(openings.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        out += "; they most often begin " + ", ".join(f"'{k}' ({n} of {unread})" for k, n in top)
    if yes_no:
        fixes = "an instruction that asks for yes or no, or the ppl inferencer where the server gives likelihoods"
    elif extractor:
        fixes = (f"the extractor {extractor} read none of them either: an instruction that asks for the option's "
                 "label, or the ppl inferencer where the server gives likelihoods")
    else:
        fixes = ("--extractor MODEL (an LLM maps each answer to an option, as MMBench's evaluation does), an "
                 "instruction that asks for the option's label, or the ppl inferencer where the server gives "
                 "likelihoods")
    out += f"; to read them: {fixes}"
    if cut:
        out += f"; {cut} stopped at the answer's token limit (finish_reason length): the answer may come after it"
    return out


def summarize_items(it: Items, recipe: Any, turn_task: str | None, seed: int,
                    inferencer: str | None = None) -> dict[str, Any]:
    d = recipe.desideratum
    used = inferencer or recipe.inferencer.type
    out: dict[str, Any] = {"recipe": recipe.name, "desideratum": d, "inferencer": used,
                           "answers_generated": INFERENCERS[used].generates_answer, "n": len(it)}
    note = _inferencer_note(recipe, used)
    if note:
        out["inferencer_note"] = note
    if not len(it):
        return out
    acc_random = M.random_accuracy(it.n_options)
    out["acc_random"] = acc_random
    per = {}
    for name in it.names:
        c = it.cols[name]
        ci, how = proportion_interval_counts(*unit_counts(it.units, c["correct"]), "item (its image)")
        per[name] = {"accuracy": _mean(c["correct"]), "accuracy_ci95": ci, "interval": how,
                     "match_ratio": _mean(c["extracted"]), "match_ratio_rule": _mean(c["rule"]),
                     "unread": int(c["unread"].sum()), "unread_share": _mean(c["unread"])}
    warning = _unread_warning(per, POOL_OF_SCENARIO.get(recipe.scenario.type) == "yesno", it.unread_seen,
                              recipe.metric.extractor)
    if warning:
        out["unread_warning"] = warning
    blind = per.pop("blind", None)
    out["settings"] = per
    first = it.primary
    if blind is not None:
        pairs = UnitSums.of([it.labels[u] for u in it.units], it.cols[first]["correct"], it.cols["blind"]["correct"])
        out["blind"] = {**blind_block_sums(pairs, UNIT), "sighted_setting": first, "request": sorted(it.requests)}
    grouped = it.group >= 0
    if grouped.any():  # MMBench: CircularEval needs every rotation right; VanillaEval asks rotation 0 only
        right = it.cols[first]["correct"]
        k_g, n_g = unit_counts(it.group[grouped], right[grouped])
        out["circular_accuracy"] = _mean(k_g == n_g)
        out["vanilla_accuracy"] = _mean(right[it.rot0])
    if turn_task:
        out.update(summarize_turns(it.turns or [], turn_task))
    c = it.cols[first]
    if d == "calibration" and not c["has_conf"].any():  # a generation inferencer: answers without confidence
        out.update(ece=None, overall=None, accuracy=per[first]["accuracy"],
                   calibration_note=f"no ECE: the {used} inferencer gives no confidence (a likelihood inferencer, "
                                    "ppl or cot_ppl, does)")
    elif d == "calibration":
        cal = M.ece_equal_count(c["conf"][c["has_conf"]], c["correct"][c["has_conf"]], recipe.metric.n_bins)
        out.update(ece=cal["ece"], overall=1 - cal["ece"], reliability=cal["bins"], accuracy=per[first]["accuracy"])
    elif d == "icl" or recipe.instruction.type == "ice":
        if "shots=0" in per and len(per) > 1:
            # defined above chance only: its normalisation divides by (acc_0 - chance), which flips sign below
            out["riam"] = _riam(it) if per["shots=0"]["accuracy"] > acc_random else None
    elif d == "instruction_following":
        base = it.cols["original"]["pred"]
        mr: dict[str, list[float]] = {}
        for name in per:
            if name != "original":
                mr.setdefault(name.split(":")[0], []).append(_mean(base == it.cols[name]["pred"]))
        out["match_ratio"] = {g: float(np.mean(v)) for g, v in mr.items()}
        out["mr_weighted"] = _mr_weighted(it)  # each group weighted by its verbalizers: their plain mean
        out["acc_vm"] = float(np.mean([per[n]["accuracy"] for n in per if n != "original"]))
    elif d == "robustness":
        orig = per["original"]["accuracy"]
        # defined above chance only: (acc_crp - chance) / (acc_orig - chance) x 100 flips sign below it
        out["rrm"] = {n.split(":")[1]: (M.rrm(orig, v["accuracy"], acc_random) if orig > acc_random else None)
                      for n, v in per.items() if n != "original"}
    elif d == "hallucination":
        out["pope"] = M.pope_metrics(c["pred"] == it.pred0, c["ans0"])
        out["pope"]["accuracy_ci95"], out["pope"]["interval"] = proportion_interval_counts(
            *unit_counts(it.units, c["correct"]), "image (its questions)")
    elif d == "language":
        judges = it.judge or []
        judged = [j for j in judges if j.get("mean") is not None]
        skipped = dict(Counter(j["skipped"] for j in judges if j.get("skipped")))
        out["language"] = {"score": float(np.mean([j["mean"] for j in judged])) if judged else None,
                           "judged": len(judged), "skipped": skipped, **judge_agreement(judged)}
    out["headline"] = chef_headline(it, out, d, recipe.metric.n_bins, turn_task, seed)
    blank_unmeasured(out)
    return out


def official_answer(rec: dict[str, Any]) -> tuple[str | None, Any] | None:
    """(benchmark, Answer) of a finished item toward its benchmark's official figure (datasets/official.py), or
    None: the unmanipulated setting's answer, the first repeat's; a yes/no item (options Yes, No) says whether the
    model said yes.  The summary and ``compare`` both read items through this."""
    r = rec.get("result") or {}
    meta = r.get("meta") or {}
    if not meta.get("official") or "turns" in r or not r.get("settings"):
        return None
    x = r["settings"][primary_setting([n for n in r["settings"] if n != "blind"])]
    yes_no = bool(meta.get("pope"))
    pred = x.get("pred")
    return answer_of(meta, unit=str(r.get("image") or r.get("id")), correct=x["correct"],
                     category=meta.get("category"), copy=meta.get("rotation", 0),
                     said_yes=(type(pred) is not str and pred == 0) if yes_no else None,
                     truth_yes=x.get("answer") == 0 if yes_no else None,
                     key=str(rec["sample_id"]) if rec.get("sample_id") is not None else None)


class ChefSummary:
    """``add(record)`` each finished item, then ``result(failed)``: the ``metrics`` of results.json.  With repeats,
    one table per repeat (sharing units and prediction codes, so that they pool)."""

    def __init__(self, recipe: Any, turn_task: str | None, seed: int, repeats: int = 1,
                 temperature: float = 0.0, inferencer: str | None = None) -> None:
        self.recipe, self.turn_task, self.seed, self.inferencer = recipe, turn_task, seed, inferencer
        self.repeats, self.temperature = repeats, temperature
        units, codes, groups = Units(), {}, Units()
        self.tables = [ItemsBuilder(keep_turns=bool(turn_task), keep_judge=recipe.desideratum == "language",
                                    units=units, codes=codes, groups=groups) for _ in range(repeats)]
        self.official = Tally()

    def add(self, rec: dict[str, Any]) -> None:
        r = rec["result"]
        self.tables[0].add(r)
        if (got := official_answer(rec)) is not None:
            self.official.add(*got)
        for k, again in enumerate(r.get("repeats", ())[:self.repeats - 1], start=1):
            self.tables[k].add(again)

    def result(self, failed: list[dict[str, Any]] = ()) -> dict[str, Any]:
        tables = [b.items() for b in self.tables]
        summary = lambda it: summarize_items(it, self.recipe, self.turn_task, self.seed, self.inferencer)  # noqa: E731
        out = summary(tables[0])
        if (official := self.official.result()) is not None:
            out["official"] = official
        if self.repeats > 1 and len(tables[0]):  # the headline per repeat beside; the headline pools each item's
            per = [summary(t).get("headline") or {} for t in tables]
            out["repeats"] = spread([h.get("value") for h in per], self.temperature)
            head = summary(Items.concat([t for t in tables if len(t)])).get("headline")
            if head and head.get("interval") is not None:
                out["headline"] = {**head, "interval": {**head["interval"], "repeats": self.repeats}}
            elif head:  # not measured over the pooled repeats: said, and its figure blanked
                out["headline"] = head
                blank_unmeasured(out)
        return out
