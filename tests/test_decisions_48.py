"""Issue 48: decisions that are right.  One test per finding, each on a constructed case whose right answer is
computed here by hand: p-values from the exact sign-flip (permutation) distribution, enumerated with
itertools.product; intervals from their definition (the hull of the shifts the test does not reject, found on a
grid by brute force)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from conftest import run_cli


# ----------------------------------------------------------------------------- constructed runs

def _vhx(folder, model, correct, ids=None, per=1, headline=None):
    folder.mkdir(parents=True)
    ids = list(ids) if ids is not None else list(range(len(correct)))
    rows = [{"sample_id": f"case{i}", "status": "done", "task": "vhexpansion", "seq": i,
             "result": {"image": f"img{i // per}.png", "variants": {"original": {"correct": bool(c)}}}}
            for i, c in zip(ids, correct)]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    value = sum(correct) / len(correct)
    h = headline or ("accuracy", value, [max(0.0, value - 0.1), min(1.0, value + 0.1)])
    (folder / "results.json").write_text(json.dumps(
        {"task": "vhexpansion", "spec": {"task_spec": {"vlm": model}}, "counts": {},
         "metrics": {"headline": {"name": h[0], "value": h[1], "ci95": h[2], "interval": {}}}}))
    return folder


def _gen(folder, model, scores, cats, ids=None):
    """A GenCeption run: GC@3 per image, its category; the headline the mean of the category means."""
    folder.mkdir(parents=True)
    ids = list(ids) if ids is not None else list(range(len(scores)))
    rows = [{"sample_id": f"img{i}", "status": "done", "task": "genception", "seq": i,
             "result": {"complete": True, "gc": {"GC@3": v}, "category": c, "image": f"img{i}",
                        "image_sha256": f"h{i}"}} for i, v, c in zip(ids, scores, cats)]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    by: dict[str, list[float]] = {}
    for v, c in zip(scores, cats):
        by.setdefault(c, []).append(v)
    value = float(np.mean([np.mean(v) for v in by.values()]))
    (folder / "results.json").write_text(json.dumps(
        {"task": "genception", "spec": {"task_spec": {"vlm": model, "generator": "g", "encoder": "e"}},
         "counts": {},
         "metrics": {"T": 3, "chains": {"scored": len(scores), "failed": 0},
                     "GC@3": {"score": value, "ci95": [value - 0.1, value + 0.1]},
                     "headline": {"name": "GC@3", "value": value, "ci95": [value - 0.1, value + 0.1],
                                  "interval": {}}}}))
    return folder


def exact_p(D, W=None, delta=0.0):
    """Two-sided sign-flip p-value of sum(D - delta W), by enumerating every sign pattern."""
    D = np.asarray(D, dtype=float)
    W = np.full(len(D), 1.0 / len(D)) if W is None else np.asarray(W, dtype=float)
    x = D - delta * W
    obs = abs(x.sum())
    hits = sum(abs(np.dot(s, x)) >= obs - 1e-12 for s in itertools.product((1, -1), repeat=len(D)))
    return hits / 2 ** len(D)


def agresti_min_by_hand(b, c, n, alpha=0.05, z=None):
    """Agresti and Min (2005): the Wald interval of (b - c) / n after adding 1/2 to each cell of the 2x2 table."""
    z = __import__("scipy.stats").stats.norm.ppf(1 - alpha / 2) if z is None else z
    bs, cs, ns = b + 0.5, c + 0.5, n + 2
    est, se = (bs - cs) / ns, math.sqrt((bs + cs) - (bs - cs) ** 2 / ns) / ns
    return max(-1.0, est - z * se), min(1.0, est + z * se)


def tango_by_hand(b, c, n, alpha=0.05, z=None):
    """Tango (1998): the deltas whose score statistic lies within +/- z, on a grid of 1e-5 refined by brentq."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2) if z is None else z

    def score(d):  # p21~: the root of 2n p^2 + (-(b + c) + (2n - b + c) d) p - c d (1 - d) = 0
        A, B, C = 2 * n, -(b + c) + (2 * n - b + c) * d, -c * d * (1 - d)
        p21 = (math.sqrt(B * B - 4 * A * C) - B) / (2 * A)
        return (b - c - n * d) / math.sqrt(n * (2 * p21 + d * (1 - d)))

    grid = np.linspace(-1 + 1e-9, 1 - 1e-9, 200_001)
    inside = [d for d in grid[::100] if abs(score(d)) <= z]
    lo = -1.0 if abs(score(grid[0])) <= z else brentq(lambda d: score(d) - z, grid[0], inside[0])
    hi = 1.0 if abs(score(grid[-1])) <= z else brentq(lambda d: score(d) + z, inside[-1], grid[-1])
    return lo, hi


