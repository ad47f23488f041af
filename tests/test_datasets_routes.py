"""What was left of issue 46 on the routes into the methods: a reader's options written after the path
(``PATH?split=..``) on ChEF's route as on the others; SEED-Bench-2's image lists sent whole to the model by
ChEF; MMVP's pairs on its Hub copy (no pair column) so that pair accuracy is reported.  Replicas built here
from the published schemas, checked against values written by hand."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli
from PIL import Image

from vlmcheck.core.files import InputFileError
from vlmcheck.core.roles import Capabilities, Generation
from vlmcheck.datasets import DatasetFormError, load, path_options
from vlmcheck.methods.chef import ChefSpec, ChefTask, Recipe
from vlmcheck.run.runner import RunOptions, run_task
from test_datasets_releases import Scripted  # the scripted yes/no model of the MMVP release test


def _img(path: Path, colour) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), colour).save(path)
    return path


class Recording:
    """A VLM that answers "A" and keeps every request's messages."""

    def __init__(self, multi_image: bool = True) -> None:
        self.model_id = "test:recording"
        self.capabilities = Capabilities(multi_image=multi_image)
        self.sent = []

    async def generate(self, messages, config):
        self.sent.append(messages)
        return Generation(text="A", finish_reason="stop")


def _run(tmp_path, data, scenario, vlm, name="run"):
    task = ChefTask(ChefSpec(vlm=vlm.model_id, recipe=Recipe(name="t", scenario={"type": scenario}), data=data,
                             inferencer="direct"), vlm=vlm)
    run_task(task, tmp_path / name, RunOptions(progress=False, report=False))
    return [json.loads(x) for x in (tmp_path / name / "samples.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------- reader options after the path

def _scienceqa(tmp_path: Path) -> Path:
    """ScienceQA's release (problems.json, pid_splits.json, images/<split>/<pid>/): the default split (test)
    holds problem 5; the one asked for (train) holds problem 7."""
    root = tmp_path / "scienceqa"
    root.mkdir()
    problems = {
        "5": {"question": "Which of these states is farthest north?", "choices": ["West Virginia", "Louisiana"],
              "answer": 0, "hint": "", "image": "image.png", "subject": "social science", "split": "test"},
        "7": {"question": "Which animal's feet are also adapted for grabbing prey?", "choices": ["bat", "owl", "cow"],
              "answer": 1, "hint": "Bald eagles eat fish.", "image": "image.png", "subject": "natural science",
              "split": "train"}}
    (root / "problems.json").write_text(json.dumps(problems))
    (root / "pid_splits.json").write_text(json.dumps({"train": ["7"], "val": [], "test": ["5"]}))
    _img(root / "images" / "test" / "5" / "image.png", (1, 2, 3))
    _img(root / "images" / "train" / "7" / "image.png", (0, 99, 0))
    return root


def test_path_options_parsed_only_where_the_path_does_not_exist_as_written(tmp_path):
    assert path_options("./sqa?split=train&images=./val2014") == ("./sqa", {"split": "train", "images": "./val2014"})
    odd = tmp_path / "a?b=c"
    odd.write_text("x")
    assert path_options(str(odd)) == (str(odd), {})
    assert path_options("./what?") == ("./what?", {})


def test_split_option_on_chefs_route(tmp_path):
    from vlmcheck.methods.chef.scenarios import load_scenario

    root = _scienceqa(tmp_path)
    assert [i["id"] for i in load_scenario("scienceqa", str(root))] == ["5"]  # the default: test
    for source in (f"{root}?split=train", f"scienceqa:{root}?split=train"):
        items = load_scenario("scienceqa", source)
        assert [(i["id"], i["question"], i["options"], i["answer"]) for i in items] == [
            ("7", "Context: Bald eagles eat fish.\nWhich animal's feet are also adapted for grabbing prey?",
             ["bat", "owl", "cow"], 1)]
    # a run: `chef run --scenario scienceqa --data PATH?split=train` asks the train question, about its image
    vlm = Recording()
    rows = _run(tmp_path, f"{root}?split=train", "scienceqa", vlm)
    assert [r["sample_id"] for r in rows] == ["7"]
    asked = vlm.sent[0][-1]
    assert "Which animal's feet" in asked.text and asked.images[0].to_pil().getpixel((0, 0)) == (0, 99, 0)


@pytest.mark.slow
def test_split_option_through_the_chef_run_command(tmp_path):
    root = _scienceqa(tmp_path)
    cmd = ["chef", "run", "--recipe", "scienceqa", "--scenario", "scienceqa", "--inferencer", "direct", "--vlm",
           "ref:describer", "--no-progress", "--data"]
    run = run_cli(*cmd, f"{root}?split=train", "--out", str(tmp_path / "run"))
    assert run.returncode == 0, run.stderr
    rows = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["result"]["answer"], len(r["result"]["options"])) for r in rows] == [("7", 1, 3)]
    bad = run_cli(*cmd, f"{root}?splt=train", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2 and "the scienceqa form takes no option 'splt'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_an_option_the_reader_does_not_take_is_one_sentence(tmp_path):
    from vlmcheck.methods.chef.scenarios import load_scenario

    root = _scienceqa(tmp_path)
    with pytest.raises(InputFileError, match=r"the scienceqa form takes no option 'splt' \(it takes split\)"):
        load_scenario("scienceqa", f"{root}?splt=train")
    with pytest.raises(DatasetFormError, match=r"expected a split named 'dev'"):
        load(f"{root}?split=dev")


def test_pope_images_option_on_chefs_route(tmp_path):
    """POPE's split files with the COCO images elsewhere: ``?images=DIR`` (the default places hold none)."""
    from vlmcheck.methods.chef.scenarios import load_scenario

    out = tmp_path / "POPE" / "output" / "coco"
    out.mkdir(parents=True)
    img = "COCO_val2014_000000310196.jpg"
    _img(tmp_path / "coco" / "val2014" / img, (9, 9, 9))
    (out / "coco_pope_random.json").write_text(
        json.dumps({"question_id": 1, "image": img, "text": "Is there a snowboard in the image?", "label": "yes"})
        + "\n")
    with pytest.raises(InputFileError, match="give images=DIR"):
        load_scenario("pope", str(out / "coco_pope_random.json"))
    items = load_scenario("pope", f"{out / 'coco_pope_random.json'}?images={tmp_path / 'coco' / 'val2014'}")
    assert [(i["id"], i["image"], i["answer"]) for i in items] == [
        ("random-1", str(tmp_path / "coco" / "val2014" / img), 0)]


# ---------------------------------------------------------------- SEED-Bench-2: every image sent, in order

def _seedbench2(tmp_path: Path) -> Path:
    root = tmp_path / "SEEDBench2"
    colours = {"a.jpg": (250, 0, 0), "b.jpg": (0, 250, 0), "c.jpg": (0, 0, 250), "d.jpg": (90, 90, 90)}
    for name, c in colours.items():
        _img(root / "image" / "SEED-Bench-2-image" / name, c)
    data = {"questions": [
        {"answer": "C", "choice_a": "first", "choice_b": "second", "choice_c": "third", "choice_d": "",
         "data_id": ["c.jpg", "a.jpg", "b.jpg"], "data_source": "SEED-Bench v2", "data_type": "Multiple Images",
         "question": "Which image shows the blue square?", "question_id": "7", "question_type_id": 23},
        {"answer": "A", "choice_a": "grey", "choice_b": "red", "choice_c": "", "choice_d": "",
         "data_id": "d.jpg", "data_source": "SEED-Bench v2", "data_type": "Single Image",
         "question": "What colour is it?", "question_id": "8", "question_type_id": 1}]}
    (root / "SEED-Bench_v2_level1_2_3.json").write_text(json.dumps(data))
    return root


def _near(part) -> tuple:
    """A sent image's colour, to the nearest 10 (the files are JPEGs, as SEED-Bench's are)."""
    return tuple(round(v / 10) * 10 for v in part.to_pil().getpixel((0, 0)))


def test_seedbench2_image_lists_sent_whole_and_in_order(tmp_path):
    from vlmcheck.methods.chef.scenarios import load_scenario

    root = _seedbench2(tmp_path)
    folder = root / "image" / "SEED-Bench-2-image"
    items = load_scenario("mc", str(root))
    assert items[0]["images"] == [str(folder / n) for n in ("c.jpg", "a.jpg", "b.jpg")]
    assert items[0]["image"] == str(folder / "c.jpg") and "images" not in items[1]
    vlm = Recording()
    rows = _run(tmp_path, str(root), "mc", vlm)
    assert [r["sample_id"] for r in rows] == ["7", "8"]
    by_question = {m[-1].text.split("\n")[0]: m[-1] for m in vlm.sent}
    multi = by_question["Which image shows the blue square?"]
    assert [_near(p) for p in multi.images] == [(0, 0, 250), (250, 0, 0), (0, 250, 0)]  # c, a, b as listed
    assert [_near(p) for p in by_question["What colour is it?"].images] == [(90, 90, 90)]


def test_seedbench2_in_context_example_shows_its_every_image(tmp_path):
    """ICL with images (ice.with_images): a one-shot example that is a multi-image item shows all its images,
    in order, before the question's own; an example with more options (3) than the question (2) labels them
    all (it failed its sample with an IndexError before)."""
    root = _seedbench2(tmp_path)
    vlm = Recording()
    r = Recipe(name="t", desideratum="icl", scenario={"type": "mc"},
               instruction={"type": "ice", "ice": {"retriever": "random", "shots": [1], "with_images": True}})
    task = ChefTask(ChefSpec(vlm=vlm.model_id, recipe=r, data=str(root), inferencer="direct"), vlm=vlm)
    run_task(task, tmp_path / "run", RunOptions(progress=False, report=False))
    asked = next(m for m in vlm.sent if m[-1].text.startswith("What colour is it?"))
    example, answer, question = asked  # item 8's only possible example is item 7
    assert example.text.startswith("Which image shows the blue square?\nOptions:\nA. first\nB. second\nC. third")
    assert answer.text.endswith("(C) third")
    assert [_near(p) for p in example.images] == [(0, 0, 250), (250, 0, 0), (0, 250, 0)]
    assert [_near(p) for p in question.images] == [(90, 90, 90)]


def test_several_images_need_a_model_that_takes_them(tmp_path):
    root = _seedbench2(tmp_path)
    with pytest.raises(ValueError, match=r"1 items show several images \(e\.g\. '7'.*does not declare multi-image"):
        ChefTask(ChefSpec(vlm="test:one", recipe=Recipe(name="t", scenario={"type": "mc"}), data=str(root),
                          inferencer="direct"), vlm=Recording(multi_image=False))


# ---------------------------------------------------------------- MMVP's Hub copy: pairs by Index

def _jpeg(red: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (red, 0, 0)).save(buf, "JPEG", quality=95)
    return buf.getvalue()


# MMVP/MMVP and lmms-lab-eval/MMVP on the Hub: Index (1-based), Question, Options "(a) x (b) y",
# Correct Answer "(a)", image; rows 2k-1 and 2k are one CLIP-blind pair; no pair column
MMVP_ROWS = [(1, "Is the dog facing left or right from the camera's perspective?", "(a) Left (b) Right", "(a)"),
             (2, "Is the dog facing left or right from the camera's perspective?", "(a) Left (b) Right", "(b)"),
             (3, "Are the butterfly's feet visible?", "(a) Yes (b) No", "(a)"),
             (4, "Are the butterfly's feet visible?", "(a) Yes (b) No", "(a)"),
             (5, "Is the door of the truck cab open?", "(a) Yes (b) No", "(b)"),
             (6, "Is the door of the truck cab open?", "(a) Yes (b) No", "(a)")]


def _mmvp_hub(tmp_path: Path) -> Path:
    folder = tmp_path / "MMVP"
    (folder / "data").mkdir(parents=True)
    rows = [{"Index": i, "Question": q, "Options": o, "Correct Answer": a,
             "image": {"bytes": _jpeg(30 * i), "path": f"{i}.jpg"}} for i, q, o, a in MMVP_ROWS]
    pq.write_table(pa.Table.from_pylist(rows), folder / "data" / "train-00000-of-00001.parquet")
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                      "    path: data/train-*\n---\n")
    return folder


