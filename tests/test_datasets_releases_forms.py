"""Original-release forms of issue 46, each on a small faithful replica built here from its published schema
(names and layouts as the release has them; tiny images), checked against values written by hand."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from PIL import Image

from vlmcheck.datasets import DatasetFormError, detect, load


def _img(path: Path, colour=(10, 20, 30), size=(8, 8)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)
    return path


# ---------------------------------------------------------------- POPE: output/coco/coco_pope_<split>.json

def _pope(tmp_path: Path) -> Path:
    out = tmp_path / "POPE" / "output" / "coco"
    out.mkdir(parents=True)
    a, b = "COCO_val2014_000000310196.jpg", "COCO_val2014_000000210789.jpg"
    _img(out / "val2014" / a)
    _img(out / "val2014" / b, (200, 0, 0))
    random = [{"question_id": 1, "image": a, "text": "Is there a snowboard in the image?", "label": "yes"},
              {"question_id": 2, "image": a, "text": "Is there a dog in the image?", "label": "no"},
              {"question_id": 3, "image": b, "text": "Is there a person in the image?", "label": "yes"}]
    adversarial = [{"question_id": 1, "image": b, "text": "Is there a chair in the image?", "label": "no"}]
    for name, rows in (("random", random), ("adversarial", adversarial)):
        (out / f"coco_pope_{name}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_pope_release_split_files(tmp_path):
    out = _pope(tmp_path)
    assert detect(out / "coco_pope_random.json").name == "pope" and detect(out).name == "pope"
    ds = load(out)
    assert [r.id for r in ds.records] == ["adversarial-1", "random-1", "random-2", "random-3"]
    assert [(r.answer, r.split) for r in ds.records] == [("no", "adversarial"), ("yes", "random"),
                                                         ("no", "random"), ("yes", "random")]
    assert ds.records[1].question == "Is there a snowboard in the image?"
    assert ds.distinct_images == 2 and ds.records[1].images == ds.records[2].images  # one image, one unit
    assert ds.records[1].group == "COCO_val2014_000000310196.jpg" and ds.records[1].root == str(out / "val2014")
    one = load(out / "coco_pope_random.json")
    assert [r.id for r in one.records] == ["random-1", "random-2", "random-3"]


def test_pope_release_through_vhx_cases(tmp_path):
    from vlmcheck.methods.vhx_cases import load_cases

    cases = load_cases(_pope(tmp_path) / "coco_pope_random.json")
    assert [(c.id, c.answer, c.meta["split"]) for c in cases] == [
        ("random-1", "yes", "random"), ("random-2", "no", "random"), ("random-3", "yes", "random")]


def test_pope_and_mme_releases_through_chef_pope_scenario(tmp_path):
    from vlmcheck.methods.chef.scenarios import load_scenario

    items = load_scenario("pope", str(_pope(tmp_path) / "coco_pope_random.json"))  # was KeyError: 'answer'
    assert [(i["id"], i["options"], i["answer"]) for i in items] == [
        ("random-1", ["Yes", "No"], 0), ("random-2", ["Yes", "No"], 1), ("random-3", ["Yes", "No"], 0)]
    mme = load_scenario("pope", str(_mme(tmp_path)))  # ChEF's mme recipe on the release folder
    assert [(i["id"], i["answer"], i["meta"]["category"]) for i in mme] == [
        ("artwork/10002.jpg#1", 0, "artwork"), ("artwork/10002.jpg#2", 1, "artwork"),
        ("code_reasoning/0020.png#1", 0, "code_reasoning"), ("code_reasoning/0020.png#2", 1, "code_reasoning")]


def test_pope_without_its_images_is_one_sentence(tmp_path):
    out = _pope(tmp_path)
    (out / "val2014").rename(out / "elsewhere")
    with pytest.raises(DatasetFormError, match=r"coco_pope_random\.json: expected the COCO images it names "
                                               r"\(e\.g\. COCO_val2014_000000310196\.jpg\)"):
        load(out / "coco_pope_random.json")
    ds = load(out / "coco_pope_random.json", images=out / "elsewhere")
    assert len(ds.records) == 3


# ---------------------------------------------------------------- MME release folder

def _mme(tmp_path: Path) -> Path:
    root = tmp_path / "MME_Benchmark_release_version" / "MME_Benchmark"
    _img(root / "artwork" / "images" / "10002.jpg")
    (root / "artwork" / "questions_answers_YN").mkdir(parents=True)
    (root / "artwork" / "questions_answers_YN" / "10002.txt").write_text(
        "Is this artwork created by donatello? Please answer yes or no.\tYes\n"
        "Is this artwork created by gentile da fabriano? Please answer yes or no.\tNo\n")
    _img(root / "code_reasoning" / "0020.png", (1, 2, 3))
    (root / "code_reasoning" / "0020.txt").write_text(
        "Is a c++ code shown in the picture? Please answer yes or no.\tYes\n"
        "Is a python code shown in the picture? Please answer yes or no.\tNo\n")
    # after one run of the GenCeption authors' code on this category folder
    _img(root / "code_reasoning" / "results_llava7b" / "0020_0.png", (9, 9, 9))
    (root / "code_reasoning" / "results_llava7b" / "0020_result.pkl").write_bytes(b"\x80\x04N.")
    return root.parent


def test_mme_release_folder(tmp_path):
    rel = _mme(tmp_path)
    assert detect(rel).name == "mme"
    ds = load(rel)
    assert [r.id for r in ds.records] == ["artwork/10002.jpg#1", "artwork/10002.jpg#2", "code_reasoning/0020.png#1",
                                          "code_reasoning/0020.png#2"]
    assert [r.answer for r in ds.records] == ["yes", "no", "yes", "no"]
    assert [r.category for r in ds.records] == ["artwork", "artwork", "code_reasoning", "code_reasoning"]
    assert ds.records[2].question == "Is a c++ code shown in the picture? Please answer yes or no."
    assert ds.distinct_images == 2  # the generated results_llava7b/0020_0.png is no MME image
    assert ds.records[0].images == [str(rel / "MME_Benchmark" / "artwork" / "images" / "10002.jpg")]


def test_genception_folder_after_the_authors_code_keeps_only_seeds(tmp_path):
    from vlmcheck.core.data import load_image_dataset

    root = tmp_path / "mme_data"
    _img(root / "color" / "000000061658.jpg")
    _img(root / "color" / "000000338560.jpg", (50, 50, 50))
    for t in range(3):  # experiment.py: results_<model>/<seed>_<t>.<ext> and <seed>_result.pkl
        _img(root / "color" / "results_gpt4v" / f"000000061658_{t}.jpg", (t, t, t))
    (root / "color" / "results_gpt4v" / "000000061658_result.pkl").write_bytes(b"\x80\x04N.")
    _img(root / "color" / "results_llava7b" / "000000338560_0.jpg", (7, 7, 7))  # a run stopped before its pickle
    items = load_image_dataset(root)
    assert [(i.id, i.category) for i in items] == [("color/000000061658.jpg", "color"),
                                                   ("color/000000338560.jpg", "color")]


# ---------------------------------------------------------------- ScienceQA release

def _scienceqa(tmp_path: Path) -> Path:
    root = tmp_path / "scienceqa"
    problems = {
        "5": {"question": "Which of these states is farthest north?", "choices": ["West Virginia", "Louisiana",
              "Arizona", "Oklahoma"], "answer": 0, "hint": "Figure: a map.", "image": "image.png", "task": "closed choice",
              "grade": "grade2", "subject": "social science", "topic": "geography", "category": "Geography",
              "skill": "Read a map: cardinal directions", "lecture": "Maps have four cardinal directions.",
              "solution": "West Virginia is farthest north.", "split": "test"},
        "6": {"question": "Which tense does the sentence use?\nMona will print her name.", "choices": [
              "present tense", "future tense", "past tense"], "answer": 1, "hint": "", "image": None,
              "subject": "language science", "split": "test"},
        "7": {"question": "Which animal's feet are also adapted for grabbing prey?", "choices": ["a", "b", "c",
              "d", "great horned owl"], "answer": 4, "hint": "Bald eagles eat fish.", "image": "image.png",
              "subject": "natural science", "split": "train"}}
    root.mkdir()
    (root / "problems.json").write_text(json.dumps(problems))
    (root / "pid_splits.json").write_text(json.dumps({"train": ["7"], "val": [], "test": ["5", "6"],
                                                      "minival": [], "minitest": ["5"]}))
    _img(root / "images" / "test" / "5" / "image.png")
    _img(root / "images" / "train" / "7" / "image.png", (0, 99, 0))
    return root


def test_scienceqa_release(tmp_path):
    root = _scienceqa(tmp_path)
    assert detect(root).name == "scienceqa" and detect(root / "problems.json").name == "scienceqa"
    test = load(root)
    # ScienceQA's items are its image questions (ChEF's, lmms-eval's scienceqa_img): problem 6 is text-only
    assert [r.id for r in test.records] == ["5"] and test.notes[0].startswith("split 'test'")
    assert test.skipped == [("6", "text-only question (ScienceQA's items are its image questions, as ChEF's and "
                                  "lmms-eval's scienceqa_img)")] and test.rows == 2
    assert test.records[0].options == ["West Virginia", "Louisiana", "Arizona", "Oklahoma"]
    assert test.records[0].answer == 0 and test.records[0].hint == "Figure: a map."
    assert test.records[0].images == [str(root / "images" / "test" / "5" / "image.png")]
    assert test.records[0].category == "social science" and test.records[0].meta["skill"].startswith("Read a map")
    train = load(root, split="train")
    r = train.records[0]
    assert (r.id, r.answer, r.options[4], r.hint) == ("7", 4, "great horned owl", "Bald eagles eat fish.")
    # ChEF on the release: the hint as "Context: ..." above the question, as on the JSONL route
    from vlmcheck.methods.chef.scenarios import load_scenario

    items = load_scenario("scienceqa", f"scienceqa:{root}")
    assert [(i["id"], i["question"], i["answer"], len(i["options"])) for i in items] == [
        ("5", "Context: Figure: a map.\nWhich of these states is farthest north?", 0, 4)]


def test_scienceqa_unknown_split_and_broken_json(tmp_path):
    root = _scienceqa(tmp_path)
    with pytest.raises(DatasetFormError, match=r"pid_splits\.json: expected a split named 'dev' \(it has "):
        load(root, split="dev")
    (root / "problems.json").write_text("{\"5\": ")
    with pytest.raises(DatasetFormError, match=r"problems\.json: expected ScienceQA's problems\.json .*not JSON"):
        load(root)


# ---------------------------------------------------------------- SEED-Bench JSON (v1 and v2's image lists)

def test_seedbench_v1(tmp_path):
    root = tmp_path / "SEED-Bench"
    _img(root / "SEED-Bench-image" / "1454426_2591111986.jpg")
    data = {"questions": [
        {"answer": "A", "choice_a": "One", "choice_b": "Two", "choice_c": "Three", "choice_d": "Four",
         "data_id": "1454426_2591111986.jpg", "data_type": "image", "question": "How many towels are in the image?",
         "question_id": "101669", "question_type_id": 5},
        {"answer": "C", "choice_a": "a", "choice_b": "b", "choice_c": "c", "choice_d": "d", "data_id": "v.mp4",
         "data_type": "video", "question": "What happens?", "question_id": "9", "question_type_id": 10}],
        "question_type": {"Scene Understanding": 1, "Instance Counting": 5, "Action Recognition": 10}}
    (root / "SEED-Bench.json").write_text(json.dumps(data))
    assert detect(root).name == "seedbench"
    ds = load(root)
    assert [(r.id, r.options, r.answer, r.category) for r in ds.records] == [
        ("101669", ["One", "Two", "Three", "Four"], 0, "Instance Counting")]
    assert ds.notes == [] and [why for _, why in ds.skipped] == [
        "not an image question (data_type video): vlmcheck evaluates images"]


def test_seedbench2_image_lists(tmp_path):
    root = tmp_path / "SEEDBench2"
    for name in ("a.jpg", "b.jpg"):
        _img(root / "image" / "SEED-Bench-2-image" / name)
    data = {"questions": [{"answer": "B", "choice_a": "left", "choice_b": "right", "choice_c": "", "choice_d": "",
                           "data_id": ["a.jpg", "b.jpg"], "data_source": "SEED-Bench v2",
                           "data_type": "Multiple Images", "question": "Which image shows the cat?",
                           "question_id": "7", "question_type_id": 23}]}
    (root / "SEED-Bench_v2_level1_2_3.json").write_text(json.dumps(data))
    r = load(root).records[0]
    assert r.images == [str(root / "image" / "SEED-Bench-2-image" / n) for n in ("a.jpg", "b.jpg")]
    assert (r.options, r.answer, r.category) == (["left", "right"], 1, "23")


# ---------------------------------------------------------------- CIFAR-10 python batches

def _cifar(tmp_path: Path) -> tuple[Path, np.ndarray]:
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    batch = {b"batch_label": b"testing batch 1 of 1", b"labels": [3, 8, 0],
             b"data": pixels.transpose(0, 3, 1, 2).reshape(3, 3072),
             b"filenames": [b"domestic_cat_s_000907.png", b"hydrofoil_s_000078.png", b"sea_boat_s_001456.png"]}
    names = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]
    (root / "test_batch").write_bytes(pickle.dumps(batch, protocol=2))
    (root / "batches.meta").write_bytes(pickle.dumps({b"label_names": names, b"num_cases_per_batch": 3,
                                                      b"num_vis": 3072}, protocol=2))
    return tmp_path, pixels


def test_cifar10_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    folder, pixels = _cifar(tmp_path)
    assert detect(folder).name == "cifar10"
    ds = load(folder)
    assert [(r.id, r.answer, r.category) for r in ds.records] == [
        ("test_batch-0", 3, "cat"), ("test_batch-1", 8, "ship"), ("test_batch-2", 0, "airplane")]
    assert ds.records[0].options[:3] == ["airplane", "automobile", "bird"] and len(ds.records[0].options) == 10
    assert ds.records[1].meta["filename"] == "hydrofoil_s_000078.png"
    for r, want in zip(ds.records, pixels):
        assert np.array_equal(np.asarray(Image.open(r.images[0])), want)  # lossless, channels in order
    assert load(folder).records[0].images == ds.records[0].images  # written once
    from vlmcheck.methods.chef.scenarios import load_scenario

    items = load_scenario("classification", str(folder))  # ChEF's cifar10 recipe on the release
    assert [(i["id"], i["options"][i["answer"]]) for i in items] == [
        ("test_batch-0", "cat"), ("test_batch-1", "ship"), ("test_batch-2", "airplane")]


def test_cifar10_batch_that_would_run_code_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    folder, _ = _cifar(tmp_path)

    class Evil:
        def __reduce__(self):
            return (len, ("pwned",))

    # the global named in the bytes, never pickled from ``print`` itself: a library loaded earlier in this process
    # (Ray's tqdm) may have replaced builtins.print, and pickle would name the replacement
    evil = pickle.dumps({b"data": Evil()}, protocol=3)
    assert b"cbuiltins\nlen\n" in evil
    (folder / "cifar-10-batches-py" / "test_batch").write_bytes(evil.replace(b"cbuiltins\nlen\n", b"cbuiltins\nprint\n"))
    with pytest.raises(DatasetFormError, match=r"test_batch: expected a CIFAR-10 python batch .*builtins\.print "
                                               r"is not allowed"):
        load(folder)


# ---------------------------------------------------------------- Flickr30k, Karpathy's splits

def test_flickr30k_karpathy(tmp_path):
    root = tmp_path / "flickr30k"
    images = [{"sentids": [0, 1], "imgid": 0, "split": "train", "filename": "1000092795.jpg",
               "sentences": [{"raw": "Two young guys with shaggy hair.", "tokens": ["two"], "imgid": 0, "sentid": 0},
                             {"raw": "Two young men outside.", "tokens": ["two"], "imgid": 0, "sentid": 1}]},
              {"sentids": [5], "imgid": 1, "split": "test", "filename": "1007129816.jpg",
               "sentences": [{"raw": "The man with pierced ears is wearing glasses.", "tokens": [], "imgid": 1,
                              "sentid": 5}]}]
    root.mkdir()
    (root / "dataset_flickr30k.json").write_text(json.dumps({"images": images, "dataset": "flickr30k"}))
    _img(root / "flickr30k-images" / "1000092795.jpg")
    _img(root / "flickr30k-images" / "1007129816.jpg")
    assert detect(root).name == "karpathy"
    ds = load(root)
    assert [(r.id, r.description, r.split) for r in ds.records] == [
        ("1", "The man with pierced ears is wearing glasses.", "test")]
    train = load(root / "dataset_flickr30k.json", split="train").records[0]
    assert train.meta["captions"] == ["Two young guys with shaggy hair.", "Two young men outside."]
    assert train.images == [str(root / "flickr30k-images" / "1000092795.jpg")]


# ---------------------------------------------------------------- DOCCI

def test_docci(tmp_path):
    root = tmp_path / "docci"
    rows = [{"example_id": "test_00000", "split": "test", "image_file": "test_00000.jpg",
             "description": "A close up view of a pink flower."},
            {"example_id": "train_00001", "split": "train", "image_file": "train_00001.jpg",
             "description": "A white mug on a wooden table."}]
    root.mkdir()
    (root / "docci_descriptions.jsonlines").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _img(root / "images" / "test_00000.jpg")
    _img(root / "images" / "train_00001.jpg")
    assert detect(root).name == "docci"
    ds = load(root)  # DOCCI's train split, the one CAST drew its pairs from; the others counted as left out
    assert [(r.id, r.split, r.description) for r in ds.records] == [
        ("train_00001", "train", "A white mug on a wooden table.")]
    assert ds.skipped == [("line 1", "in split 'test', not 'train' (pass ?split=NAME or ?split=all)")]
    assert [r.id for r in load(root, split="all").records] == ["test_00000", "train_00001"]
    assert [r.id for r in load(root, split="test").records] == ["test_00000"]
    (root / "docci_descriptions.jsonlines").write_text("")
    with pytest.raises(DatasetFormError, match=r"docci_descriptions\.jsonlines: expected DOCCI's .*the file is "
                                               r"empty"):
        load(root)


# ---------------------------------------------------------------- CAST authors' pairs

def _cast(tmp_path: Path) -> Path:
    data = tmp_path / "cast" / "data"
    for i in (0, 1):
        stem = f"{i:3d}"  # the release's names: "  0.json", imgs/"  0_0.jpg"
        (data / "imgs").mkdir(parents=True, exist_ok=True)
        (data / f"{stem}.json").write_text(json.dumps({
            "id": i, "docci_idx_0": 5859 + i, "docci_idx_1": 4103 + i, "img_pair_similarity": 0.66 + i / 100,
            "desc_pair_similarity": 0.3, "description_0": f"Inside view of a cave {i}.",
            "description_1": f"An indoor view of a coconut tree {i}."}))
        _img(data / "imgs" / f"{stem}_0.jpg", (i, 0, 0))
        _img(data / "imgs" / f"{stem}_1.jpg", (i, 1, 0))
    return tmp_path / "cast"


def test_cast_authors_pairs(tmp_path):
    from vlmcheck.methods.cast import load_pairs

    root = _cast(tmp_path)
    assert detect(root).name == "cast-pairs" and detect(root / "data").name == "cast-pairs"
    ds = load(root)
    assert [(r.id, r.group) for r in ds.records] == [("0_0", "0"), ("0_1", "0"), ("1_0", "1"), ("1_1", "1")]
    assert ds.distinct_images == 4 and ds.records[1].description == "An indoor view of a coconut tree 0."
    assert ds.records[2].images == [str(root / "data" / "imgs" / "  1_0.jpg")]
    assert ds.records[3].meta == {"docci_idx": 4104, "image_cosine": 0.67, "text_cosine": 0.3}
    pairs = load_pairs(root / "data")  # cast run --pairs on the authors' data/ folder
    assert [(p["id"], p["a"]["id"], p["b"]["id"]) for p in pairs] == [("0", "0_0", "0_1"), ("1", "1_0", "1_1")]
    assert pairs[0]["a"]["description"] == "Inside view of a cave 0." and pairs[0]["b"]["image"].endswith("  0_1.jpg")


def test_hand_made_cast_pairs_without_side_ids_get_ids(tmp_path):
    from vlmcheck.methods.cast import load_pairs

    _img(tmp_path / "x.png")
    _img(tmp_path / "y.png", (1, 1, 1))
    rows = [{"a": {"image": "x.png", "description": "a red mug"}, "b": {"image": "y.png", "description": "a cup"}},
            {"id": "p2", "a": {"image": "y.png", "description": "a cup"},
             "b": {"id": "mine", "image": "x.png", "description": "a red mug"}}]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = load_pairs(tmp_path / "pairs.jsonl")
    assert [(p["id"], p["a"]["id"], p["b"]["id"]) for p in got] == [("0-a~0-b", "0-a", "0-b"),
                                                                    ("p2", "p2-a", "mine")]


def test_empty_chef_scenario_file_is_an_error(tmp_path):
    from vlmcheck.methods.chef.scenarios import load_scenario

    (tmp_path / "mc.jsonl").write_text("")
    with pytest.raises(ValueError, match=r"mc\.jsonl: no mc items in it"):
        load_scenario("mc", tmp_path / "mc.jsonl")


# ---------------------------------------------------------------- VHTest workbooks

@pytest.mark.slow
def test_vhtest_ynq_workbooks(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    bench = tmp_path / "VHTest" / "Benchmark"
    (bench / "YNQ_Benchmark").mkdir(parents=True)
    for mode, rows in (("color", [("color_0.png", "Is the cat black?", "y"), ("color_0.png", "Is the cat white?",
                                                                                "n")]),
                       ("OCR", [("OCR_3.png", "Does the sign say STOP?", "n")])):
        wb = openpyxl.Workbook()
        ws = wb.active
        ws.append(["image_path", "yes_or_no_question", "yes_or_no_ground_truth", "LLaVA_bug_success"])
        for r in rows:
            ws.append([*r, 1])
        ws.append([None, None, None, 0.5])  # the authors' sheets may end in a summary row
        wb.save(bench / "YNQ_Benchmark" / f"{mode}.xlsx")
        for img in {r[0] for r in rows}:
            _img(bench / "Images" / mode / img)
    for p in (tmp_path / "VHTest", bench, bench / "YNQ_Benchmark"):
        assert detect(p).name == "vhtest"
    ds = load(bench)
    assert [(r.id, r.category, r.answer, r.question) for r in ds.records] == [
        ("OCR-1", "OCR", "no", "Does the sign say STOP?"), ("color-1", "color", "yes", "Is the cat black?"),
        ("color-2", "color", "no", "Is the cat white?")]
    assert ds.distinct_images == 2 and not ds.skipped
    from vlmcheck.methods.vhx_cases import load_cases

    cases = load_cases(bench)  # vhx run --cases VHTest/Benchmark
    assert [(c.id, c.answer, c.meta["category"]) for c in cases] == [("OCR-1", "no", "OCR"), ("color-1", "yes", "color"),
                                                                    ("color-2", "no", "color")]
    (bench / "YNQ_Benchmark" / "color.xlsx").write_bytes(b"not a zip")
    with pytest.raises(DatasetFormError, match=r"color\.xlsx: expected an \.xlsx workbook"):
        load(bench)


# ---------------------------------------------------------------- LAMM meta files

def test_lamm_meta_paths_relative_to_the_data_root(tmp_path):
    root = tmp_path / "LAMM" / "2D_Benchmark"
    (root / "meta_file").mkdir(parents=True)
    _img(root / "scienceqa_images" / "1.png")
    _img(root / "cifar10_images" / "3.png", (5, 5, 5))
    (root / "meta_file" / "VQA_ScienceQA.json").write_text(json.dumps([
        {"id": 1, "image": "scienceqa_images/1.png", "query": "Which is farthest north?\nContext: N/A\nOptions: "
                                                              "(A) Maine (B) Ohio", "gt_choice": 0,
         "gt_choices": ["Maine", "Ohio"]}]))
    (root / "meta_file" / "Classification_CIFAR10.json").write_text(json.dumps([
        {"image": "cifar10_images/3.png", "query": "What is the category of the object?", "label": "cat"}]))
    assert detect(root).name == "lamm" and detect(root / "meta_file" / "VQA_ScienceQA.json").name == "lamm"
    ds = load(root)
    assert [(r.id, r.category, r.answer) for r in ds.records] == [
        ("Classification_CIFAR10/0", "Classification_CIFAR10", "cat"), ("VQA_ScienceQA/1", "VQA_ScienceQA", 0)]
    assert ds.records[1].images == [str(root / "scienceqa_images" / "1.png")]  # not under meta_file/
    assert ds.records[1].options == ["Maine", "Ohio"]
    assert load(root / "meta_file" / "VQA_ScienceQA.json").records[0].images == ds.records[1].images
    assert ds.records[0].meta == {"task": "Classification", "dataset": "CIFAR10", "benchmark": "cifar10",
                                  "label": "cat", "query": "What is the category of the object?"}
    assert ds.records[1].meta["benchmark"] == "scienceqa"  # its items count toward ScienceQA's official figure


def test_lamm_fsc147_meta_file_through_chef_counting(tmp_path):
    from vlmcheck.methods.chef.scenarios import load_scenario

    root = tmp_path / "2D_Benchmark"
    (root / "meta_file").mkdir(parents=True)
    _img(root / "fsc147_images" / "2.jpg")
    (root / "meta_file" / "Counting_FSC147.json").write_text(json.dumps([
        {"id": "2.jpg", "image": "fsc147_images/2.jpg", "query": "How many apples are there?", "num": 7}]))
    items = load_scenario("counting", f"lamm:{root}")
    assert [(i["id"], i["meta"]["count"], i["image"]) for i in items] == [
        ("Counting_FSC147/2.jpg", 7, str(root / "fsc147_images" / "2.jpg"))]


def test_omnibenchmark_meta_file_through_chef_hierarchical(tmp_path):
    from vlmcheck.methods.chef.scenarios import load_scenario

    root = tmp_path / "ChEF" / "Omnibenchmark"
    (root / "meta_file").mkdir(parents=True)
    _img(root / "omnibenchmark_images" / "a.jpg")
    _img(root / "omnibenchmark_images" / "b.jpg", (3, 3, 3))
    (root / "meta_file" / "Classification_Omnibenchmark.json").write_text(json.dumps([  # ChEF's meta: no query
        {"image": "omnibenchmark_images/a.jpg", "chain": ["animal", "dog"], "realm_name": "mammal"},
        {"image": "omnibenchmark_images/b.jpg", "chain": ["animal", "cat"], "realm_name": "mammal"}]))
    items = load_scenario("hierarchical", f"lamm:{root}")
    assert [(i["id"], i["image"], i["meta"]["chain"]) for i in items] == [
        ("Classification_Omnibenchmark/0", str(root / "omnibenchmark_images" / "a.jpg"), ["animal", "dog"]),
        ("Classification_Omnibenchmark/1", str(root / "omnibenchmark_images" / "b.jpg"), ["animal", "cat"])]


def test_no_form_is_one_sentence(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(DatasetFormError, match="no known dataset form found there"):
        detect(tmp_path)


# ---------------------------------------------------------------- bad input: one sentence naming the file

def _broken(tmp_path: Path, form: str) -> tuple[Path, str]:
    """A release whose one file is damaged; (path to read, the file the sentence must name)."""
    if form == "pope":
        out = _pope(tmp_path)
        (out / "coco_pope_random.json").write_text('{"question_id": 1, "image": "x.jpg", "text": "Q?", "label": '
                                                   '"yes"}\n{"question_id": 2,\n')
        return out / "coco_pope_random.json", "coco_pope_random.json: expected POPE's JSON Lines"
    if form == "seedbench":
        (tmp_path / "SEED-Bench.json").write_text('{"questions": ')
        return tmp_path, "SEED-Bench.json: expected SEED-Bench's JSON"
    if form == "cifar10":
        folder, _ = _cifar(tmp_path)
        batch = folder / "cifar-10-batches-py" / "test_batch"
        batch.write_bytes(batch.read_bytes()[:100])
        return folder, "test_batch: expected a CIFAR-10 python batch"
    if form == "karpathy":
        (tmp_path / "dataset_flickr30k.json").write_text('{"images": {}}')
        return tmp_path, "dataset_flickr30k.json: expected Karpathy's split file with a list"
    if form == "cast-pairs":
        root = _cast(tmp_path)
        (root / "data" / "  1.json").write_text("{")
        return root, "  1.json: expected a CAST pair"
    (tmp_path / "meta_file").mkdir()
    (tmp_path / "meta_file" / "VQA_AI2D.json").write_text('{"image": "x.png"}')
    return tmp_path, "VQA_AI2D.json: expected a LAMM meta file"  # an object, not a list


@pytest.mark.parametrize("form", ["pope", "seedbench", "cifar10", "karpathy", "cast-pairs", "lamm"])
def test_a_release_that_cannot_be_read_is_one_sentence(tmp_path, monkeypatch, form):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    path, says = _broken(tmp_path, form)
    assert detect(path).name == form
    with pytest.raises(DatasetFormError) as err:
        load(path)
    msg = str(err.value)
    assert says in msg and "\n" not in msg and "Traceback" not in msg


@pytest.mark.slow
def test_data_inspect_on_a_broken_release_exits_non_zero_with_one_sentence(tmp_path):

    path, says = _broken(tmp_path, "seedbench")
    run = run_cli("data", "inspect", str(path))
    assert run.returncode == 2 and says in run.stderr and "Traceback" not in run.stderr
