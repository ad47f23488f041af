"""ChEF: metrics by hand, scenarios, inferencers, recipes on the reference world."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlmcheck.core.roles import CapabilityError, Generation
from vlmcheck.methods.chef import ChefSpec, ChefTask, Recipe, resolve_recipe, shipped_recipes
from vlmcheck.methods.chef import metrics as M
from vlmcheck.methods.chef.scenarios import load_scenario
from vlmcheck.methods.chef.recipe import extract_choice, verbalizer_labels
from vlmcheck.run.runner import RunOptions, run_task
from vlmcheck.world.make import make_world


def test_ece_equal_count_by_hand():
    # 12 items, 3 bins: sizes 4, 4, 4
    conf = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.9, 0.9, 0.9]
    corr = [0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1]
    out = M.ece_equal_count(conf, corr, n_bins=3)
    # bin1 conf .25 acc .25; bin2 conf .65 acc .75; bin3 conf .9 acc 1.0
    assert out["ece"] == pytest.approx((4 * 0 + 4 * 0.1 + 4 * 0.1) / 12)
    # 13 items in 10 bins: the first 3 bins get 2 items
    sizes = [b["n"] for b in M.ece_equal_count(np.linspace(0, 1, 13), [1] * 13)["bins"]]
    assert sizes == [2, 2, 2, 1, 1, 1, 1, 1, 1, 1]


def test_rrm_matches_the_papers_robustness_table():
    # ChEF Table 10: LLaVA ScienceQA 46.55 -> 39.12, random 35.80: RRM 30.88; MMBench 44.13 -> 33.16, 27.57: 33.76
    assert M.rrm(46.55, 39.12, 35.80) == pytest.approx(30.88, abs=0.01)
    assert M.rrm(44.13, 33.16, 27.57) == pytest.approx(33.76, abs=0.01)
    assert M.rrm(55.18, 41.89, 35.80) == pytest.approx(31.42, abs=0.01)  # InstructBLIP ScienceQA


def test_riam_mr_pope_random_by_hand():
    assert M.riam(0.5, [0.6, 0.7, 0.8], 0.25) == pytest.approx((0.7 - 0.5) / 0.25 * 50 + 50)
    assert M.match_ratio([0, 1, 2, 3], [0, 1, 3, 3]) == 0.75
    p = M.pope_metrics([1, 1, 0, 0, 1], [1, 0, 0, 1, 1])
    assert p["precision"] == pytest.approx(2 / 3) and p["recall"] == pytest.approx(2 / 3)
    assert p["accuracy"] == pytest.approx(3 / 5) and p["yes_ratio"] == pytest.approx(3 / 5)
    assert M.random_accuracy([4, 4, 2]) == pytest.approx((0.25 + 0.25 + 0.5) / 3)
    assert M.parse_judge_score("[Explanation]\nfine\n[Overall Score]\n7") == 7
    assert M.parse_judge_score("no score") is None


def test_extraction_and_verbalizers():
    opts = ["red", "blue", "green", "yellow"]
    assert extract_choice("B", opts, list("ABCD")) == 1
    assert extract_choice("The answer is (C).", opts, list("ABCD")) == 2
    assert extract_choice("It is yellow.", opts, list("ABCD")) == 3
    assert extract_choice("Maybe red or blue", opts, list("ABCD")) is None
    assert extract_choice("2. blue", opts, ["1", "2", "3", "4"]) == 1
    assert verbalizer_labels("unnatural", ["next"], 4) == ["D", "A", "B", "C"]


def _mmbench_tsv(path: Path) -> Path:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buf, "PNG")
    img = base64.b64encode(buf.getvalue()).decode()
    rows = ["index\tquestion\thint\tA\tB\tC\tD\tanswer\timage\tcategory",
            f"1\tWhat colour?\tnan\tblue\tred\tgreen\tyellow\tB\t{img}\tcolor",
            f"2\tHow many?\tnan\t1\t2\t3\t\tC\t{img}\tcount"]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_mmbench_circular_rotates_options(tmp_path):
    items = load_scenario("mmbench", _mmbench_tsv(tmp_path / "mmb.tsv"), circular=True)
    first = [it for it in items if it["meta"]["group"] == "1"]
    assert len(first) == 4 and len([it for it in items if it["meta"]["group"] == "2"]) == 3
    for it in first:
        assert it["options"][it["answer"]] == "red"  # the answer follows its option through every rotation
    assert [it["options"][0] for it in first] == ["blue", "red", "green", "yellow"]


def test_mmbench_official_circular_copies_are_rotations_not_questions(tmp_path):
    # The official dev TSV: question 7 and its shifted copies 1000007, 2000007 (index mod 1e6 = 7).
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buf, "PNG")
    img = base64.b64encode(buf.getvalue()).decode()
    rows = ["index\tquestion\thint\tA\tB\tC\tD\tanswer\timage\tcategory",
            f"7\tWhat colour?\tnan\tblue\tred\tgreen\t\tB\t{img}\tcolor",
            f"1000007\tWhat colour?\tnan\tred\tgreen\tblue\t\tA\t{img}\tcolor",
            f"2000007\tWhat colour?\tnan\tgreen\tblue\tred\t\tC\t{img}\tcolor",
            f"8\tHow many?\tnan\t1\t2\t\t\tA\t{img}\tcount"]
    (tmp_path / "dev.tsv").write_text("\n".join(rows) + "\n")
    vanilla = load_scenario("mmbench", tmp_path / "dev.tsv")
    assert [it["id"] for it in vanilla] == ["7", "8"]  # copies are not new questions
    circ = load_scenario("mmbench", tmp_path / "dev.tsv", circular=True)
    assert sorted((it["meta"]["group"], it["meta"]["rotation"]) for it in circ) == [
        ("7", 0), ("7", 1), ("7", 2), ("8", 0)]  # the file's copies are the rotations: none generated
    assert all(it["options"][it["answer"]] == "red" for it in circ if it["meta"]["group"] == "7")
    # in-context examples never include a rotation of the question being asked
    r = Recipe(name="m", scenario={"type": "mmbench", "options": {"circular": True}},
               instruction={"type": "ice", "ice": {"retriever": "fixed", "shots": [0, 2]}}, inferencer={"type": "ppl"})
    task = ChefTask(ChefSpec(vlm="ref:describer", recipe=r, data=str(tmp_path / "dev.tsv")))
    ex = asyncio.run(task._examples(next(it for it in task.items if it["id"] == "7"), 2, None))
    assert [e["meta"]["group"] for e in ex] == ["8"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("chefworld")
    make_world(out, n=24, seed=5)
    return out


def _run(world, tmp_path, recipe, vlm="ref:describer", **kw):
    r = resolve_recipe(recipe)
    r.scenario.type = "world"
    return run_task(ChefTask(ChefSpec(vlm=vlm, recipe=r, data=str(world)), **kw), tmp_path,
                    RunOptions(progress=False)).results["metrics"]


@pytest.mark.slow
def test_recipes_on_the_world(world, tmp_path):
    clean = _run(world, tmp_path / "a", "calibration")
    noisy = _run(world, tmp_path / "b", "calibration", vlm="ref:describer?level=0.3")
    assert clean["accuracy"] == 1.0 and noisy["accuracy"] < clean["accuracy"]
    assert noisy["ece"] > clean["ece"]  # the knobs make confident mistakes
    assert 0 < clean["ece"] < 0.2 and len(clean["reliability"]) == 10
    icl = _run(world, tmp_path / "c", "icl")
    assert set(icl["settings"]) == {"shots=0", "shots=1", "shots=2", "shots=3"}
    assert icl["riam"] == pytest.approx(50.0)  # the describer ignores examples: no change from 0-shot
    rob = _run(world, tmp_path / "d", "robustness", vlm="ref:describer?level=0.1")
    assert set(rob["rrm"]) == {"image", "text", "both"}
    assert rob["settings"]["corrupt:image"]["accuracy"] <= rob["settings"]["original"]["accuracy"]
    rec = json.loads((tmp_path / "d" / "samples.jsonl").read_text().splitlines()[0])["result"]
    chain = rec["settings"]["corrupt:both"]
    assert [s["category"] for s in chain["image_chain"]][:4] == ["noise", "blur", "weather", "digital"]
    # the recipe's default rewriter (ref:rewriter) applied the sentence-level method of every item's chain,
    # or said why not
    sentence = [next(s for s in json.loads(x)["result"]["settings"]["corrupt:text"]["text_chain"]
                     if s["category"] == "sentence") for x in (tmp_path / "d" / "samples.jsonl").read_text()
                .splitlines()]
    assert all("from" in s or "unchanged" in s.get("skipped", "") for s in sentence)
    assert sum("from" in s for s in sentence) > len(sentence) // 2
    ins = _run(world, tmp_path / "e", "instruction-following")
    assert set(ins["match_ratio"]) == {"natural", "neutral", "unnatural"}


@pytest.mark.slow
def test_robustness_corrupts_each_items_image_once(world, tmp_path, monkeypatch):
    """The image and both settings show one corrupted image per item, made once: the item's chain applied to
    its image (what the stored chain regenerates)."""
    from PIL import Image

    from vlmcheck.perturb import compose

    made = []
    real = compose.apply_chain
    monkeypatch.setattr(compose, "apply_chain", lambda img, chain: made.append(chain) or real(img, chain))
    _run(world, tmp_path, "robustness", vlm="ref:describer?level=0.1")
    recs = [json.loads(x)["result"] for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert len(made) == len(recs) == 24
    for rec in recs:
        image, both = rec["settings"]["corrupt:image"], rec["settings"]["corrupt:both"]
        assert image["image"] == both["image"] and image["image_chain"] == both["image_chain"]
    rec = recs[0]
    again = real(Image.open(rec["image"]).convert("RGB"), rec["settings"]["corrupt:image"]["image_chain"])
    assert Image.open(tmp_path / rec["settings"]["corrupt:image"]["image"]).tobytes() == again.tobytes()


@pytest.mark.slow
def test_hallucination_recipe_on_world_pope(world, tmp_path):
    from vlmcheck.methods.pope import build_pope, load_annotations

    cases = build_pope(load_annotations(world / "objects.jsonl"), "adversarial", n_images=24, per_image=2)
    path = world / "pope.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    r = resolve_recipe("hallucination")
    m = run_task(ChefTask(ChefSpec(vlm="ref:describer?yes_bias=0.5", recipe=r, data=str(path))), tmp_path,
                 RunOptions(progress=False)).results["metrics"]
    assert m["pope"]["recall"] == 1.0 and m["pope"]["yes_ratio"] > 0.5 and m["pope"]["precision"] < 1.0


class Judge:
    model_id = "test:judge"

    def __init__(self):
        from vlmcheck.core.roles import Capabilities

        self.capabilities = Capabilities()
        self.seen = []

    async def generate(self, messages, config):
        self.seen.append(messages)
        return Generation(text=f"[Explanation]\nok\n[Overall Score]\n{6 + config.seed % 3}", finish_reason="stop")


@pytest.mark.slow  # ~3 s of CPU
def test_language_judge_on_correct_items_only(world, tmp_path):
    judge = Judge()
    r = resolve_recipe("language")
    r.scenario.type = "world"
    m = run_task(ChefTask(ChefSpec(vlm="ref:describer?level=0.3", recipe=r, data=str(world)), judge=judge),
                 tmp_path, RunOptions(progress=False)).results["metrics"]
    lang = m["language"]
    # five sampled judgements per item (ChEF E.4, F): seeds 0..4 -> 6, 7, 8, 6, 7, mean 6.8
    assert lang["score"] == pytest.approx(6.8)
    assert judge.seen and len(judge.seen) % 5 == 0  # five calls for every judged item
    assert lang["skipped"].get("conclusion incorrect (only correct items are judged)", 0) > 0
    assert judge.seen[0][0].role == "system" and "impartial judge" in judge.seen[0][0].text
    none = run_task(ChefTask(ChefSpec(vlm="ref:describer", recipe=r, data=str(world))), tmp_path / "x",
                    RunOptions(progress=False)).results["metrics"]["language"]
    assert none["score"] is None and "no judge" in next(iter(none["skipped"]))


def test_ppl_needs_the_capability(world):
    with pytest.raises(CapabilityError, match="loglikelihood"):
        ChefTask(ChefSpec(vlm="ref:photo", recipe=resolve_recipe("world-accuracy"), data=str(world)))


@pytest.mark.slow
def test_ppl_on_tiny_hf_model_matches_direct_logits(tmp_path):
    pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).parent))
    from hf_tiny import build_tiny_llava

    from vlmcheck.core.messages import Message
    from vlmcheck.core.spec import load_model

    model = load_model(f"hf:{build_tiny_llava(tmp_path / 'llava')}", "vlm")
    Image.new("RGB", (32, 32), "red").save(tmp_path / "r.png")
    data = tmp_path / "mc.jsonl"
    data.write_text(json.dumps({"image": "r.png", "question": "What colour?", "options": ["red", "blue", "green"],
                                "answer": "A"}) + "\n")
    r = Recipe(name="t", scenario={"type": "mc"}, inferencer={"type": "ppl"})
    res = run_task(ChefTask(ChefSpec(vlm=model.model_id, recipe=r, data=str(data)), vlm=model), tmp_path / "run",
                   RunOptions(progress=False))
    rec = json.loads((tmp_path / "run" / "samples.jsonl").read_text())["result"]["settings"]["standard"]
    msgs = [Message.user(Image.open(tmp_path / "r.png"),
                         "What colour?\nOptions:\nA. red\nB. blue\nC. green\nAnswer with the option's label.")]
    # ChEF B.3/D.2: for multiple choice the answer pool is the labels; the authors score "The answer is (A"
    lls = asyncio.run(model.loglikelihood(msgs, [f"The answer is ({L}" for L in "ABC"]))
    s = np.array([ll.sum / ll.n_tokens for ll in lls])
    p = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    assert rec["probs"] == pytest.approx(list(p), abs=1e-5)
    assert rec["pred"] == int(np.argmax(s))
    assert res.results["metrics"]["n"] == 1


def test_shipped_recipes_validate():
    names = set(shipped_recipes())
    assert {"calibration", "icl", "instruction-following", "language", "robustness", "hallucination", "cifar10",
            "flickr30k", "scienceqa", "mmbench", "mme", "seedbench", "world-accuracy"} <= names
    for name in names:
        assert resolve_recipe(name).name == name


class Extractor:
    model_id = "test:extractor"

    def __init__(self):
        from vlmcheck.core.roles import Capabilities

        self.capabilities = Capabilities()

    async def generate(self, messages, config):
        text = messages[-1].text
        answer = text.split("Answer: ", 1)[1]
        options = [line[3:] for line in text.split("Options:\n", 1)[1].split("\nAnswer:")[0].splitlines()]
        hit = chr(64 + len(options)) if "latter" in answer else "none"  # a tiny 'LLM' that reads 'the latter'
        return Generation(text=hit, finish_reason="stop")


class Vague:
    """Answers in words only an LLM extractor can map ("the latter")."""

    model_id = "test:vague"

    def __init__(self):
        from vlmcheck.core.roles import Capabilities

        self.capabilities = Capabilities()

    async def generate(self, messages, config):
        return Generation(text="Between green and red, the latter.", finish_reason="stop")


def test_llm_extractor_second_step(world, tmp_path):
    data = tmp_path / "mc.jsonl"
    Image.new("RGB", (8, 8)).save(tmp_path / "x.png")
    data.write_text("".join(json.dumps({"image": "x.png", "question": "Colour?", "options": ["green", "red"],
                                        "answer": "B"}) + "\n" for _ in range(3)))
    r = Recipe(name="t", scenario={"type": "mc"}, inferencer={"type": "direct"})
    no_llm = run_task(ChefTask(ChefSpec(vlm="test:vague", recipe=r, data=str(data)), vlm=Vague()), tmp_path / "a",
                      RunOptions(progress=False)).results["metrics"]["settings"]["standard"]
    assert no_llm["match_ratio"] == 0.0
    task = ChefTask(ChefSpec(vlm="test:vague", recipe=r, data=str(data)), vlm=Vague())
    task.extractor = Extractor()
    with_llm = run_task(task, tmp_path / "b", RunOptions(progress=False)).results["metrics"]["settings"]["standard"]
    assert with_llm["match_ratio"] == 1.0 and with_llm["match_ratio_rule"] == 0.0 and with_llm["accuracy"] == 1.0


def test_ppl_through_an_openai_compatible_server_with_prompt_logprobs(fake_server, tmp_path):
    """vLLM-style prompt_logprobs: continuation log-probabilities through the chat API."""
    from vlmcheck.core.spec import load_model
    from vlmcheck.testing.fake_openai import word_logprob

    Image.new("RGB", (8, 8), "red").save(tmp_path / "r.png")
    data = tmp_path / "mc.jsonl"
    data.write_text(json.dumps({"image": "r.png", "question": "Colour?", "options": ["red", "blue", "light green"],
                                "answer": "A"}) + "\n")
    r = Recipe(name="t", scenario={"type": "mc"}, inferencer={"type": "ppl"})
    with pytest.raises(CapabilityError, match="loglikelihood"):
        ChefTask(ChefSpec(vlm=f"openai:fake@{fake_server.base_url}", recipe=r, data=str(data)))
    spec = f"openai:fake@{fake_server.base_url}?prompt_logprobs=1"
    run_task(ChefTask(ChefSpec(vlm=spec, recipe=r, data=str(data)), vlm=load_model(spec, "vlm")), tmp_path / "run",
             RunOptions(progress=False))
    rec = json.loads((tmp_path / "run" / "samples.jsonl").read_text())["result"]["settings"]["standard"]
    conts = [f"The answer is ({L}" for L in "ABC"]  # the label pool (ChEF B.3, D.2)
    means = np.array([np.mean([word_logprob(w) for w in c.split()]) for c in conts])
    p = np.exp(means - means.max()) / np.exp(means - means.max()).sum()
    assert rec["probs"] == pytest.approx(list(p), abs=1e-9)
    sent = [q for q in fake_server.requests()]
    assert len(sent) == 4  # one base request and one per option


def test_scenario_from_a_hugging_face_dataset(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    ds = datasets.Dataset.from_dict(
        {"image": [Image.new("RGB", (8, 8), "red")] * 2, "question": ["Colour?", "Shape?"],
         "choices": [["red", "blue"], ["star", "circle"]], "answer": [0, 1]},
        features=datasets.Features({"image": datasets.Image(), "question": datasets.Value("string"),
                                    "choices": datasets.Sequence(datasets.Value("string")),
                                    "answer": datasets.Value("int64")}))
    ds.save_to_disk(str(tmp_path / "sqa"))
    items = load_scenario("scienceqa", f"hfds:{tmp_path / 'sqa'}")
    assert [(it["question"], it["options"], it["answer"]) for it in items] == [
        ("Colour?", ["red", "blue"], 0), ("Shape?", ["star", "circle"], 1)]
    assert Path(items[0]["image"]).is_file()


def test_multiple_choice_ppl_scores_labels_only_and_classes_by_name(tmp_path):
    # ChEF B.3/D.2: the multiple-choice pool is {A, B, C, ...} ("The answer is (A"); a classification pool is
    # the class names ("The answer is cat"); POPE is the bare question with "Yes" / "No" (C.6).
    seen = []

    class Scorer:
        model_id = "test:scorer"

        def __init__(self):
            from vlmcheck.core.roles import Capabilities

            self.capabilities = Capabilities(loglikelihood=True)

        async def loglikelihood(self, messages, continuations):
            from vlmcheck.core.roles import Loglikelihood

            seen.append((messages[-1].content[-1].text, list(continuations)))
            return [Loglikelihood(sum=-float(i + 1), n_tokens=1) for i in range(len(continuations))]

    Image.new("RGB", (8, 8), "red").save(tmp_path / "r.png")
    (tmp_path / "mc.jsonl").write_text(json.dumps({"image": "r.png", "question": "Colour?",
                                                   "options": ["red", "blue"], "answer": "A"}) + "\n")
    (tmp_path / "cls.jsonl").write_text("".join(json.dumps({"image": "r.png", "label": c}) + "\n"
                                                for c in ("cat", "dog")))
    (tmp_path / "pope.jsonl").write_text(json.dumps({"image": "r.png", "question": "Is there a cat in the image?",
                                                     "answer": "no"}) + "\n")
    for kind, data in (("mc", "mc.jsonl"), ("classification", "cls.jsonl"), ("pope", "pope.jsonl")):
        r = Recipe(name=kind, scenario={"type": kind}, inferencer={"type": "ppl"})
        vlm = Scorer()
        run_task(ChefTask(ChefSpec(vlm=vlm.model_id, recipe=r, data=str(tmp_path / data)), vlm=vlm),
                 tmp_path / kind, RunOptions(progress=False, report=False))
    mc, cls, pope = seen[0], seen[1], seen[-1]
    assert mc[1] == ["The answer is (A", "The answer is (B"]
    # a class-name pool as LAMM's ChEF asks CIFAR-10 (query.py / template.py, entry 0): "The photo of the " alone,
    # no option list, no label instruction, each class in "The object in the image is {option}"
    assert cls == ("The photo of the ", ["The object in the image is cat", "The object in the image is dog"])
    assert pope == ("Is there a cat in the image?", ["Yes", "No"])  # no options listing, no label instruction
    # Flickr30k's caption retrieval: "Generate caption of this image:" and 'The caption for this image is " {c}'
    seen.clear()
    (tmp_path / "ret.jsonl").write_text("".join(json.dumps({"image": "r.png", "caption": c}) + "\n"
                                                for c in ("a red square", "a blue dot", "a green line")))
    vlm = Scorer()
    r = Recipe(name="ret", scenario={"type": "retrieval", "options": {"k": 3}}, inferencer={"type": "ppl"})
    run_task(ChefTask(ChefSpec(vlm=vlm.model_id, recipe=r, data=str(tmp_path / "ret.jsonl")), vlm=vlm),
             tmp_path / "ret", RunOptions(progress=False, report=False))
    prompt, conts = seen[0]
    assert prompt == "Generate caption of this image:" and len(conts) == 3
    assert all(c.startswith('The caption for this image is " ') for c in conts)


def test_ten_options_run_end_to_end(tmp_path):
    # CIFAR-10 has ten classes: labels run past H
    from vlmcheck.core.roles import Capabilities, Loglikelihood

    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]

    class Picky:
        model_id = "test:picky"
        capabilities = Capabilities(loglikelihood=True)

        async def loglikelihood(self, messages, continuations):
            return [Loglikelihood(sum=0.0 if c.endswith("truck") else -5.0, n_tokens=1) for c in continuations]

    for c in classes:  # an image per item: ten units, so the interval is Wilson's on ten answers
        Image.new("RGB", (8, 8), "red").save(tmp_path / f"{c}.png")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": c, "image": f"{c}.png", "label": c}) + "\n"
                                              for c in classes))
    r = resolve_recipe("cifar10")
    res = run_task(ChefTask(ChefSpec(vlm="test:picky", recipe=r, data=str(tmp_path / "c.jsonl")), vlm=Picky()),
                   tmp_path / "run", RunOptions(progress=False, report=False))
    assert res.results["counts"] == {**res.results["counts"], "done": 10, "failed": 0}
    rows = [json.loads(x)["result"]["settings"]["standard"] for x in (tmp_path / "run" / "samples.jsonl").read_text()
            .splitlines()]
    assert [r["labels"][-1] for r in rows] == ["J"] * 10 and sum(r["correct"] for r in rows) == 1  # only "truck"
    assert res.results["metrics"]["settings"]["standard"]["accuracy"] == pytest.approx(0.1)


def test_ten_images_one_answer_each_get_wilsons_interval(tmp_path):
    """Ten items on ten images (ten units of one answer): no clustering, so the accuracy's interval is Wilson's
    on 1 of 10, by hand with z = 1.96."""
    test_ten_options_run_end_to_end(tmp_path)
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    # the accuracy's interval: Wilson on 1 of 10 (ten images, one answer each: no clustering), by hand, z = 1.96
    import math

    z, n, p = 1.959963984540054, 10, 0.1
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n
                                                                                          + z * z / (4 * n * n))
    st = res["metrics"]["settings"]["standard"]
    assert st["accuracy_ci95"] == pytest.approx([centre - half, centre + half])
    assert st["interval"]["n"] == 10 and st["interval"]["design_effect"] == 1.0


def test_flickr30k_negatives_are_the_most_similar_captions(tmp_path, monkeypatch):
    # ChEF D.2: retrieval negatives are the top-k by sentence similarity.  With embeddings fixed by hand,
    # caption 0's three negatives are 1, 2, 3 (inner products 0.9, 0.8, 0.7), never 4 (0.1).
    import vlmcheck.methods.cast as cast

    vecs = {"a dog runs": [1.0, 0.0], "a dog walks": [0.9, 0.436], "a puppy runs": [0.8, 0.6],
            "a cat runs": [0.7, 0.714], "a red car": [0.1, 0.995]}
    monkeypatch.setattr(cast, "sentence_embeddings", lambda texts: np.array([vecs[t] for t in texts]))
    Image.new("RGB", (8, 8)).save(tmp_path / "i.png")
    (tmp_path / "f.jsonl").write_text("".join(json.dumps({"id": str(i), "image": "i.png", "caption": c}) + "\n"
                                              for i, c in enumerate(vecs)))
    items = load_scenario("retrieval", tmp_path / "f.jsonl", negatives="similar", k=4)
    assert sorted(items[0]["options"]) == sorted(["a dog runs", "a dog walks", "a puppy runs", "a cat runs"])
    assert items[0]["options"][items[0]["answer"]] == "a dog runs"
    assert resolve_recipe("flickr30k").scenario.options["negatives"] == "similar"


def _chef_run(folder, metrics, scenario="scienceqa", data="sqa.jsonl", seed=0, vlm="openai:m@http://a/v1"):
    folder.mkdir()
    spec = {"seed": seed, "task_spec": {"vlm": vlm, "recipe": {"scenario": {"type": scenario}}, "data": data,
                                        "seed": seed}}
    (folder / "results.json").write_text(json.dumps({"task": "chef", "spec": spec, "metrics": metrics}))
    return folder


def test_aggregate_gives_the_papers_weighted_avg_overall_and_seed_deviations(tmp_path):
    from vlmcheck.methods.chef.aggregate import aggregate

    rob = lambda n, acc, crp, rrm: {"desideratum": "robustness", "recipe": "robustness", "n": n,  # noqa: E731
                                    "settings": {"original": {"accuracy": acc}, "corrupt:both": {"accuracy": crp}},
                                    "rrm": {"both": rrm}}
    a = aggregate([_chef_run(tmp_path / "r1", rob(10, 0.8, 0.5, 40.0)),
                   _chef_run(tmp_path / "r2", rob(30, 0.6, 0.4, 30.0), "mmbench", "mmb.tsv")])
    # by hand, weighted by items: acc (10*0.8 + 30*0.6)/40, acc_crp (10*0.5 + 30*0.4)/40, RRM (400 + 900)/40
    assert a["avg"]["acc"] == pytest.approx(0.65) and a["avg"]["acc_crp"] == pytest.approx(0.425)
    assert a["avg"]["rrm"] == pytest.approx(32.5) and a["avg"]["n"] == 40
    assert [r["scenario"] for r in a["rows"]] == ["scienceqa:sqa", "mmbench:mmb"]
    cal = lambda n, ece: {"desideratum": "calibration", "recipe": "calibration", "n": n, "ece": ece,  # noqa: E731
                          "accuracy": 0.5, "settings": {}}
    c = aggregate([_chef_run(tmp_path / "c1", cal(10, 0.1)), _chef_run(tmp_path / "c2", cal(30, 0.3), "mmbench")])
    assert c["overall"] == pytest.approx(1 - (10 * 0.1 + 30 * 0.3) / 40)  # Table 8: 1 - weighted ECE = 0.75
    icl = lambda riam: {"desideratum": "icl", "recipe": "icl", "n": 20, "riam": riam, "settings": {}}  # noqa: E731
    s = aggregate([_chef_run(tmp_path / f"s{i}", icl(v), seed=i) for i, v in enumerate((50.0, 53.0, 56.0))])
    (sv,) = s["seed_variance"]
    assert sv["mean"] == pytest.approx(53.0)  # section F: |x_seed - mean| per seed
    assert sv["deviation"] == pytest.approx({"0": 3.0, "1": 0.0, "2": 3.0})
    with pytest.raises(Exception, match="different desiderata"):
        aggregate([tmp_path / "r1", tmp_path / "c1"])
    other = _chef_run(tmp_path / "o", rob(10, 0.8, 0.5, 40.0), vlm="openai:other")
    with pytest.raises(Exception, match="different models"):
        aggregate([tmp_path / "r1", other])
    # the same model at another endpoint is the same model
    moved = _chef_run(tmp_path / "mv", rob(10, 0.8, 0.5, 40.0), vlm="openai:m@http://b/v1?concurrency=4")
    assert aggregate([tmp_path / "r1", moved])["model"] == "openai:m"


def test_the_pope_recipe_reads_answers_with_popes_rule():
    from vlmcheck.methods.chef import resolve_recipe

    assert resolve_recipe("hallucination").metric.parser == "pope"
    assert resolve_recipe("world-accuracy").metric.parser == "lenient"
