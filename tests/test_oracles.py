"""Headlines as oracles: each method's headline figures, computed by the code a run uses to write results.json
(the task's summary fold, fed the finished records a run stores), against values worked out by hand here from
the paper's definition.  bench/mutants.py checks that these and the methods' other tests catch plausible slips
in the formulas (ECE for 1 - ECE, an unweighted GC@T ...)."""

from __future__ import annotations

import pytest

from vlmcheck.methods.chef.recipe import resolve_recipe
from vlmcheck.methods.chef.summary import ChefSummary


def _item(i: int, settings: dict, n_options: int = 4, image: str | None = None) -> dict:
    return {"status": "done", "result": {"id": f"q{i}", "image": image or f"img{i}.png", "n_options": n_options,
                                         "meta": {}, "settings": settings}}


def _fold(recipe: str, records) -> dict:
    fold = ChefSummary(resolve_recipe(recipe), None, 0)
    for r in records:
        fold.add(r)
    return fold.result()


def test_chef_calibration_overall_is_one_minus_equal_count_ece_by_hand():
    """ChEF C.2 / Table 8: ECE over 10 equal-count bins (sorted by confidence; the first N mod 10 bins one item
    more), ECE = sum_b n_b |conf_b - acc_b| / N; the desideratum's score is 1 - ECE."""
    # 12 items all at confidence 0.9 (a stable sort keeps their order); the first 8 right, the last 4 wrong
    recs = [_item(i, {"standard": {"answer": 0, "pred": 0 if i < 8 else 1, "correct": i < 8, "extracted": True,
                                   "confidence": 0.9}}) for i in range(12)]
    m = _fold("calibration", recs)
    # bins: {0,1} {2,3} {4} {5} {6} {7} -> |0.9 - 1| each; {8} {9} {10} {11} -> |0.9 - 0| each
    ece = (2 * 0.1 + 2 * 0.1 + 4 * 0.1 + 4 * 0.9) / 12  # = 4.4 / 12
    assert m["ece"] == pytest.approx(ece)
    assert m["overall"] == pytest.approx(1 - ece)  # 0.6333
    assert m["accuracy"] == pytest.approx(8 / 12)
    assert [b["n"] for b in m["reliability"]] == [2, 2] + [1] * 8
    head = m["headline"]
    assert head["value"] == pytest.approx(1 - ece)
    lo, hi = head["ci95"]
    assert lo <= 1 - ece <= hi and 0 <= lo and hi <= 1  # the interval is on 1 - ECE, not on ECE


def test_chef_riam_by_hand():
    """ChEF C.3: RIAM = (mean accuracy over the shot settings - 0-shot accuracy) / (0-shot - random) * 50 + 50."""
    right = {0: [1, 1, 0, 0], 1: [1, 1, 1, 0], 2: [1, 1, 1, 1]}  # accuracy 0.5, 0.75, 1.0 on 4 items
    recs = [_item(i, {f"shots={k}": {"answer": 0, "pred": 0 if right[k][i] else 1, "correct": bool(right[k][i]),
                                     "extracted": True} for k in (0, 1, 2)}) for i in range(4)]
    m = _fold("icl", recs)
    acc_random = 1 / 4
    assert m["acc_random"] == pytest.approx(acc_random)
    assert m["riam"] == pytest.approx(((0.75 + 1.0) / 2 - 0.5) / (0.5 - acc_random) * 50 + 50)  # = 125
    assert m["headline"]["name"] == "riam" and m["headline"]["value"] == pytest.approx(125.0)


def test_chef_rrm_by_hand():
    """ChEF C.5: RRM = (accuracy corrupted - random) / (accuracy original - random) * 100, per corruption."""
    right = {"original": [1, 1, 1, 0], "corrupt:image": [1, 1, 0, 0], "corrupt:text": [1, 0, 0, 0],
             "corrupt:both": [0, 0, 0, 0]}
    recs = [_item(i, {name: {"answer": 0, "pred": 0 if r[i] else 1, "correct": bool(r[i]), "extracted": True}
                      for name, r in right.items()}, n_options=2) for i in range(4)]
    m = _fold("robustness", recs)
    rand = 1 / 2
    rrm = lambda acc: (acc - rand) / (0.75 - rand) * 100  # noqa: E731
    assert m["rrm"] == pytest.approx({"image": rrm(0.5), "text": rrm(0.25), "both": rrm(0.0)})
    assert m["rrm"]["image"] == pytest.approx(0.0) and m["rrm"]["both"] == pytest.approx(-200.0)
    assert m["headline"]["value"] == pytest.approx(-200.0)  # the headline: RRM with image and text corrupted


