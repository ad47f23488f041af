"""ChEF's inferencers (supplementary B.3) as components, chosen per run: each one's choice computed by hand from
the paper's definition on constructed likelihoods and answers; the answers the parser could not read; the refusal
that names every way forward; ``--blind`` on every shipped recipe that allows it; every desideratum through a
generation inferencer offline."""

from __future__ import annotations

import json
import math

import pytest
from PIL import Image

from vlmcheck.core.roles import Capabilities, CapabilityError, Generation, Loglikelihood
from vlmcheck.methods.chef import ChefSpec, ChefTask, Recipe, resolve_recipe, shipped_recipes, usable_inferencers
from vlmcheck.methods.chef.inferencers import likelihood_refusal, ppl_choice
from vlmcheck.run.runner import RunOptions, run_task
from vlmcheck.world.make import make_world


class Scripted:
    """A VLM whose answers and likelihoods are set by the test; records every request."""

    model_id = "test:scripted"

    def __init__(self, answer=None, scores=None, loglikelihood=True):
        self.capabilities = Capabilities(loglikelihood=loglikelihood)
        self.answer, self.scores = answer, scores or {}
        self.generated, self.scored = [], []

    async def generate(self, messages, config):
        self.generated.append([(m.role, m.text) for m in messages])
        return Generation(text=self.answer(messages), finish_reason="stop")

    async def loglikelihood(self, messages, continuations):
        self.scored.append(([(m.role, m.text) for m in messages], list(continuations)))
        return [Loglikelihood(sum=self.scores[c][0], n_tokens=self.scores[c][1]) for c in continuations]


def _mc(tmp_path, rows):
    Image.new("RGB", (8, 8), "red").save(tmp_path / "r.png")
    path = tmp_path / "mc.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "image": "r.png", **r}) + "\n" for i, r in enumerate(rows)))
    return path


