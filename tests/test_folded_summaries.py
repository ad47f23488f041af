"""Issue 37 item 1: VHExpansion's and CAST's summaries folded one record at a time, in memory that grows with the
sampled units (source images, scene pairs) by a few hundred bytes, not with the records.  The figures are checked
against values computed here from the papers' definitions."""

from __future__ import annotations

import json
import math
import tracemalloc

import numpy as np
import pytest

from vlmcheck import RunOptions, run_task
from vlmcheck.metrics.clusters import UnitSums, draws
from vlmcheck.world.make import make_world

Z = 1.959963984540054


def wilson(k: float, n: float) -> tuple[float, float]:
    p, d = k / n, 1 + Z * Z / n
    centre, half = (p + Z * Z / (2 * n)) / d, Z / d * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _v(answer: str, parsed: str, neg: str | None = None) -> dict:
    """A variant's answers (their text read as they were parsed): the question's (right when it is the case's
    answer) and the negation's."""
    v = {"answer": f"{parsed.capitalize()}.", "parsed": parsed, "correct": parsed == answer}
    if neg is not None:  # the negated question's right answer is the other one
        v.update(neg_answer=f"{neg.capitalize()}.", neg_parsed=neg, neg_correct=neg != answer)
    return v


def _case(image: str, answer: str, negated: bool, original: tuple, bright: tuple) -> dict:
    return {"status": "done", "result": {
        "image": image, "question": "Is there a cat?", "answer": answer, "negation": {"ok": negated},
        "variants": {"vhx_brightness": _v(answer, *bright), "original": _v(answer, *original)}}}


CASES = [  # image, answer, negation usable, original (answer, negation's), brightened
    _case("A", "yes", True, ("yes", "no"), ("no", "no")),
    _case("A", "no", True, ("yes", "yes"), ("yes", "yes")),
    _case("B", "yes", False, ("yes",), ("yes",)),
    _case("C", "no", True, ("no", "yes"), ("no", "yes")),
]


def _vhx_task(tmp_path):
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec

    (tmp_path / "cases.jsonl").write_text("")
    task = VHExpansionTask.__new__(VHExpansionTask)
    task.cfg = VHXSpec(vlm="ref:describer", cases=str(tmp_path / "cases.jsonl"), perturb=["vhx_brightness"])
    return task


