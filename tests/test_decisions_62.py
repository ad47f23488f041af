"""Issue 62: every surface decides on the headline it prints.  Constructed runs whose headlines, margins and
p-values are computed here by hand from the methods' definitions: CAST's headline pools verdicts per cell over
pairs and averages the cells (the authors' Top-k analysis); its paired test swaps whole pairs between the runs
and recomputes that headline, enumerated here over every swap pattern."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import run_cli

CAST_NAME = "CAST Top-3 cross-modal consistency"
MODS = ("text", "image", "both")
FMTS = ("one_both", "true_false", "yes_no")


# ----------------------------------------------------------------------------- constructed runs

def _cast_pair(i: int, statements: int, confirmed: int) -> dict:
    """A scene pair whose every generation wrote ``statements`` statements, the first ``confirmed`` of them
    confirmed by every validation (cross-modal or not) in every format, the others refuted."""
    gen = {g: {"statements": [{"text": f"s{j}", "verdicts": {f"{v}|{f}": {"verdict": int(j < confirmed)}
                                                             for v in MODS for f in FMTS}}
                              for j in range(statements)]} for g in MODS}
    return {"a": f"p{i}a", "b": f"p{i}b", "generation": gen}


def _cast(folder, model, pairs):
    """A CAST run on pairs 0..n-1: (statements, confirmed) per pair; its headline from the run's own scorer."""
    from vlmcheck.methods.cast_scores import cast_headline

    folder.mkdir(parents=True)
    results = [_cast_pair(i, s, c) for i, (s, c) in enumerate(pairs)]
    rows = [{"sample_id": f"pair{i}", "status": "done", "task": "cast", "seq": i, "result": r}
            for i, r in enumerate(results)]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    h = cast_headline(results)
    (folder / "results.json").write_text(json.dumps(
        {"task": "cast", "spec": {"task_spec": {"vlm": model}}, "counts": {"done": len(rows), "samples": len(rows)},
         "metrics": {"n_pairs": len(rows), "headline": h}}))
    return folder


# A: pairs 0-9 one statement, confirmed (1 of 1); pairs 10-19 three statements, none confirmed (0 of 3).
# Pooled per cell: 10 / 40 = 0.250 (the mean of per-pair shares would be 0.500).
# B: pairs 0-4 3 of 3, pairs 5-14 0 of 1, pairs 15-19 1 of 3.  Pooled: 20 / 40 = 0.500 (mean share 0.333).
A_PAIRS = [(1, 1)] * 10 + [(3, 0)] * 10
B_PAIRS = [(3, 3)] * 5 + [(1, 0)] * 10 + [(3, 1)] * 5


def exact_swap_p(a, b, delta=0.0):
    """Every one of the 2^n swap patterns of whole pairs: the headline (here one pooled ratio, every cell and
    format alike) recomputed for each; the share at least as far from 0 as the observed difference."""
    a, b = np.asarray(a, float), np.asarray(b, float)  # (confirmed, parsed) per pair, the 3 statements' worth
    n = len(a)
    S = ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(float)
    bs = b.copy()
    bs[:, 0] += delta * b[:, 1]
    move = bs - a
    ca, pa = a[:, 0].sum() + S @ move[:, 0], a[:, 1].sum() + S @ move[:, 1]
    cb, pb = bs[:, 0].sum() - S @ move[:, 0], bs[:, 1].sum() - S @ move[:, 1]
    t = ca / pa - cb / pb
    obs = a[:, 0].sum() / a[:, 1].sum() - bs[:, 0].sum() / bs[:, 1].sum()
    return float((np.abs(t) >= abs(obs) - 1e-12).mean())


def test_cast_headline_of_the_constructed_runs_by_hand(tmp_path):
    a = _cast(tmp_path / "A", "A", A_PAIRS)
    b = _cast(tmp_path / "B", "B", B_PAIRS)
    assert json.loads((a / "results.json").read_text())["metrics"]["headline"]["value"] == pytest.approx(0.25)
    assert json.loads((b / "results.json").read_text())["metrics"]["headline"]["value"] == pytest.approx(0.5)


