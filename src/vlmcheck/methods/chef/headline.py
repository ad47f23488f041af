"""A ChEF run's headline with its 95 % interval: which figure leads each desideratum and how its interval is made
(docs/methods.md, "Every method").  The sampled unit is the item's image: its settings, ICE draws and (POPE) its
questions move together.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...metrics.decisions import (cluster_bootstrap_groups, headline_entry, krippendorff_alpha_interval,
                                 too_few_units, widen_degenerate, wilson_clustered)
from ...metrics.measured import not_measured, share_headline, unread_reason
from . import metrics as M
from .items import Items, first_appearance, unit_counts
from .turns import summarize_turns

UNIT = "item (its image)"
_NAMES = {"weighted_accuracy": "WeightedACC", "grounding_accuracy": "grounding accuracy (mAP@0.5)"}


def _cluster_bootstrap(it: Items, statistic: Callable[[Items], float | None],
                       seed: int) -> tuple[list[float] | None, int]:
    """metrics.decisions.cluster_bootstrap on columns: the same draws of whole units, in the same order."""
    order = first_appearance(it.units)
    number = np.empty(int(it.units.max()) + 1 if len(it.units) else 0, dtype=np.int64)
    number[order] = np.arange(len(order))
    return cluster_bootstrap_groups(number[it.units], lambda idx: statistic(it.take(idx)), seed=seed)


def _boot(it: Items, name: str, value: float | None, statistic: Callable, seed: int,
          bounded: bool = False) -> dict[str, Any]:
    """``bounded``: the figure lies in [0, 1] (WeightedACC, mAP, 1 - ECE), so a bootstrap of zero width or on too
    few images becomes the Wilson bound on the images (metrics/decisions.widen_degenerate)."""
    ci, n_ok = _cluster_bootstrap(it, statistic, seed)
    n_units = len(np.unique(it.units))
    # bounded: too few images, or every resample the same, give the bound on the images, as CAST's cells
    ci, widened = widen_degenerate(ci, value, n_units, few=True) if bounded else (ci, False)
    if widened:
        method = (f"{'clopper-pearson' if n_units < 2 else 'wilson'} bound on the {n_units} image(s) as units "
                  "(too few images for a bootstrap: fewer units than any test needs to reject anything)"
                  if too_few_units(n_units) else "wilson bound on the images (every resample gave the same figure)")
    elif ci is not None and ci[1] - ci[0] <= 1e-12:  # an unbounded ratio with no spread: said, never a bound
        method = ("cluster bootstrap: every resample gave the same figure, no spread to estimate (a point, not a "
                  "bound)")
    elif ci is not None and too_few_units(n_units):
        method = (f"cluster bootstrap on {n_units} images, expanded percentile: at so few units, the range of the "
                  "resamples (no test could reject anything; not a bound)")
    else:
        method = "cluster bootstrap, recomputing the figure from resampled items (expanded percentile)"
    how = {"method": method, "unit": UNIT, "n_units": n_units, "n_resamples_defined": n_ok}
    return headline_entry(name, value, ci, how)


def _accuracy(it: Items, setting: str) -> float:
    return float(np.mean(it.cols[setting]["correct"]))


def _riam(it: Items) -> float | None:
    shots = {int(k.split("=")[1]): _accuracy(it, k) for k in it.names if k.startswith("shots=")}
    rand = M.random_accuracy(it.n_options)
    if 0 not in shots or len(shots) < 2 or shots[0] == rand:
        return None
    return M.riam(shots[0], [shots[k] for k in sorted(shots) if k > 0], rand)


def _rrm_both(it: Items) -> float | None:
    rand = M.random_accuracy(it.n_options)
    orig = _accuracy(it, "original")
    return None if orig == rand else M.rrm(orig, _accuracy(it, "corrupt:both"), rand)


#: below this many images RRM gets the bound of :func:`rrm_bound`, where its bootstrap undercovers (docs/world.md)
RRM_BOUND_BELOW = 15


def rrm_bound(it: Items, alpha: float = 0.05) -> tuple[list[float] | None, str]:
    """A conservative interval for RRM = (c - r) / (o - r) x 100 (docs/methods.md): its range over the clustered
    Wilson intervals of o and c at alpha / 2 each, at the box's corners (RRM is monotone in each); (None, the
    reason) where o's interval reaches chance r."""
    rand = M.random_accuracy(it.n_options)
    o_lo, o_hi, _ = wilson_clustered(*unit_counts(it.units, it.cols["original"]["correct"]), alpha / 2)
    c_lo, c_hi, _ = wilson_clustered(*unit_counts(it.units, it.cols["corrupt:both"]["correct"]), alpha / 2)
    n = len(np.unique(it.units))
    if o_lo <= rand:
        return None, (f"unbounded: on {n} images the original accuracy's {1 - alpha / 2:.1%} Wilson interval "
                      f"[{o_lo:.3f}, {o_hi:.3f}] reaches chance ({rand:.3f}), where RRM's denominator is 0")
    lo = (c_lo - rand) / ((o_hi if c_lo >= rand else o_lo) - rand) * 100
    hi = (c_hi - rand) / ((o_lo if c_hi >= rand else o_hi) - rand) * 100
    return [float(lo), float(hi)], (f"bound on {n} images (fewer than {RRM_BOUND_BELOW}, where the bootstrap of "
                                    "the ratio undercovers): RRM's range over the clustered Wilson intervals of "
                                    f"both accuracies at {1 - alpha / 2:.1%} each (Bonferroni; conservative)")


