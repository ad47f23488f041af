"""CAST: parsing, prompts, scores by hand, pair sampling, end to end on world pairs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import re

import pytest
from PIL import Image

from vlmcheck.methods.cast import (FORMATS, MODALITIES, CastSpec, CastTask, cast_scores, parse_statements,
                                   parse_verdict, sample_pairs, side_by_side, validation_prompt)
from vlmcheck.run.runner import RunOptions, run_task
from vlmcheck.world.make import make_world_pairs


def test_statements_glued_to_the_prefill_as_the_authors_parse_them():
    # "Similarities:\n\n1." + a stripped continuation: the authors' ^\d+\.\s* keeps "The two ..." as item 1
    assert parse_statements("Similarities:\n\n1.The two scenes are outdoors.\n2.Both have a tree.") == [
        "The two scenes are outdoors.", "Both have a tree."]
    assert parse_statements("1.5 apples are on the table.") == []  # a decimal, not an item


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
    # pair 1: two text-generated statements; 'both' validation with the one/both format says 0 for the first
    r1 = _result({"text": [{("both", "one_both"): 0, ("image", "yes_no"): None}, {("both", "one_both"): 1}]})
    r2 = _result({"text": [{("both", "one_both"): 1}]})
    s = cast_scores([r1, r2], k_values=(1, 3))
    top3 = s["topk"]["top3"]
    # cell (text, both, one_both): verdicts 0, 1 (pair 1) and 1 (pair 2), pooled -> 2/3
    assert top3["one_both"]["text"]["both"]["score"] == pytest.approx(2 / 3)
    # the 'both' column never mixes with other modalities under the same format
    assert top3["one_both"]["text"]["text"]["score"] == 1.0
    # unparseable verdicts are excluded and counted
    assert top3["yes_no"]["text"]["image"]["score"] == 1.0
    assert top3["yes_no"]["text"]["image"]["unparseable_rate"] == pytest.approx(1 / 3)
    # top-1 looks at the first statement only: 0 and 1
    assert s["topk"]["top1"]["one_both"]["text"]["both"]["score"] == pytest.approx(0.5)
    # the format average is the mean of the three per-format scores: (2/3 + 1 + 1) / 3
    assert top3["mean"]["text"]["both"]["score"] == pytest.approx(8 / 9)
    assert top3["mean"]["image"]["text"]["score"] is None  # no statements generated from images
    # per position (appendix C.2): position 1 has 0 and 1, position 2 only pair 1's 1
    assert s["position"]["pos1"]["one_both"]["text"]["both"]["score"] == pytest.approx(0.5)
    assert s["position"]["pos2"]["one_both"]["text"]["both"]["score"] == pytest.approx(1.0)
    assert s["position"]["pos3"]["one_both"]["text"]["both"]["score"] is None


def test_topk_pools_statements_over_pairs_with_unequal_counts():
    # Pair A: 5 statements, yes/no verdicts 1, 0, None, 1, 1 (text -> text).  Pair B: 1 statement, verdict 0.
    # Pooled Top-k over statements with index < k, unparseable excluded (the authors' analysis):
    #   Top-1: A1=1, B1=0          -> 1/2
    #   Top-3: A1..A3 = 1, 0, (x); B1 = 0 -> 1/3
    #   Top-5: 1, 0, 1, 1; 0       -> 3/5
    # (averaging each pair first would give Top-5 = (3/4 + 0) / 2 = 0.375)
    a = _result({"text": [{("text", "yes_no"): v} for v in (1, 0, None, 1, 1)]})
    b = _result({"text": [{("text", "yes_no"): 0}]})
    top = cast_scores([a, b], k_values=(1, 3, 5))["topk"]
    assert top["top1"]["yes_no"]["text"]["text"]["score"] == pytest.approx(1 / 2)
    assert top["top3"]["yes_no"]["text"]["text"]["score"] == pytest.approx(1 / 3)
    assert top["top5"]["yes_no"]["text"]["text"]["score"] == pytest.approx(3 / 5)
    assert top["top5"]["yes_no"]["text"]["text"]["unparseable_rate"] == pytest.approx(1 / 6)
    # other formats default to 1 in _result: mean over formats = (3/5 + 1 + 1) / 3
    assert top["top5"]["mean"]["text"]["text"]["score"] == pytest.approx((3 / 5 + 2) / 3)
    # two pairs are too few for a bootstrap (it gave [0, 0.75]: pair B alone 0, pair A alone 3/4): Wilson's
    # 2 x 3/5 = 1.2 of 2 on the pairs as units, by hand with z = 1.96
    z, n, p = 1.959963984540054, 2, 3 / 5
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert top["top5"]["yes_no"]["text"]["text"]["ci95"] == pytest.approx([centre - half, centre + half])
    assert "bound on the 2 pair(s)" in top["top5"]["yes_no"]["text"]["text"]["ci_method"]


def test_verdict_after_an_echoed_answer_prefix():
    assert parse_verdict("Answer: Yes", "yes_no") == 1
    # the authors split on "Answer:" case-sensitively (validator.py: pred.split("Answer:")[-1]): a lower-case
    # "answer:" is not split off, the text starts with "answer", and the verdict is unparseable
    assert parse_verdict("answer:  **No**, only one", "yes_no") is None
    assert parse_verdict("Answer:  **No**, only one", "yes_no") == 0
    assert parse_verdict("Answer with 'one' or 'both'. Answer: both", "one_both") == 1


class _Recorder:
    """A VLM that records its messages and answers in CAST's formats."""

    def __init__(self, prefill: bool) -> None:
        from vlmcheck.core.roles import Capabilities

        self.model_id = f"test:recorder-{prefill}"
        self.capabilities = Capabilities(multi_image=True, prefill=prefill)
        self.seen = []

    async def generate(self, messages, config):
        from vlmcheck.core.roles import Generation

        self.seen.append(messages)
        prompt = messages[0].text
        word = "Both" if "'both'" in prompt else "True" if "'true'" in prompt else "Yes"
        if messages[-1].role == "assistant":  # continue the pre-filled turn
            text = " Both show a circle.\n2. Both are on white." if "Similarities" in messages[-1].text else f" {word}"
        else:
            text = "1. Both show a circle." if "similarities" in prompt else f"Answer: {word}"
        return Generation(text=text, finish_reason="stop")