def _exact_inputs():
    """Per pair (confirmed, parsed) of one cell and format: every cell and format of a pair alike."""
    return [(c, s) for s, c in A_PAIRS], [(c, s) for s, c in B_PAIRS]


def _cli(*args):
    p = run_cli(*args)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    return " ".join((p.stdout + "\n" + p.stderr).split())  # tables on stdout, sentences on stderr


@pytest.mark.slow
def test_cast_one_leader_one_margin_one_verdict_on_every_surface(tmp_path):
    """Headlines A 0.250, B 0.500 on the same 20 pairs: the mean of per-pair shares would say A - B = +0.167.
    Every surface prints B ahead by 0.500 - 0.250 = 0.250, with the swap test of the pooled headline."""
    from vlmcheck.export import run_rows
    from vlmcheck.methods.compare import compare_runs
    from vlmcheck.methods.decide import decide
    from vlmcheck.report.html import build_report

    a = _cast(tmp_path / "A", "A", A_PAIRS)
    b = _cast(tmp_path / "B", "B", B_PAIRS)
    ea, eb = _exact_inputs()
    p_exact = exact_swap_p(ea, eb)  # 2^20 patterns
    # compare: A - B = -0.25, the p-value of the swap test (Monte Carlo here: within 4 of its errors)
    (c,) = compare_runs([a, b])["comparisons"]
    assert c["difference"] == pytest.approx(0.25 - 0.5)
    assert abs(c["p_value"] - p_exact) <= 4 * c["p_mc_error"] and c["p_mc_error"] < 0.003
    assert "swap" in c["test"] and c["separated"] == (c["p_holm"] <= 0.05)
    lo, hi = c["ci95"]
    assert (hi < 0) == c["separated"]  # the interval excludes 0 exactly when the test rejects
    # the interval is the swap test inverted: just inside its ends the exact test does not reject, outside it does
    for end, out in ((lo, -1), (hi, +1)):
        assert exact_swap_p(ea, eb, end - out * 0.02) > 0.05 >= exact_swap_p(ea, eb, end + out * 0.02)
    # the first screen's decision: B leads, the values printed are the headlines, the margin their difference
    (d,) = decide([a, b])
    r = d["runner_up"]
    assert d["leader"] == "B" and d["value"] == pytest.approx(0.5) and r["value"] == pytest.approx(0.25)
    assert r["difference"] == pytest.approx(0.25) and r["p_value"] == c["p_value"]
    assert d["separated"] == c["separated"]
    assert "B leads on CAST Top-3 cross-modal consistency with 0.500" in d["sentence"] and ", A 0.250;" in d["sentence"]
    assert "margin 0.250" in d["sentence"]
    verdict = "separated" if c["separated"] else "cannot be separated"
    # the report: the first screen, the leaderboard by method
    page = build_report([a, b], tmp_path / "r.html").read_text()
    assert "+0.250" in page and "+0.167" not in page and "0.333" not in page
    standing = "behind the leader by 0.2500" if c["separated"] else "cannot be separated from the leader (difference 0.2500"
    assert standing in page
    # compare in the terminal
    out = _cli("compare", a, b)
    assert "A - B = -0.2500" in out and f"): {verdict}; 20 shared" in out
    # export: the headlines whose difference every surface printed
    rows = {r["model"]: r["value"] for r in run_rows([a, b])}
    assert rows["B"] - rows["A"] == pytest.approx(r["difference"])


def test_pooled_swap_test_enumerates_every_pattern_on_few_pairs(tmp_path):
    """On 12 pairs every swap pattern is counted: the p-value is the exact one."""
    from vlmcheck.methods.compare import compare_runs

    pa, pb = A_PAIRS[4:16], B_PAIRS[4:16]
    a = _cast(tmp_path / "A", "A", pa)
    b = _cast(tmp_path / "B", "B", pb)
    (c,) = compare_runs([a, b])["comparisons"]
    ea, eb = [(c_, s) for s, c_ in pa], [(c_, s) for s, c_ in pb]
    hand = sum(x[0] for x in ea) / sum(x[1] for x in ea) - sum(x[0] for x in eb) / sum(x[1] for x in eb)
    assert c["difference"] == pytest.approx(hand)
    assert c["p_value"] == pytest.approx(exact_swap_p(ea, eb), abs=1e-12) and "exact" in c["test"]


