"""Each benchmark's items are the same on every route it is read by (its release, its Hub copies, its VLMEvalKit
TSV, LAMM's meta file), and every run says what it read.

Replicas built here from the published schemas: ``lmms-lab/MMBench`` (configs cc/cn/en, splits dev/test; ``en``'s
``index`` a string, ``L2-category``) and VLMEvalKit's ``MMBench_DEV_EN.tsv`` (circular copies at index + k x
1,000,000, options rotated k places, a copy's image the index of its question); ``lmms-lab/SEED-Bench``
(question_id, data_id, data_type, choice_a..d, answer letter, question_type_id, image a list) and the release's
``SEED-Bench.json`` + ``SEED-Bench-image/``; ``lmms-lab/ScienceQA`` (configs ScienceQA-FULL / ScienceQA-IMG,
splits validation / test; image None for a text-only question), the release's ``problems.json`` +
``pid_splits.json`` + ``images/test/<pid>/image.png``, LAMM's ``meta_file/VQA_ScienceQA.json``;
``google/docci`` (example_id, image, description; splits train / test) and DOCCI's ``docci_descriptions.jsonlines``;
``lmms-lab/POPE`` (config ``default`` split test, config ``Full`` splits adversarial / popular / random).

Figures are computed by hand from the benchmark's definition (VLMEvalKit's CircularEval: a question is right when
every copy is right) and must come out the same on every route.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from vlmcheck.core.roles import Capabilities, Generation
from vlmcheck.datasets import DatasetFormError, load
from vlmcheck.methods.chef import ChefSpec, ChefTask, Recipe
from vlmcheck.methods.chef.scenarios import load_scenario
from vlmcheck.run.runner import RunOptions, run_task

LETTERS = "ABCDEFGH"
REV = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def hub(tmp_path, monkeypatch):
    """An offline Hugging Face cache, and the image store, inside the test's folder."""
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hf"


def png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


def hub_repo(hf: Path, repo: str, tables: dict[str, list[dict]], configs: dict[str, dict[str, str]]) -> Path:
    """A Hub dataset snapshot in the cache: ``tables`` file -> rows, ``configs`` config -> split -> pattern."""
    snap = hf / f"datasets--{repo.replace('/', '--')}" / "snapshots" / REV
    for name, rows in tables.items():
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), snap / name)
    card = ["---", "configs:"]
    for cfg, splits in configs.items():
        card += [f"- config_name: {cfg}", "  data_files:"]
        card += [f"  - split: {s}\n    path: {p}" for s, p in splits.items()]
    (snap / "README.md").write_text("\n".join(card + ["---", ""]))
    (snap.parent.parent / "refs").mkdir(parents=True, exist_ok=True)
    (snap.parent.parent / "refs" / "main").write_text(REV)
    return snap


class Oracle:
    """Answers the letter of the right option (``right``: a word of the question -> the right option's text),
    except where (that word, the option shown first) is in ``wrong``: then the letter of another option."""

    model_id = "test:oracle"

    def __init__(self, right: dict[str, str], wrong: set[tuple[str, str]] = frozenset()) -> None:
        self.capabilities = Capabilities()
        self.right, self.wrong = right, wrong

    async def generate(self, messages, config):
        text = messages[-1].text
        shown = re.findall(r"^([A-Z])\. (.*)$", text, re.M)
        key = next(k for k in self.right if k in text)
        target = self.right[key]
        if (key, shown[0][1]) in self.wrong:
            target = next(o for _, o in shown if o != target)
        return Generation(text=next(L for L, o in shown if o == target), finish_reason="stop")


def chef_run(tmp_path: Path, data: str, scenario: dict, vlm, name: str) -> dict:
    task = ChefTask(ChefSpec(vlm=vlm.model_id, recipe=Recipe(name="t", scenario=scenario), data=data,
                             inferencer="direct"), vlm=vlm)
    return run_task(task, tmp_path / name, RunOptions(progress=False, report=False)).results


def pictures(items: list[dict]) -> list[bytes]:
    return [Path(i["image"]).read_bytes() for i in items]


# ---------------------------------------------------------------- MMBench: Hub copy and VLMEvalKit TSV

#: (index, question, options, right option) - MMBench dev's shape: 3 or 4 options
MMB = [(11, "What colour is the square?", ["red", "blue", "green", "yellow"], 0),
       (25, "Which shape is shown?", ["circle", "square", "triangle", "star"], 1),
       (37, "How many squares are there?", ["one", "two", "three"], 0),
       (48, "How big is the square?", ["large", "small", "medium"], 1),
       (52, "Where is the square?", ["left", "right", "top", "bottom"], 2),
       (69, "What is the background?", ["white", "black", "grey"], 2)]
