"""Issue 37 item 1: ChEF's summary folded one item at a time into columns (methods/chef/items.py).  For every
ChEF scenario kind the world has, the metrics the runner wrote while it streamed the records are the summary of
the records in samples.jsonl, and the columns hold an item in a small fraction of its record's memory."""

import json
import tracemalloc

import pytest

from vlmcheck import RunOptions, run_task
from vlmcheck.world.make import make_world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("chefworld")
    make_world(out, n=12, seed=3)
    return out


def _check(task, folder) -> float:
    """A round trip: the written metrics equal the summary of the records (the same code on both sides, so this
    checks the streaming, not the numbers: tests/test_oracles.py checks those by hand); returns the folded bytes
    per record's JSON byte."""
    records = [json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines()]
    done = [r for r in records if r["status"] == "done"]
    assert done
    written = json.loads((folder / "results.json").read_text())["metrics"]
    assert written == json.loads(json.dumps(task.summarize(done, [])))
    fold = task.summary_folder()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for r in done:
            fold.add(r)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return held / len(json.dumps(done))


@pytest.mark.parametrize("recipe,data", [("calibration", None), ("robustness", None), ("icl", None),
                                         ("instruction-following", None), ("language", None),
                                         ("fsc147", "counting.jsonl"), ("voc2012", "detection.jsonl"),
                                         ("omnibenchmark", "hierarchy")])
@pytest.mark.slow
def test_round_trip_chef_recipes_written_metrics_are_the_records_summary(world, tmp_path, recipe, data):
    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe

    r = resolve_recipe(recipe)
    if data is None:
        r.scenario.type = "world"
    task = ChefTask(ChefSpec(vlm="ref:describer?level=0.3", recipe=r, data=str(world / data if data else world)))
    run_task(task, tmp_path, RunOptions(progress=False, report=False))
    # the turn scenarios keep each item's turns (what their metrics read): a larger share of a small record
    assert _check(task, tmp_path) < 0.5  # a record in memory as dicts is 3-4 times its JSON


@pytest.mark.slow
def test_round_trip_chef_pope_with_blind_control_and_a_direct_recipe_with_repeats(world, tmp_path):
    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe
    from vlmcheck.methods.pope import build_pope, load_annotations

    cases = build_pope(load_annotations(world / "objects.jsonl"), "adversarial", n_images=12, per_image=2)
    (world / "pope.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    task = ChefTask(ChefSpec(vlm="ref:describer?level=0.3", recipe=resolve_recipe("hallucination"),
                             data=str(world / "pope.jsonl"), blind=True))
    run_task(task, tmp_path / "pope", RunOptions(progress=False, report=False))
    assert _check(task, tmp_path / "pope") < 0.5
    r = resolve_recipe("robustness")
    r.scenario.type = "world"
    task = ChefTask(ChefSpec(vlm="ref:describer?level=0.3", recipe=r, data=str(world), repeats=2, temperature=0.7))
    run_task(task, tmp_path / "rep", RunOptions(progress=False, report=False))
    assert _check(task, tmp_path / "rep") < 0.5


@pytest.mark.slow
def test_an_item_costs_tens_of_bytes_in_columns():
    """Marginal memory of the columns: 50,000 items on 100 images against 5,000."""
    from vlmcheck.methods.chef import resolve_recipe
    from vlmcheck.methods.chef.summary import ChefSummary

    def items(n):
        for i in range(n):
            yield {"status": "done", "result": {
                "image": f"img/{i % 100}.png", "n_options": 4, "meta": {"category": "count"},
                "question": "How many?" * 30, "options": ["1", "2", "3", "4"], "settings": {"standard": {
                    "answer": i % 4, "pred": (i * 7) % 4, "correct": i % 3 == 0, "extracted": True,
                    "confidence": (i % 10) / 10, "probs": [0.25] * 4, "rationale": "B. 2" * 40}}}}

    def held(n):
        fold = ChefSummary(resolve_recipe("calibration"), None, 0)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for r in items(n):
                fold.add(r)
            return tracemalloc.get_traced_memory()[0] - before, fold
        finally:
            tracemalloc.stop()

    few, _ = held(5_000)
    many, fold = held(50_000)
    assert (many - few) / 45_000 < 80  # 8 + 8 + 8 + 1 bytes an item and 21 a setting, arrays grown ahead
    m = fold.result()
    assert m["n"] == 50_000 and m["settings"]["standard"]["interval"]["n_units"] == 100


def test_the_columns_bootstrap_draws_the_same_units_as_the_list_based_one():
    """methods/chef/headline's bootstrap on columns resamples exactly as metrics.decisions.cluster_bootstrap does
    on the records: same units drawn, same items in the same order, so any statistic gives the same interval."""
    import numpy as np

    from vlmcheck.methods.chef.headline import _cluster_bootstrap
    from vlmcheck.methods.chef.items import Items
    from vlmcheck.metrics.decisions import cluster_bootstrap

    rng = np.random.default_rng(5)
    res = [{"id": f"q{i}", "image": f"img{rng.integers(0, 9)}.png", "n_options": 4, "meta": {},
            "settings": {"standard": {"correct": bool(rng.random() < 0.6), "confidence": float(rng.random())}}}
           for i in range(60)]
    it = Items.of(res)

    def first_confident(rows):  # depends on the order of the drawn items, not only on which were drawn
        return float(np.argmax(rows))

    want = cluster_bootstrap(res, [r["image"] for r in res],
                             lambda rs: first_confident([r["settings"]["standard"]["confidence"] for r in rs]), seed=3)
    got = _cluster_bootstrap(it, lambda sub: first_confident(sub.cols["standard"]["conf"]), seed=3)
    assert got == want and want[1] == 1000