# ----------------------------------------------------------------------------- GenCeption on shared images

def _gen(folder, model, scores, ids, cats=None):
    """A GenCeption run: GC@3 per image (one category unless ``cats``); its headline the mean of category means
    over all its images."""
    folder.mkdir(parents=True)
    cats = cats or ["x"] * len(scores)
    rows = [{"sample_id": f"img{i}", "status": "done", "task": "genception", "seq": k,
             "result": {"complete": True, "gc": {"GC@3": v}, "category": c, "image": f"img{i}",
                        "image_sha256": f"h{i}"}} for k, (i, v, c) in enumerate(zip(ids, scores, cats))]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    by: dict[str, list[float]] = {}
    for v, c in zip(scores, cats):
        by.setdefault(c, []).append(v)
    value = float(np.mean([np.mean(v) for v in by.values()]))
    (folder / "results.json").write_text(json.dumps(
        {"task": "genception", "spec": {"task_spec": {"vlm": model, "generator": "g", "encoder": "e"}},
         "counts": {"done": len(rows), "samples": len(rows)},
         "metrics": {"T": 3, "chains": {"scored": len(scores), "failed": 0},
                     "GC@3": {"score": value, "ci95": [value - 0.05, value + 0.05]},
                     "headline": {"name": "GC@3", "value": value, "ci95": [value - 0.05, value + 0.05],
                                  "interval": {}}}}))
    return folder


def test_genception_leaderboard_ranks_on_the_shared_images_as_compare(tmp_path):
    """A and B share images 0-7, where A scores 0.6 and B 0.4 on every one (8 of 8 differences A's: exact
    p = 2 / 2^8).  A's other 8 images score 0.1, B's other 8 0.9: on its own images A has 0.35, B 0.65.  Every
    surface ranks A first, by 0.6 - 0.4 = 0.2 on the 8 shared images."""
    from vlmcheck.methods.compare import compare_runs
    from vlmcheck.methods.decide import decide
    from vlmcheck.methods.leaderboard import leaderboard
    from vlmcheck.report.html import build_report

    a = _gen(tmp_path / "A", "A", [0.6] * 8 + [0.1] * 8, ids=list(range(0, 16)))
    b = _gen(tmp_path / "B", "B", [0.4] * 8 + [0.9] * 8, ids=list(range(0, 8)) + list(range(16, 24)))
    (c,) = compare_runs([a, b])["comparisons"]
    assert c["difference"] == pytest.approx(0.2) and c["p_value"] == pytest.approx(2 / 2 ** 8) and c["separated"]
    board = leaderboard([a, b])
    assert list(board["models"]) == ["A", "B"] and board["models"]["A"]["rank"] == 1
    assert board["shared"]["n"] == 8 and board["models"]["A"]["tied_with"] == []
    assert board["models"]["A"]["on_shared"] == pytest.approx(0.6)
    assert board["models"]["B"]["on_shared"] == pytest.approx(0.4)
    assert board["models"]["B"]["GC@3"] == pytest.approx(0.65)  # its own score stays beside
    (d,) = decide([a, b])
    assert d["leader"] == "A" and d["runner_up"]["difference"] == pytest.approx(0.6 - 0.4) and d["separated"]
    assert d["value"] == pytest.approx(board["models"]["A"]["on_shared"])
    page = build_report([a, b], tmp_path / "r.html").read_text()
    gc = page[page.index("<h2>GenCeption leaderboard</h2>"):]
    assert gc.index("<td>A</td>") < gc.index("<td>B</td>") and "8 shared images" in gc
    assert "behind the leader by 0.2000" in page and "A leads on GC@3 with 0.600 on the 8 samples" in page
    # the first screen and the leaderboard by method print the values the margin is the difference of
    assert "0.600<small>on the 8 shared samples; its run's headline 0.350" in page
    assert "0.4000<small>on the 8 shared samples; its run's headline 0.6500" in page
    out = _cli("compare", a, b, "-o", tmp_path / "lb.json")
    assert re.search(r"1 │ A │ 0\.6000 │ 0\.3500", out) and re.search(r"2 │ B │ 0\.4000 │ 0\.6500", out)
    assert "A - B = 0.2000" in out and ": separated; 8 shared, 16 left out" in out