def test_vhexpansion_summary_by_hand(tmp_path):
    m = _vhx_task(tmp_path).summarize(CASES, [])
    assert list(m["variants"]) == ["original", "vhx_brightness"]  # the paper's order, not the records'
    assert m["n_cases"] == 4 and m["negation"] == {"ok": 3, "failed": 1} and m["share_yes_cases"] == 0.5
    o, b = m["variants"]["original"], m["variants"]["vhx_brightness"]
    # original: right on A-yes, B, C; both answers right (Def. 3) on A-yes and C of the three negated cases
    assert (o["n"], o["accuracy"], o["n_pairs"], o["symmetric_accuracy"]) == (4, 3 / 4, 3, 2 / 3)
    assert o["yes_ratio"] == 5 / 7 and o["new_vh_cases"] == 0  # 7 answers; the original question is not new
    # brightened: wrong on both cases of image A; new VH cases are its wrong questions (2) and negations (0)
    assert (b["accuracy"], b["symmetric_accuracy"], b["yes_ratio"], b["new_vh_cases"]) == (1 / 2, 1 / 3, 4 / 7, 2)
    assert m["new_vh_cases_total"] == 2
    # clustered by image: original accuracy per image (k, n) = A (1, 2), B (1, 1), C (1, 1); the ratio
    # estimator's variance 3/2 x (0.5^2 + 0.25^2 + 0.25^2) / 16 is below the binomial 0.75 x 0.25 / 4: deff 1
    # - but 3 images of several answers are too few to estimate it: each image one answer (deff 4 / 3, effective
    # n 3), Wilson's 2.25 of 3, a labelled bound
    assert o["accuracy_ci95"] == pytest.approx(wilson(2.25, 3))
    assert o["intervals"]["accuracy"]["design_effect"] == pytest.approx(4 / 3)
    assert o["intervals"]["accuracy"]["method"].startswith("wilson bound on the 3 units")
    # brightened (k, n) = A (0, 2), B (1, 1), C (1, 1): 3/2 x (1 + 0.25 + 0.25) / 16 over 0.25 / 4 = 2.25
    deff = 1.5 * (1 + 0.25 + 0.25) / 16 / (0.25 / 4)
    assert b["intervals"]["accuracy"]["design_effect"] == pytest.approx(deff)
    # the effective n 4 / 2.25 = 1.78 is below 2 (less than two units' worth): the exact Clopper-Pearson interval
    # on it (issue 48), by its definition through the beta quantiles, not Wilson
    from scipy.stats import beta

    n_eff = 4 / deff
    x = 0.5 * n_eff
    assert n_eff < 2
    assert b["accuracy_ci95"] == pytest.approx([beta.ppf(0.025, x, n_eff - x + 1), beta.ppf(0.975, x + 1, n_eff - x)])
    assert b["intervals"]["accuracy"]["n_units"] == 3
    # the headline: symmetric accuracy on the original images, pairs per image A (1, 2), C (1, 1): deff 1, but
    # two images of several answers are too few to estimate it: each image one answer, Wilson's 4/3 of 2 (a bound)
    assert m["headline"]["value"] == 2 / 3 and m["headline"]["ci95"] == pytest.approx(wilson(4 / 3, 2))


