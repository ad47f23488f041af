"""How many samples a comparison needs (``vlmcheck plan --pilot RUN [--pilot RUN_B] --delta D``): from one
pilot, the n per run of two independent runs; from two, the n of common samples; each for the test ``compare``
runs, with its range over the pilot's uncertainty.  The stated power holds on average over pilots, not for
each.  What each figure means: docs/usage.md, "Planning a run's size".
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from ..metrics.decisions import wilson
from ..metrics.paired import n_clustered, n_mcnemar
from ..metrics.pooled import linearised
from .compare import _as_outcome, shared, unit_values

_MAX_N = 10_000_000
#: below this many units a pilot's plan is flagged: its n varies from pilot to pilot by a third or more
#: (bench/plan_power.py --pilots, docs/world.md)
SMALL_PILOT = 30


def t_power(n: int, sd: float, delta: float, alpha: float, paired: bool) -> float:
    """Power of the two-sided t-test of a difference ``delta``: paired (n differences of sd ``sd``, df n - 1) or
    two independent samples of n each (sd ``sd`` each, df 2n - 2), from the noncentral t distribution."""
    from scipy.stats import nct, t

    df = n - 1 if paired else 2 * n - 2
    if df < 1:
        return 0.0
    ncp = delta * math.sqrt(n) / sd if paired else delta / (sd * math.sqrt(2.0 / n))
    c = t.ppf(1 - alpha / 2, df)
    return float(nct.sf(c, df, ncp) + nct.cdf(-c, df, ncp))


def n_t(sd: float, delta: float, alpha: float, power: float, paired: bool) -> int | None:
    """The smallest n (at least 2) whose t-test reaches ``power``; None beyond ten million."""
    if sd <= 0:
        return 2
    q = NormalDist().inv_cdf
    guess = ((q(1 - alpha / 2) + q(power)) * (1.0 if paired else math.sqrt(2.0)) * sd / delta) ** 2
    lo, hi = 2, max(3, int(math.ceil(guess)) + 2)
    while t_power(hi, sd, delta, alpha, paired) < power:  # the t-test needs at least the normal n
        lo, hi = hi, hi * 2
        if hi > _MAX_N:
            return None
    while lo < hi:  # power grows with n: bisect for the smallest n that reaches it
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if t_power(mid, sd, delta, alpha, paired) >= power else (mid + 1, hi)
    return lo


def mde_t(sd: float, n: int, alpha: float, power: float, paired: bool) -> float | None:
    """The smallest difference the t-test detects with ``power`` at n (bisection on delta)."""
    if n < 2 or sd <= 0:
        return None
    lo, hi = 0.0, sd
    while t_power(n, sd, hi, alpha, paired) < power:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if t_power(n, sd, mid, alpha, paired) >= power else (mid, hi)
    return hi


def _spread(values: np.ndarray, binary: bool) -> tuple[float, list[float], str]:
    """(planning sd, [low, high] sd over the pilot's uncertainty, basis)."""
    n = len(values)
    if binary:
        p = float(values.mean())
        lo, hi = wilson(p * n, n)
        sds = [math.sqrt(q * (1 - q)) for q in (lo, hi)] + ([0.5] if lo <= 0.5 <= hi else [])
        rng = [min(sds), max(sds)]
        if p in (0.0, 1.0):
            return max(sds), rng, (f"bound: every pilot answer is {'right' if p else 'wrong'}, so the spread at the "
                                   f"Wilson 95% limit of the share ({lo:.4f} to {hi:.4f}) is used")
        return math.sqrt(p * (1 - p)), rng, f"share {p:.4f} (Wilson 95% {lo:.4f} to {hi:.4f})"
    sd = float(values.std(ddof=1))
    return sd, _chi2_range(sd, n), "sample sd (chi-square 95% interval of the sd for the range)"


UPPER_SD_QUANTILE = 0.2  # chi-square lower tail: the sd's upper 80 % posterior limit


def n_t_predictive(sd: float, m: int, delta: float, alpha: float, power: float, floor: int = 2) -> int | None:
    """The smallest n (at least ``floor``) whose paired t-test power, averaged over the pilot's uncertainty about
    the sd (the 10 deciles' midpoints of its chi-square posterior from ``m`` units), reaches ``power``, and at
    least the t-test's n at the sd's posterior 80th percentile (CAST's small pilots: docs/world.md).  None
    beyond ten million."""
    from scipy.stats import chi2

    if sd <= 0 or m < 2:
        return n_t(sd, delta, alpha, power, paired=True)
    sds = sd * np.sqrt((m - 1) / chi2.ppf((np.arange(10) + 0.5) / 10, m - 1))

    def avg(n: int) -> float:
        return float(np.mean([t_power(n, s, delta, alpha, paired=True) for s in sds]))

    hi = n_t(float(sds.max()), delta, alpha, power, paired=True)  # every decile reaches power there
    if hi is None:
        return None
    lo, hi = floor - 1, max(hi, floor)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if avg(mid) >= power else (mid, hi)
    # the swap test's power falls more steeply below its n than the t-test's, so the n is also at least the
    # t-test's at the sd's posterior 80th percentile (the true sd exceeds it with posterior probability 0.2)
    upper = n_t(float(sd * math.sqrt((m - 1) / chi2.ppf(UPPER_SD_QUANTILE, m - 1))), delta, alpha, power, paired=True)
    return max(hi, upper or hi)


def min_units(alpha: float) -> int:
    """The fewest units at which a two-sided sign-flip test can reject at ``alpha``: 2 / 2^m <= alpha."""
    return max(2, int(math.ceil(1 - math.log2(alpha) - 1e-12)))


def unit_spread(values: np.ndarray, units: list[str]) -> tuple[float, float, int]:
    """(sd of a unit's mean, mean unit size, units): per unit, (its sum - mean x its size) / mean size, the ratio
    estimator's residual; its sd (ddof 1) over sqrt(units) is the standard error of the pooled mean over units.
    Units of one sample each: the samples' own sd."""
    idx: dict[str, int] = {}
    k = np.array([idx.setdefault(u, len(idx)) for u in units])
    m = len(idx)
    sums = np.bincount(k, weights=values, minlength=m)
    sizes = np.bincount(k, minlength=m).astype(float)
    size = float(sizes.mean())
    resid = (sums - values.mean() * sizes) / size
    return (float(resid.std(ddof=1)) if m > 1 else 0.0), size, m


def _samples(units: float | None, size: float) -> int | None:
    """Units times their mean size in samples, rounded up (less a float's error: 3 units of 1.0 are 3 samples)."""
    return None if units is None else int(math.ceil(units * size - 1e-9))


def _sizes(sd: float, rng: list[float], delta: float, alpha: float, power: float, paired: bool,
           size: float = 1.0) -> dict:
    """n in samples: the t-test's n in units (at least :func:`min_units`) times the mean unit size ``size``;
    "units": the units at the planning sd."""
    floor = min_units(alpha)

    def units(s: float) -> int | None:
        u = n_t(s, delta, alpha, power, paired) if s > 0 else floor
        return None if u is None else max(u, floor)

    return {"n": _samples(units(sd), size), "range": [_samples(units(r), size) for r in rng], "units": units(sd)}


def _mcnemar_sizes(b: int, c: int, n: int, delta: float, alpha: float, power: float) -> dict:
    """n of the exact McNemar test from a paired pilot of one binary answer a unit, at a share of discordant
    units q (p_b, p_c = (q + delta) / 2, (q - delta) / 2; q at least delta): the power averaged over the
    Beta(b + c + 1/2, n - b - c + 1/2) posterior of q (at q alone, 100-unit pilots gave 0.60-0.99 power).  The
    range: n at the ends of q's Wilson interval; no discordant unit: its upper end, labelled a bound."""
    from scipy.stats import beta

    q = (b + c) / n
    lo, hi = wilson(b + c, n)
    floor = min_units(alpha)

    def pair(qq: float) -> tuple[float, float]:
        qq = min(1.0, max(qq, delta))
        return (qq + delta) / 2, (qq - delta) / 2

    def size(qq: float, mix: list | None = None) -> int | None:
        pb, pc = pair(qq)
        out = n_mcnemar(pb, pc, alpha, power, mix=mix)
        return None if out is None else max(out, floor)

    basis = f"discordant share {q:.4f} (Wilson 95% {lo:.4f} to {hi:.4f}; power averaged over its uncertainty)"
    if b + c == 0:
        q, basis = hi, f"bound: no pilot unit is discordant, so the Wilson 95% limit of the share ({hi:.4f}) is used"
        point = size(q)
    else:
        qs = beta.ppf((np.arange(10) + 0.5) / 10, b + c + 0.5, n - b - c + 0.5)
        point = size(q, [pair(x) for x in qs])
    sizes = sorted(x for x in (size(lo), size(hi)) if x is not None)
    return {"n": point, "range": [sizes[0], sizes[-1]] if sizes else [None, None], "basis": basis,
            "discordant_share": q}


def plan(pilots: list[str | Path], delta: float, power: float = 0.8, alpha: float = 0.05) -> dict[str, Any]:
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise ValueError("power and alpha lie strictly between 0 and 1")
    if delta <= 0:
        raise ValueError(f"--delta {delta}: give the difference to detect, above 0")
    if not 1 <= len(pilots) <= 2:
        raise ValueError("give one pilot run, or two pilot runs of one method")
    loaded = [unit_values(p) for p in pilots]
    if len({t for t, _, _ in loaded}) != 1:
        raise ValueError("the pilot runs are of different methods")
    out: dict[str, Any] = {"method": loaded[0][0], "delta": delta, "power": power, "alpha": alpha, "metrics": [],
                           "basis": "two-sided t-test (noncentral t), per sample"}
    if not loaded[0][2]:
        out["note"] = f"{loaded[0][0]} declares no per-sample outcomes: nothing to plan from"
    for metric, values in loaded[0][2].items():
        other = loaded[1][2].get(metric) if len(loaded) == 2 else None
        out["metrics"].append(plan_metric(metric, values, other, delta, power, alpha))
    return out


def _chi2_range(sd: float, m: int) -> list[float]:
    from scipy.stats import chi2

    return [sd * math.sqrt((m - 1) / chi2.ppf(0.975, m - 1)), sd * math.sqrt((m - 1) / chi2.ppf(0.025, m - 1))]


def _values(outs: list) -> np.ndarray:
    """The per-sample values a plan reads: each outcome's value, or - where the headline is a ratio of counts
    pooled over the samples (CAST) - the pooled headline plus each sample's influence on it
    (metrics/pooled.linearised), whose mean is the headline `compare` compares and whose spread is its own."""
    if outs and outs[0].pooled is not None:
        return np.asarray(linearised(np.array([o.counts for o in outs], dtype=float), outs[0].pooled), dtype=float)
    return np.array([o.value for o in outs])


def plan_metric(metric: str, values: dict[str, Any], other: dict[str, Any] | None, delta: float,
                power: float = 0.8, alpha: float = 0.05) -> dict[str, Any]:
    """One metric's plan from a pilot's outcomes ``values`` ({sample id: Outcome}) and, for a paired plan, a
    second pilot's ``other``: see the module docstring."""
    outs = [_as_outcome(v) for v in values.values()]
    x = _values(outs)
    units = [o.unit if o.unit is not None else sid for sid, o in zip(values, outs)]
    binary = all(o.binary for o in outs)
    span = outs[0].high - outs[0].low if outs else 1.0
    row: dict[str, Any] = {"metric": metric, "pilot_n": len(x)}
    if outs and outs[0].pooled is not None:
        row["estimand"] = ("the headline of counts pooled over the samples, as compare tests it (from each "
                           "sample's influence on it: the delta method)")
    if len(x) < 2:
        row["warning"] = "fewer than two samples in the pilot: no spread to plan from"
        return row
    sd_u, size, m = unit_spread(x, units)
    clustered = m < len(x)
    sd, rng, basis = _spread(x, binary)
    if sd <= 0:  # every value equal, not a share: the largest spread the range allows is the bound
        sd, rng, basis = span / 2, [0.0, span / 2], "bound: every pilot value is equal, so half the range is used"
    if clustered:
        # the units compare flips: the spread of a unit's mean; a pilot with no spread of its own (every answer
        # right) cannot show its clustering: every answer of a unit alike is the bound (design effect = size)
        var = float(x.var(ddof=1))
        if sd_u > 0 and m >= 2:
            deff = size * sd_u ** 2 / var
            if deff < 1:  # units no more alike than independent samples: never plan below that
                sd_u, deff = math.sqrt(var / size), 1.0
            basis = (f"{m} units of {size:.3g} samples on average, design effect {deff:.3g}: sd of a unit's mean "
                     "(chi-square 95% interval on units - 1 df)")
            sd, rng = sd_u, _chi2_range(sd_u, m)
        else:
            deff = size
            basis += f"; {m} units of {size:.3g} samples, each unit's answers taken as alike (a bound)"
        row["design_effect"] = deff
    sizes = _sizes(sd, rng, delta, alpha, power, paired=False, size=size if clustered else 1.0)
    mt = mde_t(sd, m if clustered else len(x), alpha, power, paired=False)
    row.update(sd=sd, sd_range=rng, sd_basis=basis, n_per_run_independent=sizes["n"],
               n_per_run_range=sizes["range"], units=m, mean_unit_size=size,
               test="t-test on the units (" + ("clusters" if clustered else "one sample each") + ")",
               mde_at_pilot_n=None if mt is None or mt > span else mt)
    if row["mde_at_pilot_n"] is None:
        row["mde_note"] = "no difference within the metric's range is detectable at the pilot's n"
    if other is not None:
        keep, _ = shared([values, other])
        if len(keep) >= 2:
            row.update(_paired(values, other, keep, binary, span, delta, power, alpha))
    if m < SMALL_PILOT:
        n, (lo, hi) = (row["n_paired"], row["n_paired_range"]) if "n_paired" in row else \
            (row["n_per_run_independent"], row["n_per_run_range"])
        row["pilot_warning"] = (
            f"the pilot has {m} units: the n is uncertain (from {lo} to {hi} over the pilot's uncertainty, "
            f"{n} at its estimate) and a pilot this small may give one at which the test falls well short of "
            f"power {power:g}; plan at the high end, or from a pilot of {SMALL_PILOT} units or more")
    return row


def _paired(values: dict[str, Any], other: dict[str, Any], keep: list[str], binary: bool, span: float,
            delta: float, power: float, alpha: float) -> dict[str, Any]:
    oa = [_as_outcome(values[s]) for s in keep]
    a = _values(oa)
    b = _values([_as_outcome(other[s]) for s in keep])
    units = [o.unit if o.unit is not None else s for s, o in zip(keep, oa)]
    d = a - b
    corr = float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else None
    sd_u, size, m = unit_spread(d, units)
    row: dict[str, Any] = {"paired_n": len(keep), "correlation": corr, "observed_difference": float(d.mean()),
                           "sd_difference": float(d.std(ddof=1))}
    if binary and m == len(keep):  # one binary answer a unit: compare runs the exact McNemar test
        ms = _mcnemar_sizes(int((d > 0).sum()), int((d < 0).sum()), len(keep), delta / span, alpha, power)
        row.update(n_paired=ms["n"], n_paired_range=ms["range"], sd_difference_basis=ms["basis"],
                   sd_difference_range=[row["sd_difference"]] * 2, discordant_share=ms["discordant_share"],
                   paired_test="exact McNemar (power computed exactly)")
        return row
    if sd_u > 0:
        drng = _chi2_range(sd_u, m)
        dbasis = f"sd of a unit's mean difference over {m} units of {size:.3g} samples (chi-square 95% on units - 1 df)"
        sd_diff = sd_u
    else:  # every paired difference equal: bound by the discordance a pilot of this n could hide
        q = wilson(0, m)[1]
        sd_diff, drng = math.sqrt(q) * span, [0.0, math.sqrt(q) * span]
        dbasis = "bound: every paired difference is equal; the spread of a discordance share at its Wilson limit"
    ds = _sizes(sd_diff, drng, delta, alpha, power, paired=True, size=size)
    test = "paired t-test on the units" + (" (clusters, as compare flips them)" if size > 1 else "")
    if oa[0].pooled is not None and sd_u > 0 and ds["units"] is not None:
        # a pooled headline (CAST): its n is planned from few, noisy pairs where power falls steeply: the power
        # averaged over the pilot's uncertainty about the sd
        u = n_t_predictive(sd_diff, m, delta, alpha, power, floor=min_units(alpha))
        ds = {**ds, "units": u, "n": _samples(u, size)}
        test = ("paired t-test on the pairs' influence values (the swap test's power approximated), averaged over "
                "the pilot's uncertainty about their sd")
    if binary and sd_u > 0 and ds["units"] is not None:
        # the clustered McNemar test of skewed unit sums rejects less often than the t-test of the same spread
        # (0.64 of datasets at a t-planned 0.80 on the bench): its power simulated from the pilot's units
        idx: dict[str, int] = {}
        k = np.array([idx.setdefault(u, len(idx)) for u in units])
        per = [np.bincount(k, weights=w, minlength=m).astype(int) for w in ((d > 0), (d < 0), np.ones(len(d)))]
        sim = n_clustered(*per, delta / span, ds["units"], alpha, power, floor=min_units(alpha))
        if sim is not None:
            scale = sim / ds["units"]
            ds = {"n": _samples(sim, size), "units": sim,
                  "range": [None if r is None else max(_samples(r, scale), _samples(min_units(alpha), size))
                            for r in ds["range"]]}
            test = ("clustered McNemar (sign flips of whole units): power simulated on 1,000 datasets of the "
                    "pilot's units a size; range the t-test's, scaled alike")
    row.update(sd_difference=sd_diff, sd_difference_range=drng, sd_difference_basis=dbasis, n_paired=ds["n"],
               n_paired_range=ds["range"], units_paired=ds["units"], paired_test=test)
    return row