MMB_COLOURS = ["red", "blue", "green", "yellow", "purple", "orange"]


def mmbench_rows() -> list[dict]:
    """VLMEvalKit's rows: each question, then its copies k = 1..n-1 at index + k x 1e6, options rotated k places
    (copy k's option j is the question's option (j + k) mod n)."""
    rows = []
    for (idx, q, opts, ans), colour in zip(MMB, MMB_COLOURS):
        n = len(opts)
        for k in range(n):
            rot = opts[k:] + opts[:k]
            rows.append({"index": idx + k * 1_000_000, "question": q, "hint": "Look closely." if idx == 11 else None,
                         **{L: (rot[j] if j < n else None) for j, L in enumerate("ABCD")},
                         "answer": LETTERS[(ans - k) % n], "category": "attribute_recognition",
                         "source": "MMBench", "l2-category": "finegrained_perception", "comment": None,
                         "split": "dev", "colour": colour})
    return rows


def mmbench_hub(hf: Path) -> None:
    def hub_row(r, index_type=str):
        out = {k: v for k, v in r.items() if k not in ("colour", "l2-category")}
        return {**out, "index": index_type(r["index"]), "L2-category": r["l2-category"],
                "image": {"bytes": png(r["colour"]), "path": None}}

    dev = [hub_row(r) for r in mmbench_rows()]
    test = [{**hub_row(r), "answer": None, "split": "test"} for r in mmbench_rows()[:2]]
    hub_repo(hf, "lmms-lab/MMBench", {"en/dev-00000-of-00001.parquet": dev, "en/test-00000-of-00001.parquet": test,
                                      "cn/dev-00000-of-00001.parquet": [hub_row(r, int) for r in mmbench_rows()[:1]],
                                      "cc/test-00000-of-00001.parquet": [hub_row(r, int) for r in mmbench_rows()[:1]]},
             {"cc": {"test": "cc/test-*"}, "cn": {"dev": "cn/dev-*"},
              "en": {"dev": "en/dev-*", "test": "en/test-*"}})


def mmbench_tsv(folder: Path) -> Path:
    header = ["index", "question", "hint", "A", "B", "C", "D", "answer", "category", "image", "source",
              "l2-category", "comment", "split"]
    lines = ["\t".join(header)]
    for r in mmbench_rows():
        own = r["index"] < 1_000_000
        image = base64.b64encode(png(r["colour"])).decode() if own else str(r["index"] % 1_000_000)
        cells = {**r, "image": image}
        lines.append("\t".join("" if cells.get(h) is None else str(cells[h]) for h in header))
    path = folder / "MMBench_DEV_EN.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _mmb_view(items: list[dict]) -> list[tuple]:
    return [(i["id"], i["options"], i["answer"], i["meta"]["group"], i["meta"].get("rotation"), i["image"])
            for i in items]


def test_mmbench_items_the_same_on_the_hub_copy_and_the_tsv(tmp_path, hub):
    mmbench_hub(hub)
    tsv = mmbench_tsv(tmp_path)
    routes = ["hfds:lmms-lab/MMBench", "hfds:lmms-lab/MMBench?config=en&split=dev", str(tsv), f"mmbench:{tsv}"]
    views = {r: _mmb_view(load_scenario("mmbench", r, circular=True)) for r in routes}
    first = views[routes[0]]
    # 21 rows: 6 questions and their 15 copies, each asked once as the data holds it (never rotated again)
    assert len(first) == 21 and all(v == first for v in views.values())
    assert [x[:5] for x in first[:4]] == [
        ("11", ["red", "blue", "green", "yellow"], 0, "11", 0),
        ("1000011", ["blue", "green", "yellow", "red"], 3, "11", 1),
        ("2000011", ["green", "yellow", "red", "blue"], 2, "11", 2),
        ("3000011", ["yellow", "red", "blue", "green"], 1, "11", 3)]
    assert len({x[5] for x in first}) == 6  # one image per question, the same file on both routes
    # VanillaEval: the 6 questions, the copies counted as left out
    assert [i["id"] for i in load_scenario("mmbench", routes[0])] == ["11", "25", "37", "48", "52", "69"]
    ds = load(routes[0])
    assert (ds.benchmark, ds.config, ds.splits, ds.rows, len(ds.records)) == ("mmbench", "en", ["dev"], 21, 21)
    assert "config 'en' read: mmbench's (configs: cc, cn, en; pass ?config=NAME)" in ds.notes
    assert "split 'dev' read (mmbench's): 21 of 23 rows (splits: dev 21, test 2; pass ?split=NAME)" in ds.notes


