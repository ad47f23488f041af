"""Statistics for decisions (issue 34), each against values computed by hand from its definition."""

from __future__ import annotations

import math

import numpy as np

import pytest
from conftest import run_cli

from vlmcheck.metrics.decisions import (cluster_bootstrap_mean_sums, design_effect, holm, mde_proportion, wilson,
                                        wilson_clustered)
from vlmcheck.metrics.signflip import p_at_zero


@pytest.mark.slow
def test_wilson_by_hand_never_collapses():
    # z = 1.96: 0 of 10 -> centre (0 + z^2/20) / (1 + z^2/10) = half-width -> [0, 0.2775]
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-5)
    lo, hi = wilson(60, 60)
    assert lo == pytest.approx(0.93983, abs=1e-5) and hi == pytest.approx(1.0)
    from scipy.stats import binomtest  # and the same as scipy's for integer counts

    ref = binomtest(7, 20).proportion_ci(method="wilson")
    assert wilson(7, 20) == pytest.approx((ref.low, ref.high))


def test_mcnemar_exact_on_a_textbook_table():
    # compare's test of one binary answer a unit (p_at_zero of the units' differences, concordant ones beside):
    # 10 pairs right under A only, 2 under B only: p = 2 P(X <= 2 | 12, 1/2) = 2 (1 + 12 + 66) / 4096
    def mcnemar(b, c, concordant=5):
        return p_at_zero(np.r_[np.ones(b), -np.ones(c), np.zeros(concordant)] / (b + c + concordant))[0]

    assert mcnemar(10, 2) == pytest.approx(2 * 79 / 4096)
    assert mcnemar(3, 3) == 1.0 and mcnemar(0, 0) == 1.0


def test_paired_permutation_on_six_pairs_enumerated_by_hand():
    # differences 1, 2, 3, 4, 5, -1 (sum 14).  A sign pattern flips a subset S of |d| = 1, 2, 3, 4, 5, 1 (total
    # 16): its sum is 16 - 2 S, at least 14 in size when S <= 1 or S >= 15: {}, {1}, {1'} and their complements,
    # 6 of the 64 patterns.
    a = [2, 4, 6, 8, 10, 0]
    b = [1, 2, 3, 4, 5, 1]
    d = (np.array(a, float) - np.array(b, float)) / 6  # compare's sign-flip test: each unit weighs 1/6
    assert p_at_zero(d)[0] == pytest.approx(6 / 64)
    assert p_at_zero(np.zeros(6))[0] == 1.0  # a run compared with itself


def test_holm_on_four_p_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.9, 0.8]) == [1.0, 1.0]


def test_minimum_detectable_difference_of_a_proportion():
    # p = 0.5, n = 100 per run, alpha 0.05, power 0.8: (1.95996 + 0.84162) sqrt(2 x 0.25 / 100)
    assert mde_proportion(0.5, 100) == pytest.approx((1.959964 + 0.841621) * math.sqrt(0.005), rel=1e-5)
    # and the n that detects it again, by the normal formula ((z_{1-alpha/2} + z_power) sd / delta)^2
    delta = mde_proportion(0.5, 100)
    assert math.ceil(((1.959964 + 0.841621) * math.sqrt(0.5) / delta) ** 2 - 1e-6) == 100


def test_clustering_widens_the_interval():
    # 10 images x 10 questions; 5 images all right, 5 all wrong: p = 0.5 over 100 answers.  Binomial variance
    # 0.25 / 100; clustered 10/9 x 10 x 25 / 100^2 = 0.027778: design effect 11.11, effective n 9
    k, n = [10] * 5 + [0] * 5, [10] * 10
    assert design_effect(k, n) == pytest.approx((10 / 9 * 250 / 10_000) / 0.0025)
    lo, hi, deff = wilson_clustered(k, n)
    # 10 images: Wilson on the effective n at the t quantile on 9 degrees of freedom times sqrt(10 / 9)
    z9 = __import__("scipy.stats").stats.t.ppf(0.975, 9) * math.sqrt(10 / 9)
    assert (lo, hi) == pytest.approx(wilson(0.5 * 100 / deff, 100 / deff, z=z9))
    naive = wilson(50, 100)
    assert hi - lo > 2.5 * (naive[1] - naive[0])
    # questions that vary within every image: no inflation
    assert design_effect([5] * 10, [10] * 10) == 1.0
    # a cluster bootstrap of the same data is as wide
    # (10 images, each 10 of 10 right or 0 of 10: their sums and sizes)
    blo, bhi = cluster_bootstrap_mean_sums(np.array([10.0] * 5 + [0.0] * 5), np.full(10, 10.0))
    assert bhi - blo > 2.5 * (naive[1] - naive[0])


