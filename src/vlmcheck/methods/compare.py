"""Paired comparison of runs of one method: the one decision procedure that ``vlmcheck compare``,
``vhx compare``, the report's decisions and the leaderboards use, on the samples all runs share and each
headline's own quantity, from the per-sample outcomes the method declares (``run/task.py``: ``Outcome``;
nothing here names a method).  The test, its interval and Holm's correction: docs/usage.md, "Comparing runs".
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)

from ..core.files import SampleRecords, read_results
from ..metrics.decisions import holm
from ..metrics.pooled import pooled_decision
from ..metrics.signflip import decision_interval, holm_levels, paired_decision
from ..run.labels import run_label, run_labels
from ..run.task import Outcome, outcomes_for
from . import outcomes as _builtin  # noqa: F401 - registers the built-in methods' outcomes
from .headline import headline_of, not_measured_reason

ALPHA = 0.05
Units = dict[str, Outcome]


def unit_values(folder: str | Path) -> tuple[str, str, dict[str, Units]]:
    """(method, model, {metric: {sample id: Outcome}}) of a finished run, read through the method's declared
    outcomes; a method that declares none gives no metrics (the callers say so)."""
    info = read_results(folder)
    task, spec = info["task"], (info.get("spec") or {}).get("task_spec") or {}
    model = run_label(info, folder)
    read = outcomes_for(task)
    metrics: dict[str, Units] = {}
    if read is None:
        return task, model, metrics
    run_metrics = info.get("metrics") or {}
    # a headline that is not a measurement (metrics/measured.py) is never compared: its outcomes are left out
    skip = headline_of(info).get("name") if not_measured_reason(info) else None
    for rec in SampleRecords(Path(folder) / "samples.jsonl"):  # a line at a time, each record checked
        if rec.get("status") != "done":
            continue
        sid = str(rec["sample_id"])
        for metric, o in read(rec.get("result") or {}, run_metrics).items():
            if o is None or o.value is None or not np.isfinite(o.value) or metric == skip:
                continue
            metrics.setdefault(metric, {})[sid] = o._replace(unit=o.unit or sid) if isinstance(o, Outcome) else o
    return task, model, metrics


def _as_outcome(v: Any) -> Outcome:
    """An ``Outcome`` from an Outcome or an old (value, cluster, source) tuple (binary when 0 or 1)."""
    if isinstance(v, Outcome):
        return v
    value, cluster, source = (tuple(v) + (None, None, None))[:3]
    return Outcome(float(value), str(cluster), source, binary=float(value) in (0.0, 1.0))


def shared(runs: Sequence[dict[str, Any]]) -> tuple[list[str], list[dict[str, int]]]:
    """The sample ids every run finished, in the first run's order, with the same seed image wherever the runs
    record its hash; per run, how many of its samples are left out (not in every run, or another image)."""
    if not runs:
        return [], []
    common = [s for s in runs[0] if all(s in r for r in runs[1:])]
    keep = [s for s in common if len({_as_outcome(r[s]).source for r in runs} - {None}) <= 1]
    both = set(common)
    return keep, [{"only_here": sum(s not in both for s in r), "different_source": len(common) - len(keep)}
                  for r in runs]


def weights(outs: Sequence[Outcome]) -> np.ndarray:
    """Each shared sample's weight in the headline's quantity: 1/n, or 1/(strata x stratum size) when the
    outcomes carry a stratum (a mean of stratum means)."""
    strata = [o.stratum for o in outs]
    if all(s is None for s in strata):
        return np.full(len(outs), 1.0 / max(len(outs), 1))
    sizes = Counter(strata)
    return np.array([1.0 / (len(sizes) * sizes[s]) for s in strata])


def quantity(values: dict[str, Any], keep: list[str]) -> float | None:
    """A run's headline quantity on the samples ``keep``: the weighted mean of the outcomes, or - where the
    outcomes carry counts (a headline of pooled counts) - the headline of their sums."""
    if not keep:
        return None
    outs = [_as_outcome(values[s]) for s in keep]
    if outs[0].pooled is not None:
        total = np.sum([o.counts for o in outs], axis=0)
        v = float(outs[0].pooled(total[:, 0], total[:, 1]))
        return v if np.isfinite(v) else None
    return float(weights(outs) @ np.array([o.value for o in outs]))


def _numbered(outs: Sequence[Outcome]) -> dict[str, int]:
    """Each unit's number, in the order the outcomes first name it."""
    return {u: i for i, u in enumerate(dict.fromkeys(o.unit for o in outs))}


