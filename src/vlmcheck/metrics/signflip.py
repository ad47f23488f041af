"""The decision's test (``methods/compare.py``): the cluster-level sign-flip test of a weighted paired difference,
the interval that inverts it, the level of each of Holm's steps, and the labelled bounds where the inverted
interval alone would mislead.  The inversion is written here: no library inverts a weighted permutation test.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Iterator, Sequence

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)

from .decisions import wilson

#: the most sign patterns enumerated exactly; beyond, a Monte Carlo draw of MC_RESAMPLES patterns
EXACT_ROWS = 1 << 17
MC_RESAMPLES = 20_000
#: the most distinct sums the p-value's exact distribution may hold (sums of equal value merged)
EXACT_SUMS = 1 << 18
#: a Monte Carlo p within MC_SE_MARGIN of its errors of a level is drawn again, MC_GROWTH times as many draws,
#: up to MC_MAX draws (or MC_MAX_CELLS random signs in all)
MC_SE_MARGIN = 3.0
MC_GROWTH = 5
MC_MAX = 2_000_000
MC_MAX_CELLS = 400_000_000
_CHUNK_CELLS = 1 << 22


def _null_sums(a: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, probabilities) of sum_t (2 X_t - k_t) a_t, X_t ~ Binomial(k_t, 1/2), equal sums merged (so binary
    answers' lattice sums stay few); None beyond ``EXACT_SUMS`` distinct sums."""
    from scipy.stats import binom

    scale = float((k * a).sum()) or 1.0
    vals, probs = np.zeros(1), np.ones(1)
    for a_t, k_t in sorted(zip(a, k), key=lambda t: t[1]):
        if len(vals) * (k_t + 1) > 8 * EXACT_SUMS:
            return None
        x = np.arange(k_t + 1)
        step, pmf = (2 * x - k_t) * a_t, binom.pmf(x, k_t, 0.5)
        v, q = (vals[:, None] + step[None, :]).ravel(), (probs[:, None] * pmf[None, :]).ravel()
        keys, inv = np.unique(np.round(v / scale, 12), return_inverse=True)
        if len(keys) > EXACT_SUMS:
            return None
        vals, probs = keys * scale, np.bincount(inv.ravel(), weights=q, minlength=len(keys))
    return vals, probs


def reach(t: float) -> float:
    """What a statistic must reach to count as at least ``t`` (``t`` less its round-off)."""
    return t - 1e-9 * max(t, 1e-300) - 1e-13