def _run(tmp_path, vlm, data, inferencer, recipe=None, name="run"):
    r = recipe or Recipe(name="t", scenario={"type": "mc"})
    task = ChefTask(ChefSpec(vlm=vlm.model_id, recipe=r, data=str(data), inferencer=inferencer), vlm=vlm)
    res = run_task(task, tmp_path / name, RunOptions(progress=False, report=False)).results
    rows = [json.loads(x)["result"] for x in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
    return res, rows


def _softmax(scores):
    e = [math.exp(s) for s in scores]
    return [x / sum(e) for x in e]


def test_ppl_choice_by_hand():
    # B.3 (3): the most likely member; its confidence the largest softmax probability of the scores
    out = ppl_choice([-1.0, -2.0, -0.5])
    e = [math.exp(-1.0), math.exp(-2.0), math.exp(-0.5)]
    assert out["pred"] == 2
    assert out["probs"] == pytest.approx([x / sum(e) for x in e])
    assert out["confidence"] == pytest.approx(math.exp(-0.5) / sum(e))
    assert ppl_choice([-1.0, -1.0])["pred"] == 0 and ppl_choice([-1.0, -1.0])["confidence"] == pytest.approx(0.5)


# "(A": 3 tokens summing to -6 (mean -2); "(B": 4 tokens, -2 (mean -0.5); "(C": 1 token, -1.5.  The sum would pick
# C; the paper's length-normalised score (the mean) picks B.
SCORES = {"The answer is (A": (-6.0, 3), "The answer is (B": (-2.0, 4), "The answer is (C": (-1.5, 1)}
MEANS = [-2.0, -0.5, -1.5]
QUESTION = "Which colour?\nOptions:\nA. red\nB. blue\nC. green"


def test_ppl_picks_the_highest_mean_log_likelihood(tmp_path):
    data = _mc(tmp_path, [{"question": "Which colour?", "options": ["red", "blue", "green"], "answer": "B"}])
    vlm = Scripted(scores=SCORES)
    res, (rec,) = _run(tmp_path, vlm, data, "ppl")
    st = rec["settings"]["standard"]
    assert st["pred"] == 1 and st["correct"] is True
    assert st["probs"] == pytest.approx(_softmax(MEANS)) and st["confidence"] == pytest.approx(_softmax(MEANS)[1])
    assert vlm.scored == [([("user", QUESTION + "\nAnswer with the option's label.")], list(SCORES))]
    assert vlm.generated == []  # PPL generates nothing
    assert res["metrics"]["inferencer"] == "ppl" and res["spec"]["task_spec"]["inferencer"] == "ppl"


def test_cot_ppl_scores_the_pool_after_the_rationale(tmp_path):
    data = _mc(tmp_path, [{"question": "Which colour?", "options": ["red", "blue", "green"], "answer": "C"}])
    vlm = Scripted(answer=lambda m: "It looks blue.", scores=SCORES)
    res, (rec,) = _run(tmp_path, vlm, data, "cot_ppl")
    st = rec["settings"]["standard"]
    # B.3 (4), Table 7: CoT in the first turn, PPL in the second
    assert vlm.generated == [[("user", QUESTION + "\nLet's think step by step.")]]
    assert vlm.scored[0][0] == [("user", QUESTION + "\nLet's think step by step."), ("assistant", "It looks blue."),
                                ("user", QUESTION + "\nTherefore, among the options, the answer is")]
    assert st["rationale"] == "It looks blue." and st["pred"] == 1 and st["correct"] is False
    assert st["confidence"] == pytest.approx(_softmax(MEANS)[1])


def _direct_run(tmp_path):
    rows = [{"question": f"Q{i}?", "options": ["red", "blue", "green"], "answer": a}
            for i, a in enumerate(["B", "C", "B", "A", "A"])]
    said = {"Q0?": "The answer is (B).", "Q1?": "A", "Q2?": "It is blue", "Q3?": "I am not sure.", "Q4?": ""}
    data = _mc(tmp_path, rows)
    vlm = Scripted(answer=lambda m: said[m[-1].text.split("\n")[0]])
    res, recs = _run(tmp_path, vlm, data, "direct")
    return vlm, res, recs


def test_direct_reads_each_answer_and_counts_the_unread(tmp_path):
    vlm, res, recs = _direct_run(tmp_path)
    got = {r["question"]: r["settings"]["standard"] for r in recs}
    # B.3 (1): one greedy answer, read by its label or its option's text
    assert [got[f"Q{i}?"]["pred"] for i in range(5)] == [1, 0, 1, None, None]
    assert all(len(g) == 1 and g[0][1].endswith("\nAnswer with the option's label.") for g in vlm.generated)
    st = res["metrics"]["settings"]["standard"]
    # right: Q0 (B) and Q2 (blue = B); Q1 answered A for C; Q3, Q4 unread count as wrong
    assert st["accuracy"] == pytest.approx(2 / 5)
    assert st["unread"] == 2 and st["unread_share"] == pytest.approx(2 / 5)
    assert "could not read" in res["metrics"]["unread_warning"] and "standard 40%" in res["metrics"]["unread_warning"]
    assert res["metrics"]["answers_generated"] is True
    # the recipe's default was PPL: the run says what it gave up
    assert "direct inferencer instead of the recipe's ppl" in res["metrics"]["inferencer_note"]


@pytest.mark.slow
def test_the_report_shows_the_inferencer_and_the_unread_share(tmp_path):
    """The report shows what the terminal does: the inferencer, the unread share per setting (2 of the 5 answers
    of the direct run above), the inferencer's note and the unread warning."""
    _direct_run(tmp_path)
    from vlmcheck.report.html import build_report

    page = build_report([tmp_path / "run"], tmp_path / "report.html").read_text()
    table = page.split("<table class=\"chef-settings\">")[1].split("</table>")[0]
    assert "(direct inferencer)" in page and "<th>unread answers</th>" in table
    assert '<td>standard</td><td class="num">0.400</td><td class="num">0.400</td>' in table
    assert "could not read over 10%" in page and "instead of the recipe&#39;s ppl" in page


def test_cot_answers_after_its_rationale(tmp_path):
    data = _mc(tmp_path, [{"question": "Which colour?", "options": ["red", "blue", "green"], "answer": "A"}])
    vlm = Scripted(answer=lambda m: "Red it is, (A)." if m[-1].role == "user" and "Therefore" in m[-1].text
                   else "The square is red.")
    res, (rec,) = _run(tmp_path, vlm, data, "cot")
    st = rec["settings"]["standard"]
    assert vlm.generated[1] == [("user", QUESTION + "\nLet's think step by step."),
                                ("assistant", "The square is red."),
                                ("user", QUESTION + "\nTherefore, among the options, the answer is")]
    assert st["rationale"] == "The square is red." and st["pred"] == 0 and st["correct"] is True
    assert st["confidence"] is None and res["metrics"]["settings"]["standard"]["unread"] == 0
    assert "unread_warning" not in res["metrics"]


def test_yes_no_answers_keep_popes_default_and_count_the_unread(tmp_path):
    Image.new("RGB", (8, 8), "red").save(tmp_path / "r.png")
    truth = ["yes", "no", "no", "no"]
    said = ["Yes, there is.", "No.", "There might be a cat", "I see not a cat"]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"id": f"p{i}", "image": "r.png", "question": f"Is {i}?",
                                                          "answer": a}) + "\n" for i, a in enumerate(truth)))
    vlm = Scripted(answer=lambda m: said[int(m[-1].text.split()[1].rstrip("?"))])
    res, recs = _run(tmp_path, vlm, tmp_path / "p.jsonl", "direct", recipe=resolve_recipe("hallucination"))
    m = res["metrics"]
    # POPE's rule: no "no"/"not" -> yes, so "There might be a cat" is yes (wrong: the truth is no); it names
    # neither yes nor no: 1 unread of 4, reported beside POPE's accuracy of 3 / 4
    assert m["pope"]["accuracy"] == pytest.approx(3 / 4)
    assert m["settings"]["standard"]["unread"] == 1 and m["settings"]["standard"]["unread_share"] == 0.25
    assert "POPE's default, yes" in m["unread_warning"]