def test_compare_of_genception_runs_with_no_chain_scored_says_so(tmp_path):
    def unscored(folder, model):
        folder.mkdir()
        rec = {"sample_id": "img0", "status": "done", "task": "genception",
               "result": {"complete": False, "gc": {}, "image": "img0", "category": "x"}}
        (folder / "samples.jsonl").write_text(json.dumps(rec) + "\n")
        (folder / "results.json").write_text(json.dumps(
            {"task": "genception", "spec": {"task_spec": {"vlm": model, "generator": "g", "encoder": "e"}},
             "counts": {"done": 1, "samples": 1},
             "metrics": {"T": 3, "chains": {"scored": 0, "failed": 1}, "GC@3": {"score": None, "ci95": None},
                         "headline": {"name": "GC@3", "value": None, "ci95": None, "interval": {}}}}))
        return folder

    out = _cli("compare", unscored(tmp_path / "A", "A"), unscored(tmp_path / "B", "B"), "-o", tmp_path / "lb.json")
    assert "no metric with per-sample outcomes" in out and "A" in out and "B" in out


# ----------------------------------------------------------------------------- vhx compare: no duplicated rows

def test_vhx_compare_of_one_dataset_tests_each_difference_once(tmp_path):
    from vlmcheck.finetune.compare import compare_vhx

    def run(folder, correct, neg):
        folder.mkdir()
        recs = [{"sample_id": f"c{i}", "status": "done",
                 "result": {"image": f"i{i}", "meta": {"dataset": "mmvp"},
                            "variants": {"original": {"correct": bool(c), "neg_correct": bool(n)}}}}
                for i, (c, n) in enumerate(zip(correct, neg))]
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        (folder / "results.json").write_text(json.dumps({"task": "vhexpansion", "spec": {"task_spec": {"vlm": "m"}},
                                                         "metrics": {}, "counts": {}}))
        return folder

    # 8 cases: accuracy 0/8 -> 8/8 (8 discordant, exact p 2/2^8); symmetric 0/8 -> 4/8 (4 discordant, 2/2^4)
    before = run(tmp_path / "b", [0] * 8, [0] * 8)
    after = run(tmp_path / "a", [1] * 8, [1] * 4 + [0] * 4)
    cmp = compare_vhx(before, after)
    assert [(r["dataset"], r["variant"]) for r in cmp["rows"]] == [("mmvp", "original")]
    (row,) = cmp["rows"]
    p1, p2 = 2 / 2 ** 8, 2 / 2 ** 4
    assert row["accuracy"]["p_value"] == pytest.approx(p1)
    # Holm over two tests, not four: 2 x p1, then max(2 x p1, p2)
    assert row["accuracy"]["p_holm"] == pytest.approx(2 * p1)
    assert row["symmetric_accuracy"]["p_holm"] == pytest.approx(p2)


# ----------------------------------------------------------------------------- plan and wording

def test_plan_never_prints_an_n_at_which_the_test_cannot_reject(tmp_path):
    from test_decisions_48 import _vhx

    pilot = _vhx(tmp_path / "P", "P", [1] * 20)  # every answer right
    out = _cli("plan", "--pilot", pilot, "--delta", "0.3")
    ns = [int(x) for m in re.findall(r"from (\d+) to (\d+)", out) for x in m]
    ns += [int(x) for x in re.findall(r"(\d+) samples", out)]
    # 2 / 2^n <= 0.05 first at n = 6: with fewer units no sign pattern is rare enough to reject
    assert ns and min(ns) >= 6