def test_mmbench_circular_figure_the_same_on_both_routes(tmp_path, hub):
    mmbench_hub(hub)
    tsv = mmbench_tsv(tmp_path)
    right = {q: opts[a] for _, q, opts, a in MMB}
    # wrong: question 37 as asked first (its original), 52's copy 1 (first option shown "right"), 69's copy 2
    # ("grey" first); every other row right
    vlm = Oracle(right, {(MMB[2][1], "one"), (MMB[4][1], "right"), (MMB[5][1], "grey")})
    figures = []
    for n, route in enumerate(["hfds:lmms-lab/MMBench", str(tsv)]):
        res = chef_run(tmp_path, route, {"type": "mmbench", "options": {"circular": True}}, vlm, f"run{n}")
        m = res["metrics"]
        figures.append((res["counts"]["samples"], m["circular_accuracy"], m["vanilla_accuracy"]))
    # by hand (VLMEvalKit's CircularEval): questions 11, 25, 48 have every copy right -> 3/6; VanillaEval asks the
    # originals: all right but 37 -> 5/6
    assert figures == [(21, pytest.approx(3 / 6), pytest.approx(5 / 6))] * 2


# ---------------------------------------------------------------- SEED-Bench: Hub copy, release, TSV

SEED = [("101669", "How many towels are in the image?", ["One", "Two", "Three", "Four"], "A", 5, "image", "red"),
        ("101670", "What colour is the wall?", ["white", "blue", "green", "black"], "C", 1, "image", "blue"),
        ("101671", "Where is the cup?", ["left", "right", "middle", "nowhere"], "B", 3, "image", "green"),
        ("1674", "What happens next?", ["he sits", "he runs", "he falls", "he waves"], "D", 10, "video", "grey")]


def seedbench_release(root: Path) -> Path:
    (root / "SEED-Bench-image").mkdir(parents=True)
    questions = []
    for qid, q, opts, ans, tid, kind, colour in SEED:
        data_id = f"{qid}.jpg" if kind == "image" else f"{qid}.mp4"
        if kind == "image":
            (root / "SEED-Bench-image" / data_id).write_bytes(png(colour))
        questions.append({"answer": ans, **{f"choice_{c}": o for c, o in zip("abcd", opts)}, "data_id": data_id,
                          "data_type": kind, "question": q, "question_id": qid, "question_type_id": tid})
    (root / "SEED-Bench.json").write_text(json.dumps({"questions": questions, "question_type": {
        "Scene Understanding": 1, "Instance Location": 3, "Instance Counting": 5, "Action Prediction": 10}}))
    return root


def seedbench_hub(hf: Path) -> Path:
    rows = [{"answer": ans, **{f"choice_{c}": o for c, o in zip("abcd", opts)},
             "data_id": f"{qid}.jpg" if kind == "image" else f"{qid}.mp4", "data_type": kind, "question": q,
             "question_id": qid, "question_type_id": tid,
             # a video question's frames sit in the same image list as an image question's picture
             "image": [{"bytes": png(colour), "path": None}] * (1 if kind == "image" else 3)}
            for qid, q, opts, ans, tid, kind, colour in SEED]
    return hub_repo(hf, "lmms-lab/SEED-Bench", {"data/test-00000-of-00001.parquet": rows}, {"default": {"test": "data/test-*"}})


