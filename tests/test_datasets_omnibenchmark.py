"""OmniBenchmark's own release (issue 46), read as ChEF's authors prepared their Omnibenchmark scenario from it:
a small replica of the release layout (trainid2name.json, annotation/<realm>/meta/<split>.txt, data/<realm>/
images/), the images as files, checked against values written by hand, then through ChEF's hierarchical
scenario with a Bamboo label tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from vlmcheck.datasets import DatasetFormError, detect, load


def _img(path: Path, colour) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), colour).save(path)


WOLF, TABBY, EAGLE, TRAIN = ("5176676049_664217c384_o.jpg", "15190407721_33b494a204_c.jpg",
                             "8153834906_b2c8085c5e_c.jpg", "24920628852_599f40d659_c.jpg")


def _omni(tmp_path: Path) -> Path:
    root = tmp_path / "omnibenchmark_v2_onedrive"
    root.mkdir()
    (root / "trainid2name.json").write_text(json.dumps({"mammal": {"0": "white_wolf", "1": "tabby"},
                                                        "bird": {"0": "bald_eagle"}}))
    meta = root / "annotation"
    (meta / "mammal" / "meta").mkdir(parents=True)
    (meta / "bird" / "meta").mkdir(parents=True)
    # '<image path> <trainid>' per line, paths as the benchmark's meta files write them
    (meta / "mammal" / "meta" / "test.txt").write_text(f"test/images/{WOLF} 0\ntest/images/{TABBY} 1\n"
                                                       "test/images/missing_1_c.jpg 1\ntest/images/x.jpg 7\n")
    (meta / "mammal" / "meta" / "train.txt").write_text(f"train/images/{TRAIN} 1\n")
    (meta / "bird" / "meta" / "test.txt").write_text(f"test/images/{EAGLE} 0\n")
    _img(root / "data" / "mammal" / "images" / WOLF, (200, 200, 200))
    _img(root / "data" / "mammal" / "images" / TABBY, (150, 100, 50))
    _img(root / "data" / "mammal" / "images" / TRAIN, (10, 10, 10))
    _img(root / "data" / "bird" / "images" / EAGLE, (0, 0, 90))
    return root


def _bamboo(tmp_path: Path) -> Path:
    """Bamboo's tree file: id2name (first name canonical), father2child, child2father."""
    ids = {"n0": ["entity"], "n1": ["animal"], "n2": ["mammal", "mammalian"], "n3": ["canine"],
           "n4": ["white_wolf"], "n5": ["feline"], "n6": ["tabby"], "n7": ["bird"], "n8": ["bald_eagle"]}
    f2c = {"n0": ["n1"], "n1": ["n2", "n7"], "n2": ["n3", "n5"], "n3": ["n4"], "n5": ["n6"], "n7": ["n8"]}
    c2f = {c: [f] for f, kids in f2c.items() for c in kids}
    path = tmp_path / "bamboo.visual.json"
    path.write_text(json.dumps({"id2name": ids, "father2child": f2c, "child2father": c2f}))
    return path


def test_omnibenchmark_release_test_split(tmp_path):
    root = _omni(tmp_path)
    assert detect(root).name == "omnibenchmark" and detect(root / "trainid2name.json").name == "omnibenchmark"
    ds = load(root)
    assert [(r.id, r.answer, r.category, r.split) for r in ds.records] == [
        (f"mammal/{WOLF}", "white_wolf", "mammal", "test"), (f"mammal/{TABBY}", "tabby", "mammal", "test"),
        (f"bird/{EAGLE}", "bald_eagle", "bird", "test")]
    assert ds.records[0].images == [str(root / "data" / "mammal" / "images" / WOLF)]
    assert ds.records[2].images == [str(root / "data" / "bird" / "images" / EAGLE)]
    # without a Bamboo tree: the two levels the release defines
    assert [r.meta["chain"] for r in ds.records] == [["mammal", "white_wolf"], ["mammal", "tabby"],
                                                     ["bird", "bald_eagle"]]
    assert ds.records[1].meta["label_id"] == "1" and ds.records[1].meta["realm_name"] == "mammal"
    assert ds.skipped == [("annotation/mammal/meta/test.txt:3", "image missing_1_c.jpg not in data/mammal/images"),
                          ("annotation/mammal/meta/test.txt:4", "trainid 7 not in trainid2name.json['mammal']")]
    train = load(root, split="train")
    assert [(r.id, r.answer) for r in train.records] == [(f"mammal/{TRAIN}", "tabby")]
    assert ("bird", "no annotation/bird/meta/train.txt") in train.skipped