def test_identical_runs_are_level_and_a_close_run_is_not_behind_by(tmp_path):
    from test_decisions_48 import _vhx
    from vlmcheck.methods.decide import decide
    from vlmcheck.report.html import build_report

    same = [1] * 12 + [0] * 8
    a = _vhx(tmp_path / "A", "A", same)
    b = _vhx(tmp_path / "B", "B", same)
    (d,) = decide([a, b])
    assert " leads on" not in d["sentence"] and "margin 0.000" not in d["sentence"]
    assert d["sentence"].startswith("A and B are level on accuracy at 0.600") or \
        d["sentence"].startswith("B and A are level on accuracy at 0.600")
    page = build_report([a, b], tmp_path / "r.html").read_text()
    assert "level with the leader" in page and "cannot be separated from the leader by" not in page
    # one case apart: not separated, and said without "by"
    c = _vhx(tmp_path / "C", "C", [1] * 13 + [0] * 7)
    page = build_report([a, c], tmp_path / "r2.html").read_text()
    assert "cannot be separated from the leader (difference 0.0500 [" in page
    assert "cannot be separated from the leader by" not in page


def test_compare_shows_each_lines_holm_level(tmp_path):
    from test_decisions_48 import _vhx

    # three runs, three pairs: Holm judges the smallest p at 0.05/3, the next at 0.05/2, the last at 0.05
    runs = [_vhx(tmp_path / n, n, [1] * k + [0] * (40 - k)) for n, k in (("A", 38), ("B", 20), ("C", 4))]
    out = _cli("compare", *runs)
    levels = re.findall(r"against its Holm level ([0-9.]+)", out)
    assert sorted(levels) == ["0.01667", "0.025", "0.05"]
    assert "98.33% CI" in out and "97.5% CI" in out and "95% CI" in out


def test_vhexpansion_margin_is_the_difference_of_the_printed_values(tmp_path):
    """Partial overlap (cases 10-19 shared): A 4 of 10, B 10 of 10 there; own headlines 0.70 and 0.50.  The
    first screen and the leaderboard print 1.000 and 0.400 beside the margin 0.600, the own ones beside."""
    from test_decisions_48 import _vhx
    from vlmcheck.report.html import build_report

    a = _vhx(tmp_path / "A", "A", [1] * 14 + [0] * 6, ids=range(0, 20))
    b = _vhx(tmp_path / "B", "B", [1] * 10 + [0] * 10, ids=range(10, 30))
    page = build_report([a, b], tmp_path / "r.html").read_text()
    assert "1.000<small>on the 10 shared samples; its run's headline 0.500" in page
    assert "1.0000<small>on the 10 shared samples; its run's headline 0.5000" in page
    assert "0.4000<small>on the 10 shared samples; its run's headline 0.7000" in page
    assert "+0.600" in page and "behind the leader by 0.6000" in page


@pytest.mark.slow
def test_pooled_swap_interval_excludes_0_exactly_when_its_test_rejects():
    from vlmcheck.methods.cast_scores import headline_of_sums
    from vlmcheck.metrics.pooled import PooledSwap

    rng = np.random.default_rng(3)
    for _ in range(15):
        n = int(rng.integers(6, 13))
        parsed_a, parsed_b = rng.integers(1, 4, size=(n, 18)), rng.integers(1, 4, size=(n, 18))
        a = np.stack([rng.binomial(parsed_a, rng.uniform(0.2, 0.8)), parsed_a], -1)
        b = np.stack([rng.binomial(parsed_b, rng.uniform(0.2, 0.8)), parsed_b], -1)
        sf = PooledSwap(a, b, headline_of_sums)
        lo, hi = sf.interval(0.05)
        assert (lo <= 0 <= hi) == (sf.p_value(0.0) > 0.05)
        assert lo <= sf.estimate <= hi