@pytest.mark.parametrize("prefill", [True, False])
def test_prompt_layout_and_prefill(tmp_path, prefill):
    from vlmcheck.core.messages import ImagePart, TextPart

    pairs = make_world_pairs(tmp_path / "pairs", n=2, seed=1)
    vlm = _Recorder(prefill)
    task = CastTask(CastSpec(vlm=vlm.model_id, pairs=str(pairs)), vlm=vlm)
    run_task(task, tmp_path / "run", RunOptions(progress=False, limit=1))
    import json

    rec = json.loads((tmp_path / "run" / "samples.jsonl").read_text().splitlines()[0])["result"]
    assert rec["prefill"] is prefill
    for msgs in vlm.seen:
        user = msgs[0].content
        kinds = [type(p).__name__ for p in user]
        # image(s) first, then one text as the authors build it (consistency/generator.py, validator.py):
        # f"{instruction}\n\nScene 1:\n\n{a}\n\nScene 2:\n\n{b}\n\nStatement:{statement}"
        n_img = kinds.count("ImagePart")
        assert all(isinstance(p, ImagePart) for p in user[:n_img])
        assert [type(p).__name__ for p in user[n_img:]] == ["TextPart"]
        text = user[n_img].text
        assert text.startswith("Given two")
        if "Scene 1:" in text:
            assert re.search(r"\n\nScene 1:\n\n.+\n\nScene 2:\n\n.+", text, re.S)
        if "Statement:" in text:
            assert re.search(r"\n\nStatement:Both [^\n]+$", text), text[-80:]
        if len(msgs) > 1:
            assert msgs[-1].role == "assistant" and msgs[-1].text in ("Similarities:\n\n1.", "Answer:")
        assert (len(msgs) > 1) is prefill
    # every request with an image sends the same one: the pair's side-by-side image, made once for the pair
    pair = task.items[0]
    imgs = [Image.open(Path(pair[s].get("root") or "") / pair[s]["image"]).convert("RGB") for s in "ab"]
    sent = [p for msgs in vlm.seen for p in msgs[0].content if isinstance(p, ImagePart)]
    assert len(sent) >= 8 and all(p == ImagePart.from_pil(side_by_side(*imgs)) for p in sent)
    gen = rec["generation"]["text"]
    if prefill:  # the continuation is parsed with its pre-filled start: two statements
        assert [s["text"] for s in gen["statements"]] == ["Both show a circle.", "Both are on white."]
        assert gen["prefill"] == "Similarities:\n\n1."
    else:
        assert [s["text"] for s in gen["statements"]] == ["Both show a circle."]
    assert all(v["verdict"] == 1 for s in gen["statements"] for v in s["verdicts"].values())


