"""CAST: parsing, prompts, scores by hand, pair sampling, end to end on world pairs."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from vlmcheck.methods.cast import (FORMATS, MODALITIES, CastSpec, CastTask, cast_scores, parse_statements,
                                   parse_verdict, sample_pairs, side_by_side, validation_prompt)
from vlmcheck.run.runner import RunOptions, run_task
from vlmcheck.world.make import make_world_pairs


def test_parse_numbered_lists():
    text = ("Similarities:\n1. Both have a red circle.\n2) Both are on white.\n**3.** Both show four objects.\n"
            "not a list line\n4. Four\n5. Five\n6. Six")
    assert parse_statements(text) == ["Both have a red circle.", "Both are on white.", "Both show four objects.",
                                      "Four", "Five"]
    assert parse_statements(text, k=2) == ["Both have a red circle.", "Both are on white."]
    assert parse_statements("Nothing in common.") == []


def test_parse_verdicts_appendix_a3():
    assert parse_verdict("**Both**", "one_both") == 1
    assert parse_verdict("One of them.\nBoth? no", "one_both") == 0
    assert parse_verdict("True.", "true_false") == 1
    assert parse_verdict("false", "true_false") == 0
    assert parse_verdict("Yes, both do.", "yes_no") == 1
    assert parse_verdict("I think yes", "yes_no") is None  # must start with the word


def test_validation_prompts_are_figure_5():
    assert validation_prompt("one_both", "image") == (
        "Given two side-by-side images, does the following statement apply to only one of the images? "
        "Answer with 'one' or 'both'.")
    assert validation_prompt("true_false", "text").startswith(
        "Given two scenes, is the following statement true for both of the scenes? Answer with 'true' or 'false'")
    assert validation_prompt("yes_no", "both").startswith(
        "Given two descriptions and their corresponding images, does the following statement describe both of "
        "the descriptions?")


def test_side_by_side():
    out = side_by_side(Image.new("RGB", (30, 60), "red"), Image.new("RGB", (80, 20), "blue"), size=64)
    assert out.size == (128, 64)
    assert out.getpixel((10, 10)) == (255, 0, 0) and out.getpixel((100, 10)) == (0, 0, 255)


def _result(values):
    """values[g][i][v|fmt] -> verdict; builds one pair's record."""
    gen = {}
    for g in MODALITIES:
        sts = []
        for v_by_cell in values.get(g, []):
            sts.append({"text": "s", "verdicts": {f"{v}|{f}": {"raw": "", "verdict": v_by_cell.get((v, f), 1)}
                                                  for v in MODALITIES for f in FORMATS}})
        gen[g] = {"raw": "", "statements": sts}
    return {"generation": gen}


def test_scores_by_hand_cells_kept_apart():
    # pair 1: text-generated statements; 'both' validation with the one/both format says 0 for the first
    r1 = _result({"text": [{("both", "one_both"): 0, ("image", "yes_no"): None}, {("both", "one_both"): 1}]})
    r2 = _result({"text": [{("both", "one_both"): 1}]})
    s = cast_scores([r1, r2], k_values=(1, 3))
    top3 = s["topk"]["top3"]
    # cell (text, both, one_both): pair means 0.5 and 1.0 -> 0.75
    assert top3["one_both"]["text"]["both"]["score"] == pytest.approx(0.75)
    # the 'both' column never mixes with other modalities under the same format
    assert top3["one_both"]["text"]["text"]["score"] == 1.0
    # unparseable verdicts are excluded and counted
    assert top3["yes_no"]["text"]["image"]["score"] == 1.0
    assert top3["yes_no"]["text"]["image"]["unparseable_rate"] == pytest.approx(1 / 3)
    # top-1 looks at the first statement only: pair means 0 and 1
    assert s["topk"]["top1"]["one_both"]["text"]["both"]["score"] == pytest.approx(0.5)
    # mean over formats for (text, both): per pair mean of 6 (pair 1: 5 ones + 1 zero over 2 statements x 3) ...
    p1 = np.mean([0, 1, 1, 1, 1, 1])
    assert top3["mean"]["text"]["both"]["score"] == pytest.approx((p1 + 1.0) / 2)
    assert top3["mean"]["image"]["text"]["score"] is None  # no statements generated from images


def test_pair_sampling_bins_disjoint_seeded():
    rng = np.random.default_rng(0)
    n = 60
    base = rng.normal(size=(1, 16))
    emb = base + rng.normal(scale=0.7, size=(n, 16))
    items = [{"id": str(i), "image": f"{i}.png", "description": "x" * (600 if i % 5 else 100)} for i in range(n)]
    pairs, report = sample_pairs(items, emb, per_bin=3, min_chars=500, seed=1)
    used = [p[s]["id"] for p in pairs for s in ("a", "b")]
    assert len(used) == len(set(used))  # disjoint images
    for p in pairs:
        lo, hi = p["bin"]
        assert lo <= p["image_cosine"] < hi
        assert len(p["a"]["description"]) >= 500 and len(p["b"]["description"]) >= 500
    assert sample_pairs(items, emb, per_bin=3, min_chars=500, seed=1)[0] == pairs
    assert report["long_enough"] == 48 and report["seed"] == 1


def test_cast_end_to_end_on_world_pairs(tmp_path):
    pairs = make_world_pairs(tmp_path / "pairs", n=6, seed=1)
    scores = {}
    for lv in (0.0, 0.3):
        res = run_task(CastTask(CastSpec(vlm=f"ref:describer?level={lv}", pairs=str(pairs))), tmp_path / str(lv),
                       RunOptions(progress=False)).results
        assert res["counts"]["failed"] == 0
        scores[lv] = res["metrics"]["topk"]["top5"]["mean"]
    clean = scores[0.0]
    assert all(clean[g][v]["score"] == 1.0 for g in MODALITIES for v in MODALITIES)
    noisy = scores[0.3]
    off = [noisy[g][v]["score"] for g in MODALITIES for v in MODALITIES if g != v]
    assert np.mean(off) < 0.95  # image-modality errors show up as cross-modal inconsistency
    two = run_task(CastTask(CastSpec(vlm="ref:describer", pairs=str(pairs), two_images=True)), tmp_path / "two",
                   RunOptions(progress=False)).results["metrics"]["topk"]["top5"]["mean"]
    assert two["image"]["image"]["score"] == 1.0