def paired_interval_by_hand(b, c, n, alpha=0.05):
    """compare's interval of a difference of matched shares: the hull of Tango's and Agresti-Min's, at the
    normal quantile times sqrt(n / (n - 1)) (the variance of n units on n - 1 degrees of freedom)."""
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2) * math.sqrt(n / (n - 1))
    t, a = tango_by_hand(b, c, n, alpha, z), agresti_min_by_hand(b, c, n, alpha, z)
    return min(t[0], a[0]), max(t[1], a[1])


def inverted(D, W, alpha, grid):
    """The interval from its definition: the hull of the deltas on ``grid`` whose test does not reject."""
    inside = [d for d in grid if exact_p(D, W, d) > alpha]
    return min(inside), max(inside)


# ----------------------------------------------------------------------------- finding 1: the right leader

def test_partial_overlap_leader_and_margin_on_the_shared_samples(tmp_path):
    from vlmcheck.methods.compare import compare_runs
    from vlmcheck.methods.decide import decide

    # A: cases 0-19, right on 0-13 (0.70); B: cases 10-29, right on 10-19 (0.50).  On the shared cases 10-19
    # A has 4 of 10, B 10 of 10: B leads by 0.6, six discordant cases all B's: exact p = 2 / 2^6
    a = _vhx(tmp_path / "A", "A", [1] * 14 + [0] * 6, ids=range(0, 20))
    b = _vhx(tmp_path / "B", "B", [1] * 10 + [0] * 10, ids=range(10, 30))
    (d,) = decide([a, b])
    r = d["runner_up"]
    assert d["leader"] == "B" and d["value"] == pytest.approx(1.0) and r["value"] == pytest.approx(0.4)
    assert r["difference"] == pytest.approx(0.6) and r["p_value"] == pytest.approx(2 / 64) and d["separated"]
    assert d["n_shared"] == 10 and d["n_left_out"] == 20
    # one answer per case: the hull of Tango's and Agresti-Min's intervals of B - A, 6 right under B only, none
    # under A only, of 10
    lo, hi = paired_interval_by_hand(6, 0, 10)
    assert r["ci95"] == pytest.approx([lo, hi], abs=1e-8)
    assert r["ci95"][0] > 0
    assert "ahead" not in d["sentence"] and "separated" in d["sentence"]
    # compare says the same: A - B = -0.6 on the same 10 cases, the same p
    (c,) = compare_runs([a, b])["comparisons"]
    assert c["difference"] == pytest.approx(-0.6) and c["p_value"] == pytest.approx(2 / 64) and c["n_paired"] == 10


def test_genception_unequal_categories_compared_on_the_category_weighted_mean(tmp_path):
    from vlmcheck.methods.compare import compare_runs
    from vlmcheck.methods.decide import decide

    # category x holds one image, y three.  A: x 0.9, y 0.2 0.2 0.2 (mean of means 0.55, image mean 0.375);
    # B: x 0.1, y 0.5 0.5 0.5 (0.30; image mean 0.40).  The headline's paired difference A - B is
    # (0.8 + (-0.3)) / 2 = 0.25, not the image mean's -0.025.  Per image: x weighs 1/2, each y image 1/6
    cats = ["x", "y", "y", "y"]
    a = _gen(tmp_path / "A", "A", [0.9, 0.2, 0.2, 0.2], cats)
    b = _gen(tmp_path / "B", "B", [0.1, 0.5, 0.5, 0.5], cats)
    (c,) = compare_runs([a, b])["comparisons"]
    D, W = [0.8 / 2, -0.3 / 6, -0.3 / 6, -0.3 / 6], [1 / 2, 1 / 6, 1 / 6, 1 / 6]
    assert c["difference"] == pytest.approx(0.25) and c["p_value"] == pytest.approx(exact_p(D, W))
    (d,) = decide([a, b])
    assert d["leader"] == "A" and d["runner_up"]["difference"] == pytest.approx(0.25)
    assert d["value"] == pytest.approx(0.55) and not d["separated"]  # 4 images: p = 1 by enumeration


# ----------------------------------------------------------------------------- finding 2: the test decides