def rrm_headline(it: Items, value: float | None, seed: int, boot: Callable | None = None) -> dict[str, Any]:
    """RRM (both corrupted) with its interval: the cluster bootstrap (:func:`_boot`; the bench passes the one it
    already drew as ``boot``) from :data:`RRM_BOUND_BELOW` images up, :func:`rrm_bound` below."""
    name = "RRM (image and text corrupted)"
    n_units = len(np.unique(it.units))
    if n_units >= RRM_BOUND_BELOW or value is None:
        return (boot or _boot)(it, name, value, _rrm_both, seed)
    ci, method = rrm_bound(it)
    return headline_entry(name, value, ci, {"method": method, "unit": UNIT, "n_units": n_units})


def _mr_weighted(it: Items) -> float:
    """MR over the verbalizer groups weighted by their number of verbalizers: the mean over every verbalizer."""
    base = it.cols["original"]["pred"]
    return float(np.mean([np.mean(base == it.cols[n]["pred"]) for n in it.names if n not in ("original", "blind")]))


def _unread(out: dict[str, Any], names: list[str]) -> str | None:
    """The read-share floor (metrics/measured.py) over the settings a figure is made of."""
    st = out.get("settings") or {}
    return unread_reason({n: 1 - st[n]["unread_share"] for n in names if "unread_share" in st.get(n, {})})


def _chance(out: dict[str, Any], setting: str, figure: str) -> str | None:
    """RRM and RIAM divide by (that setting's accuracy - chance): a measurement only where it is above chance."""
    acc, rand = ((out.get("settings") or {}).get(setting) or {}).get("accuracy"), out.get("acc_random")
    if acc is None or rand is None or acc > rand:
        return None
    return (f"the {setting} accuracy {acc:.3f} is not above chance ({rand:.3f}), and {figure} divides by their "
            "difference (ChEF's normalisation)")


def _why(*reasons: str | None) -> str | None:
    return "; and ".join(filter(None, reasons)) or None


