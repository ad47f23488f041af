"""The paired swap test of a headline that is a mean of ratios of counts pooled over units (CAST), and the
interval that inverts it (docs/methods.md, "Runs compared on the headline"): the headline is recomputed under
every pattern of units swapped between the runs (Monte Carlo beyond ``EXACT_UNITS``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)

from .signflip import reach

#: every swap pattern up to 2^EXACT_UNITS; beyond, MC_DRAWS random patterns and the observed one
EXACT_UNITS = 14
MC_DRAWS = 10_000


class PooledSwap:
    """The swap test of ``pooled(num, den)`` (the headline from summed counts, arrays (..., K)) between runs A
    and B: ``a``, ``b`` each unit's (numerator, denominator) of each ratio, shape (units, K, 2).  Duck-types
    :class:`~vlmcheck.metrics.signflip.SignFlip` for ``decision_interval``."""

    def __init__(self, a: Any, b: Any, pooled: Callable[[Any, Any], Any], seed: int = 0, span: float = 1.0) -> None:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if a.shape != b.shape or a.ndim != 3 or a.shape[-1] != 2 or len(a) == 0:
            raise ValueError("a swap test needs both runs' (numerator, denominator) counts on the same units")
        self.a, self.b, self.pooled, self.span = a, b, pooled, span
        self.n_clusters = len(a)
        self.A, self.B = a.sum(0), b.sum(0)  # (K, 2) each
        self.estimate = float(pooled(self.A[:, 0], self.A[:, 1]) - pooled(self.B[:, 0], self.B[:, 1]))
        n = self.n_clusters
        self.exact = n <= EXACT_UNITS
        if self.exact:  # every pattern; row r swaps unit i when bit i of r is set
            rows = np.arange(2 ** n, dtype=np.int64)[:, None]
            self.S = ((rows >> np.arange(n)) & 1).astype(float)
        else:
            rng = np.random.default_rng(seed)
            draws = rng.integers(0, 2, size=(MC_DRAWS, n), dtype=np.int8).astype(float)
            self.S = np.concatenate([np.zeros((1, n)), draws])  # the observed pattern counted
        self.draws = len(self.S) - (0 if self.exact else 1)
        # what each pattern moves, per run and count: the test of any delta is then elementwise
        self._sa = [self.S @ a[..., j] for j in (0, 1)]
        self._sb = [self.S @ b[..., j] for j in (0, 1)]

    def _stats(self, delta: float) -> tuple[float, Any]:
        """(observed statistic, the statistic under every swap pattern) of the test of ``delta``: B + delta is
        B's numerators plus delta x its denominators."""
        move_num = self._sb[0] + delta * self._sb[1] - self._sa[0]  # what a pattern's swaps move, (patterns, K)
        move_den = self._sb[1] - self._sa[1]
        num_a, den_a = self.A[:, 0] + move_num, self.A[:, 1] + move_den
        num_b = self.B[:, 0] + delta * self.B[:, 1] - move_num
        den_b = self.B[:, 1] - move_den
        t = np.asarray(self.pooled(num_a, den_a) - self.pooled(num_b, den_b), dtype=float)
        return self.estimate - delta, np.where(np.isnan(t), 0.0, t)  # an emptied ratio: no evidence

    def p_value(self, delta: float = 0.0) -> float:
        obs, t = self._stats(delta)
        return float(min(1.0, (np.abs(t) >= reach(abs(obs))).mean()))

    def p_error(self, p: float) -> float | None:
        """The Monte Carlo standard error of a p-value from the draws (None when every pattern was counted)."""
        return None if self.exact else math.sqrt(max(p * (1 - p), 0.0) / self.draws)

    def _edge(self, alpha: float, sign: int) -> float:
        """The first delta outward from the estimate (in direction ``sign``) at which the test rejects, to 1e-5;
        infinite when none within twice the range does (too few units to reject anything)."""
        reach = 2.0 * self.span
        steps = np.linspace(0.0, reach, 21)[1:]
        if self.estimate and np.sign(self.estimate) != sign:  # 0 itself is a step: an edge never passes a
            steps = np.unique(np.append(steps, abs(self.estimate)))  # rejected 0 (the interval agrees with p)
        inside = 0.0
        for step in steps:
            if self.p_value(self.estimate + sign * step) <= alpha:
                lo, hi = inside, step
                while hi - lo > 1e-5:
                    mid = (lo + hi) / 2
                    lo, hi = (mid, hi) if self.p_value(self.estimate + sign * mid) > alpha else (lo, mid)
                return self.estimate + sign * lo
            inside = step
        return sign * math.inf

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        low, high = self._edge(alpha, -1), self._edge(alpha, +1)
        if self.p_value(0.0) > alpha:  # the interval agrees with the test
            low, high = min(low, 0.0), max(high, 0.0)
        return float(low) + 0.0, float(high) + 0.0


def pooled_decision(a: Any, b: Any, pooled: Callable[[Any, Any], Any], span: float = 1.0) -> dict:
    """:class:`PooledSwap`'s test of A - B, labelled as ``signflip.paired_decision`` labels its own."""
    sf = PooledSwap(a, b, pooled, span=span)
    p = sf.p_value(0.0)
    name = "paired swap of whole units, the pooled headline recomputed"
    name += (f", exact ({2 ** sf.n_clusters:,} patterns)" if sf.exact
             else f", Monte Carlo {sf.draws:,} draws (p ± {sf.p_error(p):.3f})")
    return {"difference": sf.estimate, "p_value": p, "test": name, "n_clusters": sf.n_clusters,
            "p_mc_error": sf.p_error(p), "_engine": sf, "_bounds": (-span, span)}


def linearised(counts: Any, pooled: Callable[[Any, Any], Any]) -> Any:
    """Per sample, the pooled headline plus the sample's influence on it: H + M grad H . (c_s - c_mean), H the
    headline of the summed ``counts`` (samples, K, 2), M the samples (the delta method); grad H a central
    difference."""
    c = np.asarray(counts, dtype=float)
    m = len(c)
    total = c.sum(0)
    head = float(pooled(total[:, 0], total[:, 1]))
    dev = c - total / m  # (samples, K, 2)
    h = 1e-6 * m
    up, down = total + h * dev, total - h * dev
    grad = (np.asarray(pooled(up[..., 0], up[..., 1])) - np.asarray(pooled(down[..., 0], down[..., 1]))) / (2 * h)
    return head + m * grad