def _sign_rows(rng: np.random.Generator, k: np.ndarray, draws: int) -> Iterator[np.ndarray]:
    """``draws`` random rows of each group's sign sum, 2 Binomial(k_t, 1/2) - k_t, in chunks of bounded size."""
    one, step = k == 1, max(1, _CHUNK_CELLS // len(k))
    for done in range(0, draws, step):
        r = min(step, draws - done)
        S = np.empty((r, len(k)))
        S[:, one] = 2.0 * rng.integers(0, 2, size=(r, int(one.sum())), dtype=np.int8) - 1.0
        if (~one).any():
            S[:, ~one] = 2 * rng.binomial(k[None, ~one], 0.5, size=(r, int((~one).sum()))) - k[None, ~one]
        yield S


def _mc_count(a: np.ndarray, k: np.ndarray, t: float, draws: int, rng: np.random.Generator) -> int:
    """How many of ``draws`` random sign patterns give |sum| >= t."""
    return sum(int((np.abs(S @ a) >= reach(t)).sum()) for S in _sign_rows(rng, k, draws))


def p_at_zero(d: np.ndarray, levels: Sequence[float] = (0.05,), seed: int = 0) -> tuple[float, int | None, float]:
    """(p, Monte Carlo draws or None where exact, Monte Carlo error of p) of "no difference" by sign flips of the
    clusters' contributions ``d`` (docs/usage.md, "Comparing runs"): clusters of equal |d| are one binomial; Monte
    Carlo p = (1 + count) / (1 + B), redrawn while within ``MC_SE_MARGIN`` errors of any of ``levels``."""
    a = np.abs(np.asarray(d, dtype=float))
    t = float(abs(np.asarray(d, dtype=float).sum()))
    scale = float(a.sum())
    a = a[a > 1e-12 * max(scale, 1e-300)]
    if not len(a) or t <= 1e-12 * scale:
        return 1.0, None, 0.0
    keys, k = np.unique(np.round(a / scale, 12), return_counts=True)
    a_t = keys * scale
    exact = _null_sums(a_t, k)
    if exact is not None:
        vals, probs = exact
        return float(min(1.0, probs[np.abs(vals) >= reach(t)].sum())), None, 0.0
    rng = np.random.default_rng(seed)
    cap = max(MC_RESAMPLES, min(MC_MAX, MC_MAX_CELLS // len(k)))
    hits, drawn, target = 0, 0, MC_RESAMPLES
    while True:
        hits += _mc_count(a_t, k, t, target - drawn, rng)
        drawn = target
        p = (1 + hits) / (1 + drawn)
        se = math.sqrt(p * (1 - p) / drawn)
        if drawn >= cap or all(abs(p - lv) > MC_SE_MARGIN * se for lv in levels):
            return float(min(1.0, p)), drawn, se
        target = min(cap, drawn * MC_GROWTH)


class SignFlip:
    """The sign-flip test of sum(d), ``d[c]`` cluster c's weighted contribution and ``w[c]`` its weight, and the
    interval that inverts it.  Clusters of equal (d, w) are grouped: prod(k_t + 1) exact rows, not 2^K.

    Row r (A_r = sum s d, B_r = sum s w) is as extreme as the observed T - delta when (A_r - delta B_r)^2 >=
    (T - delta)^2, a closed interval of delta (leading coefficient B_r^2 - 1 <= 0); the interval is the hull of
    {delta: p(delta) > alpha}, found exactly by sweeping those intervals' ends.
    """

    def __init__(self, d: Sequence[float], w: Sequence[float], seed: int = 0,
                 levels: Sequence[float] = (0.05,)) -> None:
        d, w = np.asarray(d, dtype=float), np.asarray(w, dtype=float)
        if len(d) == 0 or len(d) != len(w):
            raise ValueError("a sign-flip test needs one weight per cluster and at least one cluster")
        w = w / w.sum()
        keys = np.round(np.stack([d, w], 1), 12)
        types, counts = np.unique(keys, axis=0, return_counts=True)
        self.d_t, self.w_t, self.k_t = types[:, 0], types[:, 1], counts.astype(np.int64)
        self.n_clusters = int(len(d))
        self.estimate = float(d.sum())
        self.d, self.w = d, w
        self.p0, self.draws, self.mc_error = p_at_zero(d, levels, seed)
        self.exact = self.draws is None
        self.rows_exact = float(np.log(self.k_t + 1.0).sum()) <= math.log(EXACT_ROWS)
        self._seed = seed

    @cached_property
    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A, B, pi): each row's sums of d and w and its weight, built on first use."""
        from scipy.stats import binom

        k = self.k_t
        if self.rows_exact:
            X = np.indices(tuple(k + 1)).reshape(len(k), -1).T.astype(float)  # every (X_1, ..., X_T), row-major
            pi = np.prod(binom.pmf(X, k[None, :], 0.5), axis=1)
            S = 2 * X - k[None, :]
            return S @ self.d_t, S @ self.w_t, pi / pi.sum()
        rng = np.random.default_rng(self._seed)
        rows = [np.array([[float(k @ self.d_t)], [float(k @ self.w_t)]])]  # the observed row
        rows += [np.stack([S @ self.d_t, S @ self.w_t]) for S in _sign_rows(rng, k, MC_RESAMPLES)]
        A, B = np.concatenate(rows, axis=1)
        return A, B, np.full(len(A), 1.0 / len(A))

    def _extreme(self, delta: float) -> np.ndarray:
        A, B, _ = self._table
        return np.abs(A - delta * B) >= reach(abs(self.estimate - delta))

    def p_value(self, delta: float = 0.0) -> float:
        """Two-sided p-value of "the difference is ``delta``"; at 0 :func:`p_at_zero`'s."""
        if delta == 0.0:
            return self.p0
        return float(min(1.0, self._table[2][self._extreme(delta)].sum()))

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """The hull of {delta: p(delta) > alpha} (may be infinite: few clusters cannot reject anything)."""
        A, B, pi = self._table
        a = B ** 2 - 1.0
        b = 2.0 * (self.estimate - A * B)
        c = A ** 2 - self.estimate ** 2
        lo, hi = np.full(len(a), np.nan), np.full(len(a), np.nan)
        flat = np.abs(a) < 1e-9  # all signs alike: as extreme as the observed for every delta
        lo[flat], hi[flat] = -np.inf, np.inf
        disc = b * b - 4 * a * c
        ok = ~flat & (disc >= -1e-12)
        root = np.sqrt(np.clip(disc[ok], 0.0, None))
        r1, r2 = (-b[ok] + root) / (2 * a[ok]), (-b[ok] - root) / (2 * a[ok])
        lo[ok], hi[ok] = np.minimum(r1, r2), np.maximum(r1, r2)
        keep = ~np.isnan(lo)
        lo, hi, pi = lo[keep], hi[keep], pi[keep]
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
        low, high = (float(inside.min()), float(inside.max())) if len(inside) else (self.estimate, self.estimate)
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
                    binary: bool = False, single_answers: bool = False,
                    counts: tuple[int, int, int] | None = None, levels: Sequence[float] = (0.05,)) -> dict:
    """The :class:`SignFlip` test with its label, for :func:`decision_interval`: ``bounds`` (the range of one
    value) caps an unbounded interval; ``counts`` (right under A only, under B only, answers) of binary answers of
    equal weight make the interval metrics/paired's; ``levels``: its Holm steps' levels."""
    sf = SignFlip(d, w, levels=levels)
    name = ("McNemar exact" if binary and single_answers else
            "clustered McNemar (sign flips of whole clusters)" if binary else "cluster permutation (sign flips)")
    out = {"difference": sf.estimate, "p_value": sf.p_value(0.0), "n_clusters": sf.n_clusters,
           "_engine": sf, "_bounds": bounds, "_counts": counts if binary else None, "_single": single_answers}
    if sf.exact:
        name += ("" if binary and single_answers else ", exact")
    else:
        name += f", Monte Carlo, {sf.draws:,} draws (p +/- {sf.mc_error:.4f})"
        out.update(p_mc_error=sf.mc_error, mc_draws=sf.draws)
    out["test"] = name
    return out


def _agree(lo: float, hi: float, sf: SignFlip, alpha: float) -> tuple[float, float]:
    """The interval made to agree with the test: it holds 0 when the test does not reject at ``alpha``; when
    the test rejects and it holds 0, its end past 0 is the inverted test's (or, failing that, just short of 0)."""
    p0 = sf.p_value(0.0)
    if p0 > alpha:
        return min(lo, 0.0), max(hi, 0.0)
    if lo <= 0.0 <= hi and sf.estimate != 0.0:
        s_lo, s_hi = sf.interval(alpha)
        tiny = 1e-12 * max(abs(sf.estimate), 1e-300)
        if sf.estimate > 0:
            lo = s_lo if 0.0 < s_lo <= hi else tiny
        else:
            hi = s_hi if lo <= s_hi < 0.0 else -tiny
    return lo, hi


def decision_interval(dec: dict, alpha: float = 0.05) -> tuple[list[float], str | None]:
    """The interval of a :func:`paired_decision` at ``alpha`` (its Holm level) and, when it is a bound, why
    (docs/usage.md, "Comparing runs"): metrics/paired's for binary answers of equal weight, made to agree with
    the test; else the inverted test, bounded where too few units reject nothing or every unit has one difference."""
    from .paired import paired_interval, paired_interval_clustered

    sf = dec["_engine"]
    bounds, note = dec.get("_bounds"), None
    span = (bounds[1] - bounds[0]) / 2 if bounds else math.inf  # bounds are (-range, +range)
    counts = dec.get("_counts")
    if counts is not None and math.isfinite(span) and span > 0 and (dec.get("_single") or sf.n_clusters >= 2):
        b, c, n = counts
        if dec.get("_single"):
            lo, hi = paired_interval(b, c, n, alpha)
        else:
            lo, hi, _ = paired_interval_clustered(b, c, n, sf.d, sf.w, alpha)
        lo, hi = _agree(lo * span, hi * span, sf, alpha)
        return [lo + 0.0, hi + 0.0], None
    lo, hi = sf.interval(alpha)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = max(lo, -span), min(hi, span)
        note = (f"bound: {sf.n_clusters} unit(s) cannot reject any difference at this level, so the interval "
                "is the range a difference can take")
    elif math.isfinite(span) and span > 0 and sf.n_clusters > 0 and _same_difference(sf, lo, hi, span):
        n = sf.n_clusters
        v = min(max(sf.estimate, -span), span)
        wl, wh = wilson((v + span) / (2 * span) * n, n, alpha)
        lo, hi = -span + 2 * span * wl, -span + 2 * span * wh
        note = (f"bound: every one of the {n} units has the same difference, so the Wilson interval of the "
                "rescaled difference on the units")
        if sf.p_value(0.0) <= alpha and lo <= 0.0 <= hi and sf.estimate != 0.0:
            # the inverted test's end is the collapsed point itself; the bound stops just short of 0 instead
            tiny = 1e-12 * abs(sf.estimate)
            lo, hi = (tiny, hi) if sf.estimate > 0 else (lo, -tiny)
    lo, hi = _agree(lo, hi, sf, alpha)  # a rejecting test's bound already excludes 0: left as it is
    return [lo + 0.0, hi + 0.0], note


#: relative to the range: differences this close are one value (the sweep's round-off leaves 1e-12 to 1e-8 of it)
SAME_TOL = 1e-8


def _same_difference(sf: SignFlip, lo: float, hi: float, span: float) -> bool:
    """Whether every unit has the same difference, or the inverted interval collapsed to that point."""
    d, w = getattr(sf, "d", None), getattr(sf, "w", None)  # a pooled swap test has no per-unit differences
    if d is not None and w is not None:
        per_unit = np.divide(d, w, out=np.zeros_like(d), where=w > 0)[w > 0]
        if len(per_unit) and float(np.ptp(per_unit)) <= SAME_TOL * span:
            return True
    return hi - lo <= SAME_TOL * span