def test_a_perfect_vhexpansion_run_has_an_interval_of_width_above_zero(tmp_path):
    # every original question answered right: the interval is Wilson's n of n, not [1, 1] (issue 34)
    import json

    from PIL import Image

    from vlmcheck import RunOptions, run_task
    from vlmcheck.core.roles import Capabilities, Generation
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec

    class SaysYes:
        model_id = "test:yes"
        capabilities = Capabilities()

        async def generate(self, messages, config):
            return Generation(text="Yes.")

    rows = []
    for i in range(12):  # 6 images, 2 questions each, every answer yes
        if i % 2 == 0:
            Image.new("RGB", (16, 16), (20 * i, 0, 0)).save(tmp_path / f"{i}.png")
        rows.append({"image": f"{i - i % 2}.png", "question": f"Is there thing {i} in the image?", "answer": "yes"})
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = run_task(VHExpansionTask(VHXSpec(vlm="test:yes", cases=str(tmp_path / "cases.jsonl"), perturb=[]),
                                   vlm=SaysYes()), tmp_path / "run", RunOptions(progress=False, report=False))
    v = res.results["metrics"]["variants"]["original"]
    assert v["accuracy"] == 1.0 and v["n"] == 12
    # 6 images of 2 questions, fewer than 10 units: the bound of one answer an image, Wilson's 6 of 6
    n, z = 6, 1.959963984540054
    low_by_hand = (1 + z * z / (2 * n) - z * math.sqrt(z * z / (4 * n * n))) / (1 + z * z / n)  # p = 1
    assert v["accuracy_ci95"][0] == pytest.approx(low_by_hand) and v["accuracy_ci95"][0] < 0.8
    how = v["intervals"]["accuracy"]
    assert how["unit"] == "source image" and how["n_units"] == 6 and how["n"] == 12 and how["design_effect"] == 2.0
    assert how["min_detectable_difference"] is None  # p = 1: no spread to estimate it from
    from vlmcheck.metrics.decisions import proportion_interval

    # half right, one answer on each of 100 images: independent answers, no clustering, so the design effect is 1
    # (issue 50 item 4: not the ratio estimator's m/(m-1) = 100/99) and the effective n 100:
    # (1.95996 + 0.84162) sqrt(2 x 0.25 / 100)
    _, how = proportion_interval([1, 0] * 50, [f"i{j}" for j in range(100)], "image")
    assert how["design_effect"] == 1.0
    assert how["min_detectable_difference"] == pytest.approx((1.959964 + 0.841621) * math.sqrt(0.5 / 100), rel=1e-5)


def _vhx_run(folder, model, correct, neg=None, ids=None, per=2, headline=None):
    import json

    folder.mkdir(parents=True)
    ids = ids if ids is not None else range(len(correct))
    rows = []
    for i, c in zip(ids, correct):
        v = {"correct": bool(c)}
        if neg is not None:
            v["neg_correct"] = bool(neg[i - min(ids)])
        rows.append({"sample_id": f"case{i}", "status": "done", "task": "vhexpansion", "seq": i,
                     "result": {"image": f"img{i // per}.png", "variants": {"original": v}}})
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    metrics = {}
    if headline is not None:  # (name, value, ci95) as results.json records it
        metrics["headline"] = {"name": headline[0], "value": headline[1], "ci95": headline[2], "interval": {}}
    (folder / "results.json").write_text(json.dumps({"task": "vhexpansion", "spec": {"task_spec": {"vlm": model}},
                                                     "metrics": metrics, "counts": {}}))
    return folder


