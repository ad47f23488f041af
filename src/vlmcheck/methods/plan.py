"""How many samples a comparison needs (``vlmcheck plan --pilot RUN [--pilot RUN_B] --delta D``).

From one pilot run: the spread of its per-sample outcomes (``methods/compare.unit_values``, as the method
declares them) gives the n per run that detects a difference ``delta`` between two independent runs of that
spread, and the smallest difference detectable at the pilot's own n.  From two pilot runs of one method: the
spread of their paired differences gives the n of common samples.

The n is that of the test `compare` will run.  One binary answer a unit, two pilots: the exact McNemar test,
its power computed exactly (metrics/paired.mcnemar_power) at the pilots' share of discordant units.  Otherwise
the t-test (the smallest n whose two-sided t-test at ``alpha`` has ``power``, from the noncentral t
distribution; the normal formula undersizes small n - 8 where the t-test needs 10) on the units `compare` flips
(the pilot's clusters: its source images): the spread of a unit's mean (the ratio estimator's residual per unit
over the mean unit size, which carries the design effect of the clusters), n units on n - 1 degrees of freedom,
times the mean unit size in samples; for right/wrong answers in such units, the clustered McNemar's power
simulated from the pilot's units instead (metrics/paired.n_clustered: the sign-flip test of skewed unit sums
needs more units than the t-test says).  Each n is given with the range it takes over the pilot's own uncertainty:
for a share of independent answers, the spread at the ends of the pilot's Wilson interval (and 0.5 if inside
it); for the discordant share, its Wilson interval; otherwise the chi-square interval of the sd on units - 1 df.
A pilot where every answer is right (or wrong) has no spread of its own: the spread at its Wilson bound is used
and labelled as a bound.  No n, nor the range's low end, is below the fewest units at which the sign-flip test
can reject at ``alpha`` (6 at 0.05: two of 2^n sign patterns must weigh at most alpha).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..metrics.decisions import wilson
from .compare import _as_outcome, _pair, unit_values

_MAX_N = 10_000_000


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
    z = float(np.sqrt(2.0)) if not paired else 1.0
    from statistics import NormalDist

    nd = NormalDist()
    guess = ((nd.inv_cdf(1 - alpha / 2) + nd.inv_cdf(power)) * z * sd / delta) ** 2
    lo, hi = 2, max(3, int(math.ceil(guess)) + 2)
    while t_power(hi, sd, delta, alpha, paired) < power:  # the t-test needs at least the normal n
        lo, hi = hi, hi * 2
        if hi > _MAX_N:
            return None
    while lo < hi:  # power grows with n: bisect for the smallest n that reaches it
        mid = (lo + hi) // 2
        if t_power(mid, sd, delta, alpha, paired) >= power:
            hi = mid
        else:
            lo = mid + 1
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
    from scipy.stats import chi2

    sd = float(values.std(ddof=1))
    rng = [sd * math.sqrt((n - 1) / chi2.ppf(0.975, n - 1)), sd * math.sqrt((n - 1) / chi2.ppf(0.025, n - 1))]
    return sd, rng, "sample sd (chi-square 95% interval of the sd for the range)"


def _sizes(sd: float, rng: list[float], delta: float, alpha: float, power: float, paired: bool) -> dict:
    return {"n": n_t(sd, delta, alpha, power, paired),
            "range": [n_t(rng[0], delta, alpha, power, paired) if rng[0] > 0 else 2,
                      n_t(rng[1], delta, alpha, power, paired) if rng[1] > 0 else 2]}


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
        outs = [_as_outcome(v) for v in values.values()]
        x = np.array([o.value for o in outs])
        binary = all(o.binary for o in outs)
        span = outs[0].high - outs[0].low if outs else 1.0
        row: dict[str, Any] = {"metric": metric, "pilot_n": len(x)}
        if len(x) < 2:
            row["warning"] = "fewer than two samples in the pilot: no spread to plan from"
            out["metrics"].append(row)
            continue
        sd, rng, basis = _spread(x, binary)
        if sd <= 0:  # every value equal, not a share: the largest spread the range allows is the bound
            sd, rng, basis = span / 2, [0.0, span / 2], "bound: every pilot value is equal, so half the range is used"
        sizes = _sizes(sd, rng, delta, alpha, power, paired=False)
        m = mde_t(sd, len(x), alpha, power, paired=False)
        row.update(sd=sd, sd_range=rng, sd_basis=basis, n_per_run_independent=sizes["n"],
                   n_per_run_range=sizes["range"],
                   mde_at_pilot_n=None if m is None or m > span else m)
        if row["mde_at_pilot_n"] is None:
            row["mde_note"] = "no difference within the metric's range is detectable at the pilot's n"
        if len(loaded) == 2 and metric in loaded[1][2]:
            other = loaded[1][2][metric]
            keep, _ = _pair(values, other)
            if len(keep) >= 2:
                a = np.array([_as_outcome(values[s]).value for s in keep])
                b = np.array([_as_outcome(other[s]).value for s in keep])
                d = a - b
                sd_diff = float(d.std(ddof=1))
                corr = float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else None
                if sd_diff > 0:
                    _, drng, dbasis = _spread(d, False)
                else:  # every paired difference equal: bound by the discordance a pilot of this n could hide
                    q = wilson(0, len(d))[1]
                    sd_diff, drng = math.sqrt(q) * span, [0.0, math.sqrt(q) * span]
                    dbasis = "bound: every paired difference is equal; the spread of a discordance share at its Wilson limit"
                ds = _sizes(sd_diff, drng, delta, alpha, power, paired=True)
                row.update(paired_n=len(keep), sd_difference=sd_diff, sd_difference_range=drng,
                           sd_difference_basis=dbasis, correlation=corr, observed_difference=float(d.mean()),
                           n_paired=ds["n"], n_paired_range=ds["range"])
        out["metrics"].append(row)
    return out