def test_omnibenchmark_chains_from_a_bamboo_tree(tmp_path):
    root, tree = _omni(tmp_path), _bamboo(tmp_path)
    ds = load(root, tree=str(tree))
    # ChEF's four levels, coarse to fine; bald_eagle's ancestors stop at 'entity' (no father above the top level
    # asked for), so ChEF leaves it out: counted in the notes
    assert [(r.id, r.meta["chain"]) for r in ds.records] == [
        (f"mammal/{WOLF}", ["animal", "mammal", "canine", "white_wolf"]),
        (f"mammal/{TABBY}", ["animal", "mammal", "feline", "tabby"])]
    assert "left out, class with no 4-level Bamboo chain: bird 1" in ds.notes
    assert [r.meta["chain"] for r in load(root, tree=str(tree), levels="3").records] == [
        ["mammal", "canine", "white_wolf"], ["mammal", "feline", "tabby"], ["animal", "bird", "bald_eagle"]]


def test_omnibenchmark_release_through_chef_hierarchical(tmp_path):
    from vlmcheck.methods.chef.scenarios import load_scenario

    root, tree = _omni(tmp_path), _bamboo(tmp_path)
    items = load_scenario("hierarchical", f"omnibenchmark:{root}?tree={tree}", negatives=3)
    assert [(i["id"], i["image"], i["meta"]["chain"], i["meta"]["realm"]) for i in items] == [
        (f"mammal/{WOLF}", str(root / "data" / "mammal" / "images" / WOLF), ["animal", "mammal", "canine",
                                                                              "white_wolf"], "mammal"),
        (f"mammal/{TABBY}", str(root / "data" / "mammal" / "images" / TABBY), ["animal", "mammal", "feline",
                                                                                "tabby"], "mammal")]
    # each level's options: the class and its siblings in Bamboo (the tree the chains came from)
    wolf = items[0]["turns"]
    assert [sorted(t["options"]) for t in wolf] == [["animal"], ["bird", "mammal"], ["canine", "feline"],
                                                     ["white_wolf"]]
    assert [t["options"][t["answer"]] for t in wolf] == ["animal", "mammal", "canine", "white_wolf"]
    # single-turn classification over the release: the class names are the options
    cls = load_scenario("classification", f"omnibenchmark:{root}")
    assert [(i["id"], i["options"][i["answer"]]) for i in cls] == [
        (f"mammal/{WOLF}", "white_wolf"), (f"mammal/{TABBY}", "tabby"), (f"bird/{EAGLE}", "bald_eagle")]
    assert cls[0]["options"] == ["bald_eagle", "tabby", "white_wolf"]


def test_omnibenchmark_bad_input_is_one_sentence(tmp_path):
    root = _omni(tmp_path)
    with pytest.raises(DatasetFormError, match=r"expected a split among train, val, test \(got 'dev'\)"):
        load(root, split="dev")
    (tmp_path / "tree.json").write_text(json.dumps({"id2name": {}}))
    with pytest.raises(DatasetFormError, match=r"tree\.json: expected Bamboo's label tree"):
        load(root, tree=str(tmp_path / "tree.json"))
    (root / "annotation" / "mammal" / "meta" / "test.txt").write_text(f"test/images/{WOLF} 0\ntest/images/{WOLF} 0\n")
    with pytest.raises(DatasetFormError, match=r"test\.txt: expected one line per image .* repeated at line 2"):
        load(root)
    (root / "trainid2name.json").write_text("[1, 2]")
    with pytest.raises(DatasetFormError, match=r"trainid2name\.json: expected OmniBenchmark's \{realm"):
        load(root)
