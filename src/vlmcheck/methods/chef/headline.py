"""A ChEF run's headline with its 95 % interval (issue 34): which figure leads each desideratum and how its
interval is made.

The sampled unit is the item's image: its settings, ICE draws and (POPE) its questions move together.
Proportions (accuracy, POPE accuracy, VanillaEval) use the clustered Wilson interval, which never has zero width;
the ratios and composite scores (RRM, RIAM, match ratio, 1 - ECE, the turn scenarios' metrics, the judge's score)
use a cluster bootstrap that recomputes the figure from the resampled items with the same functions as the run.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...metrics.decisions import (cluster_bootstrap, headline_entry, krippendorff_alpha_interval, proportion_interval,
                                  widen_degenerate)
from . import metrics as M

UNIT = "item (its image)"
_NAMES = {"weighted_accuracy": "WeightedACC", "grounding_accuracy": "grounding accuracy (mAP@0.5)"}


def _unit(r: dict[str, Any]) -> str:
    return str(r.get("image") or r.get("id"))


def _boot(res: list[dict[str, Any]], name: str, value: float | None, statistic: Callable, seed: int,
          bounded: bool = False) -> dict[str, Any]:
    """``bounded``: the figure lies in [0, 1] (WeightedACC, mAP, 1 - ECE), so a bootstrap of zero width (every
    item perfect) becomes the Wilson bound on the number of images (metrics/decisions.widen_degenerate)."""
    ci, n_ok = cluster_bootstrap(res, [_unit(r) for r in res], statistic, seed=seed)
    n_units = len({_unit(r) for r in res})
    widened = False
    if bounded:
        ci, widened = widen_degenerate(ci, value, n_units)
    how = {"method": "wilson bound on the images (every resample gave the same figure)" if widened else
           "cluster bootstrap, recomputing the figure from resampled items", "unit": UNIT,
           "n_units": n_units, "n_resamples_defined": n_ok}
    return headline_entry(name, value, ci, how)


def _accuracy(res: list[dict[str, Any]], setting: str) -> float:
    return float(np.mean([r["settings"][setting]["correct"] for r in res]))


def _riam(res: list[dict[str, Any]]) -> float | None:
    shots = {int(k.split("=")[1]): _accuracy(res, k) for k in res[0]["settings"] if k.startswith("shots=")}
    rand = M.random_accuracy(r["n_options"] for r in res)
    if 0 not in shots or len(shots) < 2 or shots[0] == rand:
        return None
    return M.riam(shots[0], [shots[k] for k in sorted(shots) if k > 0], rand)


def _rrm_both(res: list[dict[str, Any]]) -> float | None:
    rand = M.random_accuracy(r["n_options"] for r in res)
    orig = _accuracy(res, "original")
    return None if orig == rand else M.rrm(orig, _accuracy(res, "corrupt:both"), rand)


def _mr_weighted(res: list[dict[str, Any]]) -> float:
    base = [r["settings"]["original"]["pred"] for r in res]
    groups: dict[str, list[float]] = {}
    for name in res[0]["settings"]:
        if name not in ("original", "blind"):
            groups.setdefault(name.split(":")[0], []).append(
                M.match_ratio(base, [r["settings"][name]["pred"] for r in res]))
    weights = {g: len(v) for g, v in groups.items()}
    return float(sum(np.mean(v) * weights[g] for g, v in groups.items()) / sum(weights.values()))


def chef_headline(res: list[dict[str, Any]], out: dict[str, Any], desideratum: str, n_bins: int, turn_task: str | None,
                  seed: int = 0) -> dict[str, Any] | None:
    """The headline entry of a ChEF run from its item results ``res`` and its summary ``out`` (see the module
    docstring); the figure and its name are the ones :func:`vlmcheck.methods.headline.headline` reads."""
    if not res:
        return None
    first = next(iter(res[0]["settings"]))
    turn_key = out.get("turn_metric")
    if turn_key in out:  # Omnibenchmark, VOC2012
        from .turns import summarize_turns

        def turns_stat(rs: list[dict[str, Any]]) -> float | None:
            return summarize_turns([{"turns": r["settings"][first]["turns"], "meta": r["meta"]} for r in rs],
                                   turn_task or "")[turn_key]

        return _boot(res, _NAMES[turn_key], out[turn_key], turns_stat, seed, bounded=True)
    if out.get("vanilla_accuracy") is not None:  # MMBench: VanillaEval (rotation 0) is the headline
        rows = [r for r in res if r["meta"].get("rotation") == 0]
        ci, how = proportion_interval([next(iter(r["settings"].values()))["correct"] for r in rows],
                                      [_unit(r) for r in rows], UNIT)
        return headline_entry("VanillaEval accuracy", out["vanilla_accuracy"], ci, how)
    if "overall" in out:  # calibration: 1 - ECE (Table 8)
        def overall(rs: list[dict[str, Any]]) -> float | None:
            rows = [r["settings"][first] for r in rs if r["settings"][first]["confidence"] is not None]
            if not rows:
                return None
            return 1 - M.ece_equal_count([x["confidence"] for x in rows], [x["correct"] for x in rows], n_bins)["ece"]

        return _boot(res, "overall", out["overall"], overall, seed, bounded=True)
    if "riam" in out:
        return _boot(res, "riam", out["riam"], _riam, seed)
    if "mr_weighted" in out:
        return _boot(res, "mr_weighted", out["mr_weighted"], _mr_weighted, seed)
    if "pope" in out:
        p = out["pope"]
        return headline_entry("POPE accuracy", p["accuracy"], p["accuracy_ci95"], p["interval"])
    if isinstance(out.get("rrm"), dict) and "both" in out["rrm"]:
        return _boot(res, "RRM (image and text corrupted)", out["rrm"]["both"], _rrm_both, seed)
    if desideratum == "language" and (out.get("language") or {}).get("score") is not None:
        def judged(rs: list[dict[str, Any]]) -> float | None:
            vals = [r["judge"]["mean"] for r in rs if (r.get("judge") or {}).get("mean") is not None]
            return float(np.mean(vals)) if vals else None

        return _boot(res, "language score (judge)", out["language"]["score"], judged, seed)
    st = out["settings"][first]
    return headline_entry("accuracy", st["accuracy"], st["accuracy_ci95"], st["interval"])


def judge_agreement(judged: list[dict[str, Any]]) -> dict[str, Any]:
    """How far the judge's sampled judgements of one answer agree (ChEF E.4 averages 5 of them per item): their
    spread (mean over items of the standard deviation of an item's scores) and Krippendorff's alpha (interval)
    over items; with a second judge, judge-to-judge agreement on the item means (Spearman's rho, mean absolute
    difference, alpha)."""
    out: dict[str, Any] = {}
    many = [j["scores"] for j in judged if len(j.get("scores") or []) >= 2]
    if many:
        out["judge_spread"] = float(np.mean([np.std(s) for s in many]))
        out["judge_agreement"] = {"krippendorff_alpha_interval": krippendorff_alpha_interval(many),
                                  "n_items": len(many), "judgements_per_item": max(len(s) for s in many)}
    both = [(j["mean"], j["mean2"]) for j in judged if j.get("mean2") is not None]
    if both:
        from scipy.stats import spearmanr

        a, b = np.array(both).T
        rho = float(spearmanr(a, b).statistic) if len(both) > 2 and a.std() > 0 and b.std() > 0 else None
        out["judge_to_judge"] = {"score_second": float(b.mean()), "spearman": rho,
                                 "mean_abs_difference": float(np.abs(a - b).mean()), "n_items": len(both),
                                 "krippendorff_alpha_interval": krippendorff_alpha_interval([list(x) for x in both])}
    return out