def test_two_image_prompts_say_two_images():
    from vlmcheck.methods.cast import generation_prompt

    assert "side-by-side" not in validation_prompt("one_both", "image", two_images=True)
    assert validation_prompt("one_both", "image", two_images=True).startswith("Given two images, does")
    assert "side-by-side" not in generation_prompt("image", two_images=True)
    assert "side-by-side" in generation_prompt("image")


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


@pytest.mark.slow
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


def test_the_headline_has_an_interval_over_pairs_by_hand():
    from vlmcheck.methods.cast import cast_headline

    def pair(verdict):
        return {"generation": {g: {"statements": [{"verdicts": {f"{v}|{f}": {"verdict": verdict}
                                                                for v in MODALITIES for f in FORMATS}}]}
                               for g in MODALITIES}}

    z = 1.959963984540054
    # pair 1 confirms everything, pair 2 nothing: every cross-modal cell pools to 1/2, the headline is 1/2; two
    # pairs are too few for a bootstrap: Wilson's 1 of 2 on the pairs as units, centre 1/2, half-width
    # z / (1 + z^2 / 2) x sqrt(1/8 + z^2 / 16) = 0.405
    h = cast_headline([pair(1), pair(0)])
    half = z / (1 + z * z / 2) * math.sqrt(1 / 8 + z * z / 16)
    assert h["value"] == pytest.approx(0.5) and h["ci95"] == pytest.approx([0.5 - half, 0.5 + half])
    how = h["interval"]
    assert (how["unit"], how["n_units"]) == ("scene pair", 2) and how["method"].startswith("wilson bound on the 2")
    # the smallest detectable difference from that interval, (1.95996 + 0.84162) x sqrt(2) x 0.810 / (2 x 1.95996)
    # = 0.819, within a share's range
    assert how["min_detectable_difference"] == pytest.approx(
        (z + 0.8416212335729143) * math.sqrt(2) * 2 * half / (2 * z), rel=1e-6)
    # a whole-range interval gives (1.95996 + 0.84162) x sqrt(2) / (2 x 1.95996) = 1.011, more than a share can
    # differ by (1): none is reported (issue 48 finding 9: "a share's MDE of 1.40")
    from vlmcheck.metrics.decisions import headline_entry
    assert headline_entry("x", 0.5, [0.0, 1.0], {})["interval"]["min_detectable_difference"] is None
    # four pairs that confirm everything: not [1, 1] but Wilson's 4 of 4 on the pairs (issue 34)
    perfect = cast_headline([pair(1)] * 4)
    assert perfect["value"] == 1.0 and perfect["interval"]["unit"] == "scene pair"
    assert perfect["ci95"][0] == pytest.approx((1 + z * z / 8 - z * math.sqrt(z * z / 64)) / (1 + z * z / 4))
    # unparseable verdicts are left out of a cell, as in the matrices
    assert cast_headline([pair(1), pair(None)])["value"] == 1.0


def _pair_of(verdicts_at):
    """One pair whose three generations each hold len(verdicts_at(g, v, f)) statements, with those verdicts."""
    return {"generation": {g: {"statements": [
        {"verdicts": {f"{v}|{f}": {"verdict": verdicts_at(g, v, f)[i]} for v in MODALITIES for f in FORMATS}}
        for i in range(3)]} for g in MODALITIES}}


def _wilson_by_hand(p, n, z=1.959963984540054):
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [max(0.0, centre - half), min(1.0, centre + half)]


