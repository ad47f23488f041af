"""Statistics for decisions (issue 34): intervals that do not collapse, paired tests, multiple comparisons and the
smallest difference a run can detect.  Clustered by the unit that was sampled (Miller, "Adding error bars to
evals", 2024): the source image, the CAST pair, the ChEF item.

scipy does the exact tests (binomial, McNemar as a binomial on the discordant pairs, permutation); the clustered
Wilson interval, Holm's step-down and the minimum detectable difference are written here: scipy's Wilson takes
integer counts only (a clustered one has an effective, fractional n), and the other two are three lines each
that would otherwise pull in statsmodels.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Sequence

import numpy as np

from .clusters import UnitSums, draws

Z95 = 1.959963984540054  # the two-sided 95 % normal quantile


def _ppf(q: float) -> float:
    # the standard normal quantile from the standard library: scipy.stats costs 0.25 s to import, a tenth of
    # the client CPU of a 1,000-image API run that needs nothing else from it
    return NormalDist().inv_cdf(q)


def _z(alpha: float) -> float:
    return _ppf(1 - alpha / 2)


def wilson(successes: float, n: float, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for a proportion; ``n`` may be fractional (an effective sample size).  Never of zero
    width at 0/n or n/n: 0 of 10 -> [0, 0.2775], 60 of 60 -> [0.9398, 1]."""
    if n <= 0:
        return (float("nan"), float("nan"))
    z = _z(alpha)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0))
    # at 0/n (n/n) the bound is exactly 0 (1) by the formula; rounding must not leave 3e-17 there
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= n else min(1.0, centre + half)
    return (lo, hi)


def design_effect(successes: Sequence[float], totals: Sequence[float]) -> float:
    """How much clustering inflates the variance of a pooled proportion: the variance of the ratio estimator over
    clusters (successes_i, totals_i) over the binomial one; at least 1 (a cluster of one answer has none).  One
    cluster of N answers has no between-cluster spread to estimate it from: its design effect is N (the effective
    n is 1, the one unit that was sampled), never 1 (issue 48: 24 answers on one image were given the interval of
    24 independent units)."""
    k, n = np.asarray(successes, dtype=float), np.asarray(totals, dtype=float)
    m, N = len(n), n.sum()
    if N <= 0:
        return 1.0
    if m < 2:
        return max(1.0, float(N))
    p = k.sum() / N
    binomial = p * (1 - p) / N
    if binomial <= 0:
        return 1.0
    clustered = m / (m - 1) * float(((k - p * n) ** 2).sum()) / (N * N)
    return max(1.0, clustered / binomial)


def wilson_clustered(successes: Sequence[float], totals: Sequence[float], alpha: float = 0.05
                     ) -> tuple[float, float, float]:
    """(low, high, design effect): Wilson on the effective sample size N / deff of clustered answers."""
    k, n = np.asarray(successes, dtype=float), np.asarray(totals, dtype=float)
    deff = design_effect(k, n)
    n_eff = n.sum() / deff
    lo, hi = wilson(k.sum() / n.sum() * n_eff, n_eff, alpha)
    return lo, hi, deff


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: ``b`` units right under A only, ``c`` under B only (a binomial test of
    min(b, c) among b + c at 1/2)."""
    from scipy.stats import binomtest

    if b + c == 0:
        return 1.0
    return float(binomtest(min(b, c), b + c, 0.5).pvalue)


def paired_permutation_p(a: Sequence[float], b: Sequence[float], n_resamples: int = 20_000, seed: int = 0) -> float:
    """Two-sided p-value of the mean paired difference by flipping the sign of each unit's difference: exact
    (every one of the 2^n sign patterns) up to 2^n <= ``n_resamples``, else Monte Carlo."""
    from scipy.stats import permutation_test

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) == 0 or np.allclose(a, b):
        return 1.0
    res = permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                           vectorized=True,
                           n_resamples=n_resamples, alternative="two-sided", random_state=seed)
    return float(min(1.0, res.pvalue))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: sorted ascending, p_(i) x (m - i + 1), made
    monotone, capped at 1."""
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
    return (_z(alpha) + _ppf(power)) * sd / math.sqrt(n)