def test_mmvp_hub_copy_gets_mmvps_pairs(tmp_path, monkeypatch):
    from vlmcheck.methods.records import vhx_cases

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    ds = load(f"hfds:{_mmvp_hub(tmp_path)}")
    assert ds.benchmark == "mmvp"
    assert [(r.id, r.group, r.answer) for r in ds.records] == [
        ("1", "pair-1", 0), ("2", "pair-1", 1), ("3", "pair-2", 0), ("4", "pair-2", 0), ("5", "pair-3", 1),
        ("6", "pair-3", 0)]
    assert "MMVP pairs: Index 2k-1 and 2k share pair-k" in ds.notes
    cases = vhx_cases(ds)
    assert [(c.id, c.answer, c.meta["pair"]) for c in cases] == [
        ("1", "yes", "pair-1"), ("2", "no", "pair-1"), ("3", "yes", "pair-2"), ("4", "yes", "pair-2"),
        ("5", "no", "pair-3"), ("6", "yes", "pair-3")]


@pytest.mark.slow
def test_mmvp_hub_copy_through_vhx_pair_accuracy_by_hand(tmp_path, monkeypatch):
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    # truths (original / negation): 1 yes/no, 2 no/yes, 3 yes/no, 4 yes/no, 5 no/yes, 6 yes/no
    script = {(1, False): "Yes.", (1, True): "No.", (2, False): "No.", (2, True): "Yes.",
              (3, False): "Yes.", (3, True): "Yes.", (4, False): "No.", (4, True): "Yes.",
              (5, False): "No.", (5, True): "Yes.", (6, False): "Yes.", (6, True): "Yes."}
    task = VHExpansionTask(VHXSpec(vlm="ref:describer", cases=f"hfds:{_mmvp_hub(tmp_path)}", perturb=[]),
                           vlm=Scripted(script))
    orig = run_task(task, tmp_path / "run", RunOptions(progress=False)).results["metrics"]["variants"]["original"]
    # accuracy: all originals right but case 4 (5/6); symmetric: cases 1, 2, 5 right both ways (3/6);
    # MMVP pairs: (1, 2) both right, (3, 4) case 4 wrong, (5, 6) both right -> 2/3
    assert orig["accuracy"] == pytest.approx(5 / 6) and orig["symmetric_accuracy"] == pytest.approx(3 / 6)
    assert orig["pair_accuracy"] == pytest.approx(2 / 3) and orig["n_mmvp_pairs"] == 3


