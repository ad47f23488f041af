"""Statistics for decisions: intervals that do not collapse, multiple comparisons and the smallest difference a
run can detect, clustered by the unit that was sampled (Miller, "Adding error bars to evals", 2024).  The
clustered Wilson interval is written here: scipy's takes integer counts only, a clustered n is fractional.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Sequence

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)

from .clusters import Units, UnitSums, draws

Z95 = 1.959963984540054  # the two-sided 95 % normal quantile


def _z(alpha: float) -> float:
    # the standard library's normal quantile: importing scipy.stats would cost a short API run much of its CPU
    return NormalDist().inv_cdf(1 - alpha / 2)


def wilson(successes: float, n: float, alpha: float = 0.05, z: float | None = None) -> tuple[float, float]:
    """Wilson score interval for a proportion (``n`` may be an effective, fractional, sample size) at quantile
    ``z`` (the normal one at ``alpha`` unless given); never of zero width at 0/n or n/n."""
    if n <= 0:
        return (float("nan"), float("nan"))
    z = _z(alpha) if z is None else z
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0))
    # at 0/n (n/n) the bound is exactly 0 (1) by the formula; rounding must not leave 3e-17 there
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= n else min(1.0, centre + half)
    return (lo, hi)


def design_effect(successes: Sequence[float], totals: Sequence[float]) -> float:
    """How much clustering inflates the variance of a pooled proportion of clusters (successes_i, totals_i):
    :func:`ratio_design_effect` over the binomial variance."""
    k, n = np.asarray(successes, dtype=float), np.asarray(totals, dtype=float)
    N = n.sum()
    if N <= 0 or len(n) >= 2 and np.all(n == 1):  # one answer per cluster: the binomial variance itself
        return 1.0
    p = k.sum() / N
    return ratio_design_effect(k / N, n / N, p * (1 - p) / N, N)


def ratio_design_effect(D: np.ndarray, W: np.ndarray, binomial: float, n: float) -> float:
    """The variance of a ratio estimator over m clusters (contributions ``D``, weights ``W`` summing to 1),
    m / (m - 1) sum (D_i - sum(D) W_i)^2, over ``binomial``; at least 1, and ``n`` for one cluster."""
    m = len(D)
    if m < 2:
        return max(1.0, float(n))
    if binomial <= 0:
        return 1.0
    return max(1.0, m / (m - 1) * float(((D - D.sum() * W) ** 2).sum()) / binomial)


#: below this many units of several answers, a clustered share's interval is the bound of one answer a unit
FEW_CLUSTERS = 10


def wilson_clustered(successes: Sequence[float], totals: Sequence[float], alpha: float = 0.05
                     ) -> tuple[float, float, float]:
    """(low, high, design effect): Wilson on the effective n = N / deff of clustered answers, at the t quantile on
    m - 1 df times sqrt(m / (m - 1)) for m clusters; at most m below ``FEW_CLUSTERS`` clusters of several answers
    (a bound); Clopper-Pearson below an effective n of 2 (coverage: docs/world.md)."""
    return _wilson_clustered(np.asarray(successes, dtype=float), np.asarray(totals, dtype=float), alpha)[:3]


#: how a share's interval is made when its units have spread: what results.json records as its method
WILSON_CLUSTERED = "wilson, clustered (effective n = n / design effect)"


def _wilson_clustered(k: np.ndarray, n: np.ndarray, alpha: float = 0.05) -> tuple[float, float, float, str]:
    """:func:`wilson_clustered` and how its interval was made (the method results.json records)."""
    deff, m = design_effect(k, n), len(n)
    several = m >= 2 and not np.all(n == 1)
    method = WILSON_CLUSTERED
    if several and m < FEW_CLUSTERS:
        deff = max(deff, float(n.sum()) / m)
        method = (f"wilson bound on the {m} units as single answers (fewer than {FEW_CLUSTERS} units of several "
                  "answers: too few to estimate their design effect)")
    n_eff = n.sum() / deff
    x = k.sum() / n.sum() * n_eff
    if n_eff < 2:
        lo, hi = clopper_pearson(x, n_eff, alpha)
    elif several and m >= FEW_CLUSTERS:
        from scipy.stats import t

        lo, hi = wilson(x, n_eff, z=float(t.ppf(1 - alpha / 2, m - 1)) * math.sqrt(m / (m - 1)))
        method += ", t quantile on units - 1 df x sqrt(units / (units - 1))"
    else:
        lo, hi = wilson(x, n_eff, alpha)
    if m == 1 and n.sum() > 1:
        method = "clopper-pearson on one unit (a bound: one sampled unit has no spread to estimate; effective n 1)"
    return lo, hi, deff, method


def _betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b) by its continued fraction (modified Lentz; Numerical Recipes' ``betai``/``betacf``)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on this side only: use the symmetry
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return front * h


def _beta_ppf(q: float, a: float, b: float) -> float:
    """The q-quantile of Beta(a, b): I_x(a, b) = q solved for x by bisection (monotone in x), to 1e-15."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _betainc(a, b, mid) < q else (lo, mid)
        if hi - lo < 1e-15 * max(hi, 1e-300):
            break
    return (lo + hi) / 2