def test_seedbench_items_the_same_on_the_hub_copy_the_release_and_the_tsv(tmp_path, hub):
    release = seedbench_release(tmp_path / "SEED-Bench")
    snap = seedbench_hub(hub)
    tsv = tmp_path / "SEEDBench_IMG.tsv"  # VLMEvalKit's: image questions only, A..D, base64 images
    tsv.write_text("\n".join(["index\tquestion\tA\tB\tC\tD\tanswer\tcategory\timage"] + [
        "\t".join([qid, q, *opts, ans, "x", base64.b64encode(png(colour)).decode()])
        for qid, q, opts, ans, _, kind, colour in SEED if kind == "image"]) + "\n")
    routes = ["hfds:lmms-lab/SEED-Bench", f"hfds:{snap}", str(release), f"seedbench:{release}", str(tsv)]
    items = {r: load_scenario("mc", r) for r in routes}
    want = [("101669", ["One", "Two", "Three", "Four"], 0), ("101670", ["white", "blue", "green", "black"], 2),
            ("101671", ["left", "right", "middle", "nowhere"], 1)]
    for r, its in items.items():
        assert [(i["id"], i["options"], i["answer"]) for i in its] == want, r
        assert pictures(its) == [png(c) for *_, kind, c in SEED if kind == "image"], r
    # the video question: left out on every route that holds it, with the same reason, and counted
    why = "not an image question (data_type video): vlmcheck evaluates images"
    for r in routes[:4]:
        ds = load(r)
        assert (ds.benchmark, ds.rows, len(ds.records), ds.skipped) == ("seedbench", 4, 3, [("1674", why)]), r


def test_seedbench_figure_the_same_on_the_hub_copy_and_the_release(tmp_path, hub):
    release = seedbench_release(tmp_path / "SEED-Bench")
    seedbench_hub(hub)
    vlm = Oracle({"towels": "One", "wall": "green", "cup": "right", "next": "he waves"}, {("wall", "white")})
    accs = [chef_run(tmp_path, r, {"type": "mc"}, vlm, f"run{n}")["metrics"]["settings"]["standard"]["accuracy"]
            for n, r in enumerate(["hfds:lmms-lab/SEED-Bench", str(release)])]
    assert accs == [pytest.approx(2 / 3)] * 2  # three image questions, the wall one answered wrong


# ---------------------------------------------------------------- ScienceQA: Hub copy, release, LAMM

#: (pid, question, choices, answer, hint, colour or None for a text-only question)
SQA = [("5", "Which of these states is farthest north?", ["West Virginia", "Louisiana", "Arizona", "Oklahoma"], 0,
        "Figure: a map.", "red"),
       ("6", "Which tense does the sentence use?\nMona will print her name.", ["past", "future", "present"], 1, "",
        None),
       ("8", "Which animal's feet are adapted for grabbing prey?", ["duck", "owl", "cow"], 1, "", "blue")]


def scienceqa_release(root: Path) -> Path:
    problems = {}
    for pid, q, ch, a, hint, colour in SQA:
        problems[pid] = {"question": q, "choices": ch, "answer": a, "hint": hint, "image": "image.png" if colour
                         else None, "subject": "natural science", "split": "test", "lecture": "", "solution": ""}
        if colour:
            (root / "images" / "test" / pid).mkdir(parents=True)
            (root / "images" / "test" / pid / "image.png").write_bytes(png(colour))
    problems["9"] = {**problems["5"], "split": "val"}
    (root / "problems.json").write_text(json.dumps(problems))
    (root / "pid_splits.json").write_text(json.dumps({"train": [], "val": ["9"], "test": ["5", "6", "8"]}))
    return root


def scienceqa_hub(hf: Path) -> None:
    def row(pid, q, ch, a, hint, colour):
        return {"image": {"bytes": png(colour), "path": None} if colour else None, "question": q, "choices": ch,
                "answer": a, "hint": hint, "task": "closed choice", "grade": "grade4", "subject": "natural science",
                "topic": "geography", "category": "Geography", "skill": "Read a map", "lecture": "", "solution": ""}

    full = [row(*p) for p in SQA]
    img = [row(*p) for p in SQA if p[5]]
    hub_repo(hf, "lmms-lab/ScienceQA", {
        "ScienceQA-FULL/test-00000-of-00001.parquet": full, "ScienceQA-FULL/validation-00000-of-00001.parquet": full[:1],
        "ScienceQA-IMG/test-00000-of-00001.parquet": img, "ScienceQA-IMG/validation-00000-of-00001.parquet": img[:1]},
             {"ScienceQA-FULL": {"validation": "ScienceQA-FULL/validation-*", "test": "ScienceQA-FULL/test-*"},
              "ScienceQA-IMG": {"validation": "ScienceQA-IMG/validation-*", "test": "ScienceQA-IMG/test-*"}})