def test_compare_pairs_runs_with_mcnemar_by_hand(tmp_path):
    from vlmcheck.methods.compare import compare_runs

    a = _vhx_run(tmp_path / "a", "A", [1, 1, 1, 1, 1, 1, 1, 1, 0, 0], per=1)
    b = _vhx_run(tmp_path / "b", "B", [0, 0, 0, 1, 1, 1, 1, 1, 1, 0], per=1)
    (c,) = compare_runs([a, b])["comparisons"]
    # one case per image - discordant: cases 0, 1, 2 right under A only, case 8 under B only:
    # p = 2 P(X <= 1 | 4, 1/2) = 2 x 5 / 16
    assert c["metric"] == "accuracy" and c["test"] == "McNemar exact"
    assert c["discordant"] == {"a_only": 3, "b_only": 1} and c["p_value"] == pytest.approx(10 / 16)
    assert c["difference"] == pytest.approx(0.2) and c["n_paired"] == 10 and c["n_left_out"] == 0
    assert c["ci95"][0] <= 0.2 <= c["ci95"][1]
    # a run compared with itself: difference 0, p = 1
    (same,) = compare_runs([a, a])["comparisons"]
    assert same["difference"] == 0.0 and same["p_value"] == 1.0
    # two cases per image (issue 48 finding 8): the image's cases move together.  Image 0 holds cases 0, 1
    # (A only, A only: +2/10), image 1 cases 2, 3 (+1/10), image 4 cases 8, 9 (-1/10), images 2, 3 nothing.
    # Flipping the three nonzero images' signs: sums +-0.2 +-0.1 +-0.1; |sum| >= 0.2 in 6 of the 8 patterns
    a2 = _vhx_run(tmp_path / "a2", "A", [1, 1, 1, 1, 1, 1, 1, 1, 0, 0])
    b2 = _vhx_run(tmp_path / "b2", "B", [0, 0, 0, 1, 1, 1, 1, 1, 1, 0])
    (c2,) = compare_runs([a2, b2])["comparisons"]
    assert c2["test"].startswith("clustered McNemar") and c2["p_value"] == pytest.approx(6 / 8)


def test_compare_counts_what_only_one_run_finished(tmp_path):
    from vlmcheck.methods.compare import compare_runs

    a = _vhx_run(tmp_path / "a", "A", [1] * 10, ids=range(0, 10))
    b = _vhx_run(tmp_path / "b", "B", [1] * 10, ids=range(5, 15))
    (c,) = compare_runs([a, b])["comparisons"]
    assert c["n_paired"] == 5 and c["n_left_out"] == 10
    assert c["left_out"] == {"only_in_a": 5, "only_in_b": 5, "different_source": 0}