def test_separated_only_when_the_exact_test_rejects(tmp_path):
    from vlmcheck.methods.decide import decide

    # 4 vs 0 discordant cases out of 100 (one case per image): exact p = 2 / 2^4 = 0.125, not separated
    a = _vhx(tmp_path / "A", "A", [1] * 54 + [0] * 46)
    b = _vhx(tmp_path / "B", "B", [1] * 50 + [0] * 50)
    (d,) = decide([a, b])
    r = d["runner_up"]
    assert r["p_value"] == pytest.approx(0.125) and not r["separated"] and r["ci95"][0] <= 0 <= r["ci95"][1]
    assert d["sentence"].endswith("cannot be separated.")
    # one image with 24 questions, 4 right under A only: one cluster, p = 1, the interval is the range
    a1 = _vhx(tmp_path / "A1", "A", [1] * 4 + [0] * 20, per=24)
    b1 = _vhx(tmp_path / "B1", "B", [0] * 24, per=24)
    (d1,) = decide([a1, b1])
    r1 = d1["runner_up"]
    assert r1["p_value"] == 1.0 and r1["ci95"] == [-1.0, 1.0] and not r1["separated"]
    assert r1["note"].startswith("bound")


def test_the_interval_never_excludes_0_beside_a_p_above_alpha():
    from vlmcheck.metrics.signflip import SignFlip, decision_interval, paired_decision

    rng = np.random.default_rng(7)
    for trial in range(60):
        k = int(rng.integers(2, 11))
        D = np.round(rng.normal(0.15, 0.3, k), 2) / k
        W = np.full(k, 1.0 / k)
        dec = paired_decision(D, W, (-1.0, 1.0))
        assert dec["p_value"] == pytest.approx(exact_p(D, W))
        ci, _ = decision_interval(dec, 0.05)
        assert (ci[0] > 0 or ci[1] < 0) == (dec["p_value"] <= 0.05), (trial, D, ci, dec["p_value"])
    # and the interval is the test inverted, from its definition (grid of 0.001)
    D = np.array([0.3, 0.5, 0.2, 0.6, 0.1, 0.4, -0.1]) / 7
    W = np.full(7, 1 / 7)
    lo, hi = inverted(D, W, 0.05, np.round(np.arange(-0.5, 1.0, 0.001), 3))
    got = SignFlip(D, W).interval(0.05)
    assert got[0] == pytest.approx(lo, abs=0.0011) and got[1] == pytest.approx(hi, abs=0.0011)


# ----------------------------------------------------------------------------- finding 3: Holm on the screen

def test_three_models_on_the_screen_are_holm_corrected(tmp_path):
    from vlmcheck.methods.decide import decide

    # A is right on 6 cases more than C, B halfway: A - C has 6 discordant (p = 2/64), A - B and B - C 3
    # (p = 2/8).  Holm: 3 x 2/64 = 0.09375 > 0.05 - nobody is separated, where each test alone rejects A - C
    a = _vhx(tmp_path / "A", "A", [1] * 16 + [0] * 4)
    b = _vhx(tmp_path / "B", "B", [1] * 13 + [0] * 7)
    c = _vhx(tmp_path / "C", "C", [1] * 10 + [0] * 10)
    (d,) = decide([c, b, a])
    assert d["leader"] == "A"
    rb, rc = d["against"]
    assert rc["model"] == "C" and rc["p_value"] == pytest.approx(2 / 64)
    assert rc["p_holm"] == pytest.approx(3 * 2 / 64) and not rc["separated"]
    assert rb["p_holm"] == pytest.approx(max(3 * 2 / 64, 2 * 2 / 8))
    assert d["tied_with"] == ["B", "C"]
    assert rc["ci95"][0] <= 0 <= rc["ci95"][1]  # judged at Holm's level 0.05 / 3


# ----------------------------------------------------------------------------- finding 4: one-image strata

