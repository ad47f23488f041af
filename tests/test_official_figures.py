"""The benchmarks' official figures (datasets/official.py, declared in each benchmark's module) against values
computed by hand here from the authors' definitions, on small replicas whose answers separate the right formula
from the wrong ones people write: acc+ per image not per question, MME's scores summed not averaged, POPE's yes
ratio from the answers not the truth, circular accuracy over every copy, MMVP's pairs whole or not at all."""

from __future__ import annotations

import pytest

from vlmcheck.datasets.official import Answer, Tally, benchmark_of, declared, figures, official_for


def test_each_benchmark_with_an_official_figure_declares_it_once():
    assert {"mme", "pope", "mmbench", "mmvp", "seedbench", "scienceqa"} <= set(declared())
    assert official_for("cifar10") is None and official_for(None) is None


def _mme_answers() -> list[Answer]:
    def q(cat, img, ok):
        return Answer(unit=f"{cat}/{img}", correct=ok, category=cat, group=f"{cat}/{img}")

    return [q("existence", "1.jpg", True), q("existence", "1.jpg", True),     # image right twice
            q("existence", "2.jpg", True), q("existence", "2.jpg", False),    # half right
            q("count", "3.jpg", True), q("count", "3.jpg", True),
            q("count", "4.jpg", True), q("count", "4.jpg", True),
            q("code_reasoning", "5.png", True), q("code_reasoning", "5.png", False),
            q("text_translation", "6.png", False), q("text_translation", "6.png", False)]


def test_mme_score_by_hand():
    m = figures("mme", _mme_answers())
    # existence: accuracy 3/4 = 75, accuracy+ (images with both right) 1/2 = 50 -> 125
    # count: 4/4 = 100, 2/2 = 100 -> 200; perception = 125 + 200 = 325 (a sum over categories, not a mean)
    # code_reasoning: 1/2 = 50, 0/1 = 0 -> 50; text_translation: 0 + 0; cognition = 50
    assert m["perception"]["value"] == pytest.approx(325.0)
    assert m["cognition"]["value"] == pytest.approx(50.0)
    assert m["categories"]["existence"] == pytest.approx(
        {"accuracy": 75.0, "accuracy_plus": 50.0, "score": 125.0, "questions": 4, "images": 2,
         "single_question_images": 0})
    # the wrong variants: plain accuracy x 100 summed (75 + 100 = 175), a mean over the categories (162.5)
    assert m["perception"]["value"] not in (175.0, 162.5)
    assert m["perception"]["of"] == 10 and m["cognition"]["of"] == 4
    assert any("not in this run" in n for n in m["notes"])  # 10 of MME's 14 categories are absent


def test_mme_score_is_not_plain_accuracy():
    # plain accuracy here is 4/6; MME's figure is per category acc + acc+, x 100, summed per score
    one = [Answer("a", True, "OCR", "a"), Answer("a", False, "OCR", "a"),
           Answer("b", False, "numerical_calculation", "b"), Answer("b", True, "numerical_calculation", "b"),
           Answer("c", True, "numerical_calculation", "c"), Answer("c", True, "numerical_calculation", "c")]
    m = figures("mme", one)
    assert m["perception"]["value"] == pytest.approx(50.0)              # OCR: 1/2 x 100 + 0/1 x 100
    assert m["cognition"]["value"] == pytest.approx(75.0 + 50.0)        # 3/4 and 1/2
    assert m["perception"]["ci95"] is None                                # a sum of shares has no interval here


def test_mme_images_without_a_group_are_grouped_by_their_image():
    # the Hub copy (lmms-lab/MME) has no group column: its two questions of an image share the image's file
    ans = [Answer("img1", True, "color"), Answer("img1", False, "color"), Answer("img2", True, "color"),
           Answer("img2", True, "color")]
    m = figures("mme", ans)
    assert m["categories"]["color"]["images"] == 2
    assert m["perception"]["value"] == pytest.approx(75.0 + 50.0)


def _pope_answers() -> list[Answer]:
    # image A: truth Y Y N N, said Y N Y N;  image B: truth Y Y N N, said Y Y Y Y
    said = {"A": (True, False, True, False), "B": (True, True, True, True)}
    truth = (True, True, False, False)
    return [Answer(img, s == t, said_yes=s, truth_yes=t) for img, ss in said.items() for s, t in zip(ss, truth)]


def test_pope_figures_as_popes_evaluate_py():
    m = figures("pope", _pope_answers())
    # TP: A1, B1, B2 = 3; FN: A2 = 1; FP: A3, B3, B4 = 3; TN: A4 = 1
    assert m["accuracy"]["value"] == pytest.approx(4 / 8)
    assert m["precision"]["value"] == pytest.approx(3 / 6)
    assert m["recall"]["value"] == pytest.approx(3 / 4)
    assert m["f1"]["value"] == pytest.approx(2 * 0.5 * 0.75 / (0.5 + 0.75))
    # yes ratio: the model's answers (6 of 8 said yes), NOT the truth's share of yes (4 of 8, lmms-eval's)
    assert m["yes_ratio"]["value"] == pytest.approx(6 / 8) and m["yes_ratio"]["value"] != 0.5
    # shares come with an interval clustered by image: 2 images
    for k in ("accuracy", "precision", "recall", "yes_ratio"):
        lo, hi = m[k]["ci95"]
        assert lo <= m[k]["value"] <= hi and m[k]["interval"]["n_units"] == 2
    assert m["f1"]["ci95"] is None