@pytest.mark.slow
def test_round_trip_the_runs_results_are_the_summary_of_its_records(tmp_path):
    """A round trip: what the runner folds while it streams samples.jsonl is the summary of the records in that
    file (the same code on both sides; the hand-computed values are in this file's other tests and test_oracles)."""
    from vlmcheck.methods.cast import CastSpec, CastTask
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec
    from vlmcheck.world.make import make_world_pairs

    world = tmp_path / "world"
    make_world(world, n=6, seed=3)
    pairs = make_world_pairs(tmp_path / "pairs", n=2, seed=0)
    for name, task in [("vhx", VHExpansionTask(VHXSpec(vlm="ref:describer?level=0.3", cases=str(world), blind=True,
                                                       perturb=["vhx_brightness"], repeats=2, temperature=0.7))),
                       ("cast", CastTask(CastSpec(vlm="ref:describer?level=0.3", pairs=str(pairs), blind=True,
                                                  repeats=2, temperature=0.7)))]:
        run_task(task, tmp_path / name, RunOptions(progress=False, report=False))
        records = [json.loads(x) for x in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
        written = json.loads((tmp_path / name / "results.json").read_text())["metrics"]
        assert written == json.loads(json.dumps(task.summarize([r for r in records if r["status"] == "done"])))
        assert written["headline"]["interval"]["repeats"] == 2 if name == "cast" else written["variants"]


def _vhx_records(n_cases: int, n_images: int):
    rng = np.random.default_rng(0)
    for i in range(n_cases):
        answer = "yes" if i % 2 else "no"
        said = lambda: "yes" if rng.random() < 0.5 else "no"  # noqa: E731
        rec = _case(f"img/{i % n_images:07d}.jpg", answer, True, (said(), said()), (said(), said()))
        rec["result"]["question"] = "Is there a " + "very " * 200 + "small cat?"  # free text, as real answers
        yield rec


def _folded_bytes(fold, records) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for r in records:
            fold.add(r)
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_vhexpansion_summary_memory_grows_with_images_not_cases(tmp_path):
    task = _vhx_task(tmp_path)
    few = _folded_bytes(task.summary_folder(), _vhx_records(2_000, 200))
    m = task.summary_folder()
    many = _folded_bytes(m, _vhx_records(20_000, 200))
    assert many - few < 20_000  # ten times the cases on the same images: the same per-image sums
    per_image = _folded_bytes(task.summary_folder(), _vhx_records(20_000, 20_000)) / 20_000
    assert per_image < 600  # a record's free text alone is over 1 kB
    assert m.result()["variants"]["original"]["intervals"]["accuracy"]["n_units"] == 200


@pytest.mark.slow
def test_cast_summary_keeps_a_pair_in_a_few_hundred_bytes():
    from vlmcheck.methods.cast_scores import FORMATS, MODALITIES, CastSummary

    def pair(i: int) -> dict:
        st = {"text": "Both scenes " + "hold a red square " * 20, "verdicts": {
            f"{v}|{f}": {"raw": "Both. " * 10, "verdict": (i + j) % 3 or None}
            for j, (v, f) in enumerate((v, f) for v in MODALITIES for f in FORMATS)}}
        return {"status": "done", "result": {"a": f"p{i}-a", "b": f"p{i}-b", "generation": {
            g: {"raw": "1. Both ... " * 40, "statements": [st] * 5} for g in MODALITIES}}}

    fold = CastSummary(k=5, seed=0)
    per_pair = _folded_bytes(fold, (pair(i) for i in range(2_000))) / 2_000
    assert per_pair < 400, per_pair  # the record's JSON is about 25 kB
    assert fold.result()["n_pairs"] == 2_000


def test_unit_sums_fold_per_unit_in_order_of_first_appearance():
    per = UnitSums.of(["b", "a", "b", "c", "a", "b"], [1, 0, 1, 1, 1, 0], [0, 0, 1, 0, 0, 1])
    assert per.sums(0).tolist() == [2, 1, 1] and per.sums(1).tolist() == [2, 0, 0]  # b, a, c
    assert per.sizes().tolist() == [3, 2, 1] and (per.n, per.n_units) == (6, 3)


def test_chunked_bootstrap_draws_are_the_rows_of_one_draw():
    for n_units in (1, 3, 37, 1000):
        whole = np.random.default_rng(7).integers(0, n_units, size=(2000, n_units))
        parts = np.concatenate(list(draws(np.random.default_rng(7), n_units, 2000, cells=3 * n_units + 1)))
        assert (whole == parts).all()


def test_resampled_sums_are_the_sums_of_the_drawn_units(monkeypatch):
    from vlmcheck.metrics import clusters

    counts = np.random.default_rng(1).integers(0, 6, size=(50, 4)).astype(float)
    rows = np.concatenate(list(draws(np.random.default_rng(3), 50, 300)))
    want = counts[rows].sum(axis=1)
    assert (clusters.resampled_sums(counts, 3, 300) == want).all()  # the weights kept whole
    monkeypatch.setattr(clusters, "WEIGHT_CELLS", 10)
    monkeypatch.setattr(clusters, "DRAW_CELLS", 170)
    assert (clusters.resampled_sums(counts, 3, 300) == want).all()  # and drawn in chunks of three resamples
    assert [len(w) for w in clusters._weight_chunks(3, 50, 300)][:2] == [3, 3]


@pytest.mark.parametrize("text", ["", "a\n", "a\nb", "a\r\nb\r\n", "a\rb\n\n\nc", "\n", "é\u2028x\ny"])
def test_a_manifest_is_split_into_lines_as_before_without_its_whole_text_as_ucs4(tmp_path, text):
    """Lines of a manifest, from a file read as it is iterated or from a text in memory: split on "\\n" only, as
    io.StringIO(text, newline="\\n") split them (which held 4 bytes a character of a million-row manifest)."""
    import io

    from vlmcheck.core.files import _file_lines, _text_lines

    want = list(io.StringIO(text, newline="\n"))
    assert list(_text_lines(text)) == want
    (tmp_path / "m.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode())  # with a byte-order mark
    assert list(_file_lines(tmp_path / "m.jsonl", "manifest")) == want