def test_one_image_categories_get_an_interval_not_a_point(tmp_path):
    from vlmcheck.methods.genception import _score
    from vlmcheck.metrics.stats import bootstrap_ci_strata

    # six categories of one image each, scores 0.36-0.55: the old stratified bootstrap gave zero width and the
    # label "every image scored the same"
    v = np.array([0.36, 0.40, 0.45, 0.48, 0.50, 0.55])
    cats = list("abcdef")
    s = _score(v, cats, 0)
    assert "every image scored the same" not in s["interval"]["method"]
    lo, hi = s["ci95"]
    se = v.std(ddof=1) / math.sqrt(6)  # each resample: the mean of six residual draws about the grand mean
    assert lo < v.mean() < hi and 2 * se < hi - lo < 6 * se
    # a one-image category adds spread: its value moves by the pooled residuals
    w1 = np.subtract(*reversed(bootstrap_ci_strata([0.2, 0.3, 0.9], ["a", "a", "b"])))
    assert w1 > np.subtract(*reversed(bootstrap_ci_strata([0.2, 0.3], ["a", "a"]))) / 2


def test_genceptions_interval_is_the_expanded_percentile_at_the_satterthwaite_df_by_hand():
    """Left of issue 48: GenCeption's stratified bootstrap covered 0.88-0.93 with categories of 2-5 images
    (bench/interval_coverage.py).  The Rao-Wu rescaling gives each category's resampled mean the unbiased
    variance s_c^2 / n_c; the expanded percentile interval then takes the t quantile at the Welch-Satterthwaite
    df of sum_c s_c^2 / n_c (a one-image category: the variance of all N values, on N - 1 df)."""
    from scipy.stats import norm, t

    from vlmcheck.methods.genception import _score
    from vlmcheck.metrics.stats import bootstrap_ci_strata

    v = np.array([0.50, 0.62, 0.40, 0.45, 0.58, 0.70, 0.30])
    cats = ["a", "a", "b", "b", "b", "b", "c"]
    a_, b_ = v[:2], v[2:6]
    terms = [(a_.var(ddof=1) / 2, 1), (b_.var(ddof=1) / 4, 3), (v.var(ddof=1) / 1, 6)]
    df = sum(x for x, _ in terms) ** 2 / sum(x * x / d for x, d in terms)
    q = norm.cdf(-t.ppf(0.975, df))  # each tail of the expanded interval
    s = _score(v, cats, 0)
    assert s["ci95"] == pytest.approx(list(bootstrap_ci_strata(v, cats, seed=0, level=1 - 2 * q)), abs=1e-12)
    assert 0.0005 < q < 0.025 and "expanded percentile" in s["interval"]["method"]
    plain = bootstrap_ci_strata(v, cats, seed=0)
    assert s["ci95"][0] < plain[0] and s["ci95"][1] > plain[1]


def test_chefs_ratio_interval_is_the_expanded_percentile_of_its_resamples_by_hand():
    """Left of issue 48: ChEF's ratios (RRM, RIAM, match ratio, 1 - ECE, the judge's score) used the plain
    percentile of a cluster bootstrap.  Now Hesterberg's expanded percentile on the n images: the quantiles at
    Phi(-sqrt(n / (n - 1)) t_{n-1, 0.975}) of the same resamples; a [0, 1] figure on 5 images or fewer gets the
    Wilson bound on the images, labelled."""
    from scipy.stats import norm, t

    from vlmcheck.methods.chef.headline import _boot
    from vlmcheck.methods.chef.items import Items

    def items(correct, corrupt, per=1):
        m = len(correct)
        cols = {"original": {"correct": np.array(correct, bool)},
                "corrupt:both": {"correct": np.array(corrupt, bool)}}
        return Items(np.arange(m) // per, [f"i{i}" for i in range(m)], np.full(m, 4.0), ["original", "corrupt:both"],
                     cols, -1, np.full(m, -1), np.zeros(m, bool))

    acc = lambda it: float(np.mean(it.cols["original"]["correct"]))  # noqa: E731
    it = items([1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 0, 1], [0] * 16, per=2)  # 8 images of 2 items
    reps = []

    def recorded(sub):
        reps.append(acc(sub))
        return reps[-1]

    e = _boot(it, "x", acc(it), recorded, seed=0)
    n = 8
    q = norm.cdf(-math.sqrt(n / (n - 1)) * t.ppf(0.975, n - 1))  # sqrt(8/7) x 2.3646 = 2.528: 0.00574
    assert len(reps) == 1000 and q == pytest.approx(0.00574, abs=5e-5)
    assert e["ci95"] == pytest.approx([np.quantile(reps, q), np.quantile(reps, 1 - q)], abs=1e-12)
    assert "expanded percentile" in e["interval"]["method"] and e["interval"]["n_units"] == 8
    # a [0, 1] figure on 3 images (2 of them all right): Wilson of 5/6 x 3 of 3, labelled a bound
    small = items([1, 1, 1, 1, 0, 1], [0] * 6, per=2)
    e3 = _boot(small, "x", acc(small), acc, seed=0, bounded=True)
    z, x, m = 1.959963984540054, 2.5, 3
    p = x / m
    centre = (p + z * z / (2 * m)) / (1 + z * z / m)
    half = z / (1 + z * z / m) * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m))
    assert e3["ci95"] == pytest.approx([centre - half, centre + half], abs=1e-12)
    assert e3["interval"]["method"].startswith("wilson bound on the 3 image(s)")
    # RRM (unbounded) where every item is right in both settings: 100 in every resample, said to be no spread
    from vlmcheck.methods.chef.headline import _rrm_both

    perfect = items([1] * 8, [1] * 8)
    e8 = _boot(perfect, "RRM", _rrm_both(perfect), _rrm_both, seed=0)
    assert e8["value"] == pytest.approx(100.0) and e8["ci95"] == pytest.approx([100.0, 100.0])
    assert "no spread" in e8["interval"]["method"] and "not a bound" in e8["interval"]["method"]


