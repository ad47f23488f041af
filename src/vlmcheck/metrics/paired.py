"""Paired binary outcomes: the interval of a difference of matched proportions (the hull of Tango's and Agresti and
Min's, "Simple improved confidence intervals for comparing matched proportions", Statistics in Medicine 24, 2005;
its coverage against the inverted sign-flip test's is in docs/world.md), and the power of `compare`'s tests.
statsmodels has neither the matched-pairs interval nor McNemar's power.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist
from typing import Sequence

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)

from .decisions import ratio_design_effect


def agresti_min(b: float, c: float, n: float, alpha: float = 0.05, q: float | None = None) -> tuple[float, float]:
    """Interval of p_b - p_c from ``b`` units right under A only and ``c`` under B only, of ``n``: the Wald interval
    on b + 1/2, c + 1/2, n + 2, at quantile ``q`` (normal at ``alpha`` unless given), clipped to [-1, 1]."""
    q = NormalDist().inv_cdf(1 - alpha / 2) if q is None else q
    bs, cs, ns = b + 0.5, c + 0.5, n + 2.0
    est = (bs - cs) / ns
    se = math.sqrt(max((bs + cs) - (bs - cs) ** 2 / ns, 0.0)) / ns
    return max(-1.0, est - q * se), min(1.0, est + q * se)


def tango(b: float, c: float, n: float, q: float) -> tuple[float, float]:
    """Tango's score interval (Statistics in Medicine 17, 1998) of p_b - p_c: the deltas whose score statistic
    Z(delta) = (b - c - n delta) / sqrt(n (2 p~_c + delta (1 - delta))) lies within +/- ``q``, p~_c the ML p_c
    under delta; Z falls with delta, so each end is a bisection."""

    def score(d: float) -> float:
        A, B, C = 2.0 * n, -(b + c) + (2.0 * n - b + c) * d, -c * d * (1.0 - d)
        p_c = (math.sqrt(max(B * B - 4.0 * A * C, 0.0)) - B) / (2.0 * A)
        v = n * (2.0 * p_c + d * (1.0 - d))
        r = b - c - n * d
        return r / math.sqrt(v) if v > 0 else math.copysign(math.inf, r) if r else 0.0

    def root(lo: float, hi: float, target: float) -> float:
        for _ in range(80):  # score(lo) > target >= score(hi)
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if score(mid) > target else (lo, mid)
        return (lo + hi) / 2

    est, edge = (b - c) / n, 1.0 - 1e-12
    low = -1.0 if est <= -edge or score(-edge) <= q else root(-edge, est, q)
    high = 1.0 if est >= edge or score(edge) >= -q else root(est, edge, -q)
    return low, high


def paired_interval(b: float, c: float, n: float, alpha: float = 0.05, q: float | None = None) -> tuple[float, float]:
    """The interval `compare` gives a difference of matched shares: the hull of :func:`tango` and
    :func:`agresti_min` (each alone undercovers somewhere at 8-60 units), at the normal quantile times
    sqrt(n / (n - 1)) unless ``q`` is given (n units on n - 1 degrees of freedom)."""
    if q is None:
        q = NormalDist().inv_cdf(1 - alpha / 2) * (math.sqrt(n / (n - 1)) if n > 1 else 1.0)
    t_lo, t_hi = tango(b, c, n, q)
    a_lo, a_hi = agresti_min(b, c, n, alpha, q)
    return min(t_lo, a_lo), max(t_hi, a_hi)


def paired_interval_clustered(b: float, c: float, n: float, D: Sequence[float], W: Sequence[float],
                              alpha: float = 0.05) -> tuple[float, float, float]:
    """(low, high, design effect): :func:`paired_interval` on the effective counts b / deff, c / deff, n / deff of
    answers clustered in len(D) >= 2 units (contributions ``D``, weights ``W``), at the t quantile on units - 1 df."""
    from scipy.stats import t

    m = len(D)
    if m < 2:
        raise ValueError("a clustered interval needs two units or more")
    D, W = np.asarray(D, dtype=float), np.asarray(W, dtype=float)
    pb, pc = b / n, c / n
    deff = ratio_design_effect(D, W / W.sum(), (pb + pc - (pb - pc) ** 2) / n, n)
    lo, hi = paired_interval(b / deff, c / deff, n / deff, q=float(t.ppf(1 - alpha / 2, m - 1)))
    return lo, hi, deff


@lru_cache(maxsize=8)
def _reject_below(kmax: int, alpha: float) -> np.ndarray:
    """For k = 0..kmax discordant units, the largest r with 2 P(Bin(k, 1/2) <= r) <= alpha (-1: none): the exact
    McNemar test rejects when min(b, c) <= r."""
    from scipy.stats import binom

    k = np.arange(kmax + 1)
    z = NormalDist().inv_cdf(1 - alpha / 2)
    r = np.floor(k / 2 - z * np.sqrt(k) / 2).astype(int)  # near the answer; stepped to it below
    for _ in range(kmax + 2):
        up = (r + 1 < k / 2) & (2 * binom.cdf(r + 1, k, 0.5) <= alpha + 1e-12)
        down = (r >= 0) & (2 * binom.cdf(r, k, 0.5) > alpha + 1e-12)
        if not (up.any() or down.any()):
            break
        r = r + up - down
    r = np.maximum(r, -1)
    r.flags.writeable = False
    return r


def mcnemar_power(n: int, p_b: float, p_c: float, alpha: float = 0.05) -> float:
    """Power of the two-sided exact McNemar test on ``n`` units, each right under A only with probability ``p_b``
    and under B only with ``p_c``: over k ~ Binomial(n, p_b + p_c) discordant units, the chance that b given k
    (Binomial(k, p_b / (p_b + p_c))) falls in the rejection region."""
    from scipy.stats import binom

    q = p_b + p_c
    if n < 1 or q <= 0:
        return 0.0
    k = np.arange(n + 1)
    r = _reject_below(1 << int(n).bit_length(), float(alpha))[:n + 1]  # one table serves many n
    theta = p_b / q
    reject = binom.cdf(r, k, theta) + binom.sf(k - r - 1, k, theta)  # b <= r or b >= k - r
    reject = np.where(r >= 0, np.minimum(reject, 1.0), 0.0)
    return float((binom.pmf(k, n, min(q, 1.0)) * reject).sum())


def n_mcnemar(p_b: float, p_c: float, alpha: float = 0.05, power: float = 0.8, limit: int = 1_000_000,
              mix: Sequence[tuple[float, float]] | None = None) -> int | None:
    """The smallest n (at least 6) at which the exact McNemar test has ``power`` against (p_b, p_c) and keeps it
    over the next tenth of n (its power saw-tooths in n); ``mix``: the power averaged over these (p_b, p_c)
    instead (a pilot's uncertainty).  None beyond ``limit``."""
    if p_b == p_c:
        return None
    pairs = list(mix) if mix else [(p_b, p_c)]
    q, delta = p_b + p_c, abs(p_b - p_c)
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    guess = max(6.0, z * z * q / (delta * delta))  # the normal approximation, a starting point
    lo, hi = max(1, int(guess * 0.6)), int(guess * 1.6) + 20
    while lo <= limit:
        ns = np.arange(lo, hi + 1)
        ok = np.array([np.mean([mcnemar_power(int(m), b, c, alpha) for b, c in pairs]) >= power for m in ns])
        for i, m in enumerate(ns):
            span = max(3, int(m) // 10)
            if ok[i] and i + span < len(ns) and ok[i:i + span + 1].all():
                return max(int(m), 6)
        lo, hi = int(hi - hi // 10 - 3), int(hi * 1.6)
    return None


def clustered_power(a: Sequence[int], c: Sequence[int], n: Sequence[int], delta: float, units: int,
                    alpha: float = 0.05, draws: int = 1000, seed: int = 0) -> float:
    """Power of `compare`'s clustered McNemar test on ``units`` units drawn from a pilot's units (answers right
    under A only ``a``, under B only ``c``, of ``n``) moved to a true difference ``delta`` per answer: A-only
    answers turned B-only, or B-only turned A-only and then concordant ones made A-only at each unit's A-only rate."""
    a, c, n = (np.asarray(v, dtype=np.int64) for v in (a, c, n))
    N, A, C, K = int(n.sum()), int(a.sum()), int(c.sum()), int((n - a - c).sum())
    d = (A - C) / N
    to_c = (d - delta) * N / (2 * A) if d > delta and A else 0.0  # A-only -> B-only
    to_a = min(1.0, (delta - d) * N / (2 * C)) if d < delta and C else 0.0  # B-only -> A-only
    gap = max(0.0, delta - d - 2 * to_a * C / N)
    # concordant -> A-only, in proportion to each unit's own A-only rate: discordance stays where the pilot saw
    # it (spread evenly over the units it would touch more of them, and the test would seem stronger)
    rate = a / np.maximum(n, 1)
    weight = float(((n - a - c) * rate).sum())
    if gap > 0 and weight > 0:
        add = np.minimum(1.0, gap * N / weight * rate)
    else:
        add = np.full(len(n), min(1.0, gap * N / K) if gap > 0 and K else 0.0)
    rng = np.random.default_rng(seed)
    # each dataset's units come from its own resample of the pilot's, which are themselves a sample: the power
    # averaged over what they might have been (the predictive power) does not bet on them
    pilot = rng.integers(0, len(n), size=(draws, len(n)))
    i = np.take_along_axis(pilot, rng.integers(0, len(n), size=(draws, units)), axis=1)
    ai, ci, ki = a[i], c[i], (n - a - c)[i]
    x, y, z = rng.binomial(ai, to_c), rng.binomial(ci, to_a), rng.binomial(ki, add[i])
    return float((_integer_p(ai - x + y + z - (ci - y + x)) <= alpha).mean())


def _integer_p(D: np.ndarray) -> np.ndarray:
    """Per row of integer unit sums ``D`` (datasets x units), signflip.p_at_zero's exact p-value, by convolving
    each unit's +/-|D_i| on the integers, all rows at once."""
    D = np.atleast_2d(np.asarray(D, dtype=np.int64))
    v = np.abs(D)
    total = int(v.sum(1).max()) if D.size else 0
    rows = np.arange(len(D))[:, None]
    dist = np.zeros((len(D), 2 * total + 1))
    dist[:, total] = 1.0
    k = np.arange(2 * total + 1)[None, :]
    for j in range(D.shape[1]):
        x = v[:, j:j + 1]
        pad = np.pad(dist, ((0, 0), (total, total)))  # sums stay within +/- total: the padding only reads zeros
        dist = 0.5 * (pad[rows, k + total - x] + pad[rows, k + total + x])
    t = np.abs(D.sum(1))[:, None]
    p = np.where(np.abs(k - total) >= t, dist, 0.0).sum(1)
    return np.where(t[:, 0] == 0, 1.0, np.minimum(1.0, p))


def n_clustered(a: Sequence[int], c: Sequence[int], n: Sequence[int], delta: float, start: int,
                alpha: float = 0.05, power: float = 0.8, floor: int = 6, draws: int = 1000,
                limit: int = 100_000) -> int | None:
    """The fewest units (at least ``floor``) at which :func:`clustered_power` reaches ``power``: up from ``start`` by
    a quarter at a time, then bisected (one seed at every size keeps the curve smooth).  None beyond ``limit``."""
    lo, hi = floor - 1, max(floor, int(start))
    while clustered_power(a, c, n, delta, hi, alpha, draws) < power:
        lo, hi = hi, int(hi * 1.25) + 1
        if hi > limit:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if clustered_power(a, c, n, delta, mid, alpha, draws) >= power else (mid, hi)
    return hi