def mde_proportion(p: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest difference between two runs' proportions (each on ``n`` units, independent, around ``p``)
    detectable at ``alpha`` with ``power``: (z_{1-alpha/2} + z_power) x sqrt(2 p (1 - p) / n)."""
    return mde(math.sqrt(2 * p * (1 - p)), n, alpha, power)


def n_for_difference(sd_diff: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Units needed to detect a mean difference ``delta`` when the per-unit difference has sd ``sd_diff``."""
    if delta <= 0:
        raise ValueError("the difference to detect must be above 0")
    return int(math.ceil(((_z(alpha) + _ppf(power)) * sd_diff / delta) ** 2))


def cluster_bootstrap_mean(values: Sequence[float], clusters: Sequence[str], n_boot: int = 2000, seed: int = 0,
                           alpha: float = 0.05) -> tuple[float, float]:
    """Percentile interval of the mean of ``values``, resampling whole clusters (the sampled unit)."""
    v = np.asarray(values, dtype=float)
    if not len(v):
        return float("nan"), float("nan")
    per = UnitSums.of([str(c) for c in clusters], v)
    return cluster_bootstrap_mean_sums(per.sums(), per.sizes(), n_boot, seed, alpha)


def cluster_bootstrap_mean_sums(sums: np.ndarray, sizes: np.ndarray, n_boot: int = 2000, seed: int = 0,
                                alpha: float = 0.05) -> tuple[float, float]:
    """:func:`cluster_bootstrap_mean` from each cluster's sum and size (in the order the clusters first
    appeared); the resamples are drawn in chunks (metrics/clusters.draws), so a million clusters fit."""
    if len(sums) < 2:
        mean = float(sums.sum() / sizes.sum()) if len(sums) else float("nan")
        return mean, mean
    rng = np.random.default_rng(seed)
    means = np.concatenate([sums[idx].sum(1) / sizes[idx].sum(1) for idx in draws(rng, len(sums), n_boot)])
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def proportion_interval(hits: Sequence[float], units: Sequence[str], unit: str) -> tuple[list[float], dict]:
    """A 95 % interval of a share of right answers that never collapses at 0/n or n/n - Wilson on the effective n
    of answers clustered by ``units`` - and how it was made (what results.json records beside it)."""
    return proportion_interval_sums(UnitSums.of(units, hits), unit)


def proportion_interval_sums(per: UnitSums, unit: str, column: int = 0) -> tuple[list[float], dict]:
    """:func:`proportion_interval` from the right answers folded per unit (column ``column`` of ``per``)."""
    return proportion_interval_counts(per.sums(column), per.sizes(), unit)


def proportion_interval_counts(k: np.ndarray, n: np.ndarray, unit: str) -> tuple[list[float], dict]:
    """:func:`proportion_interval` from each unit's right answers ``k`` and answers ``n`` (in the order the units
    first appeared)."""
    lo, hi, deff = wilson_clustered(k, n)
    p, n_eff = k.sum() / n.sum(), n.sum() / deff
    method = "wilson, clustered (effective n = n / design effect)"
    if len(n) == 1 and n.sum() > 1:
        method = "wilson on one unit (a bound: one sampled unit has no spread to estimate; effective n 1)"
    return [lo, hi], {"method": method, "unit": unit,
                      "n_units": len(n), "n": int(n.sum()), "design_effect": deff,
                      # the smallest difference from another run of this size that a test would catch
                      "min_detectable_difference": mde_proportion(p, n_eff) if 0 < p < 1 else None,
                      "mde_basis": "two independent runs of this effective n, alpha 0.05, power 0.8"}


def cluster_bootstrap(records: Sequence, clusters: Sequence[str], statistic, n_boot: int = 1000, seed: int = 0,
                      alpha: float = 0.05) -> tuple[list[float] | None, int]:
    """Percentile interval of any ``statistic(list of records) -> float | None`` (a ratio such as RRM, a
    calibration error), resampling whole clusters of records.  Returns (interval or None, resamples on which the
    statistic was defined); a resample where it is undefined (RIAM when the 0-shot accuracy equals chance) is
    left out and counted."""
    groups: dict[str, list] = {}
    for r, c in zip(records, clusters):
        groups.setdefault(str(c), []).append(r)
    members = list(groups.values())
    if len(members) < 2:
        return None, 0
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n_boot):
        draw = [r for i in rng.integers(0, len(members), size=len(members)) for r in members[i]]
        v = statistic(draw)
        if v is not None and np.isfinite(v):
            vals.append(float(v))
    if not vals:
        return None, 0
    return [float(np.quantile(vals, alpha / 2)), float(np.quantile(vals, 1 - alpha / 2))], len(vals)