# ----------------------------------------------------------------------------- finding 5: plan at the edges

def test_plan_from_a_pilot_where_every_answer_is_right(tmp_path):
    from scipy.stats import nct, t

    from vlmcheck.methods.plan import plan

    pilot = _vhx(tmp_path / "P", "P", [1] * 30)
    (m,) = plan([pilot], delta=0.05)["metrics"]
    # Wilson's 95 % interval of 30 of 30: [30 / (30 + z^2), 1]; the spread at its lower limit
    z = 1.959963984540054
    q = 30 / (30 + z * z)
    sd = math.sqrt(q * (1 - q))

    def power(n):
        df, ncp = 2 * n - 2, 0.05 / (sd * math.sqrt(2 / n))
        c = t.ppf(0.975, df)
        return nct.sf(c, df, ncp) + nct.cdf(-c, df, ncp)

    n = next(n for n in range(2, 10000) if power(n) >= 0.8)
    assert m["sd"] == pytest.approx(sd) and m["n_per_run_independent"] == n and n > 100
    # the range's low end: never below 6 units, the fewest at which a sign-flip test can reject (2 / 2^6 <= 0.05)
    assert m["sd_basis"].startswith("bound") and m["n_per_run_range"][0] == 6 and m["n_per_run_range"][1] == n
    assert m["mde_at_pilot_n"] is None or m["mde_at_pilot_n"] > 0.05


def test_plan_uses_the_t_test_where_the_normal_undersizes():
    from scipy.stats import nct, norm, t

    from vlmcheck.methods.plan import n_t

    # a paired difference of sd 1 and delta 1: the normal formula gives ceil((1.96 + 0.84)^2) = 8
    assert math.ceil((norm.ppf(0.975) + norm.ppf(0.8)) ** 2) == 8

    def power(n):
        c = t.ppf(0.975, n - 1)
        return nct.sf(c, n - 1, math.sqrt(n)) + nct.cdf(-c, n - 1, math.sqrt(n))

    assert n_t(1.0, 1.0, 0.05, 0.8, paired=True) == next(n for n in range(2, 100) if power(n) >= 0.8) == 10


# ----------------------------------------------------------------------------- finding 6: no crash

def test_one_shared_sample_and_none_shared_say_so_in_one_sentence(tmp_path):
    from vlmcheck.methods.decide import decide
    from vlmcheck.report.html import build_report

    a = _gen(tmp_path / "A", "A", [0.5, 0.6], ["x", "y"], ids=[0, 1])
    b = _gen(tmp_path / "B", "B", [0.4, 0.7], ["x", "y"], ids=[1, 2])  # img1 only in both
    p = run_cli("compare", str(a), str(b), "--json", "-o", str(tmp_path / "lb.json"))
    assert p.returncode == 0, p.stderr
    (c,) = json.loads(p.stdout)["comparisons"]
    assert c["n_paired"] == 1 and c["p_value"] == 1.0 and "one shared sample" in c["note"]
    # none shared
    n1 = _vhx(tmp_path / "N1", "N1", [1, 0], ids=[0, 1])
    n2 = _vhx(tmp_path / "N2", "N2", [1, 1], ids=[5, 6])
    rows = {d["method"]: d for d in decide([a, b, n1, n2])}
    assert "one shared sample" in rows["genception"]["sentence"]
    assert "share no finished sample" in rows["vhexpansion"]["sentence"]
    page = build_report([a, b, n1, n2], tmp_path / "r.html").read_text()
    assert "one shared sample" in page and "share no finished sample" in page


