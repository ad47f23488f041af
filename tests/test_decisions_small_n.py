"""Small-sample intervals and plans: the degenerate sign-flip interval, CAST's headline at few pairs, plan on
CAST's pooled estimand.  Every expected value is computed here by hand from its definition."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np


def _wilson_by_hand(x: float, n: float, z: float) -> tuple[float, float]:
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_every_image_with_the_same_difference_gets_a_labelled_bound_not_a_point():
    from vlmcheck.metrics.signflip import decision_interval, paired_decision

    # GenCeption's 8 images in unequal categories (weights 1/(categories x category size)), each image's GC
    # 0.2 higher under A; the round-off of real scores (1e-10) must not hide that the differences are one value
    w = np.array([1 / 8, 1 / 8, 1 / 16, 1 / 16, 1 / 8, 1 / 24, 1 / 24, 1 / 24]) * 8 / 5.5
    w = w / w.sum()
    jitter = np.array([0, 1, -1, 2, 0, -2, 1, 0]) * 1e-10
    for sign in (1, -1):
        dec = paired_decision(sign * (0.2 + jitter) * w, w, (-1.0, 1.0))
        (lo, hi), note = decision_interval(dec)
        assert note is not None and note.startswith("bound: every one of the 8 units has the same difference")
        # p: only the two all-alike sign patterns are as extreme: 2 / 2^8, so the test rejects 0
        assert abs(dec["p_value"] - 2 / 256) < 1e-12
        # Wilson on the rescaled difference (0.2 + 1) / 2 = 0.6 of 8 units, mapped back to [-1, 1]
        _, wh = _wilson_by_hand(0.6 * 8, 8, NormalDist().inv_cdf(0.975))
        far = -1 + 2 * wh  # 0.6969...
        assert abs(far - 0.696937739999) < 1e-9
        if sign > 0:
            assert abs(hi - far) < 1e-9 and 0 < lo < 1e-9  # excludes 0, as the test does, and is not a point
        else:
            assert abs(lo + far) < 1e-9 and -1e-9 < hi < 0


def test_plan_of_cast_runs_plans_the_pooled_headline_not_the_mean_of_pair_shares(tmp_path):
    """The constructed runs of tests/test_decisions_62.py (every cell and format alike, so the headline is one
    pooled ratio): A 10 of 40 verdicts confirmed (0.250; mean of pair shares 0.500), B 20 of 40 (0.500; mean of
    pair shares 0.333).  Compare's difference is -0.250; the per-pair shares' would be +0.167."""
    from statistics import stdev

    from test_decisions_62 import A_PAIRS, B_PAIRS, _cast

    from vlmcheck.methods.plan import plan

    a = _cast(tmp_path / "A", "A", A_PAIRS)
    b = _cast(tmp_path / "B", "B", B_PAIRS)
    # by hand: pair i's influence on a pooled ratio R = C / S over m pairs is (c_i - R s_i) / (S / m)
    def lin(pairs):
        C, S, m = sum(c for _, c in pairs), sum(s for s, _ in pairs), len(pairs)
        R = C / S
        return [R + (c - R * s) / (S / m) for s, c in pairs]

    la, lb = lin(A_PAIRS), lin(B_PAIRS)
    assert la[0] == 0.625 and la[-1] == -0.125  # 0.25 +/- 0.375
    (row,) = plan([a], delta=0.1)["metrics"]
    assert abs(row["sd"] - stdev(la)) < 1e-9  # 0.3847; the pair shares' sd would be 0.5130
    assert "pooled" in row["estimand"]
    (row,) = plan([a, b], delta=0.1)["metrics"]
    d = [x - y for x, y in zip(la, lb)]
    assert abs(row["observed_difference"] - (-0.25)) < 1e-9 and abs(sum(d) / 20 + 0.25) < 1e-12
    assert abs(row["sd_difference"] - stdev(d)) < 1e-9


def test_paired_interval_of_eight_units_covers_at_least_093_where_it_covered_0929():
    """Exact coverage of compare's interval (one answer a unit) at 8 units, p_b 0.33 and p_c 0.59 (92 % of the
    units discordant): every table enumerated, its multinomial probability by hand.  At the normal quantile
    it was 0.929; on n - 1 degrees of freedom (the quantile times sqrt(n / (n - 1))) it holds 0.93."""
    from vlmcheck.metrics.signflip import decision_interval, paired_decision

    n, pb, pc = 8, 0.33, 0.59
    cover = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            d = np.r_[np.full(b, 1.0), np.full(c, -1.0), np.zeros(n - b - c)] / n
            dec = paired_decision(d, np.full(n, 1 / n), (-1.0, 1.0), binary=True, single_answers=True,
                                  counts=(b, c, n))
            (lo, hi), _ = decision_interval(dec)
            if lo <= pb - pc <= hi:
                r = n - b - c
                ways = math.factorial(n) // (math.factorial(b) * math.factorial(c) * math.factorial(r))
                cover += ways * pb ** b * pc ** c * (1 - pb - pc) ** r
    assert cover >= 0.93


def test_cast_headline_interval_is_the_jackknife_on_the_logit_scale_by_hand():
    """Six pairs, every cell and format alike (so the headline is one pooled ratio C / S of confirmed over parsed
    verdicts): (statements, confirmed) per pair.  The interval: logit(C / S) -/+ t_{5, 0.975} x the jackknife
    standard error of logit of the headline without each pair, sqrt((n - 1) / n x sum (l_i - mean l)^2)."""
    from test_decisions_62 import _cast_pair

    from vlmcheck.methods.cast_scores import cast_headline

    pairs = [(1, 1), (3, 2), (2, 1), (3, 3), (1, 0), (2, 1)]
    h = cast_headline([_cast_pair(i, s, c) for i, (s, c) in enumerate(pairs)])
    C, S, n = 8, 12, 6
    assert h["value"] == 2 / 3 == C / S
    loo = [(C - c) / (S - s) for s, c in pairs]  # 7/11, 6/9, 7/10, 5/9, 8/11, 7/10
    lg = [math.log(x / (1 - x)) for x in loo]
    mean = sum(lg) / n
    se = math.sqrt((n - 1) / n * sum((x - mean) ** 2 for x in lg))
    t5 = 2.570581835636  # t_{5, 0.975}, from the table
    expit = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    centre = math.log(2)  # logit(2/3)
    assert h["ci95"][0] == _approx(expit(centre - t5 * se)) and h["ci95"][1] == _approx(
        expit(centre + t5 * se))
    assert "jackknife" in h["interval"]["method"] and "bound" not in h["interval"]["method"]

    # one pair holds every refutation: without it the headline is 1, its logit infinite - a labelled Wilson
    # bound on the six pairs of 5/7 instead
    pairs = [(1, 1)] * 5 + [(2, 0)]
    h = cast_headline([_cast_pair(i, s, c) for i, (s, c) in enumerate(pairs)])
    assert h["value"] == 5 / 7
    lo, hi = _wilson_by_hand(5 / 7 * 6, 6, NormalDist().inv_cdf(0.975))
    assert h["ci95"][0] == _approx(lo) and h["ci95"][1] == _approx(hi)
    assert h["interval"]["method"].startswith("wilson bound on the 6 pairs")


def _approx(x):
    import pytest

    return pytest.approx(x, rel=1e-9, abs=1e-12)


def test_plan_from_a_small_pilot_says_its_n_is_uncertain():
    from vlmcheck.methods.plan import SMALL_PILOT, plan_metric
    from vlmcheck.run.task import Outcome

    rng = np.random.default_rng(0)

    def pilot(units):
        return {f"s{i}": Outcome(float(v), f"s{i}") for i, v in enumerate(rng.normal(0.5, 0.1, units))}

    row = plan_metric("gc", pilot(SMALL_PILOT - 1), None, 0.05)
    lo, hi = row["n_per_run_range"]
    assert row["pilot_warning"].startswith(f"the pilot has {SMALL_PILOT - 1} units")
    assert f"from {lo} to {hi}" in row["pilot_warning"] and lo < row["n_per_run_independent"] < hi
    assert "pilot_warning" not in plan_metric("gc", pilot(SMALL_PILOT), None, 0.05)


def test_cast_paired_plan_averages_the_t_power_over_the_pilots_sd_uncertainty(tmp_path):
    """A CAST plan's n: the smallest (at least 6, where a swap test can first reject at 0.05) whose paired t-test
    power, averaged over the deciles' midpoints of the sd's chi-square posterior (sd^2 (m - 1) / chi2(m - 1)),
    reaches 0.80, and at least the t-test's n at the sd's posterior 80th percentile - computed here with
    statsmodels' t-test power on the constructed runs' influence values.  Planned at the pilot's sd alone,
    CAST's swap test reached 0.68-0.74 on average from 10-20 pairs
    (bench/plan_power_cast.py)."""
    from statistics import stdev

    from scipy.stats import chi2
    from statsmodels.stats.power import TTestPower
    from test_decisions_62 import A_PAIRS, B_PAIRS, _cast

    from vlmcheck.methods.plan import plan

    def lin(pairs):  # as in the test above: a pooled ratio's influence values
        C, S, m = sum(c for _, c in pairs), sum(s for s, _ in pairs), len(pairs)
        return [C / S + (c - C / S * s) / (S / m) for s, c in pairs]

    d = [x - y for x, y in zip(lin(A_PAIRS), lin(B_PAIRS))]
    m, sd, delta = len(d), stdev(d), 0.2
    sds = [sd * math.sqrt((m - 1) / chi2.ppf((i + 0.5) / 10, m - 1)) for i in range(10)]

    def avg(n):
        return sum(TTestPower().power(delta / s, n, 0.05) for s in sds) / 10

    n = next(n for n in range(6, 10_000) if avg(n) >= 0.8)
    point = next(n for n in range(6, 10_000) if TTestPower().power(delta / sd, n, 0.05) >= 0.8)
    assert n > point  # the pilot's uncertainty costs pairs
    upper = sd * math.sqrt((m - 1) / chi2.ppf(0.2, m - 1))  # the sd's posterior 80th percentile
    n = max(n, next(n for n in range(2, 10_000) if TTestPower().power(delta / upper, n, 0.05) >= 0.8))
    (row,) = plan([_cast(tmp_path / "A", "A", A_PAIRS), _cast(tmp_path / "B", "B", B_PAIRS)], delta=delta)["metrics"]
    assert row["n_paired"] == n and "uncertainty about their sd" in row["paired_test"]