def _per_unit(outs: Sequence[Outcome], units: dict[str, int]) -> np.ndarray:
    """Each unit's summed counts, shape (units, K, 2), in ``units``' numbering."""
    out = np.zeros((len(units), *np.shape(outs[0].counts)))
    for o in outs:
        out[units[o.unit]] += np.asarray(o.counts, dtype=float)
    return out


def _pooled_test(oa: Sequence[Outcome], ob: Sequence[Outcome]) -> dict[str, Any]:
    """The headline of pooled counts, A - B: whole units swapped between the runs and the headline recomputed
    (``metrics/pooled.py``)."""
    units = _numbered(oa)
    span = max(oa[0].high - oa[0].low, 0.0)
    dec = pooled_decision(_per_unit(oa, units), _per_unit(ob, units), oa[0].pooled, span=span)
    dec["effect_size"] = {"name": "difference of the headlines", "value": dec["difference"]}
    dec["n_units"] = len(units)
    return dec


def _test(a: dict[str, Any], b: dict[str, Any], keep: list[str], levels: Sequence[float] = (ALPHA,)
          ) -> dict[str, Any]:
    oa = [_as_outcome(a[s]) for s in keep]
    ob = [_as_outcome(b[s]) for s in keep]
    if oa[0].pooled is not None:
        return _pooled_test(oa, ob)
    w = weights(oa)
    x, y = np.array([o.value for o in oa]), np.array([o.value for o in ob])
    units = _numbered(oa)
    idx = np.array([units[o.unit] for o in oa])
    D = np.bincount(idx, weights=w * (x - y), minlength=len(units))
    W = np.bincount(idx, weights=w, minlength=len(units))
    binary = all(o.binary for o in oa) and all(o.binary for o in ob)
    equal = bool(np.allclose(w, w[0]))
    span = max(oa[0].high - oa[0].low, 0.0)
    a_only, b_only = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
    counts = (a_only, b_only, len(keep)) if binary and equal else None
    dec = paired_decision(D, W, (-span, span), binary=binary, single_answers=len(units) == len(keep) and equal,
                          counts=counts, levels=levels)
    d = x - y
    if binary:
        dec["discordant"] = {"a_only": a_only, "b_only": b_only}
        dec["effect_size"] = {"name": "difference of proportions", "value": dec["difference"]}
    else:
        sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
        dec["effect_size"] = {"name": "Cohen's d_z", "value": float(d.mean() / sd) if sd > 0 else 0.0}
    dec["n_units"] = len(units)
    return dec


def pairwise(runs: Sequence[dict[str, Any]], metric: str, pairs: Sequence[tuple[int, int]] | None = None,
             alpha: float = ALPHA, intervals: bool = True) -> dict[str, Any]:
    """The decision procedure over ``runs`` (each ``{sample id: Outcome}`` of ``metric``): each run's headline
    quantity on the samples all share, and for every pair (i, j) (or ``pairs``) the difference i - j with its
    test, Holm-adjusted p and the interval at its Holm level (``intervals=False`` skips them, for simulations)."""
    keep, left = shared(runs)
    pairs = list(pairs) if pairs is not None else list(itertools.combinations(range(len(runs)), 2))
    out: dict[str, Any] = {"metric": metric, "n_shared": len(keep), "left_out": left,
                           "values": [quantity(r, keep) for r in runs], "pairs": []}
    decs = []
    for i, j in pairs:
        row: dict[str, Any] = {"i": i, "j": j, "n_paired": len(keep),
                               "n_left_out": left[i]["only_here"] + left[j]["only_here"] + left[i]["different_source"],
                               "left_out": {"only_in_a": left[i]["only_here"], "only_in_b": left[j]["only_here"],
                                            "different_source": left[i]["different_source"]}}
        if not keep:
            row.update(difference=None, ci95=None, p_value=None, test=None, p_holm=None, separated=False,
                       note="the runs share no finished sample: nothing to compare")
        else:
            # the levels its Holm step may judge it at: a Monte Carlo p near one is drawn again
            dec = _test(runs[i], runs[j], keep, [alpha / k for k in range(1, len(pairs) + 1)])
            decs.append((row, dec))
            row.update({k: v for k, v in dec.items() if not k.startswith("_")})
        out["pairs"].append(row)
    ps = [d["p_value"] for _, d in decs]
    for (row, dec), p_h, level in zip(decs, holm(ps), holm_levels(ps, alpha)):
        ci, note = decision_interval(dec, level) if intervals else (None, None)
        row.update(p_holm=p_h, ci95=ci, ci_level=1 - level, separated=bool(p_h <= alpha))
        if note:
            row["note"] = note
        if len(keep) == 1:
            row["note"] = "one shared sample: no spread to test against, the runs cannot be separated"
    return out