def widen_degenerate(ci: Sequence[float] | None, value: float | None, n_units: int, low: float = 0.0,
                     high: float = 1.0) -> tuple[list[float] | None, bool]:
    """A bootstrap interval of a mean of values bounded in [low, high] has zero width when every unit has the
    same value (a perfect run: every s = 1, every verdict true).  Then the Wilson interval of the rescaled mean on
    ``n_units`` units replaces it: a unit bounded in [0, 1] with mean p has variance at most p (1 - p), so
    treating each unit as one yes/no answer is the conservative bound.  Returns (interval, whether widened)."""
    if ci is None or value is None or n_units <= 0 or ci[1] - ci[0] > 1e-12 or not low <= value <= high:
        return (list(ci) if ci is not None else None), False
    span = high - low
    lo, hi = wilson((value - low) / span * n_units, n_units)
    return [low + lo * span, low + hi * span], True


def mde_from_interval(ci: Sequence[float] | None, alpha: float = 0.05, power: float = 0.8,
                      span: float | None = None) -> float | None:
    """The minimum detectable difference between two independent runs of this size, from a run's own 95 %
    interval: its standard error is (high - low) / (2 x 1.96); the difference of two such runs has sqrt(2)
    times it; (z_{1-alpha/2} + z_power) of that is detected with ``power``.  None when it exceeds ``span``, the
    largest difference the metric can show (a share's MDE of 1.40 says only that no difference is detectable)."""
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
    if how.get("min_detectable_difference") is None:
        span = 1.0 if ci is not None and 0.0 <= ci[0] and ci[1] <= 1.0 and value is not None else None
        how["min_detectable_difference"] = mde_from_interval(ci, span=span)
        how.setdefault("mde_basis", "two independent runs of this size, from this interval, alpha 0.05, power 0.8")
        if how["min_detectable_difference"] is None and ci is not None:
            how["mde_basis"] = "none: no difference within the metric's range would be detected at this size"
    return {"name": name, "value": value, "ci95": list(ci) if ci is not None else None, "interval": how,
            "higher_is_better": higher_is_better}


def krippendorff_alpha_interval(units: Sequence[Sequence[float]]) -> float | None:
    """Krippendorff's alpha for interval data: 1 - D_o / D_e, with D_o the mean squared difference between
    values of one unit (each unit's pairs weighted 1 / (m_u - 1)) and D_e the mean squared difference between any
    two pairable values.  Units with fewer than two values are not pairable.  Written here (a dozen lines) rather
    than adding a dependency; tested by hand."""
    pairable = [np.asarray(u, dtype=float) for u in units if len(u) >= 2]
    if not pairable:
        return None
    values = np.concatenate(pairable)
    n = len(values)
    d_o = sum(((u[:, None] - u[None, :]) ** 2).sum() / (len(u) - 1) for u in pairable) / n
    d_e = ((values[:, None] - values[None, :]) ** 2).sum() / (n * (n - 1))
    return None if d_e == 0 else float(1 - d_o / d_e)


# ----------------------------------------------------------------------------- the decision's test (issue 48)

#: the most sign patterns enumerated exactly; beyond, a Monte Carlo draw of MC_RESAMPLES patterns
EXACT_ROWS = 1 << 17
MC_RESAMPLES = 20_000
_CHUNK_CELLS = 1 << 22