# ----------------------------------------------------------------------------- finding 7: one giant cluster

def test_one_cluster_of_24_answers_is_one_unit():
    from vlmcheck.metrics.decisions import proportion_interval

    ci, how = proportion_interval([1] * 15 + [0] * 9, ["img"] * 24, "image")
    # one unit: effective n 1 with 15/24 of a success; Clopper-Pearson from its beta quantiles
    from scipy.stats import beta

    x = 15 / 24
    assert ci == pytest.approx([beta.ppf(0.025, x, 1 - x + 1), beta.ppf(0.975, x + 1, 1 - x)])
    assert how["design_effect"] == 24 and ci[0] < 0.2 and ci[1] > 0.95
    assert "bound" in how["method"]


# ----------------------------------------------------------------------------- finding 8: clustered McNemar

def test_mcnemar_clusters_the_answers_of_one_image(tmp_path):
    from vlmcheck.methods.compare import compare_runs

    # 12 discordant answers, all A's, on 2 images of 6: unclustered McNemar would give 2 / 2^12 = 0.0005;
    # two clusters give p = 2 / 2^2 = 0.5 (both images flipped the same way are as extreme as observed)
    a = _vhx(tmp_path / "A", "A", [1] * 12, per=6)
    b = _vhx(tmp_path / "B", "B", [0] * 12, per=6)
    (c,) = compare_runs([a, b])["comparisons"]
    assert c["p_value"] == pytest.approx(exact_p([0.5, 0.5])) == 0.5
    assert c["test"].startswith("clustered McNemar") and c["ci95"][0] <= 0 <= c["ci95"][1]


def test_chef_compare_clusters_by_image_as_its_headline():
    from vlmcheck.methods.outcomes import _chef

    o = _chef({"image": "im1.jpg", "settings": {"standard": {"correct": True}}},
              {"headline": {"name": "POPE accuracy"}})
    assert o["POPE accuracy"].unit == "im1.jpg" and o["POPE accuracy"].binary


# ----------------------------------------------------------------------------- finding 9: bounds and wording

def test_a_shares_detectable_difference_never_exceeds_its_range():
    from vlmcheck.metrics.decisions import headline_entry, mde_from_interval

    # an interval [0, 1] of a share: se = 1 / 3.92, MDE = 2.80 x sqrt(2) x se = 1.01 > 1: none detectable
    assert mde_from_interval([0.0, 1.0]) > 1
    e = headline_entry("accuracy", 0.5, [0.0, 1.0], {})
    assert e["interval"]["min_detectable_difference"] is None and "none" in e["interval"]["mde_basis"]


def test_a_shares_detectable_difference_from_its_clustered_interval_stays_in_range():
    from vlmcheck.metrics.decisions import headline_entry, proportion_interval_counts

    z, zp = 1.959963984540054, 0.8416212335729143  # the 97.5 % and 80 % normal quantiles
    # 1 of 2 one-answer images: (z + z_0.8) sqrt(2 x 0.5 x 0.5 / 2) = 1.40 > 1, the largest difference a share can
    # show: none is detectable (finding 9 printed 1.40), and the headline does not refill it from the interval
    ci, how = proportion_interval_counts(np.array([1.0, 0.0]), np.array([1.0, 1.0]), "image")
    assert (z + zp) * math.sqrt(2 * 0.25 / 2) == pytest.approx(1.4008, abs=1e-4)
    assert how["min_detectable_difference"] is None and how["mde_basis"].startswith("none")
    e = headline_entry("accuracy", 0.5, ci, how)
    assert e["interval"]["min_detectable_difference"] is None and e["interval"]["mde_basis"].startswith("none")
    # 20 of 40: (z + z_0.8) sqrt(2 x 0.25 / 40) = 0.3132, within the range, kept
    _, how = proportion_interval_counts(np.array([1.0] * 20 + [0.0] * 20), np.ones(40), "image")
    assert how["min_detectable_difference"] == pytest.approx((z + zp) * math.sqrt(0.5 / 40), rel=1e-9)
    assert not how["mde_basis"].startswith("none")


