"""Issue 37 item 1: results.json keeps in memory only what ChEF's summary reads (VHExpansion and CAST fold their
summaries: tests/test_folded_summaries.py).  For every ChEF scenario kind the world has, the summary of the
slimmed records equals the summary of the full ones (so no field a summary reads is dropped), and the slimmed
records are smaller."""

import json

import pytest

from vlmcheck import RunOptions, run_task
from vlmcheck.methods.slim import slim_record, without
from vlmcheck.world.make import make_world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("slimworld")
    make_world(out, n=12, seed=3)
    return out


def _check(task, folder):
    records = [json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines()]
    done = [r for r in records if r["status"] == "done"]
    assert done
    slim = [task.summary_record(r) for r in done]
    assert task.summarize(slim, []) == task.summarize(done, [])
    assert len(json.dumps(slim)) < len(json.dumps(done))
    assert done == [json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines()
                    if json.loads(x)["status"] == "done"]  # slimming copied, never changed a record
    return len(json.dumps(slim)) / len(json.dumps(done))


def test_without_drops_paths_with_wildcards_and_leaves_the_record_alone():
    rec = {"a": {"x": {"raw": "long", "v": 1}, "y": {"raw": "t", "v": 2}}, "l": [{"text": "s", "k": 0}], "q": "?"}
    assert without(rec, [("a", "*", "raw"), ("l", "[]", "text"), ("q",)]) == \
        {"a": {"x": {"v": 1}, "y": {"v": 2}}, "l": [{"k": 0}]}
    assert rec["a"]["x"]["raw"] == "long" and rec["l"][0]["text"] == "s" and rec["q"] == "?"
    # a repeat's record is slimmed like the record itself
    full = {"status": "done", "result": {"q": "?", "v": 1, "repeats": [{"q": "?", "v": 2}]}}
    assert slim_record(full, [("q",)])["result"] == {"v": 1, "repeats": [{"v": 2}]}


@pytest.mark.parametrize("recipe,data", [("calibration", None), ("robustness", None), ("icl", None),
                                         ("instruction-following", None), ("language", None),
                                         ("fsc147", "counting.jsonl"), ("voc2012", "detection.jsonl"),
                                         ("omnibenchmark", "hierarchy")])
def test_chef_recipes(world, tmp_path, recipe, data):
    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe

    r = resolve_recipe(recipe)
    if data is None:
        r.scenario.type = "world"
    task = ChefTask(ChefSpec(vlm="ref:describer?level=0.3", recipe=r, data=str(world / data if data else world)))
    run_task(task, tmp_path, RunOptions(progress=False, report=False))
    assert _check(task, tmp_path) <= 1.0


def test_chef_pope_with_blind_control_and_a_direct_recipe_with_repeats(world, tmp_path):
    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe
    from vlmcheck.methods.pope import build_pope, load_annotations

    cases = build_pope(load_annotations(world / "objects.jsonl"), "adversarial", n_images=12, per_image=2)
    (world / "pope.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    task = ChefTask(ChefSpec(vlm="ref:describer?level=0.3", recipe=resolve_recipe("hallucination"),
                             data=str(world / "pope.jsonl"), blind=True))
    run_task(task, tmp_path / "pope", RunOptions(progress=False, report=False))
    assert _check(task, tmp_path / "pope") <= 1.0
    r = resolve_recipe("robustness")
    r.scenario.type = "world"
    task = ChefTask(ChefSpec(vlm="ref:describer?level=0.3", recipe=r, data=str(world), repeats=2, temperature=0.7))
    run_task(task, tmp_path / "rep", RunOptions(progress=False, report=False))
    assert _check(task, tmp_path / "rep") < 0.8