def compare_two(a: dict[str, Any], b: dict[str, Any], metric: str, level: float = ALPHA) -> dict[str, Any]:
    """A minus B on the samples both finished: :func:`pairwise` of two runs; ``level`` the interval's level
    where a caller corrects for several comparisons itself (its Holm step: ``metrics.signflip.holm_levels``)."""
    (row,) = pairwise([a, b], metric, alpha=level)["pairs"]
    return {"metric": metric, **{k: v for k, v in row.items() if k not in ("i", "j")}}


def compare_runs(runs: list[str | Path]) -> dict[str, Any]:
    """Every pair of ``runs`` (one method), every metric the method declares: see the module docstring.  A method
    that declares no per-sample outcomes gets a note, not an empty table."""
    folders = [Path(r) for r in runs]
    loaded = [unit_values(f) for f in folders]
    methods = {t for t, _, _ in loaded}
    if len(methods) != 1:
        raise ValueError(f"compare runs of one method; these are {', '.join(sorted(methods))}")
    method = methods.pop()
    infos = [read_results(f, need_samples=False) for f in folders]
    labels = run_labels(zip(infos, folders))  # told apart
    values = [v for _, _, v in loaded]
    for folder, v in zip(folders, values):  # the official share figures, paired question by question (or group)
        v.update(official_units(folder, method))
    metrics = [m for m in values[0] if all(m in v for v in values)]
    comparisons: list[dict[str, Any]] = []
    for metric in metrics:
        for row in pairwise([v[metric] for v in values], metric)["pairs"]:
            i, j = row.pop("i"), row.pop("j")
            comparisons.append({"metric": metric, **row, "a": labels[i], "b": labels[j],
                                "run_a": str(folders[i]), "run_b": str(folders[j])})
    out: dict[str, Any] = {"method": method, "comparisons": comparisons}
    official = official_figures(runs)
    if official:
        out["official"] = official
    unmeasured = [{"run": str(f), "model": label, "metric": headline_of(info).get("name"),
                   "reason": not_measured_reason(info)}
                  for f, label, info in zip(folders, labels, infos) if not_measured_reason(info)]
    if unmeasured:  # said in place of a number, and left out of every comparison of that metric
        out["not_measured"] = unmeasured
    if not metrics and unmeasured:
        out["note"] = (f"nothing to compare: the headline of {len(unmeasured)} of these {len(runs)} runs is not a "
                       "measurement")
    elif not metrics:
        out["note"] = (f"no metric with per-sample outcomes in every run ({method} declares "
                       + ("none" if outcomes_for(method) is None else "some, but not in all of these runs") + ")")
    return out


def official_figures(runs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Each run's official figures (``metrics["official"]``, datasets/official.py) side by side, as the run
    computed them: a sum or ratio of shares (MME's scores, POPE's F1) has no per-sample outcome to pair."""
    from ..datasets.official import rows

    out = []
    for r in runs:
        info = read_results(r)
        got = rows((info.get("metrics") or {}).get("official"))
        if got:
            spec = (info.get("spec") or {}).get("task_spec") or {}
            out.append({"run": str(r), "model": spec.get("vlm") or str(r),
                        "figures": {(name if len({b for b, _, _ in got}) == 1 else f"{b}.{name}"):
                                    {k: v.get(k) for k in ("value", "ci95")} for b, name, v in got}})
    return out


def official_units(folder: str | Path, method: str) -> dict[str, Units]:
    """``{"official.<figure>": {key: Outcome}}``: a run's official share figures (datasets/official.py) as
    per-question or per-group outcomes, read through the method's ``official_answer``, for ``compare`` to test."""
    from ..datasets.official import Answer, official_for
    from ..run.registry import TASKS, task_class

    read = getattr(task_class(method), "official_answer", None) if method in TASKS else None
    if read is None:
        return {}
    answers: dict[str, list[Answer]] = {}
    for rec in SampleRecords(Path(folder) / "samples.jsonl"):
        if rec.get("status") == "done":
            got = read(rec)
            if got is not None and got[0]:
                answers.setdefault(got[0], []).append(got[1])
    out: dict[str, Units] = {}
    for bench, mine in answers.items():
        off = official_for(bench)
        if off is None or off.outcomes is None:
            continue
        prefix = "official." if len(answers) == 1 else f"official.{bench}."
        for figure, per in off.outcomes(mine).items():
            out[prefix + figure] = {k: Outcome(v, unit, binary=True) for k, (v, unit) in per.items()}
    return out