@pytest.mark.slow
def test_the_screen_never_shows_a_negative_lead_or_a_bare_tie(tmp_path):
    """Finding 9's wording: "ahead ... by -0.300" (a lead measured on other samples than the ranking) and
    "tied with (95%)".  The partial-overlap case of finding 1 on the report's first screen, its leaderboard and
    ``vlmcheck compare``; the three-model case of finding 3 on the first screen."""
    from vlmcheck.report.html import build_report

    a = _vhx(tmp_path / "A", "A", [1] * 14 + [0] * 6, ids=range(0, 20))
    b = _vhx(tmp_path / "B", "B", [1] * 10 + [0] * 10, ids=range(10, 30))
    page = build_report([a, b], tmp_path / "r.html").read_text()
    # B leads on the 10 shared cases by 1.0 - 0.4 = 0.6; six discordant cases all B's: p = 2 / 2^6 = 0.03125;
    # one pair: Holm p = p; the interval is the hull of Tango's and Agresti-Min's (one answer a case)
    lo, hi = paired_interval_by_hand(6, 0, 10)
    assert "B leads on accuracy with 1.000 on the 10 samples all its runs share (20 left out)" in page
    assert "+0.600" in page and "-0.600" not in page and "by -" not in page and "ahead" not in page
    m = __import__("re").search(r"behind the leader by 0\.6000 \[([-0-9.]+), ([-0-9.]+)\], Holm p 0\.0313", page)
    assert m and float(m.group(1)) == pytest.approx(lo, abs=0.0051)
    assert float(m.group(2)) == pytest.approx(hi, abs=0.0051)
    assert "tied with" not in page and "yes, from every other model" in page
    # compare states the signed difference A - B, never as a lead
    p = run_cli("compare", str(a), str(b))
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())
    assert "A - B = -0.6000" in out and "p 0.03125" in out and ": separated; 10 shared, 20 left out" in out
    assert "ahead" not in out and "tied" not in out
    # three models, Holm: nobody separated; the screen says from whom, never "tied with" (nor with nobody)
    runs = [_vhx(tmp_path / n, n, [1] * k + [0] * (20 - k)) for n, k in (("C3", 10), ("B3", 13), ("A3", 16))]
    page = build_report(runs, tmp_path / "r3.html").read_text()
    assert "no: cannot be separated from B3, C3" in page and "tied with" not in page


# ----------------------------------------------------------------------------- item 2: a new method

class ToyTask:
    """A method added as docs/architecture.md says, declaring its outcomes: nothing else knows its name."""

    name = "toy48"

    @staticmethod
    def decision_outcomes(result, run_metrics):
        from vlmcheck.run.task import Outcome

        return {"toy score": Outcome(float(result["score"]), str(result["image"]), binary=True)}


def test_a_new_method_appears_in_compare_and_the_decisions(tmp_path):
    from vlmcheck.methods.compare import compare_runs
    from vlmcheck.methods.decide import decide
    from vlmcheck.run.task import register_task

    register_task("toy48", ToyTask)
    runs = []
    for name, right in (("T1", [1] * 8), ("T2", [0] * 8)):
        f = tmp_path / name
        f.mkdir()
        (f / "samples.jsonl").write_text("".join(json.dumps(
            {"sample_id": f"s{i}", "status": "done", "result": {"score": r, "image": f"i{i}"}}) + "\n"
            for i, r in enumerate(right)))
        v = sum(right) / 8
        (f / "results.json").write_text(json.dumps(
            {"task": "toy48", "spec": {"task_spec": {"vlm": name}}, "counts": {},
             "metrics": {"headline": {"name": "toy score", "value": v, "ci95": [v, v], "interval": {}}}}))
        runs.append(f)
    (c,) = compare_runs(runs)["comparisons"]
    assert c["metric"] == "toy score" and c["p_value"] == pytest.approx(2 / 2 ** 8) and c["separated"]
    (d,) = decide(runs)
    assert d["method"] == "toy48" and d["leader"] == "T1" and d["separated"]