def test_the_summary_reads_settings_by_name_not_position():
    """A record read back from samples.jsonl lists its settings in sorted order ("blind" before "standard",
    "corrupt:*" before "original"): the summary must read the unmanipulated setting by name (issue 47)."""
    from vlmcheck.methods.chef.summary import ChefSummary

    def rec(i, right, blind_right):
        st = lambda ok: {"correct": ok, "pred": 0 if ok else 1, "answer": 0, "extracted": True}  # noqa: E731
        return {"result": {"id": f"q{i}", "image": f"i{i}.png", "n_options": 2, "meta": {},
                           "settings": {"blind": {**st(blind_right), "blind": "no image"}, "standard": st(right)}}}

    fold = ChefSummary(resolve_recipe("world-accuracy"), None, 0)
    for i, (a, b) in enumerate([(True, False), (True, True), (False, False), (True, False)]):
        fold.add(rec(i, a, b))
    m = fold.result()
    # sighted: 3 of 4 right; blind: 1 of 4
    assert list(m["settings"]) == ["standard"] and m["headline"]["value"] == pytest.approx(3 / 4)
    assert m["blind"]["sighted_setting"] == "standard" and m["blind"]["accuracy"] == pytest.approx(1 / 4)


def test_the_refusal_names_every_way_forward(tmp_path):
    data = _mc(tmp_path, [{"question": "Q?", "options": ["a", "b"], "answer": 0}])
    with pytest.raises(CapabilityError) as e:
        ChefTask(ChefSpec(vlm="test:scripted", recipe=resolve_recipe("calibration"), data=str(data)),
                 vlm=Scripted(loglikelihood=False))
    msg = str(e.value)
    assert "\n" not in msg and msg.count(". ") == 0 and msg.endswith(".")  # one sentence
    for way in ("?prompt_logprobs=1", "--inferencer cot", "--inferencer direct", "no ECE", "a local hf: model"):
        assert way in msg, way
    # a turn scenario has no generation inferencer to offer
    turns = likelihood_refusal(resolve_recipe("voc2012"), "multiturn_ppl", "m")
    assert "--inferencer" not in turns and "?prompt_logprobs=1" in turns and "hf:" in turns
    # the same model runs the recipe through a generation inferencer
    task = ChefTask(ChefSpec(vlm="test:scripted", recipe=resolve_recipe("calibration"), data=str(data),
                             inferencer="direct"), vlm=Scripted(answer=lambda m: "A", loglikelihood=False))
    assert task.inferencer.name == "direct"


def test_each_recipe_declares_its_default_and_allowed_inferencers():
    for name, path in shipped_recipes().items():
        r = resolve_recipe(name)
        assert r.inferencer.allowed, f"{name} declares no allowed inferencers"
        assert r.inferencer.type == r.inferencer.allowed[0] and set(usable_inferencers(r)) == set(r.inferencer.allowed)
    with pytest.raises(ValueError, match="PPL turns"):
        ChefSpec(vlm="x", recipe=resolve_recipe("voc2012"), inferencer="direct")
    with pytest.raises(ValueError, match="chain of thought"):
        ChefSpec(vlm="x", recipe=resolve_recipe("language"), inferencer="direct")
    with pytest.raises(ValueError, match="allows ppl, cot_ppl"):
        ChefSpec(vlm="x", recipe=Recipe(name="r", scenario={"type": "mc"},
                                        inferencer={"type": "ppl", "allowed": ["ppl", "cot_ppl"]}), inferencer="cot")
    with pytest.raises(ValueError, match="not among the allowed"):
        Recipe(name="r", scenario={"type": "mc"}, inferencer={"type": "cot", "allowed": ["ppl"]})
    # a spec recorded before the field existed reads back as the recipe's default (resume keeps working)
    old = ChefSpec(vlm="x", recipe=resolve_recipe("calibration")).model_dump()
    del old["inferencer"]
    assert ChefSpec.model_validate(old).inferencer == "cot_ppl"