@pytest.mark.slow
def test_three_runs_every_pair_with_holm_and_the_json_of_the_cli(tmp_path):
    import json

    from vlmcheck.methods.compare import compare_runs
    from vlmcheck.metrics.decisions import holm

    runs = [_vhx_run(tmp_path / n, n, v, neg=[1] * 10) for n, v in
            (("A", [1] * 10), ("B", [1] * 5 + [0] * 5), ("C", [0] * 10))]
    cmp = compare_runs(runs)
    pairs = {(c["a"], c["b"], c["metric"]) for c in cmp["comparisons"]}
    assert {(a, b) for a, b, _ in pairs} == {("A", "B"), ("A", "C"), ("B", "C")}
    for metric in ("accuracy", "symmetric accuracy"):  # Holm over the pairs of models, per metric
        cs = [c for c in cmp["comparisons"] if c["metric"] == metric]
        assert [c["p_holm"] for c in cs] == pytest.approx(holm([c["p_value"] for c in cs]))
    p = run_cli("compare", *map(str, runs), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["method"] == "vhexpansion" and len(out["comparisons"]) == 6  # 3 pairs x 2 metrics
    need = {"metric", "a", "b", "n_paired", "n_left_out", "difference", "ci95", "p_value", "p_holm", "test"}
    assert all(need <= set(c) for c in out["comparisons"])


@pytest.mark.slow
def test_plan_from_one_and_two_pilots_by_hand(tmp_path):
    import json

    from scipy.stats import nct, t, norm

    from vlmcheck.methods.plan import plan

    def power(n, sd, delta, paired):  # the two-sided t-test's power, from its definition
        df = n - 1 if paired else 2 * n - 2
        ncp = delta * math.sqrt(n) / sd if paired else delta / (sd * math.sqrt(2 / n))
        c = t.ppf(0.975, df)
        return nct.sf(c, df, ncp) + nct.cdf(-c, df, ncp)

    def smallest(sd, delta, paired):
        return next(n for n in range(2, 100000) if power(n, sd, delta, paired) >= 0.8)

    a = _vhx_run(tmp_path / "a", "A", [1, 0] * 5, per=1)  # accuracy 0.5 over 10 cases, one an image
    b = _vhx_run(tmp_path / "b", "B", [1, 0] * 4 + [0, 0], per=1)
    out = plan([a], delta=0.2)
    (m,) = [x for x in out["metrics"] if x["metric"] == "accuracy"]
    sd = 0.5  # a share of 0.5: sqrt(p (1 - p))
    assert m["sd"] == pytest.approx(sd)
    assert m["n_per_run_independent"] == smallest(sd, 0.2, False)
    z = norm.ppf(0.975) + norm.ppf(0.8)
    assert m["n_per_run_independent"] > math.ceil((z * math.sqrt(2) * sd / 0.2) ** 2)  # the normal undersizes
    lo, hi = m["n_per_run_range"]
    assert lo <= m["n_per_run_independent"] <= hi and hi == smallest(0.5, 0.2, False)  # 0.5 is in the interval
    two = plan([a, b], delta=0.2)
    (p2,) = [x for x in two["metrics"] if x["metric"] == "accuracy"]
    # one binary answer an image: the exact McNemar test's n.  The pilots' differences [0] * 8 + [1, 0]: one
    # discordant unit of 10; the discordant share q over its Beta(1.5, 9.5) posterior (10 quantiles), each at
    # least the 0.2 to detect, p_b = (q + 0.2) / 2, p_c = (q - 0.2) / 2; the power averaged over them, the
    # smallest n from which it stays >= 0.8 over the next tenth of n (mcnemar_power: tested by enumeration)
    from scipy.stats import beta

    from vlmcheck.metrics.paired import mcnemar_power

    qs = [max(q, 0.2) for q in beta.ppf((np.arange(10) + 0.5) / 10, 1.5, 9.5)]

    def mean_power(n):
        return np.mean([mcnemar_power(n, (q + 0.2) / 2, (q - 0.2) / 2) for q in qs])

    ok = {n: mean_power(n) >= 0.8 for n in range(6, 200)}
    want = next(n for n in range(6, 150) if all(ok[j] for j in range(n, n + max(3, n // 10) + 1)))
    assert p2["n_paired"] == want and p2["paired_test"].startswith("exact McNemar")
    # at q = 0.2 alone (p_c = 0) every discordant unit goes A's way: rejects from 6, P(Binomial(n, 0.2) >= 6);
    # the uncertainty about q asks for more
    from scipy.stats import binom

    assert want > next(n for n in range(6, 1000) if binom.sf(5, n, 0.2) >= 0.8)
    p = run_cli("plan", "--pilot", str(a), "--delta", "0.2", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["metrics"][0]["n_per_run_independent"] > 0


def test_a_degenerate_bootstrap_of_a_bounded_mean_becomes_wilson_by_hand():
    from vlmcheck.metrics.decisions import widen_degenerate

    z = 1.959963984540054
    # every unit 1 on [0, 1], n = 60: Wilson 60 of 60 -> [0.93983, 1]
    ci, widened = widen_degenerate([1.0, 1.0], 1.0, 60)
    assert widened and ci[0] == pytest.approx(0.93983, abs=1e-5) and ci[1] == pytest.approx(1.0)
    # GenCeption's s lies in [-1, 1]: every chain at 1 over 10 images -> 2 x Wilson(10 of 10) - 1
    lo01 = (1 + z * z / 20 - z * math.sqrt(z * z / 400)) / (1 + z * z / 10)
    ci, widened = widen_degenerate([1.0, 1.0], 1.0, 10, low=-1.0, high=1.0)
    assert widened and ci == pytest.approx([2 * lo01 - 1, 1.0])
    # an interval with width is kept as it is
    assert widen_degenerate([0.2, 0.4], 0.3, 10) == ([0.2, 0.4], False)


def test_minimum_detectable_difference_from_an_interval_by_hand():
    from vlmcheck.metrics.decisions import mde_from_interval

    # [0.4, 0.6]: se = 0.2 / (2 x 1.95996) = 0.051021; two runs: sqrt(2) se; x (1.95996 + 0.84162)
    se = 0.2 / (2 * 1.959964)
    assert mde_from_interval([0.4, 0.6]) == pytest.approx((1.959964 + 0.841621) * math.sqrt(2) * se, rel=1e-5)
    assert mde_from_interval(None) is None


def test_cluster_bootstrap_of_any_statistic_resamples_whole_clusters():
    from vlmcheck.metrics.decisions import cluster_bootstrap

    # 10 images of 10 answers, 5 all right and 5 all wrong: the clustered interval of the share is as wide as
    # the design effect says (about sqrt(11.1) x the naive one), the naive one (each answer its own cluster) not
    values = [1.0] * 50 + [0.0] * 50
    share = lambda rs: sum(rs) / len(rs)  # noqa: E731
    (lo, hi), n_ok = cluster_bootstrap(values, [f"img{i // 10}" for i in range(100)], share, n_boot=2000)
    (nlo, nhi), _ = cluster_bootstrap(values, [str(i) for i in range(100)], share, n_boot=2000)
    assert n_ok == 2000 and (hi - lo) > 2.5 * (nhi - nlo)
    # a statistic undefined on some resamples: those are counted out, not turned into numbers
    # (undefined unless image 0 is drawn: a draw of 10 of 10 clusters misses it with probability 0.9^10 = 0.349)
    records = [(v, i // 10) for i, v in enumerate(values)]
    _, n_ok = cluster_bootstrap(records, [c for _, c in records],
                                lambda rs: None if all(c != 0 for _, c in rs) else 1.0, n_boot=2000)
    assert 0.31 < (2000 - n_ok) / 2000 < 0.39
    assert cluster_bootstrap([1.0, 0.0], ["a", "a"], share) == (None, 0)  # one cluster: no interval


def test_every_method_records_its_headline_with_an_interval(tmp_path):
    # a results.json of each method says its headline, a 95 % interval of width above zero, how it was made and
    # the smallest difference it lets a comparison detect (issue 34 item 1)
    from vlmcheck.methods.chef.headline import chef_headline

    res = []
    for i in range(20):  # robustness: 20 items on 10 images, 4 options each; clean right 16, corrupted right 10
        res.append({"id": f"q{i}", "image": f"img{i // 2}.png", "n_options": 4, "meta": {},
                    "settings": {"original": {"correct": i < 16}, "corrupt:both": {"correct": i < 10}}})
    out = {"settings": {"original": {}}, "rrm": {"both": (0.5 - 0.25) / (0.8 - 0.25) * 100}}
    entry = chef_headline(res, out, "robustness", 10, None)
    assert entry["name"] == "RRM (image and text corrupted)" and entry["value"] == pytest.approx(45.4545, rel=1e-4)
    lo, hi = entry["ci95"]
    assert lo < entry["value"] < hi and entry["interval"]["unit"] == "item (its image)"
    assert entry["interval"]["n_units"] == 10 and entry["interval"]["min_detectable_difference"] > 0


def test_decide_names_the_leader_its_margin_and_who_it_cannot_be_separated_from(tmp_path):
    from vlmcheck.methods.decide import decide
    from vlmcheck.report.html import build_report

    runs = []
    for name, right in (("C", [0] * 10), ("A", [1] * 10), ("B", [1] * 9 + [0])):
        sym = sum(right) / 10  # every negation right: symmetric accuracy = accuracy
        runs.append(_vhx_run(tmp_path / name, name, right, neg=[1] * 10, per=1,
                             headline=("symmetric accuracy", sym, [max(0, sym - 0.2), min(1, sym + 0.1)])))
    (d,) = decide(runs)
    assert d["leader"] == "A" and d["value"] == pytest.approx(1.0) and d["metric"] == "symmetric accuracy"
    assert d["n_shared"] == 10 and d["n_left_out"] == 0
    # one case per image.  A - B: one discordant image, p = 1 (both signs of it as extreme); A - C: ten,
    # p = 2 / 2^10; B - C: nine, p = 2 / 2^9.  Holm over the three pairs: 3 x 2/1024, then max(that, 2 x 2/512),
    # then max(that, 1)
    r, c = d["against"]
    assert r["model"] == "B" and r["difference"] == pytest.approx(0.1) and r["p_value"] == pytest.approx(1.0)
    assert r["p_holm"] == pytest.approx(1.0) and not r["separated"] and r["ci95"][0] <= 0 <= r["ci95"][1]
    assert c["model"] == "C" and c["difference"] == pytest.approx(1.0)
    assert c["p_value"] == pytest.approx(2 / 1024) and c["p_holm"] == pytest.approx(6 / 1024) and c["separated"]
    assert d["tied_with"] == ["B"] and not d["separated"]
    # every image 1 under A, 0 under C: the hull of Tango's and Agresti-Min's intervals at the Holm level 0.05 / 3
    from test_decisions_48 import paired_interval_by_hand

    assert c["ci95"] == pytest.approx(list(paired_interval_by_hand(10, 0, 10, 0.05 / 3)), abs=1e-8)
    assert "note" not in c
    # the report's first screen says it, before the contents; the leaderboard row says it too
    page = build_report(runs, tmp_path / "r.html").read_text()
    assert page.index('id="decisions"') < page.index('<nav id="toc"')
    assert "A leads on symmetric accuracy with 1.000 on the 10 samples all its runs share (0 left out)" in page
    assert "cannot be separated." in page and "no: cannot be separated from B" in page
    assert "behind the leader by 1.0000" in page


def test_the_stratified_bootstrap_is_rescaled_by_hand():
    from vlmcheck.metrics.stats import bootstrap_ci_strata

    # one stratum [0, 1]: resampled means 0, 1/2, 1 (p = 1/4, 1/2, 1/4), rescaled about 1/2 by sqrt(2 / 1):
    # 1/2 - 0.7071, 1/2, 1/2 + 0.7071 (variance 1/4 = s^2 / n with s^2 = 1/2); a second stratum [1, 1] adds 1
    # to every resample: the mean of the two means is (m + 1) / 2
    r = math.sqrt(2) / 2
    lo, hi = bootstrap_ci_strata([0.0, 1.0, 1.0, 1.0], ["a", "a", "b", "b"])
    assert lo == pytest.approx((0.5 - r + 1) / 2) and hi == pytest.approx((0.5 + r + 1) / 2)
    # a stratum of one value (issue 48 finding 4) borrows the residuals of all values about their grand mean,
    # rescaled by sqrt(N / (N - 1)): 0.3 + (v - 13/30) sqrt(3/2) for v in (0, 1, 0.3).  The extreme atoms of the
    # resampled (a + b) / 2 each have probability 1/4 x 1/3 > 0.025, so they are the 2.5 and 97.5 % points
    res = [(v - 1.3 / 3) * math.sqrt(1.5) for v in (0.0, 1.0, 0.3)]
    assert bootstrap_ci_strata([0.0, 1.0, 0.3], ["a", "a", "b"]) == pytest.approx(
        ((0.5 - r + 0.3 + min(res)) / 2, (0.5 + r + 0.3 + max(res)) / 2))


def test_krippendorff_alpha_for_interval_data_by_hand():
    from vlmcheck.metrics.decisions import krippendorff_alpha_interval

    # units (1, 1), (2, 3): pairable values 1, 1, 2, 3 (n = 4).  D_o = [0 + 2 x 1 / 1] / 4 = 0.5.
    # D_e: ordered pairs' squared differences: (1,1) 0 x2, (1,2) 1 x4, (1,3) 4 x4, (2,3) 1 x2 -> 22 / (4 x 3)
    assert krippendorff_alpha_interval([[1, 1], [2, 3]]) == pytest.approx(1 - 0.5 / (22 / 12))
    assert krippendorff_alpha_interval([[4, 4, 4], [7, 7, 7]]) == 1.0  # perfect agreement
    assert krippendorff_alpha_interval([[5], [6]]) is None  # nothing pairable


class _BySeed:
    """Answers "Yes." on seed 0 (and no seed) and "No." on seed 1; describes a red circle on even seeds and a blue
    square on odd ones; records the temperatures it was asked at."""

    model_id = "test:byseed"

    def __init__(self):
        from vlmcheck.core.roles import Capabilities

        self.capabilities = Capabilities()
        self.temps = set()

    async def generate(self, messages, config):
        from vlmcheck.core.roles import Generation

        self.temps.add(config.temperature)
        seed = config.seed or 0
        if "description" in messages[-1].text.lower():
            return Generation(text="A large red circle in the center." if seed % 2 == 0 else
                              "A small blue square at the top left.")
        return Generation(text="Yes." if seed % 2 == 0 else "No.")


def test_chef_repeats_give_the_spread_and_pool_each_items_repeats_by_hand(tmp_path):
    import json

    from PIL import Image

    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe

    rows = []
    for i, ans in enumerate(["yes", "yes", "yes", "no"]):
        Image.new("RGB", (8, 8), (50 * i, 0, 0)).save(tmp_path / f"{i}.png")
        rows.append({"id": f"q{i}", "image": f"{i}.png", "question": f"Is there a thing {i}?", "answer": ans})
    (tmp_path / "pope.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = resolve_recipe("hallucination")
    r.inferencer.type = "direct"
    model = _BySeed()
    task = ChefTask(ChefSpec(vlm="test:byseed", recipe=r, data=str(tmp_path / "pope.jsonl"), repeats=2,
                             temperature=0.7), vlm=model)
    m = run_task(task, tmp_path / "run", RunOptions(progress=False, report=False)).results["metrics"]
    # repeat 0 says yes to all: 3 of 4 right; repeat 1 says no to all: 1 of 4
    assert m["repeats"]["values"] == [0.75, 0.25] and m["repeats"]["mean"] == 0.5 and m["repeats"]["std"] == 0.25
    assert m["pope"]["accuracy"] == 0.75 and model.temps == {0.7}  # the tables are repeat 0's
    # the headline pools the 8 answers, clustered by item: every item has one right and one wrong answer, so
    # the design effect is 1 and the interval is Wilson's 4 of 8
    h = m["headline"]
    assert h["value"] == 0.5 and h["interval"]["repeats"] == 2 and h["interval"]["n_units"] == 4
    # 4 items of 2 answers, fewer than 10 units: the bound of one answer an item, Wilson's 2 of 4
    assert h["ci95"] == pytest.approx(list(wilson(2, 4)))
    with pytest.raises(ValueError, match="repeats need a generation inferencer"):
        ChefTask(ChefSpec(vlm="test:byseed", recipe=resolve_recipe("hallucination"), data=str(tmp_path / "pope.jsonl"),
                          repeats=2), vlm=model)


def test_cast_headline_pools_the_repeats_of_a_pair():
    from vlmcheck.methods.cast import FORMATS, MODALITIES, cast_headline

    def pair(verdict, a="p"):
        return {"a": a, "b": "q", "generation": {g: {"statements": [
            {"verdicts": {f"{v}|{f}": {"verdict": verdict} for v in MODALITIES for f in FORMATS}}]}
            for g in MODALITIES}}

    # two pairs, each run twice with the same verdicts: the pooled headline is the single run's, over 2 units
    once = cast_headline([pair(1, "x"), pair(0, "y")])
    twice = cast_headline([pair(1, "x"), pair(0, "y")] * 2, clusters=["x", "y", "x", "y"])
    # (two units are too few for a bootstrap: Wilson's 1 of 2 on the pairs, 0.5 -/+ 0.405)
    z = 1.959963984540054
    half = z / (1 + z * z / 2) * math.sqrt(1 / 8 + z * z / 16)
    assert twice["value"] == once["value"] == 0.5 and twice["ci95"] == once["ci95"]
    assert once["ci95"] == pytest.approx([0.5 - half, 0.5 + half])
    assert twice["interval"]["n_units"] == 2


def test_genception_repeats_by_the_papers_definition(tmp_path):
    import json

    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.genception import GenCeptionSpec, GenCeptionTask
    from vlmcheck.metrics.stats import mean_of_means
    from vlmcheck.world.make import make_world

    make_world(tmp_path / "w", n=8, seed=3)
    task = GenCeptionTask(GenCeptionSpec(vlm="test:byseed", generator="ref:renderer", encoder="ref:pixels",
                                         data=str(tmp_path / "w"), T=2, repeats=2, temperature=1.0), vlm=_BySeed())
    m = run_task(task, tmp_path / "run", RunOptions(progress=False, report=False)).results["metrics"]
    recs = [json.loads(x)["result"] for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    gc2 = lambda s: (1 * s[0] + 2 * s[1]) / 3  # noqa: E731  GC@2 = sum t s_t / sum t
    cats = [r["category"] for r in recs]
    per = [[gc2(r["s"]) for r in recs], [gc2(r["repeats"][0]["s"]) for r in recs]]
    assert recs[0]["repeats"][0]["s"] != recs[0]["s"]  # the repeat described another scene
    assert m["repeats"]["values"] == pytest.approx([mean_of_means(p, cats) for p in per])
    pooled = [(a + b) / 2 for a, b in zip(*per)]
    assert m["headline"]["value"] == pytest.approx(mean_of_means(pooled, cats))
    assert m["GC@2"]["score"] == pytest.approx(m["repeats"]["values"][0])  # the tables stay repeat 0's
    assert "embedding0" not in recs[0]["repeats"][0] and m["headline"]["interval"]["repeats"] == 2


def test_judge_spread_agreement_and_a_second_judge(tmp_path):
    from vlmcheck.methods.chef.headline import judge_agreement
    from vlmcheck.metrics.decisions import krippendorff_alpha_interval

    judged = [{"scores": [8, 8, 9], "mean": 25 / 3, "mean2": 7.0}, {"scores": [4, 6, 5], "mean": 5.0, "mean2": 5.0},
              {"scores": [9, 9, 9], "mean": 9.0, "mean2": 8.0}]
    out = judge_agreement(judged)
    sd = [np.std([8, 8, 9]), np.std([4, 6, 5]), 0.0]
    assert out["judge_spread"] == pytest.approx(sum(sd) / 3)
    assert out["judge_agreement"]["krippendorff_alpha_interval"] == pytest.approx(
        krippendorff_alpha_interval([[8, 8, 9], [4, 6, 5], [9, 9, 9]]))
    j = out["judge_to_judge"]
    # item means 8.33, 5, 9 vs 7, 5, 8: the same order (rho 1); |differences| 1.33, 0, 1
    assert j["spearman"] == pytest.approx(1.0) and j["mean_abs_difference"] == pytest.approx((4 / 3 + 0 + 1) / 3)


def test_vhx_compare_uses_the_paired_test_by_hand(tmp_path):
    from vlmcheck.finetune.compare import compare_vhx

    before = _vhx_run(tmp_path / "before", "base", [0, 0, 0, 1, 1, 1, 1, 1, 1, 0])
    after = _vhx_run(tmp_path / "after", "tuned", [1, 1, 1, 1, 1, 1, 1, 1, 0, 0])
    out = compare_vhx(before, after)
    (row,) = [r for r in out["rows"] if r["dataset"] == "cases" and r["variant"] == "original"]
    acc = row["accuracy"]
    # after minus before: cases 0-2 right after only, case 8 right before only: McNemar p = 2 x 5 / 16
    # two cases per image: images 0 (+2/10), 1 (+1/10), 4 (-1/10) differ; |sum| >= 0.2 in 6 of 8 sign patterns
    assert acc["delta"] == pytest.approx(0.2) and acc["p_value"] == pytest.approx(6 / 8)
    assert acc["test"].startswith("clustered McNemar") and acc["n_paired"] == 10 and acc["ci95"][0] <= 0.2 <= acc["ci95"][1]
    assert acc["p_holm"] >= acc["p_value"]


def test_design_effect_is_one_when_every_cluster_holds_one_answer():
    """Issue 50 item 4: ten images with one answer each are ten independent answers: no clustering, a design
    effect of exactly 1 (the ratio estimator's m/(m-1) small-sample factor gave 10/9 = 1.111 here)."""
    from vlmcheck.metrics.decisions import design_effect

    assert design_effect([1, 0, 0, 0, 0, 0, 0, 0, 0, 0], [1] * 10) == 1.0
    # two answers per image, perfectly correlated within each image: by hand, p = 0.5, binomial p(1-p)/N = 0.25/8,
    # clustered m/(m-1) * sum((k - p n)^2) / N^2 = 4/3 * 4 * 1 / 64 = 1/12, ratio (1/12) / (1/32) = 8/3
    assert abs(design_effect([2, 0, 2, 0], [2, 2, 2, 2]) - 8 / 3) < 1e-12


def test_clopper_pearson_quantiles_equal_scipy_beta_ppf():
    """The beta quantiles are computed without scipy.stats (a one-image run no longer imports it, issue 51):
    equal to scipy.stats.beta.ppf on fractional and integer shapes, small and large."""
    import random

    from scipy.stats import beta

    from vlmcheck.metrics.decisions import _beta_ppf, clopper_pearson

    rng = random.Random(3)
    cases = [(0.025, 0.5, 1.28), (0.975, 1.5, 0.28), (0.025, 1, 1), (0.975, 3, 1), (0.005, 40, 960.5)]
    cases += [(rng.choice([0.025, 0.975, rng.random()]), rng.uniform(0.05, 50), rng.uniform(0.05, 50))
              for _ in range(60)]
    for q, a, b in cases:
        assert _beta_ppf(q, a, b) == pytest.approx(float(beta.ppf(q, a, b)), abs=1e-12), (q, a, b)
    # x successes of n: (beta(a/2; x, n-x+1), beta(1-a/2; x+1, n-x)), the ends 0 and 1 at x = 0 and x = n
    assert clopper_pearson(0, 1.78) == (0.0, pytest.approx(float(beta.ppf(0.975, 1, 1.78))))
    assert clopper_pearson(1.78, 1.78) == (pytest.approx(float(beta.ppf(0.025, 1.78, 1))), 1.0)


def test_proportion_interval_independent_is_proportion_interval_without_numpy():
    # issue 51: describe's share answered is computed without numpy; it must equal the general function's record
    # for answers each its own unit, at one answer (Clopper-Pearson on n_eff 1) and above (Wilson)
    from vlmcheck.metrics.decisions import proportion_interval, proportion_interval_independent

    for n in (1, 2, 3, 10, 37):
        for hits in sorted({0, 1, n // 2, n - 1, n}):
            expected = proportion_interval([True] * hits + [False] * (n - hits), [str(i) for i in range(n)], "image")
            assert proportion_interval_independent(hits, n, "image") == expected, (hits, n)
    # by hand: 1 of 1, Clopper-Pearson's lower bound (alpha/2)^(1/n) = 0.025, upper 1; 0 of 10 Wilson's [0, 0.2775]
    (lo, hi), how = proportion_interval_independent(1, 1, "image")
    assert abs(lo - 0.025) < 1e-12 and hi == 1.0 and how["design_effect"] == 1.0
    (lo, hi), _ = proportion_interval_independent(0, 10, "image")
    assert lo == 0.0 and abs(hi - 0.2775) < 5e-5
    with pytest.raises(ValueError):
        proportion_interval_independent(0, 0, "image")