def test_mmbench_circular_and_vanilla_by_vlmevalkit_rule():
    def q(g, copy, ok):
        return Answer(unit=f"img{g}", correct=ok, group=str(g), copy=copy)

    ans = ([q(1, k, True) for k in range(4)]                      # every copy right
           + [q(2, 0, True), q(2, 1, False), q(2, 2, True), q(2, 3, True)]   # the question right, a copy wrong
           + [q(3, 0, False)] + [q(3, k, True) for k in (1, 2, 3)]          # only the question wrong
           + [q(4, k, True) for k in range(4)])
    m = figures("mmbench", ans)
    assert m["circular_accuracy"]["value"] == pytest.approx(2 / 4)   # questions 1 and 4
    assert m["vanilla_accuracy"]["value"] == pytest.approx(3 / 4)    # copy 0 of 1, 2, 4
    assert m["circular_accuracy"]["value"] != pytest.approx(14 / 16)  # not the share of copies right
    assert m["circular_accuracy"]["interval"]["n_units"] == 4


def test_mmbench_without_copies_has_no_circular_accuracy_and_says_so():
    m = figures("mmbench", [Answer("a", True, group="1"), Answer("b", False, group="2")])
    assert "circular_accuracy" not in m and m["vanilla_accuracy"]["value"] == 0.5
    assert "VanillaEval" in m["notes"][0]


def test_mmvp_pair_accuracy_counts_a_pair_only_when_both_are_right():
    def q(p, ok):
        return Answer(unit=f"pair-{p}", correct=ok, group=f"pair-{p}")

    ans = [q(1, True), q(1, True), q(2, True), q(2, False), q(3, False), q(3, False), q(4, True), q(4, True),
           q(5, True)]                                     # pair 5: its other question failed
    m = figures("mmvp", ans)
    assert m["pair_accuracy"]["value"] == pytest.approx(2 / 4)   # pairs 1 and 4; a half-right pair is 0, not 0.5
    assert m["pair_accuracy"]["value"] != pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert m["accuracy"]["value"] == pytest.approx(6 / 9)
    assert "1 pairs with one question answered" in m["notes"][0]


@pytest.mark.parametrize("benchmark", ["seedbench", "scienceqa"])
def test_seedbench_and_scienceqa_accuracy_clustered_by_image(benchmark):
    ans = [Answer("i1", True), Answer("i1", True), Answer("i2", False), Answer("i3", True)]
    m = figures(benchmark, ans)
    assert m["accuracy"]["value"] == pytest.approx(3 / 4)
    assert m["accuracy"]["interval"]["n_units"] == 3 and m["accuracy"]["n"] == 4


def test_tally_keeps_only_benchmarks_that_declare_a_figure():
    t = Tally()
    t.add("cifar10", Answer("x", True))
    t.add(None, Answer("y", True))
    assert t.result() is None
    t.add("scienceqa", Answer("z", False))
    assert t.result()["benchmark"] == "scienceqa" and t.result()["accuracy"]["value"] == 0.0


@pytest.mark.parametrize("source, expected", [
    ("/data/LMUData/MMBench_DEV_EN.tsv", "mmbench"), ("SEEDBench_IMG.tsv", "seedbench"),
    ("./ScienceQA_TEST.tsv", "scienceqa"), ("hfds:lmms-lab/MME", "mme"), ("hfds:lmms-lab/SEED-Bench?split=test",
                                                                             "seedbench"),
    ("hfds:lmms-lab/POPE", "pope"), ("hfds:MMVP/MMVP", "mmvp"), ("hfds:lmms-lab/MME-RealWorld", None),
    ("./photos", None), ("SEEDBench2.tsv", None)])
def test_benchmark_of_a_source_named_for_it(source, expected):
    assert benchmark_of(None, source) == expected
    assert benchmark_of("pope", source) == "pope"


def test_mme_the_issues_numbers_plain_accuracy_075_perception_775_cognition_100():
    # each category has two images of two questions; (a, b) = questions right on its first and second image
    cats = {"existence": (2, 2), "count": (2, 2), "position": (2, 2), "color": (2, 1), "OCR": (1, 1),
            "commonsense_reasoning": (1, 1), "numerical_calculation": (1, 1)}
    ans = [Answer(f"{c}/{i}", k < right, c, f"{c}/{i}") for c, rights in cats.items()
           for i, right in enumerate(rights) for k in range(2)]
    assert sum(a.correct for a in ans) / len(ans) == 0.75          # 21 of 28: what vlmcheck reported alone
    m = figures("mme", ans)
    # perception: 3 x (100 + 100) + color (75 + 50) + OCR (50 + 0) = 775; cognition: 2 x (50 + 0) = 100
    assert m["perception"]["value"] == pytest.approx(775.0)
    assert m["cognition"]["value"] == pytest.approx(100.0)