def test_cells_at_few_or_equal_pairs_get_the_bound_on_the_pairs_by_hand():
    """Issue 48 finding 9: Top-k cells showed [1.0, 1.0] at 6 verdicts, and an interval of [0.883, 0.889] on 2
    pairs.  A cell's interval is on the pairs (the sampled units): Wilson of score x n of n pairs when every pair
    has the same score or when there are too few pairs (5 or fewer: no test could reject anything), Clopper-
    Pearson on one pair; labelled as a bound in ``ci_method`` (the headline's ``interval.method``)."""
    from vlmcheck.methods.cast import cast_headline

    z = 1.959963984540054
    ones = _pair_of(lambda g, v, f: [1, 1, 1])
    # six pairs; pair 0 rejects its first text-generated statement validated on the image in yes/no
    first = _pair_of(lambda g, v, f: [0, 1, 1] if (g, v, f) == ("text", "image", "yes_no") else [1, 1, 1])
    top3 = cast_scores([first] + [ones] * 5, k_values=(3,))["topk"]["top3"]
    # Wilson 6 of 6 at p = 1: centre - half = 1 / (1 + z^2 / 6)
    bound = [6 / (6 + z * z), 1.0]
    assert bound == pytest.approx(_wilson_by_hand(1.0, 6))
    flat = [(f, g, v) for f in (*FORMATS, "mean") for g in MODALITIES for v in MODALITIES]
    varied = {("yes_no", "text", "image"), ("mean", "text", "image")}
    for f, g, v in flat:
        cell = top3[f][g][v]
        if (f, g, v) in varied:  # pairs differ: the bootstrap over the six pairs, not a bound
            assert cell["ci_method"] == "bootstrap, resampling pairs (expanded percentile)" and cell["ci95"][1] - cell["ci95"][0] > 0
        else:  # every pair confirms every statement: not [1, 1] (today's code) but Wilson 6 of 6, labelled
            assert cell["score"] == 1.0 and cell["ci95"] == pytest.approx(bound), (f, g, v)
            assert cell["ci_method"] == "wilson bound on n pairs (every pair the same score)"

    # two pairs with nearly equal scores: one all confirmed, one with a single rejection among 54 cross-modal
    # verdicts (cell text->image, yes/no, statement 1).  That cell-format pools to 5/6, its cell (mean of three
    # formats) to (5/6 + 2) / 3, the headline (mean of six cells) to 1 - (1/6) / 18.  A bootstrap draws pair 0
    # twice, one of each, or pair 1 twice: it gave [1 - (1/3) / 18, 1].  On 2 pairs: Wilson of 2h of 2.
    two = [ones, first]
    h = cast_headline(two)
    value = 1 - (1 / 6) / 18
    assert h["value"] == pytest.approx(value)
    assert h["ci95"] == pytest.approx(_wilson_by_hand(value, 2))
    assert h["ci95"][0] < 0.5  # two units: wide, not [0.981, 1]
    assert h["interval"]["method"].startswith("wilson bound on the 2 pair(s)") and "bound" in h["interval"]["method"]
    top3 = cast_scores(two, k_values=(3,))["topk"]["top3"]
    assert top3["yes_no"]["text"]["image"]["ci95"] == pytest.approx(_wilson_by_hand(5 / 6, 2))
    assert top3["mean"]["text"]["image"]["ci95"] == pytest.approx(_wilson_by_hand((5 / 6 + 2) / 3, 2))
    assert top3["one_both"]["image"]["text"]["ci95"] == pytest.approx(_wilson_by_hand(1.0, 2))
    assert all("bound on the 2 pair(s)" in top3[f][g][v]["ci_method"] for f, g, v in flat)

    # one pair, every verdict confirmed: Clopper-Pearson 1 of 1, [(alpha / 2)^(1/1), 1] = [0.025, 1] (Wilson on
    # one answer, [0.207, 1], covers only as often as the answer is right); today the headline had none
    one = cast_headline([ones])
    assert one["ci95"] == pytest.approx([0.025, 1.0]) and one["interval"]["method"].startswith("clopper-pearson")
    cell = cast_scores([ones], k_values=(3,))["topk"]["top3"]["mean"]["text"]["both"]
    assert cell["ci95"] == pytest.approx([0.025, 1.0]) and cell["ci_method"].startswith("clopper-pearson bound")


def test_the_bootstrap_interval_is_hesterbergs_expanded_percentile_by_hand():
    """From 6 pairs up the cells and the headline take the expanded percentile interval (Hesterberg 2015): the
    plain percentile interval covered 0.85 at 6 pairs (mean 0.6, bench in the issue 48 note), as a z interval
    with s sqrt((n-1)/n) would.  The level: Phi(-sqrt(n / (n - 1)) t_{n-1, 0.975}), t from the table."""
    from statistics import NormalDist

    from vlmcheck.metrics.decisions import expanded_percentile

    grid = np.linspace(0.0, 1.0, 100_001)  # replicates whose q-quantile is q
    for n, t975 in ((6, 2.570582), (100, 1.984217)):
        q = NormalDist().cdf(-math.sqrt(n / (n - 1)) * t975)
        assert expanded_percentile(grid, n) == pytest.approx([q, 1 - q], abs=1e-6)
    assert NormalDist().cdf(-math.sqrt(6 / 5) * 2.570582) == pytest.approx(0.00243, abs=1e-5)  # not 0.025
    assert NormalDist().cdf(-math.sqrt(100 / 99) * 1.984217) == pytest.approx(0.0231, abs=1e-4)