def scienceqa_lamm(root: Path) -> Path:
    """LAMM's VQA_ScienceQA.json (ChEF's scenario): image questions only, the query embeds context and options."""
    (root / "meta_file").mkdir(parents=True)
    (root / "scienceqa_images").mkdir()
    items = []
    for pid, q, ch, a, hint, colour in SQA:
        if colour:
            (root / "scienceqa_images" / f"{pid}.png").write_bytes(png(colour))
            opts = " ".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(ch))
            items.append({"id": pid, "image": f"scienceqa_images/{pid}.png", "gt_choice": a, "gt_choices": ch,
                          "query": f"{q}\nContext: {hint or 'N/A'}\nOptions: {opts}"})
    (root / "meta_file" / "VQA_ScienceQA.json").write_text(json.dumps(items))
    return root / "meta_file" / "VQA_ScienceQA.json"


def test_scienceqa_items_the_same_on_the_hub_copy_the_release_and_lamm(tmp_path, hub):
    release = scienceqa_release(tmp_path / "scienceqa")
    scienceqa_hub(hub)
    lamm = scienceqa_lamm(tmp_path / "2D_Benchmark")
    routes = ["hfds:lmms-lab/ScienceQA", "hfds:lmms-lab/ScienceQA?config=ScienceQA-FULL",
              "hfds:lmms-lab/ScienceQA?config=ScienceQA-IMG&split=test", str(release), f"scienceqa:{release}",
              str(lamm)]
    items = {r: load_scenario("scienceqa", r) for r in routes}
    for r, its in items.items():
        # the image questions 5 and 8 (the text-only 6 is no item), their options, answers and pictures
        assert [(i["options"], i["answer"]) for i in its] == [(SQA[0][2], 0), (SQA[2][2], 1)], r
        assert pictures(its) == [png("red"), png("blue")], r
    # the hint as "Context:" where the route keeps it apart (LAMM's query already holds it)
    assert {items[r][0]["question"] for r in routes[:5]} == {
        "Context: Figure: a map.\nWhich of these states is farthest north?"}
    assert [i["id"] for i in items[str(release)]] == ["5", "8"]
    why = "text-only question (ScienceQA's items are its image questions, as ChEF's and lmms-eval's scienceqa_img)"
    default, full, rel = load("hfds:lmms-lab/ScienceQA"), load(routes[1]), load(release)
    assert (default.config, default.splits, default.rows, default.skipped) == ("ScienceQA-IMG", ["test"], 2, [])
    assert (full.config, full.rows, [w for _, w in full.skipped]) == ("ScienceQA-FULL", 3, [why])
    assert (rel.rows, rel.skipped) == (3, [("6", why)])


def test_scienceqa_figure_the_same_on_every_route(tmp_path, hub):
    release = scienceqa_release(tmp_path / "scienceqa")
    scienceqa_hub(hub)
    lamm = scienceqa_lamm(tmp_path / "2D_Benchmark")
    vlm = Oracle({"north": "West Virginia", "tense": "future", "prey": "owl"}, {("prey", "duck")})
    routes = ["hfds:lmms-lab/ScienceQA", "hfds:lmms-lab/ScienceQA?config=ScienceQA-FULL", str(release), str(lamm)]
    accs = [chef_run(tmp_path, r, {"type": "scienceqa"}, vlm, f"run{n}")["metrics"]["settings"]["standard"]["accuracy"]
            for n, r in enumerate(routes)]
    assert accs == [pytest.approx(1 / 2)] * 4  # two image questions, the owl one answered wrong


# ---------------------------------------------------------------- DOCCI: CAST's pairs from the train split

def test_docci_train_split_by_default_on_the_release_and_the_hub(tmp_path, hub, capsys):
    from vlmcheck.methods.cast import corpus_from
    from vlmcheck.methods.records import cast_corpus

    rows = [("train_00000", "train", "red"), ("train_00001", "train", "blue"), ("test_00000", "test", "green")]
    root = tmp_path / "docci"
    (root / "images").mkdir(parents=True)
    for eid, _, colour in rows:
        (root / "images" / f"{eid}.jpg").write_bytes(png(colour))
    (root / "docci_descriptions.jsonlines").write_text("".join(json.dumps(
        {"example_id": e, "split": s, "image_file": f"{e}.jpg", "description": f"A {c} square."}) + "\n"
        for e, s, c in rows))
    hub_repo(hub, "google/docci", {f"data/{s}-00000-of-00001.parquet": [
        {"example_id": e, "image": {"bytes": png(c), "path": None}, "description": f"A {c} square."}
        for e, s_, c in rows if s_ == s] for s in ("train", "test")},
             {"default": {"train": "data/train-*", "test": "data/test-*"}})
    for route in (str(root), "hfds:google/docci"):
        scenes = cast_corpus(load(route))
        assert [s["id"] for s in scenes] == ["train_00000", "train_00001"], route
        assert [Path(s["image"]).read_bytes() for s in scenes] == [png("red"), png("blue")], route
    assert [s["id"] for s in cast_corpus(load("hfds:google/docci?split=test"))] == ["test_00000"]
    assert "split 'train' read (docci's): 2 of 3 rows (splits: train 2, test 1; pass ?split=NAME)" in load(
        "hfds:google/docci").notes
    # `cast pairs` says what it drew from
    assert [c["id"] for c in corpus_from(str(root))] == ["train_00000", "train_00001"]
    assert ("form docci, benchmark docci, split 'train': 3 rows read, 2 items; left out: 1 (1 in split 'test', "
            "not 'train' (pass ?split=NAME or ?split=all))") in capsys.readouterr().err