def clopper_pearson(x: float, n: float, alpha: float = 0.05) -> tuple[float, float]:
    """Clopper-Pearson's interval of x successes in n (may be fractional), by beta quantiles computed here: importing
    scipy.stats would cost a one-image run several times its whole start-up."""
    lo = 0.0 if x <= 0 else _beta_ppf(alpha / 2, x, n - x + 1)
    hi = 1.0 if x >= n else _beta_ppf(1 - alpha / 2, x + 1, n - x)
    return lo, hi


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order."""
    p = list(pvalues)
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def mde(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable difference of a mean (two-sided test at ``alpha``, ``power``) for units whose values
    (or paired differences) have standard deviation ``sd``: (z_{1-alpha/2} + z_power) x sd / sqrt(n)."""
    if n <= 0:
        return float("nan")
    return (_z(alpha) + NormalDist().inv_cdf(power)) * sd / math.sqrt(n)


def mde_proportion(p: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest difference between two runs' proportions (each on ``n`` units, independent, around ``p``)
    detectable at ``alpha`` with ``power``: (z_{1-alpha/2} + z_power) x sqrt(2 p (1 - p) / n)."""
    return mde(math.sqrt(2 * p * (1 - p)), n, alpha, power)


def cluster_bootstrap_mean_sums(sums: np.ndarray, sizes: np.ndarray, n_boot: int = 2000, seed: int = 0,
                                alpha: float = 0.05) -> tuple[float, float]:
    """Percentile interval of the mean of answers in clusters of sums ``sums`` and sizes ``sizes`` (in order of
    first appearance), resampling whole clusters in chunks (metrics/clusters.draws)."""
    if len(sums) < 2:
        mean = float(sums.sum() / sizes.sum()) if len(sums) else float("nan")
        return mean, mean
    rng = np.random.default_rng(seed)
    means = np.concatenate([sums[idx].sum(1) / sizes[idx].sum(1) for idx in draws(rng, len(sums), n_boot)])
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def proportion_interval(hits: Sequence[float], units: Sequence[str], unit: str) -> tuple[list[float], dict]:
    """A 95 % interval of a share of right answers that never collapses at 0/n or n/n - Wilson on the effective n
    of answers clustered by ``units`` - and how it was made (what results.json records beside it)."""
    per = UnitSums.of(units, hits)
    return proportion_interval_counts(per.sums(), per.sizes(), unit)


def proportion_interval_independent(hits: int, n: int, unit: str) -> tuple[list[float], dict]:
    """:func:`proportion_interval` of ``n`` >= 1 answers each its own unit (design effect 1), ``hits`` of them
    right: the same interval and record, without numpy (a one-image run need not load it)."""
    if n < 1:
        raise ValueError("a proportion of no answers")
    x = hits / n * n  # as the clustered path computes it (share x effective n), so the two agree to the bit
    lo, hi = clopper_pearson(x, n) if n < 2 else wilson(x, n)
    return [lo, hi], _proportion_record(hits / n, float(n), 1.0, WILSON_CLUSTERED, unit, n, n)


def proportion_interval_counts(k: np.ndarray, n: np.ndarray, unit: str) -> tuple[list[float], dict]:
    """:func:`proportion_interval` from each unit's right answers ``k`` and answers ``n`` (in the order the units
    first appeared)."""
    lo, hi, deff, method = _wilson_clustered(k, n)
    return [lo, hi], _proportion_record(k.sum() / n.sum(), n.sum() / deff, deff, method, unit, len(n), int(n.sum()))


def _proportion_record(p: float, n_eff: float, deff: float, method: str, unit: str, n_units: int, n: int) -> dict:
    """How a share's interval was made, as results.json records it beside the interval."""
    # the smallest difference from another run of this size that a test would catch; above 1, the largest a share
    # can show (1.40 at 1 of 2), it says only that none would be caught
    mdd = mde_proportion(p, n_eff) if 0 < p < 1 else None
    basis = "two independent runs of this effective n, alpha 0.05, power 0.8"
    if mdd is not None and mdd > 1.0:
        mdd, basis = None, "none: no difference within the metric's range would be detected at this size"
    return {"method": method, "unit": unit, "n_units": n_units, "n": n, "design_effect": deff,
            "min_detectable_difference": mdd, "mde_basis": basis}


def cluster_bootstrap(records: Sequence, clusters: Sequence[str], statistic, n_boot: int = 1000, seed: int = 0,
                      alpha: float = 0.05) -> tuple[list[float] | None, int]:
    """:func:`cluster_bootstrap_groups` of ``statistic(list of records) -> float | None``, records clustered by
    ``clusters``."""
    records, units = list(records), Units()
    group = np.array([units(str(c)) for c in clusters], dtype=np.int64)
    return cluster_bootstrap_groups(group, lambda idx: statistic([records[i] for i in idx]), n_boot, seed, alpha)