def chef_headline(res: Items | list[dict[str, Any]], out: dict[str, Any], desideratum: str, n_bins: int,
                  turn_task: str | None, seed: int = 0) -> dict[str, Any] | None:
    """The headline entry of a ChEF run from its items (columns, or the item results) and its summary ``out``:
    RRM and RIAM measured only above chance, a figure of parsed answers only above the read floor."""
    it = res if isinstance(res, Items) else Items.of(res) if res else None
    if it is None or not len(it):
        return None
    first = it.primary
    names = list(out.get("settings") or {})
    turn_key = out.get("turn_metric")
    if turn_key in out:  # Omnibenchmark, VOC2012
        def turns_stat(sub: Items) -> float | None:
            return summarize_turns(sub.turns or [], turn_task or "")[turn_key]

        return _boot(it, _NAMES[turn_key], out[turn_key], turns_stat, seed, bounded=True)
    if out.get("vanilla_accuracy") is not None:  # MMBench: VanillaEval (rotation 0) is the headline
        rot0 = unit_counts(it.units[it.rot0], it.cols[first]["correct"][it.rot0])
        return share_headline("VanillaEval accuracy", *rot0, UNIT, _unread(out, [first]))
    if "overall" in out and out["overall"] is None:  # calibration without confidences: no figure, and why
        return not_measured("overall", out.get("calibration_note") or "no confidence to calibrate")
    if "overall" in out:  # calibration: 1 - ECE (Table 8)
        def overall(sub: Items) -> float | None:
            c = sub.cols[first]
            if not c["has_conf"].any():
                return None
            return 1 - M.ece_equal_count(c["conf"][c["has_conf"]], c["correct"][c["has_conf"]], n_bins)["ece"]

        return _boot(it, "overall", out["overall"], overall, seed, bounded=True)
    if "riam" in out:
        why = _why(_unread(out, [n for n in names if n.startswith("shots=")]), _chance(out, "shots=0", "RIAM"))
        return not_measured("riam", why) if why else _boot(it, "riam", out["riam"], _riam, seed)
    if "mr_weighted" in out:
        why = _unread(out, names)
        return not_measured("mr_weighted", why) if why else _boot(it, "mr_weighted", out["mr_weighted"],
                                                                   _mr_weighted, seed)
    if "pope" in out:
        counts = unit_counts(it.units, it.cols[first]["correct"])
        return share_headline("POPE accuracy", *counts, out["pope"]["interval"]["unit"], _unread(out, [first]))
    if isinstance(out.get("rrm"), dict) and "both" in out["rrm"]:
        # the floor on the original setting only: an answer the model can no longer give in a readable form once
        # the image is corrupted ("I cannot answer this") is part of the loss RRM measures
        why = _why(_unread(out, ["original"]), _chance(out, "original", "RRM"))
        return not_measured("RRM (image and text corrupted)", why) if why else rrm_headline(it, out["rrm"]["both"],
                                                                                            seed)
    if desideratum == "language" and (out.get("language") or {}).get("score") is not None:
        def judged(sub: Items) -> float | None:
            vals = [j["mean"] for j in sub.judge or [] if (j or {}).get("mean") is not None]
            return float(np.mean(vals)) if vals else None

        return _boot(it, "language score (judge)", out["language"]["score"], judged, seed)
    return share_headline("accuracy", *unit_counts(it.units, it.cols[first]["correct"]), UNIT, _unread(out, [first]))


#: where each headline's figure sits in the summary: blanked when the headline is not measured, so that no copy
#: of it is read as a result (the per-setting accuracies stay, as what they are)
FIGURE_OF = {"VanillaEval accuracy": ("vanilla_accuracy",), "riam": ("riam",), "mr_weighted": ("mr_weighted",),
             "POPE accuracy": ("pope", "accuracy"), "RRM (image and text corrupted)": ("rrm", "both")}


def blank_unmeasured(out: dict[str, Any]) -> None:
    """Where the headline is not measured, its figure in ``out`` becomes None (:data:`FIGURE_OF`)."""
    head = out.get("headline") or {}
    path = FIGURE_OF.get(head.get("name")) if head.get("not_measured") else None
    node = out
    for key in (path or ())[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if path and isinstance(node, dict) and path[-1] in node:
        node[path[-1]] = None


def judge_agreement(judged: list[dict[str, Any]]) -> dict[str, Any]:
    """How far the judge's sampled judgements of one answer agree (ChEF E.4 averages 5 an item): their spread and
    Krippendorff's alpha (interval) over items; with a second judge, judge-to-judge agreement on the item means."""
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