# ---------------------------------------------------------------- every choice said

def pope_hub(hf: Path) -> None:
    def rows(split, n0):
        return [{"id": str(n0 + i), "question_id": str(i + 1), "question": f"Is there a {o} in the image?",
                 "answer": a, "image_source": "COCO_val2014_000000310196", "category": split,
                 "image": {"bytes": png("red"), "path": None}}
                for i, (o, a) in enumerate([("dog", "yes"), ("cat", "no"), ("car", "no"), ("cup", "yes")])]

    hub_repo(hf, "lmms-lab/POPE", {"data/test-00000-of-00001.parquet": rows("adversarial", 0),
                                   **{f"Full/{s}-00000-of-00001.parquet": rows(s, 10 * n)
                                      for n, s in enumerate(("adversarial", "popular", "random"))}},
             {"default": {"test": "data/test-*"},
              "Full": {"adversarial": "Full/adversarial-*", "popular": "Full/popular-*", "random": "Full/random-*"}})


def test_a_config_with_several_splits_says_which_it_read(hub):
    pope_hub(hub)
    ds = load("hfds:lmms-lab/POPE?config=Full")
    assert (ds.config, ds.splits, len(ds.records)) == ("Full", ["adversarial"], 4)
    assert ("split 'adversarial' read: 4 of 12 rows (splits: adversarial 4, popular 4, random 4; pass "
            "?split=NAME)") in ds.notes
    assert "config 'default' read (configs: default, Full; pass ?config=NAME)" in load("hfds:lmms-lab/POPE").notes


def test_a_multi_config_copy_without_a_config_is_refused_unless_the_benchmark_has_one(tmp_path, hub):
    mmbench_hub(hub)
    scienceqa_hub(hub)
    snap = hub / "datasets--lmms-lab--MMBench" / "snapshots" / REV
    with pytest.raises(DatasetFormError, match=r"config name is missing: pick one of its configs with \?config=NAME "
                                               r"\(cc, cn, en\)"):
        load(f"hfds:{snap}")  # a local copy: nothing says it is MMBench
    assert load(f"mmbench:hfds:{snap}").config == "en"
    assert load("hfds:lmms-lab/MMBench").config == "en"
    assert load("hfds:lmms-lab/ScienceQA").config == "ScienceQA-IMG"


def test_a_run_prints_and_records_what_it_read(tmp_path, hub, capsys):
    from vlmcheck.report.html import write_run_report

    mmbench_hub(hub)
    right = {q: opts[a] for _, q, opts, a in MMB}
    res = chef_run(tmp_path, "hfds:lmms-lab/MMBench", {"type": "mmbench"}, Oracle(right), "run")
    line = ("data hfds:lmms-lab/MMBench: form hf-snapshot, benchmark mmbench, config 'en', split 'dev': 21 rows "
            "read, 6 items; left out: 15 (15 circular copy: VanillaEval asks each question once)")
    err = capsys.readouterr().err
    assert line in err
    got = res["data_read"][0]
    assert {k: got[k] for k in ("source", "form", "benchmark", "config", "splits", "rows", "items", "left_out")} == {
        "source": "hfds:lmms-lab/MMBench", "form": "hf-snapshot", "benchmark": "mmbench", "config": "en",
        "splits": ["dev"], "rows": 21, "items": 6,
        "left_out": {"circular copy: VanillaEval asks each question once": 15}}
    assert json.loads((tmp_path / "run" / "results.json").read_text())["data_read"] == res["data_read"]
    html = write_run_report(tmp_path / "run").read_text()
    assert "data read" in html and "21 rows read, 6 items" in html