def test_the_cli_refuses_an_inferencer_in_one_sentence(tmp_path):
    from typer.testing import CliRunner

    from vlmcheck.cli import app

    for name, said in (("foo", "no inferencer 'foo'; ChEF's are direct, cot, ppl, cot_ppl, multiturn_ppl"),
                       ("cot", "inferencer 'cot' is refused: scenario 'detection' is asked in PPL turns")):
        out = CliRunner().invoke(app, ["chef", "run", "--recipe", "voc2012", "--vlm", "ref:describer", "--data",
                                       str(tmp_path), "--out", str(tmp_path / "r"), "--inferencer", name])
        assert out.exit_code == 2 and said in " ".join(out.output.split()) and "Traceback" not in out.output
        assert not (tmp_path / "r").exists()


def test_a_sweep_entry_picks_the_inferencer(tmp_path):
    from vlmcheck.sweep import load_sweep, plan

    (tmp_path / "s.yaml").write_text("out: o\nmodels: [ref:describer]\nmethods:\n"
                                     "  - {method: chef, recipe: world-accuracy, data: w, inferencer: direct}\n")
    ((_, _, spec),) = plan(load_sweep(tmp_path / "s.yaml"), tmp_path)
    assert ChefSpec.model_validate(spec).inferencer == "direct"
    (tmp_path / "bad.yaml").write_text("out: o\nmodels: [ref:describer]\nmethods:\n"
                                       "  - {method: chef, recipe: voc2012, data: w, inferencer: cot}\n")
    with pytest.raises(ValueError, match="PPL turns"):
        plan(load_sweep(tmp_path / "bad.yaml"), tmp_path)