class SignFlip:
    """The cluster-level sign-flip (permutation) test of a weighted paired difference, and the interval that
    inverts it, so that the two always agree.

    ``d[c]`` is cluster c's contribution to the difference of the headline (sum over its answers of weight x
    (A - B)), ``w[c]`` its weight (sum over its answers of the weight the headline gives them; the weights sum
    to 1): the difference is sum(d).  Under "A and B are exchangeable within every cluster" each cluster's
    contribution is as likely to have either sign; the two-sided p-value is the chance of a sum at least as far
    from 0 as the observed one.  With one binary answer per cluster and equal weights this is McNemar's exact
    test; with several answers per cluster, a clustered McNemar; with GenCeption's category weights, the
    stratified permutation test of the category-weighted difference.

    Clusters of equal (d, w) are grouped: the sum of k equal signs is 2 Binomial(k, 1/2) - k, so the exact
    distribution needs prod(k_t + 1) rows, not 2^K (McNemar on 10,000 answers: three groups).  Beyond
    ``EXACT_ROWS`` rows, ``MC_RESAMPLES`` random rows and the observed one (p = (1 + count) / (1 + B)).

    The interval: delta is inside when the test of d - delta w does not reject.  Row r of the sign
    distribution has statistic A_r - delta B_r (A_r = sum s d, B_r = sum s w); it is as extreme as the
    observed T - delta when (A_r - delta B_r)^2 >= (T - delta)^2, a quadratic in delta whose leading
    coefficient B_r^2 - 1 is <= 0: a closed interval of delta.  p(delta) is the weight of the intervals that
    hold delta; the 95 % interval is the hull of {delta: p(delta) > alpha}, found exactly by sweeping their
    ends.  It holds 0 whenever p(0) > alpha (enforced, not left to rounding).
    """

    def __init__(self, d: Sequence[float], w: Sequence[float], seed: int = 0) -> None:
        d, w = np.asarray(d, dtype=float), np.asarray(w, dtype=float)
        if len(d) == 0 or len(d) != len(w):
            raise ValueError("a sign-flip test needs one weight per cluster and at least one cluster")
        w = w / w.sum()
        keys = np.round(np.stack([d, w], 1), 12)
        types, counts = np.unique(keys, axis=0, return_counts=True)
        self.d_t, self.w_t, self.k_t = types[:, 0], types[:, 1], counts.astype(np.int64)
        self.n_clusters = int(len(d))
        self.estimate = float(d.sum())
        self.exact = float(np.log(self.k_t + 1.0).sum()) <= math.log(EXACT_ROWS)
        self.A, self.B, self.pi = self._rows(seed)

    def _rows(self, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from scipy.stats import binom

        k = self.k_t
        if self.exact:
            grids = np.meshgrid(*[np.arange(n + 1) for n in k], indexing="ij")
            X = np.stack([g.ravel() for g in grids], 1).astype(float)
            pi = np.prod(binom.pmf(X, k[None, :], 0.5), axis=1)
            S = 2 * X - k[None, :]
            return S @ self.d_t, S @ self.w_t, pi / pi.sum()
        rng = np.random.default_rng(seed)
        A, B = [np.array([float(k @ self.d_t)])], [np.array([float(k @ self.w_t)])]  # the observed row
        step = max(1, _CHUNK_CELLS // len(k))
        done = 0
        while done < MC_RESAMPLES:
            r = min(step, MC_RESAMPLES - done)
            S = np.empty((r, len(k)))
            one = k == 1  # a lone cluster: a fair sign (a random bit, far cheaper than a binomial draw)
            S[:, one] = 2.0 * rng.integers(0, 2, size=(r, int(one.sum())), dtype=np.int8) - 1.0
            if (~one).any():
                S[:, ~one] = 2 * rng.binomial(k[None, ~one], 0.5, size=(r, int((~one).sum()))) - k[None, ~one]
            A.append(S @ self.d_t)
            B.append(S @ self.w_t)
            done += r
        A_, B_ = np.concatenate(A), np.concatenate(B)
        return A_, B_, np.full(len(A_), 1.0 / len(A_))

    def _extreme(self, delta: float) -> np.ndarray:
        t = abs(self.estimate - delta)
        return np.abs(self.A - delta * self.B) >= t - 1e-9 * max(t, 1e-300) - 1e-13

    def p_value(self, delta: float = 0.0) -> float:
        """Two-sided p-value of "the difference is ``delta``" (exact sum of the rows as extreme)."""
        return float(min(1.0, self.pi[self._extreme(delta)].sum()))

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """The hull of {delta: p(delta) > alpha} (may be infinite: few clusters cannot reject anything)."""
        a = self.B ** 2 - 1.0
        b = 2.0 * (self.estimate - self.A * self.B)
        c = self.A ** 2 - self.estimate ** 2
        lo = np.full(len(a), np.nan)
        hi = np.full(len(a), np.nan)
        flat = np.abs(a) < 1e-9  # all signs alike: as extreme as the observed for every delta
        lo[flat], hi[flat] = -np.inf, np.inf
        disc = b * b - 4 * a * c
        ok = ~flat & (disc >= -1e-12)
        root = np.sqrt(np.clip(disc[ok], 0.0, None))
        r1, r2 = (-b[ok] + root) / (2 * a[ok]), (-b[ok] - root) / (2 * a[ok])
        lo[ok], hi[ok] = np.minimum(r1, r2), np.maximum(r1, r2)
        keep = ~np.isnan(lo)
        lo, hi, pi = lo[keep], hi[keep], self.pi[keep]
        o_lo, o_hi = np.argsort(lo), np.argsort(hi)
        s_lo, c_lo = lo[o_lo], np.cumsum(pi[o_lo])
        s_hi, c_hi = hi[o_hi], np.cumsum(pi[o_hi])

        def cover(x: np.ndarray) -> np.ndarray:  # weight of the closed intervals holding x
            started = np.searchsorted(s_lo, x, side="right")
            ended = np.searchsorted(s_hi, x, side="left")
            return (np.where(started > 0, c_lo[np.maximum(started - 1, 0)], 0.0)
                    - np.where(ended > 0, c_hi[np.maximum(ended - 1, 0)], 0.0))

        cand = np.concatenate([lo, hi, [self.estimate]])
        cand = cand[np.isfinite(cand)]
        inside = cand[cover(cand) > alpha + 1e-12]
        low = float(inside.min()) if len(inside) else self.estimate
        high = float(inside.max()) if len(inside) else self.estimate
        if pi[np.isneginf(lo)].sum() > alpha + 1e-12:
            low = -math.inf
        if pi[np.isposinf(hi)].sum() > alpha + 1e-12:
            high = math.inf
        if self.p_value(0.0) > alpha:  # the interval agrees with the test, whatever the rounding
            low, high = min(low, 0.0), max(high, 0.0)
        return low + 0.0, high + 0.0  # never -0.0


def holm_levels(pvalues: Sequence[float], alpha: float = 0.05) -> list[float]:
    """The level at which each of Holm's comparisons is judged, so that an interval inverted at it excludes 0
    exactly when Holm rejects: alpha / (m - rank) for the rejected ones (rank 0 = smallest p), and the level of
    the step where Holm stopped for the rest (their p is at least the stopping p, above that level)."""
    p = list(pvalues)
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    stop = None
    for rank, i in enumerate(order):
        level = alpha / (m - rank)
        if stop is None and p[i] > level:
            stop = level
        out[i] = level if stop is None else stop
    return out


def paired_decision(d: Sequence[float], w: Sequence[float], bounds: tuple[float, float] | None,
                    binary: bool = False, single_answers: bool = False) -> dict:
    """The test and its 95 % interval of a weighted paired difference (:class:`SignFlip`), with its label;
    ``bounds`` - the range of one value - caps an interval that few clusters leave unbounded, and says so."""
    sf = SignFlip(d, w)
    if binary and single_answers:
        name = "McNemar exact"
    elif binary:
        name = "clustered McNemar (sign flips of whole clusters)"
    else:
        name = "cluster permutation (sign flips)"
    if not sf.exact:
        name += f", Monte Carlo {MC_RESAMPLES:,}"
    return {"difference": sf.estimate, "p_value": sf.p_value(0.0), "test": name, "n_clusters": sf.n_clusters,
            "_engine": sf, "_bounds": bounds}


def decision_interval(dec: dict, alpha: float = 0.05) -> tuple[list[float], str | None]:
    """The interval of a :func:`paired_decision` at ``alpha`` (its Holm level) and, when it is a bound, why.

    Two cases where the inverted test alone would mislead get a labelled bound instead: too few units to reject
    any difference (the inverted interval is unbounded: the range a difference can take), and every unit with
    the same difference (the inverted interval collapses to that point: 10 of 10 images right under A and wrong
    under B do not show that the difference is exactly 1).  Then the Wilson interval of the rescaled difference
    on the units (as :func:`widen_degenerate` for a mean), still made to hold 0 where the test does not reject."""
    sf = dec["_engine"]
    lo, hi = sf.interval(alpha)
    bounds, note = dec.get("_bounds"), None
    span = (bounds[1] - bounds[0]) / 2 if bounds else math.inf  # bounds are (-range, +range)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = max(lo, -span), min(hi, span)
        note = (f"bound: {sf.n_clusters} unit(s) cannot reject any difference at this level, so the interval "
                "is the range a difference can take")
    elif hi - lo < 1e-12 and math.isfinite(span) and span > 0 and sf.n_clusters > 0:
        n = sf.n_clusters
        v = min(max(sf.estimate, -span), span)
        wl, wh = wilson((v + span) / (2 * span) * n, n, alpha)
        lo, hi = -span + 2 * span * wl, -span + 2 * span * wh
        note = (f"bound: every one of the {n} units has the same difference, so the Wilson interval of the "
                "rescaled difference on the units")
    if sf.p_value(0.0) > alpha:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    return [lo + 0.0, hi + 0.0], note
