"""Paths as users give them: a relative data path and the absolute one give the same items on every route
(LAMM's meta files through ChEF's turn scenarios, the turn scenarios' own folders, a release read by the dataset
layer, a method's own JSONL), and every image they name exists; the Hugging Face cache holding a repository of
release files (``hfds:MMVP/MMVP``: Questions.csv + "MMVP Images/") is read as that release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from vlmcheck.datasets import load
from vlmcheck.methods.chef.scenarios import load_scenario


def _img(path: Path, colour=(10, 20, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), colour).save(path)


def _same_items(rel: list[dict], absolute: list[dict]) -> None:
    assert rel == absolute
    for it in rel:
        assert Path(it["image"]).is_file(), it["image"]


@pytest.mark.parametrize("kind, meta, row", [
    ("counting", "Counting_FSC147.json", {"id": "2.jpg", "image": "fsc147_images/2.jpg",
                                           "query": "How many apples are there?", "num": 7}),
    ("hierarchical", "Classification_Omnibenchmark.json", {"id": "2.jpg", "image": "fsc147_images/2.jpg",
                                                            "chain": ["animal", "dog"], "realm_name": "animal"}),
])
def test_lamm_meta_file_relative_path_through_chef_turn_scenarios(tmp_path, monkeypatch, kind, meta, row):
    root = tmp_path / "2D_Benchmark"
    (root / "meta_file").mkdir(parents=True)
    _img(root / "fsc147_images" / "2.jpg")
    (root / "meta_file" / meta).write_text(json.dumps([row]))
    monkeypatch.chdir(tmp_path)
    rel = load_scenario(kind, f"2D_Benchmark/meta_file/{meta}")   # was 2D_Benchmark/2D_Benchmark/fsc147_images
    _same_items(rel, load_scenario(kind, str(root / "meta_file" / meta)))
    assert rel[0]["image"] == str(root / "fsc147_images" / "2.jpg")


def test_fsc147_folder_relative_path_through_chef_counting(tmp_path, monkeypatch):
    root = tmp_path / "FSC147"
    _img(root / "images_384_VarV2" / "7.jpg")
    (root / "annotation_FSC147_384.json").write_text(json.dumps({"7.jpg": {"points": [[1, 1], [2, 2], [3, 3]]}}))
    (root / "ImageClasses_FSC147.txt").write_text("7.jpg\tapples\n")
    (root / "Train_Test_Val_FSC_147.json").write_text(json.dumps({"test": ["7.jpg"]}))
    monkeypatch.chdir(tmp_path)
    rel = load_scenario("counting", "FSC147")
    _same_items(rel, load_scenario("counting", str(root)))
    assert rel[0]["root"] == str(root)


def test_chef_jsonl_and_a_release_relative_path(tmp_path, monkeypatch):
    _img(tmp_path / "d" / "a.png")
    (tmp_path / "d" / "mc.jsonl").write_text(json.dumps({"id": "q", "image": "a.png", "question": "Q?",
                                                         "options": ["x", "y"], "answer": 0}) + "\n")
    mme = tmp_path / "MME_Benchmark_release_version" / "color"
    _img(mme / "1.jpg")
    (mme / "1.txt").write_text("Is it red?\tYes\nIs it blue?\tNo\n")
    monkeypatch.chdir(tmp_path)
    _same_items(load_scenario("mc", "d/mc.jsonl"), load_scenario("mc", str(tmp_path / "d" / "mc.jsonl")))
    _same_items(load_scenario("pope", "mme:MME_Benchmark_release_version"),
                load_scenario("pope", f"mme:{tmp_path / 'MME_Benchmark_release_version'}"))
    assert [r.images for r in load("MME_Benchmark_release_version").records] == \
           [r.images for r in load(tmp_path / "MME_Benchmark_release_version").records]


MMVP_CSV = ("Index,Question,Options,Correct Answer\n"
            "1,Is the dog facing left or right?,(a) Left (b) Right,(a)\n"
            "2,Is the dog facing left or right?,(a) Left (b) Right,(b)\n")


def test_hfds_mmvp_from_the_hub_cache_is_read_as_the_release(tmp_path, monkeypatch):
    # the MMVP/MMVP dataset repository holds the release's files, not parquet shards
    cache = tmp_path / "hub"
    repo = cache / "datasets--MMVP--MMVP"
    snap = repo / "snapshots" / "abc123"
    (snap / "MMVP Images").mkdir(parents=True)
    (snap / "Questions.csv").write_text(MMVP_CSV)
    _img(snap / "MMVP Images" / "1.jpg")
    _img(snap / "MMVP Images" / "2.jpg", (90, 0, 0))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ds = load("hfds:MMVP/MMVP")   # exited 2: "neither a Hub snapshot nor a save_to_disk folder"
    release = load(snap)
    assert ds.form == "mmvp" and ds.benchmark == "mmvp" and ds.source == "hfds:MMVP/MMVP"
    assert [(r.id, r.options, r.answer, r.group, r.images) for r in ds.records] == \
           [(r.id, r.options, r.answer, r.group, r.images) for r in release.records]
    assert [r.group for r in ds.records] == ["pair-1", "pair-1"]


def test_hfds_local_folder_relative_path_names_its_images_absolutely(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    snap = tmp_path / "snap"
    (snap / "data").mkdir(parents=True)
    (snap / "README.md").write_text("# a dataset\n")
    _img(snap / "imgs" / "a.png")
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    pq.write_table(pa.table({"question": ["Is it red?"], "answer": ["yes"],
                             "image": pa.array([{"bytes": None, "path": "imgs/a.png"}], image)}),
                   snap / "data" / "test-00000-of-00001.parquet")
    monkeypatch.chdir(tmp_path)
    rel, absolute = load("hfds:./snap"), load(f"hfds:{snap}")
    assert rel.records[0].images == absolute.records[0].images == [str(snap / "imgs" / "a.png")]