# ----------------------------------------------------------------------------- end to end on the reference world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("infworld")
    make_world(out, n=8, seed=11)
    from vlmcheck.methods.pope import build_pope, load_annotations

    cases = build_pope(load_annotations(out / "objects.jsonl"), "adversarial", n_images=8, per_image=1)
    (out / "pope.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    Image.new("RGB", (16, 16), "red").save(out / "r.png")
    (out / "cls.jsonl").write_text("".join(json.dumps({"id": c, "image": "r.png", "label": c}) + "\n"
                                           for c in ("cat", "dog", "ship", "truck")))
    (out / "ret.jsonl").write_text("".join(json.dumps({"image": "r.png", "caption": c}) + "\n"
                                           for c in ("a red square", "a blue dot", "a green line", "two cats")))
    return out


def _recipe_on_world(name, world):
    """A shipped recipe on the reference world: its multiple-choice scenarios as world questions, POPE on the
    world's objects, classification and retrieval on their own small files."""
    r = resolve_recipe(name)
    kind = r.scenario.type
    if kind == "pope":
        return r, world / "pope.jsonl"
    if kind == "classification":
        return r, world / "cls.jsonl"
    if kind == "retrieval":  # random negatives: the sentence model's load (tens of seconds) tests nothing here
        r.scenario.options.update(k=3, negatives="random")
        return r, world / "ret.jsonl"
    r.scenario.type = "world"
    r.scenario.options = {}
    return r, world


def _blind_recipes():
    from vlmcheck.methods.chef.recipe import TURN_SCENARIOS

    return [n for n in shipped_recipes() if resolve_recipe(n).desideratum != "language"
            and resolve_recipe(n).scenario.type not in TURN_SCENARIOS]


@pytest.mark.slow
@pytest.mark.parametrize("name", _blind_recipes())
def test_blind_runs_for_every_recipe_that_allows_it(world, tmp_path, name):
    """Issue 47: --blind crashed with KeyError 'blind' once the run was read back from its store (samples.jsonl
    keeps a record's settings in sorted order: "blind" before "standard")."""
    r, data = _recipe_on_world(name, world)
    run_task(ChefTask(ChefSpec(vlm="ref:describer?level=0.1", recipe=r, data=str(data), blind=True)), tmp_path,
             RunOptions(progress=False, report=False))
    res = json.loads((tmp_path / "results.json").read_text())  # written, and read back like `vlmcheck report`
    m = res["metrics"]
    assert "blind" not in m["settings"] and m["blind"]["sighted_setting"] in ("standard", "original", "shots=0")
    assert m["headline"] is not None
    recs = [json.loads(x)["result"] for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    sighted = [rec["settings"][m["blind"]["sighted_setting"]]["correct"] for rec in recs]
    first = next(iter(m["settings"]))
    if first == m["blind"]["sighted_setting"]:
        assert m["settings"][first]["accuracy"] == pytest.approx(sum(sighted) / len(sighted))


@pytest.mark.slow
def test_blind_through_the_cli_as_in_the_issue(world, tmp_path):
    from typer.testing import CliRunner

    from vlmcheck.cli import app

    out = CliRunner().invoke(app, ["chef", "run", "--recipe", "world-accuracy", "--vlm", "ref:describer?level=0.1",
                                   "--data", str(world), "--out", str(tmp_path / "r"), "--blind", "--no-report"])
    assert out.exit_code == 0, out.output
    m = json.loads((tmp_path / "r" / "results.json").read_text())["metrics"]
    assert m["blind"]["sighted_setting"] == "standard" and m["headline"]["name"] == "accuracy"
    assert "world-accuracy (accuracy, ppl inferencer)" in " ".join(out.output.split())
    from vlmcheck.report.html import build_report  # the report's run spec says which inferencer gave the numbers

    page = build_report([tmp_path / "r"], tmp_path / "report.html").read_text()
    assert "<tr><th>inferencer</th><td>ppl</td></tr>" in page


@pytest.mark.slow
@pytest.mark.parametrize("name,inferencer", [("world-accuracy", "direct"), ("calibration", "direct"),
                                             ("icl", "direct"), ("instruction-following", "direct"),
                                             ("language", "cot"), ("robustness", "direct"),
                                             ("hallucination", "direct")])
def test_every_desideratum_runs_through_a_generation_inferencer(world, tmp_path, name, inferencer):
    """Issue 47: every ChEF desideratum on a model with no likelihoods (ref:describer here, offline)."""
    r, data = _recipe_on_world(name, world)
    judge = Scripted(answer=lambda m: "[Explanation]\nclear\n[Overall Score]\n7") if r.desideratum == "language" \
        else None
    task = ChefTask(ChefSpec(vlm="ref:describer?level=0.1", recipe=r, data=str(data), inferencer=inferencer),
                    judge=judge)
    res = run_task(task, tmp_path, RunOptions(progress=False, report=False)).results
    m = res["metrics"]
    assert res["counts"]["failed"] == 0 and m["inferencer"] == inferencer and m["answers_generated"]
    assert res["spec"]["task_spec"]["inferencer"] == inferencer
    assert all("unread_share" in v for v in m["settings"].values())
    recs = [json.loads(x)["result"] for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert all("answer_text" in s for rec in recs for s in rec["settings"].values())  # generated, not scored
    h = m["headline"]
    if r.desideratum == "calibration":  # no confidence: no ECE, and the run says why
        assert h["value"] is None and "no ECE" in m["calibration_note"] and m["overall"] is None
    elif r.desideratum == "language":
        assert m["language"]["score"] is not None and all("rationale" in rec["settings"]["standard"] for rec in recs)
    else:
        assert h["value"] is not None


@pytest.mark.slow  # a fake server process
def test_unread_prose_answers_get_a_warning_that_says_what_would_read_them(tmp_path):
    """A server whose every answer is prose (it describes the picture, names no option): the warning names the
    answers' common opening and what reads them (--extractor, an instruction, ppl), and that they were cut at the
    answer's token limit.  Before: the warning said only that they count as wrong."""
    from conftest import FakeServer
    from vlmcheck.methods.chef.task import ChefSpec as Spec

    server = FakeServer(0.0, tmp_path, "--prose")
    try:
        rows = [{"question": f"Q{i}?", "options": ["red", "blue", "green"], "answer": "A"} for i in range(4)]
        data = _mc(tmp_path, rows)
        task = ChefTask(Spec(vlm=f"openai:m@{server.base_url}", recipe=Recipe(name="t", scenario={"type": "mc"}),
                             data=str(data), inferencer="direct"))
        res = run_task(task, tmp_path / "run", RunOptions(progress=False, report=False, preflight=False)).results
    finally:
        server.stop()
    warning = res["metrics"]["unread_warning"]
    assert "could not read over 10% of the answers (standard 100%)" in warning
    assert "they most often begin 'the image shows' (4 of 4)" in warning
    assert "--extractor MODEL" in warning and "ppl inferencer" in warning
    assert "4 stopped at the answer's token limit" in warning
