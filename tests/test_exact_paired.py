"""Exact where the name says exact, intervals that hold at small n, and plans for the test that will be run:
McNemar's exact test on the discordant units, Monte Carlo sign flips that say so, the interval of a paired
difference of binary answers (Tango's and Agresti-Min's hull, clustered on effective counts), the clustered
share's t quantile, and `plan`'s n for exact McNemar and for clustered units."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom, binomtest, norm, t

from vlmcheck.run.task import Outcome
from test_decisions_48 import agresti_min_by_hand


def _runs(xa, xb, per=1):
    """Two runs' outcomes on the same samples, ``per`` answers a unit."""
    units = [f"u{i // per}" for i in range(len(xa))]
    a = {f"s{i}": Outcome(float(x), u, None, binary=True) for i, (x, u) in enumerate(zip(xa, units))}
    b = {f"s{i}": Outcome(float(x), u, None, binary=True) for i, (x, u) in enumerate(zip(xb, units))}
    return a, b


def _table(b, c, concordant):
    """b units right under A only, c under B only, the rest right under both."""
    return _runs([1] * b + [0] * c + [1] * concordant, [0] * b + [1] * c + [1] * concordant)


def hull_by_hand(b, c, n, q):
    """The hull of Tango's score interval (1998) and Agresti-Min's (2005) at quantile q, from their definitions:
    Tango's ends solve (b - c - n d) / sqrt(n (2 p21~ + d (1 - d))) = +/- q, p21~ the constrained MLE."""
    from scipy.optimize import brentq

    def score(d):
        A, B, C = 2 * n, -(b + c) + (2 * n - b + c) * d, -c * d * (1 - d)
        p21 = (math.sqrt(B * B - 4 * A * C) - B) / (2 * A)
        return (b - c - n * d) / math.sqrt(n * (2 * p21 + d * (1 - d)))

    e = 1 - 1e-9
    t_lo = -1.0 if score(-e) <= q else brentq(lambda d: score(d) - q, -e, (b - c) / n)
    t_hi = 1.0 if score(e) >= -q else brentq(lambda d: score(d) + q, (b - c) / n, e)
    bs, cs, ns = b + 0.5, c + 0.5, n + 2
    est, se = (bs - cs) / ns, math.sqrt((bs + cs) - (bs - cs) ** 2 / ns) / ns
    return min(t_lo, max(-1, est - q * se)), max(t_hi, min(1, est + q * se))


# ----------------------------------------------------------------------------- exact McNemar, whatever its size

@pytest.mark.parametrize("b, c, separated", [(75, 52, False), (87, 62, True)])
def test_mcnemar_exact_on_hundreds_of_units_matches_statsmodels(b, c, separated):
    from statsmodels.stats.contingency_tables import mcnemar

    from vlmcheck.methods.compare import compare_two

    ref = mcnemar([[600, b], [c, 0]], exact=True).pvalue  # the binomial test on the b + c discordant units
    row = compare_two(*_table(b, c, 600), "acc")
    assert row["test"] == "McNemar exact" and "mc_draws" not in row
    assert abs(row["p_value"] - ref) < 1e-9
    assert row["separated"] is separated and (row["ci95"][0] > 0) is separated


def test_a_monte_carlo_sign_flip_says_so_and_draws_again_near_the_level():
    from vlmcheck.metrics import signflip
    from vlmcheck.metrics.signflip import p_at_zero, paired_decision

    rng = np.random.default_rng(3)
    d = rng.normal(0.3, 1.0, 22) / 22  # 22 distinct contributions: 4 million sign patterns, more than enumerated
    # the exact p by meet in the middle: every sign pattern of the first 11 against every one of the last 11
    half = [np.array([sum(s * x for s, x in zip(signs, part)) for signs in itertools.product((-1, 1), repeat=11)])
            for part in (d[:11], d[11:])]
    total = (half[0][:, None] + half[1][None, :]).ravel()
    exact = float((np.abs(total) >= abs(d.sum()) - 1e-12).mean())
    p, draws, se = p_at_zero(d, levels=())
    assert draws == signflip.MC_RESAMPLES and se == pytest.approx(math.sqrt(p * (1 - p) / draws))
    assert abs(p - exact) < 4 * se
    dec = paired_decision(d, np.full(22, 1 / 22), (-2, 2), levels=(0.5,))
    assert f"Monte Carlo, {dec['mc_draws']:,} draws (p +/- {dec['p_mc_error']:.4f})" in dec["test"]
    # a level within 3 Monte Carlo errors of p: drawn again with five times the draws (the first draws kept)
    p2, draws2, se2 = p_at_zero(d, levels=(p + 2 * se,))
    assert draws2 >= signflip.MC_GROWTH * signflip.MC_RESAMPLES and se2 < se and abs(p2 - exact) < 4 * se2