def cluster_bootstrap_groups(group: np.ndarray, statistic, n_boot: int = 1000, seed: int = 0,
                             alpha: float = 0.05) -> tuple[list[float] | None, int]:
    """(expanded percentile interval or None, resamples where it was defined) of ``statistic(record indices)``,
    whole clusters resampled (``group``: each record's cluster, numbered by first appearance); a resample where the
    statistic is undefined (None, or not finite) is left out."""
    members = np.argsort(group, kind="stable")
    sizes = np.bincount(group)
    starts = np.cumsum(sizes) - sizes
    if len(sizes) < 2:
        return None, 0
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n_boot):
        draw = rng.integers(0, len(sizes), size=len(sizes))
        lens = sizes[draw]
        pos = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(starts[draw], lens)
        v = statistic(members[pos])
        if v is not None and np.isfinite(v):
            vals.append(float(v))
    if not vals:
        return None, 0
    return expanded_percentile(np.asarray(vals), len(sizes), alpha), len(vals)


def too_few_units(n_units: int, alpha: float = 0.05) -> bool:
    """Fewer units than any sign-flip test needs to reject anything at ``alpha``: 2 / 2^n > alpha (n <= 5 at 0.05)."""
    return n_units < 1 or 2.0 ** (1 - n_units) > alpha


def expanded_percentile(boots: np.ndarray, n_units: int, alpha: float = 0.05) -> list[float]:
    """Hesterberg's expanded percentile interval of bootstrap replicates on ``n_units`` units (docs/methods.md)."""
    from scipy.stats import t

    q = NormalDist().cdf(-math.sqrt(n_units / (n_units - 1)) * float(t.ppf(1 - alpha / 2, n_units - 1)))
    return [float(np.quantile(boots, q)), float(np.quantile(boots, 1 - q))]


def widen_degenerate(ci: Sequence[float] | None, value: float | None, n_units: int, low: float = 0.0,
                     high: float = 1.0, few: bool = False) -> tuple[list[float] | None, bool]:
    """(interval, whether widened): a zero-width bootstrap interval of a mean of values in [low, high] becomes the
    Wilson bound of the rescaled mean on ``n_units`` units as yes/no answers; ``few``: so does any interval on
    :func:`too_few_units` units (Clopper-Pearson on one)."""
    collapsed = ci is not None and ci[1] - ci[0] <= 1e-12
    if value is None or n_units <= 0 or not low <= value <= high or not (collapsed or few and too_few_units(n_units)):
        return (list(ci) if ci is not None else None), False
    span = high - low
    x = (value - low) / span * n_units
    lo, hi = clopper_pearson(x, n_units) if few and n_units < 2 else wilson(x, n_units)
    return [low + lo * span, low + hi * span], True


def mde_from_interval(ci: Sequence[float] | None, alpha: float = 0.05, power: float = 0.8,
                      span: float | None = None) -> float | None:
    """The minimum detectable difference between two independent runs of this size, from a run's own 95 %
    interval (standard error (high - low) / (2 x 1.96), sqrt(2) times it for a difference); None above ``span``,
    the largest difference the metric can show."""
    if ci is None:
        return None
    se = (ci[1] - ci[0]) / (2 * Z95)
    out = mde(math.sqrt(2) * se, 1, alpha, power)
    return None if span is not None and out > span else out


def headline_entry(name: str, value: float | None, ci: Sequence[float] | None, how: dict | None,
                   higher_is_better: bool = True) -> dict:
    """What results.json records as a run's headline: the metric, its value, its 95 % interval, how that was made
    (method, resampling unit, number of units) and the smallest difference it lets a comparison detect."""
    how = dict(how or {})
    if how.get("min_detectable_difference") is None and not str(how.get("mde_basis", "")).startswith("none"):
        span = 1.0 if ci is not None and 0.0 <= ci[0] and ci[1] <= 1.0 and value is not None else None
        how["min_detectable_difference"] = mde_from_interval(ci, span=span)
        how.setdefault("mde_basis", "two independent runs of this size, from this interval, alpha 0.05, power 0.8")
        if how["min_detectable_difference"] is None and ci is not None:
            how["mde_basis"] = "none: no difference within the metric's range would be detected at this size"
    return {"name": name, "value": value, "ci95": list(ci) if ci is not None else None, "interval": how,
            "higher_is_better": higher_is_better}


def krippendorff_alpha_interval(units: Sequence[Sequence[float]]) -> float | None:
    """Krippendorff's alpha for interval data, 1 - D_o / D_e, over units of two values or more."""
    pairable = [np.asarray(u, dtype=float) for u in units if len(u) >= 2]
    if not pairable:
        return None
    values = np.concatenate(pairable)
    n = len(values)
    d_o = sum(((u[:, None] - u[None, :]) ** 2).sum() / (len(u) - 1) for u in pairable) / n
    d_e = ((values[:, None] - values[None, :]) ** 2).sum() / (n * (n - 1))
    return None if d_e == 0 else float(1 - d_o / d_e)