def test_rrm_below_15_images_is_the_bonferroni_box_bound_by_hand():
    """Left of issue 48 (item 3): RRM's cluster bootstrap covered 0.73 at 6 images of one item.  Below 15 images
    RRM = (c - r) / (o - r) x 100 gets its range over the Wilson intervals of o and c at 97.5 % each (Bonferroni),
    labelled a bound; unbounded (no interval, said) where o's interval reaches chance."""
    from scipy.stats import norm

    from vlmcheck.methods.chef.headline import rrm_headline
    from vlmcheck.methods.chef.items import Items

    def items(correct, corrupt):
        m = len(correct)
        cols = {"original": {"correct": np.array(correct, bool)},
                "corrupt:both": {"correct": np.array(corrupt, bool)}}
        return Items(np.arange(m), [f"i{i}" for i in range(m)], np.full(m, 4.0), ["original", "corrupt:both"],
                     cols, -1, np.full(m, -1), np.zeros(m, bool))

    def wilson(k, n, z):
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return centre - half, centre + half

    z = norm.ppf(1 - 0.025 / 2)  # 2.2414
    r = 0.25
    # 10 images, one item each: 9 right originally, 6 right corrupted; RRM = (0.6 - 0.25) / (0.9 - 0.25) x 100
    it = items([1] * 9 + [0], [1] * 6 + [0] * 4)
    e = rrm_headline(it, (0.6 - r) / (0.9 - r) * 100, seed=0)
    (o_lo, o_hi), (c_lo, c_hi) = wilson(9, 10, z), wilson(6, 10, z)
    assert o_lo > r and c_lo > r  # c's interval above chance: lower end over o's upper end, upper over o's lower
    assert e["ci95"] == pytest.approx([(c_lo - r) / (o_hi - r) * 100, (c_hi - r) / (o_lo - r) * 100], abs=1e-9)
    assert e["interval"]["method"].startswith("bound on 10 images") and "conservative" in e["interval"]["method"]
    assert e["ci95"][0] < e["value"] < e["ci95"][1]
    # the corrupted accuracy's interval reaching below chance: its lower end over o's LOWER end (more negative)
    it2 = items([1] * 9 + [0], [1] * 2 + [0] * 8)
    (c2_lo, c2_hi) = wilson(2, 10, z)
    assert c2_lo < r < c2_hi
    e2 = rrm_headline(it2, (0.2 - r) / (0.9 - r) * 100, seed=0)
    assert e2["ci95"] == pytest.approx([(c2_lo - r) / (o_lo - r) * 100, (c2_hi - r) / (o_lo - r) * 100], abs=1e-9)
    # 6 images, 3 right originally: o's interval reaches chance, the denominator can be 0: unbounded, said
    it3 = items([1] * 3 + [0] * 3, [1] * 2 + [0] * 4)
    assert wilson(3, 6, z)[0] < r
    e3 = rrm_headline(it3, (2 / 6 - r) / (0.5 - r) * 100, seed=0)
    assert e3["ci95"] is None and e3["interval"]["method"].startswith("unbounded")
    # from 15 images on (here 20): the cluster bootstrap (expanded percentile), as before
    it4 = items([1] * 18 + [0] * 2, [1] * 12 + [0] * 8)
    e4 = rrm_headline(it4, (0.6 - r) / (0.9 - r) * 100, seed=0)
    assert "expanded percentile" in e4["interval"]["method"]


def test_genception_on_5_images_or_fewer_is_the_labelled_wilson_bound_by_hand():
    """Left of issue 48 (item 3): GenCeption on 5 images or fewer kept its bootstrap (0.88 coverage on categories of
    2 and 3 images).  Now the Wilson bound of the category-weighted mean rescaled from [-1, 1], on the Kish
    effective n of the category weights, as CAST's and ChEF's [0, 1] figures there, labelled."""
    from vlmcheck.methods.genception import _score

    v = np.array([0.2, 0.6, 0.4, 0.5, 0.3])
    cats = ["a", "b", "b", "b", "b"]  # weights 1/2 for a's image, 1/8 for each of b's
    s = _score(v, cats, seed=0)
    score = (0.2 + (0.6 + 0.4 + 0.5 + 0.3) / 4) / 2  # 0.325
    n = 1 / (0.5 ** 2 + 4 * 0.125 ** 2)  # Kish: (sum w)^2 / sum w^2 = 1 / 0.3125 = 3.2
    z = 1.959963984540054
    p = (score + 1) / 2
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert s["score"] == pytest.approx(score)
    assert s["ci95"] == pytest.approx([2 * (centre - half) - 1, 2 * (centre + half) - 1], abs=1e-12)
    assert s["interval"]["method"].startswith("wilson bound on 5 images (Kish effective n 3.20")
    # 6 images: the bootstrap, as before
    s6 = _score(np.append(v, 0.45), cats + ["a"], seed=0)
    assert s6["interval"]["method"].startswith("bootstrap within categories")