def test_chef_pope_by_hand():
    """POPE (ChEF's hallucination desideratum): precision, recall and F1 = 2PR / (P + R) of answering yes."""
    # answer 0 is "yes"; truth yes on items 0-3, no on 4-7; predicted yes on 0, 1, 2 and 4, 5
    truth = [0, 0, 0, 0, 1, 1, 1, 1]
    pred = [0, 0, 0, 1, 0, 0, 1, 1]
    recs = [_item(i, {"standard": {"answer": truth[i], "pred": pred[i], "correct": truth[i] == pred[i],
                                   "extracted": True}}, n_options=2) for i in range(8)]
    m = _fold("hallucination", recs)
    p = m["pope"]
    precision, recall = 3 / 5, 3 / 4  # tp 3, fp 2, fn 1
    assert p["precision"] == pytest.approx(precision) and p["recall"] == pytest.approx(recall)
    assert p["f1"] == pytest.approx(2 * precision * recall / (precision + recall))  # 2/3
    assert p["accuracy"] == pytest.approx(5 / 8)
    # POPE's yes ratio is the share of the model's answers that say yes (5 of 8), not the ground truth's (4 of 8)
    assert p["yes_ratio"] == pytest.approx(5 / 8)
    assert m["headline"]["name"] == "POPE accuracy" and m["headline"]["value"] == pytest.approx(5 / 8)


def test_chef_instruction_following_match_ratio_and_acc_vm_by_hand():
    """ChEF C.4: the match ratio of a verbalizer setting is the share of items whose predicted option is the one
    predicted without it; per group the mean over its settings; MR weighted by the group's number of settings;
    Acc_vm the mean accuracy over the verbalizer settings."""
    answer = [0, 0, 0, 0]
    pred = {"original": [0, 1, 2, 3], "A:0": [0, 1, 2, 0], "A:1": [0, 0, 0, 0], "B:0": [0, 1, 2, 3]}
    recs = [_item(i, {name: {"answer": answer[i], "pred": p[i], "correct": p[i] == answer[i], "extracted": True}
                      for name, p in pred.items()}) for i in range(4)]
    m = _fold("instruction-following", recs)
    # matches with the original: A:0 3 of 4, A:1 1 of 4, B:0 4 of 4
    assert m["match_ratio"] == pytest.approx({"A": (3 / 4 + 1 / 4) / 2, "B": 1.0})
    assert m["mr_weighted"] == pytest.approx((0.5 * 2 + 1.0 * 1) / 3)
    # right (answer 0): A:0 items 0 and 3, A:1 all four, B:0 item 0
    assert m["acc_vm"] == pytest.approx((2 / 4 + 4 / 4 + 1 / 4) / 3)
    assert m["headline"]["name"] == "mr_weighted" and m["headline"]["value"] == pytest.approx(2 / 3)


def test_chef_accuracy_headline_by_hand():
    """A recipe of the accuracy desideratum: the headline is the share of items answered right, its interval
    clustered by image (two questions on each of three images here)."""
    right = [1, 1, 1, 0, 0, 0]
    recs = [_item(i, {"standard": {"answer": 0, "pred": 0 if right[i] else 2, "correct": bool(right[i]),
                                   "extracted": True}}, image=f"img{i // 2}.png") for i in range(6)]
    m = _fold("cifar10", recs)
    assert m["desideratum"] == "accuracy"
    assert m["headline"]["name"] == "accuracy" and m["headline"]["value"] == pytest.approx(3 / 6)
    assert m["headline"]["interval"]["n_units"] == 3


def test_mmvp_pair_accuracy_by_hand():
    """MMVP (Tong et al. 2024, section 3): a pair (the same question on the two images of a CLIP-blind pair)
    counts as right only when both its questions are answered right; a pair with one question left in the run
    is left out of the share (and reported)."""
    from vlmcheck.methods.vhx_summary import VHXSummary

    def case(i: int, pair: str, right: bool) -> dict:
        answer = "yes" if i % 2 else "no"
        parsed = answer if right else ("no" if answer == "yes" else "yes")
        return {"status": "done", "result": {
            "image": f"img{i}.png", "answer": answer, "negation": {"ok": False}, "meta": {"pair": pair},
            "variants": {"original": {"parsed": parsed, "correct": right, "answer": parsed.capitalize() + "."}}}}

    # p1 both right, p2 half right, p3 both wrong, p4 one question only (its other one failed)
    rows = [("p1", True), ("p1", True), ("p2", True), ("p2", False), ("p3", False), ("p3", False), ("p4", True)]
    fold = VHXSummary([], None, 1)
    for i, (pair, right) in enumerate(rows):
        fold.add(case(i, pair, right))
    orig = fold.result()["variants"]["original"]
    assert orig["pair_accuracy"] == pytest.approx(1 / 3)  # p1 of p1, p2, p3 ("any question right" gives 2/3)
    assert orig["n_mmvp_pairs"] == 3 and orig["mmvp_pairs_incomplete"] == 1  # p4 counted would give 2/4
    assert orig["accuracy"] == pytest.approx(4 / 7)


def test_every_mutant_in_bench_mutants_still_finds_its_formula():
    """bench/mutants.py changes each headline formula by its text.  A formula reworded leaves its mutant stale:
    the bench then applies nothing and runs nothing for it, so no test would say the formula lost its guard."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("bench_mutants", root / "bench" / "mutants.py")
    mutants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutants)
    stale = [name for name, rel, old, new, tests in mutants.MUTANTS
             if (root / "src" / "vlmcheck" / rel).read_text(encoding="utf-8").count(old) != 1 or old == new
             or not all((root / t).is_file() for t in tests)]
    assert len(mutants.MUTANTS) >= 16 and stale == []