def test_clustered_binary_sign_flips_are_exact_on_any_number_of_units():
    from vlmcheck.methods.compare import compare_two

    rng = np.random.default_rng(1)
    xa = (rng.random(160) < 0.8).astype(int)
    xb = (rng.random(160) < 0.7).astype(int)
    row = compare_two(*_runs(xa, xb, per=4), "acc")
    D = (xa - xb).reshape(40, 4).sum(1)  # each image's sum of differences, an integer
    # the sign-flip null of sum s_i |D_i| by convolution on the integers
    dist = {0: 1.0}
    for v in np.abs(D):
        nxt: dict[int, float] = {}
        for s, p in dist.items():
            for x in (s + v, s - v):
                nxt[x] = nxt.get(x, 0.0) + p / 2
        dist = nxt
    ref = sum(p for s, p in dist.items() if abs(s) >= abs(D.sum()))
    assert row["test"] == "clustered McNemar (sign flips of whole clusters), exact"
    assert row["p_value"] == pytest.approx(ref, abs=1e-12)


# ----------------------------------------------------------------------------- intervals at small n

def test_one_answer_a_unit_gets_the_hull_of_tango_and_agresti_min_by_hand():
    from vlmcheck.methods.compare import compare_two
    from vlmcheck.metrics.paired import agresti_min

    # the case: 20 units, 1 right under A only, none under B only
    assert agresti_min(1, 0, 20) == pytest.approx(agresti_min_by_hand(1, 0, 20))
    assert agresti_min(1, 0, 20) == pytest.approx((-0.0791, 0.1700), abs=5e-5)
    row = compare_two(*_table(1, 0, 19), "acc")
    lo, hi = hull_by_hand(1, 0, 20, norm.ppf(0.975) * math.sqrt(20 / 19))  # n - 1 df: sqrt(n / (n - 1))
    assert row["ci95"] == pytest.approx([lo, hi], abs=1e-8) and lo < -0.0791 and hi > 0.17
    # the inverted sign-flip test gave [0, 0.143] here, which misses a true difference of 0.15 that one
    # discordant unit of 20 is quite likely to come from; the hull holds it
    assert row["ci95"][1] > 0.15