# ---------------------------------------------------------------- VLMEvalKit TSVs of POPE and SEED-Bench

def _tsv(path: Path, header: list[str], rows: list[list]) -> Path:
    path.write_text("\n".join("\t".join(map(str, r)) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path


def test_vlmeval_pope_and_seedbench_tsvs(tmp_path, monkeypatch):
    """VLMEvalKit's yes/no TSV (POPE.tsv: index, question, answer Yes/No, category = the POPE split, image as
    base64 or another row's index) and its multiple-choice TSV (SEEDBench_IMG.tsv: index, question, A..D,
    answer letter, category, image), the columns of ImageYORNDataset / ImageMCQDataset."""
    import base64

    from vlmcheck.methods.chef.scenarios import load_scenario

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    red, blue = (base64.b64encode(_jpeg(r)).decode() for r in (200, 20))
    pope = _tsv(tmp_path / "POPE.tsv", ["index", "question", "answer", "category", "image"], [
        [0, "Is there a snowboard in the image?", "Yes", "random", red],
        [1, "Is there a dog in the image?", "No", "random", "0"],  # the same COCO image: row 0's
        [2, "Is there a chair in the image?", "No", "adversarial", blue]])
    items = load_scenario("pope", f"pope:{pope}")
    assert [(i["id"], i["answer"], i["meta"]["category"]) for i in items] == [
        ("0", 0, "random"), ("1", 1, "random"), ("2", 1, "adversarial")]
    assert items[0]["image"] == items[1]["image"] != items[2]["image"]  # one image, one unit
    seed = _tsv(tmp_path / "SEEDBench_IMG.tsv", ["index", "question", "A", "B", "C", "D", "answer", "category",
                                                 "image"], [
        [101669, "How many towels are in the image?", "One", "Two", "Three", "Four", "A", "Instance Counting", red]])
    items = load_scenario("mc", f"seedbench:{seed}")
    assert [(i["id"], i["options"], i["answer"], i["meta"]["category"]) for i in items] == [
        ("101669", ["One", "Two", "Three", "Four"], 0, "Instance Counting")]
    # a TSV has one split: split= is no option of its form; a column role is
    with pytest.raises(DatasetFormError, match=r"the vlmeval-tsv form takes no option 'split' \(it takes \*_column\)"):
        load(f"{seed}?split=test")
    assert load(f"{seed}?category_column=question").records[0].category == "How many towels are in the image?"


def test_seedbench_hub_image_lists_reach_chef_whole(tmp_path, monkeypatch):
    """lmms-lab/SEED-Bench(-2): the image column a list (a multi-image question's pictures); ChEF's items carry
    every one."""
    from vlmcheck.methods.chef.scenarios import load_scenario

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "SEED-Bench"
    (folder / "data").mkdir(parents=True)
    rows = [{"question_id": "q1", "data_id": "v1", "question": "What happens?", "choice_a": "x", "choice_b": "y",
             "choice_c": "z", "choice_d": "w", "answer": "C", "question_type_id": 10, "data_type": "Multiple Images",
             "image": [{"bytes": _jpeg(240), "path": "f0.jpg"}, {"bytes": _jpeg(30), "path": "f1.jpg"}]}]
    pq.write_table(pa.Table.from_pylist(rows), folder / "data" / "test-00000-of-00001.parquet")
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n"
                                      "    path: data/test-*\n---\n")
    item = load_scenario("mc", f"hfds:{folder}")[0]
    assert len(item["images"]) == 2 and item["image"] == item["images"][0]
    reds = [Image.open(p).getpixel((0, 0))[0] for p in item["images"]]
    assert [round(r / 10) * 10 for r in reds] == [240, 30]  # f0, then f1