def test_several_answers_a_unit_get_the_hull_on_effective_counts_by_hand():
    from vlmcheck.methods.compare import compare_two

    xa = [1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    xb = [0, 0, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1]
    row = compare_two(*_runs(xa, xb, per=3), "acc")
    a, b_ = np.array(xa), np.array(xb)
    n, m = 30, 10
    b, c = int(((a == 1) & (b_ == 0)).sum()), int(((a == 0) & (b_ == 1)).sum())
    D = (a - b_).reshape(m, 3).sum(1) / n  # each image's contribution to the difference; weights 3 / 30 each
    d = D.sum()
    clustered = m / (m - 1) * ((D - d / m) ** 2).sum()
    binomial = (b / n + c / n - (b / n - c / n) ** 2) / n
    deff = max(1.0, clustered / binomial)
    lo, hi = hull_by_hand(b / deff, c / deff, n / deff, t.ppf(0.975, m - 1))
    assert deff > 1 and row["ci95"] == pytest.approx([lo, hi], abs=1e-8)


def _wilson(p, ne, z):
    centre = (p + z * z / (2 * ne)) / (1 + z * z / ne)
    half = z / (1 + z * z / ne) * math.sqrt(p * (1 - p) / ne + z * z / (4 * ne * ne))
    return centre - half, centre + half


def test_a_clustered_share_uses_the_t_quantile_on_clusters_minus_one_by_hand():
    from vlmcheck.metrics.decisions import proportion_interval_counts, wilson_clustered

    k = np.array([12, 9, 11, 4, 10, 12, 12, 7, 11, 10], dtype=float)  # 10 images of 12 answers
    n = np.full(10, 12.0)
    N, p = n.sum(), k.sum() / n.sum()
    deff = 10 / 9 * ((k - p * n) ** 2).sum() / N ** 2 / (p * (1 - p) / N)
    lo, hi, got_deff = wilson_clustered(k, n)
    # the quantile: t on 9 df times sqrt(10 / 9) (0.924-0.929 coverage at 10-12 units of 12 with t alone)
    z = t.ppf(0.975, 9) * math.sqrt(10 / 9)
    assert got_deff == pytest.approx(deff) and (lo, hi) == pytest.approx(_wilson(p, N / deff, z))
    _, how = proportion_interval_counts(k, n, "image")
    assert how["method"].endswith("t quantile on units - 1 df x sqrt(units / (units - 1))")
    # 6 images of 12: too few to estimate the design effect; each image taken as one answer (effective n 6,
    # below the estimated 72 / deff), the normal quantile, labelled a bound
    k6, n6 = k[:6], n[:6]
    p6 = k6.sum() / 72
    lo, hi, got_deff = wilson_clustered(k6, n6)
    assert got_deff == pytest.approx(12.0) and (lo, hi) == pytest.approx(_wilson(p6, 6, norm.ppf(0.975)))
    _, how = proportion_interval_counts(k6, n6, "image")
    assert how["method"].startswith("wilson bound on the 6 units")


# ----------------------------------------------------------------------------- plan for the test that will be run

def test_mcnemar_power_is_the_exact_tests_by_enumeration():
    from vlmcheck.metrics.paired import mcnemar_power, n_mcnemar

    from functools import lru_cache

    @lru_cache(maxsize=None)
    def rejects(low, k):
        return binomtest(low, k, 0.5).pvalue <= 0.05

    def by_hand(n, pb, pc):  # every table (b, c, rest) and whether scipy's binomial test rejects on it
        total = 0.0
        for b in range(n + 1):
            for c in range(n + 1 - b):
                if b + c and rejects(min(b, c), b + c):
                    total += (math.comb(n, b) * math.comb(n - b, c) * pb ** b * pc ** c
                              * (1 - pb - pc) ** (n - b - c))
        return total

    for n, pb, pc in ((15, 0.3, 0.05), (24, 0.2, 0.1), (9, 0.5, 0.0)):
        assert mcnemar_power(n, pb, pc) == pytest.approx(by_hand(n, pb, pc), abs=1e-12)
    n = n_mcnemar(0.3, 0.05)
    assert mcnemar_power(n, 0.3, 0.05) >= 0.8 > mcnemar_power(n - 1, 0.3, 0.05) or \
        mcnemar_power(n - 1, 0.3, 0.05) >= 0.8 > mcnemar_power(n - 2, 0.3, 0.05)
    assert all(mcnemar_power(j, 0.3, 0.05) >= 0.8 for j in range(n, n + max(3, n // 10) + 1))


def test_the_fast_integer_sign_flip_p_is_p_at_zero():
    from vlmcheck.metrics.paired import _integer_p
    from vlmcheck.metrics.signflip import p_at_zero

    rng = np.random.default_rng(2)
    D = rng.integers(-3, 7, size=(40, 12))
    D[0] = 0
    got = _integer_p(D)
    assert got == pytest.approx([p_at_zero(r.astype(float))[0] for r in D], abs=1e-12)


def test_plan_of_clustered_pilots_sizes_units_with_their_design_effect_by_hand():
    from statsmodels.stats.power import TTestPower

    from vlmcheck.methods.plan import plan_metric

    rng = np.random.default_rng(4)
    unit = np.repeat(rng.normal(0, 0.15, 20), 5)  # 20 images of 5 samples, values sharing the image's effect
    xa = np.clip(0.6 + unit + rng.normal(0, 0.1, 100), 0, 1)
    xb = np.clip(xa - 0.05 + rng.normal(0, 0.08, 100), 0, 1)
    names = [f"img{i // 5}" for i in range(100)]
    a = {f"s{i}": Outcome(float(x), u, None) for i, (x, u) in enumerate(zip(xa, names))}
    b = {f"s{i}": Outcome(float(x), u, None) for i, (x, u) in enumerate(zip(xb, names))}
    row = plan_metric("score", a, b, delta=0.03)
    d = xa - xb
    resid = (d.reshape(20, 5).sum(1) - d.mean() * 5) / 5  # each image's mean difference about the pooled one
    sd = resid.std(ddof=1)
    units = math.ceil(TTestPower().solve_power(effect_size=0.03 / sd, alpha=0.05, power=0.8))
    assert row["sd_difference"] == pytest.approx(sd) and row["units_paired"] == max(units, 6)
    assert row["n_paired"] == 5 * row["units_paired"] and "clusters" in row["paired_test"]


def _clustered_pair(rng, units, per, rho=1 / 3):
    """A's error rate per image v ~ Beta (mean 0.15, intra-image correlation rho), B's min(1, 2 v); one uniform
    per answer for both (B right implies A right)."""
    s = (1 - rho) / rho
    v = np.repeat(rng.beta(0.15 * s, 0.85 * s, size=units), per)
    z = rng.random(units * per)
    return _runs((z >= v).astype(int), (z >= np.minimum(1.0, 2 * v)).astype(int), per=per)


@pytest.mark.slow
def test_plans_n_achieves_its_power_with_the_clustered_test():
    """Pilots of 60 images of 6 cases (intra-image correlation 1/3): at plan's n, compare's clustered test
    separates the runs in at least 0.78 of datasets, averaged over pilots (any one small pilot can miss either
    way: bench/plan_power.py, docs/world.md)."""
    from vlmcheck.methods.compare import pairwise
    from vlmcheck.methods.plan import plan_metric

    rng = np.random.default_rng(11)
    s = 2.0
    v = rng.beta(0.15 * s, 0.85 * s, size=2_000_000)
    delta = 0.85 - (1 - float(np.minimum(1.0, 2 * v).mean()))  # the true difference, about 0.14
    powers = []
    for _ in range(2):
        a, b = _clustered_pair(rng, 60, 6)
        row = plan_metric("acc", a, b, delta)
        assert row["paired_test"].startswith("clustered McNemar")
        units = math.ceil(row["n_paired"] / 6)
        powers.append(np.mean([pairwise(list(_clustered_pair(rng, units, 6)), "acc", intervals=False)
                               ["pairs"][0]["separated"] for _ in range(300)]))
    assert np.mean(powers) >= 0.78 and min(powers) >= 0.7, powers
