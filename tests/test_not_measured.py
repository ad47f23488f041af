"""A headline is a measurement or it is absent: a server whose every answer is unreadable gives no headline number
through every ChEF desideratum and every method, with the reason on every surface (results.json, terminal,
report, leaderboards, compare, export); GenCeption with a generator that cannot draw is not measured (no "+0.000,
cannot be separated"); a dry run makes no claim about the server."""

from __future__ import annotations

import csv
import json
import os

import pytest
from PIL import Image

from conftest import FakeServer, run_cli
from vlmcheck.core.roles import Capabilities, Generation
from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe
from vlmcheck.metrics.measured import READ_FLOOR, not_measured, reason_of, unread_reason
from vlmcheck.run.runner import RunOptions, run_task


# ------------------------------------------------------------------ the floor and the entry, by hand

def test_the_read_floor_and_the_not_measured_entry():
    assert READ_FLOOR == 0.5
    assert unread_reason({"standard": 0.5}) is None  # half read reaches the floor
    why = unread_reason({"original": 0.49, "corrupt:both": 0.9})
    assert "original 49%" in why and "corrupt:both" not in why and "fewer than 50%" in why
    h = not_measured("riam", "because")
    assert h["value"] is None and h["ci95"] is None and reason_of(h) == "because" and h["name"] == "riam"
    assert reason_of({"name": "x", "value": 0.3}) is None and reason_of(None) is None


# ------------------------------------------------------------------ ChEF in process: chance and the floor

class Saying:
    """A VLM without likelihoods that answers every question with ``answer``."""

    capabilities = Capabilities(loglikelihood=False)

    def __init__(self, answer: str, model_id: str = "test:saying") -> None:
        self.answer, self.model_id = answer, model_id

    async def generate(self, messages, config):
        return Generation(text=self.answer, finish_reason="stop")


def _mc(tmp_path, n=6, answer="B"):
    for i in range(n):
        Image.new("RGB", (8 + i, 8), (40 * i, 90, 200)).save(tmp_path / f"i{i}.png")
    path = tmp_path / "mc.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "image": f"i{i}.png", "question": f"Q{i}?",
                                        "options": ["red", "blue", "green", "white"], "answer": answer}) + "\n"
                            for i in range(n)))
    return path


def _chef(tmp_path, recipe, answer, name):
    r = resolve_recipe(recipe)  # its multiple-choice scenario, on the items of _mc
    task = ChefTask(ChefSpec(vlm="test:saying", recipe=r, data=str(_mc(tmp_path)), inferencer="direct"),
                    vlm=Saying(answer))
    return run_task(task, tmp_path / name, RunOptions(progress=False, report=False)).results["metrics"]


def test_rrm_is_not_measured_from_unread_answers_and_below_chance(tmp_path):
    """Every answer unreadable: every accuracy 0, below chance 1/4.  ChEF's RRM = (0 - 1/4) / (0 - 1/4) x 100 =
    100 would be a number from nothing: the headline is null with both reasons, and no RRM is a number."""
    m = _chef(tmp_path, "robustness", "I cannot say.", "rob")
    h = m["headline"]
    assert m["settings"]["original"]["accuracy"] == 0 and m["acc_random"] == pytest.approx(0.25)
    assert h["value"] is None and h["name"] == "RRM (image and text corrupted)"
    assert "original 0% read" in h["not_measured"] and "not above chance (0.250)" in h["not_measured"]
    assert all(v is None for v in m["rrm"].values())  # 100.0 each on the code before


def test_rrm_is_a_ratio_only_above_chance(tmp_path):
    """Every answer read ("A") and wrong (the truth is B): the floor is met, the original accuracy 0 is below
    chance, so RRM (100 again on the code before) is not measured for that reason alone.  Every answer "B", read,
    right in the original setting (accuracy 1 > chance 1/4): RRM = (c - 1/4) / (1 - 1/4) x 100 with c the accuracy
    once image and text are corrupted (the options shuffled: "B" is then wrong), a measurement."""
    m = _chef(tmp_path, "robustness", "A", "wrong")
    assert m["settings"]["original"]["unread_share"] == 0
    why = m["headline"]["not_measured"]
    assert "not above chance" in why and "parser" not in why
    m = _chef(tmp_path, "robustness", "B", "right")
    assert m["settings"]["original"]["accuracy"] == 1
    c = m["settings"]["corrupt:both"]["accuracy"]
    assert m["headline"]["value"] == pytest.approx((c - 0.25) / (1 - 0.25) * 100)
    assert "not_measured" not in m["headline"]


def test_mr_weighted_of_unread_answers_is_not_measured(tmp_path):
    """"unread" matches "unread" under every verbalizer: the match ratio would be 1.0 from answers no one read."""
    m = _chef(tmp_path, "instruction-following", "I cannot say.", "mr")
    assert m["headline"]["value"] is None and m["mr_weighted"] is None
    assert "fewer than 50%" in m["headline"]["not_measured"]


# ------------------------------------------------------------------ GenCeption: a generator that cannot draw

@pytest.mark.slow
def test_genception_with_a_generator_that_cannot_draw_is_not_measured(tmp_path):
    """ref:renderer draws nothing of prose it cannot parse: the same blank image for every description, so s(t) is
    the seed image against that one image - the same for every model.  Not measured, with the reason."""
    from vlmcheck.methods.genception import GenCeptionSpec, GenCeptionTask
    from vlmcheck.world.make import make_world

    world = tmp_path / "w"
    make_world(world, n=3, seed=2)

    class Echo(Saying):
        async def generate(self, messages, config):  # a different undrawable description per image
            return Generation(text=f"zq{len(messages[0].images[0].sha256 or '')}{messages[0].images[0].sha256}",
                              finish_reason="stop")

    out = {}
    for name in ("a", "b"):
        task = GenCeptionTask(GenCeptionSpec(vlm=f"test:{name}", generator="ref:renderer", encoder="ref:pixels",
                                             data=str(world), T=1), vlm=Echo("", f"test:{name}"))
        out[name] = run_task(task, tmp_path / name, RunOptions(progress=False, report=False)).results["metrics"]
    for m in out.values():
        assert m["headline"]["value"] is None and "same image" in m["headline"]["not_measured"]
        assert "GC@1" not in m and len(m["s_mean"]) == 1
    # the report's first screen: both left out with the reason, no margin, no tie
    from vlmcheck.report.html import build_report

    page = build_report([tmp_path / "a", tmp_path / "b"], tmp_path / "report.html").read_text()
    first = page[page.index('id="decisions"'):page.index("<h2>Summary")]
    assert "+0.000" not in page and "cannot be separated" not in first
    assert first.count("not measured") == 2 and "same image" in first
    # the reference describer's descriptions are drawn: images that differ, a GC@1 number
    task = GenCeptionTask(GenCeptionSpec(vlm="ref:describer", generator="ref:renderer", encoder="ref:pixels",
                                         data=str(world), T=1))
    m = run_task(task, tmp_path / "drawn", RunOptions(progress=False, report=False)).results["metrics"]
    assert m["headline"]["value"] is not None and "not_measured" not in m["headline"]


# ------------------------------------------------------------------ a dry run makes no claim about the server

def _cli(*args, cwd):
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    out = run_cli(*args, cwd=cwd, env=env)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return out


def test_server_checks_see_real_answers_from_a_server_only():
    from vlmcheck.core.spec import load_model
    from vlmcheck.run.estimate import Estimator
    from vlmcheck.run.server_checks import answers_from_a_server

    class Remote:
        model_id = "openai:m@http://127.0.0.1:9/v1"
        capabilities = Capabilities()

    assert answers_from_a_server(Remote())
    assert not answers_from_a_server(Estimator(Remote(), "vlm", object(), None))  # a dry run's stand-in
    assert not answers_from_a_server(load_model("ref:describer"))  # runs here: no server to speak of


def test_the_dry_run_offline_makes_no_server_claim(tmp_path):
    """ref:describer answers every seed alike (it is deterministic) and the dry run's stand-ins answer alike: no
    call reached a server, so neither says "the server seems to ignore the temperature"."""
    from vlmcheck.world.make import make_world

    make_world(tmp_path / "w", n=3, seed=1)
    for extra in (["--dry-run"], []):
        run = _cli("vhx", "run", "--vlm", "ref:describer?level=0.1", "--cases", tmp_path / "w", "--perturb", "",
                   "--out", tmp_path / f"r{len(extra)}", "--repeats", "2", "--temperature", "0.7", "--no-progress",
                   "--no-report", *extra, cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "ignore the temperature" not in run.stderr + run.stdout
    assert "server_checks" not in json.loads((tmp_path / "r0" / "results.json").read_text())


# ------------------------------------------------------------------ every method against an unreadable server

@pytest.fixture(scope="module")
def unread(tmp_path_factory):
    """The fake OpenAI server ("Answer <digest>": no option, no yes/no word, no numbered statement) through
    every ChEF desideratum that generates answers, VHExpansion, CAST and GenCeption with ref:renderer."""
    from vlmcheck.world.make import make_world, make_world_pairs

    tmp = tmp_path_factory.mktemp("unread")
    make_world(tmp / "world", n=6, seed=4)
    make_world_pairs(tmp / "pairs", n=3, seed=1)
    server = FakeServer(0.0, tmp)
    url = server.base_url
    runs, printed = {}, {}
    chef = {"robustness": "direct", "icl": "direct", "instruction-following": "direct", "hallucination": "direct",
            "world-accuracy": "direct", "calibration": "direct"}
    try:
        for recipe, inferencer in chef.items():
            for model in ("a", "b") if recipe == "robustness" else ("a",):  # two to compare
                out = tmp / "chef" / recipe / model
                scenario = [] if recipe == "world-accuracy" else ["--scenario", "world"]
                printed[out] = _cli("chef", "run", "--recipe", recipe, *scenario, "--vlm", f"openai:{model}@{url}",
                                    "--data", tmp / "world", "--inferencer", inferencer, "--out", out,
                                    "--no-progress", "--no-report", cwd=tmp)
                runs.setdefault(recipe, []).append(out)
        out = tmp / "vhx"
        printed[out] = _cli("vhx", "run", "--vlm", f"openai:a@{url}", "--cases", tmp / "world", "--perturb", "",
                            "--out", out, "--no-progress", "--no-report", cwd=tmp)
        runs["vhx"] = [out]
        out = tmp / "cast"
        printed[out] = _cli("cast", "run", "--vlm", f"openai:a@{url}", "--pairs", tmp / "pairs" / "pairs.jsonl",
                            "--out", out, "--no-progress", "--no-report", cwd=tmp)
        runs["cast"] = [out]
        out = tmp / "gc"
        printed[out] = _cli("genception", "--vlm", f"openai:a@{url}", "--vlm", f"openai:b@{url}", "--generator",
                            "ref:renderer", "--encoder", "ref:pixels", "--data", tmp / "world", "-T", "1", "--out",
                            out, "--no-progress", "--no-report", cwd=tmp)
        runs["genception"] = sorted(p for p in out.iterdir() if p.is_dir())
    finally:
        server.stop()
    return tmp, runs, printed


@pytest.mark.slow
def test_no_headline_number_from_an_unreadable_server_in_results_and_terminal(unread):
    tmp, runs, printed = unread
    for method, folders in runs.items():
        for folder in folders:
            res = json.loads((folder / "results.json").read_text())
            h = res["metrics"]["headline"]
            assert h["value"] is None and h["not_measured"], (method, h)
            if method != "genception":  # a GenCeption command prints its runs together
                run = printed[folder]
                assert run.returncode == 0, run.stderr[-2000:]
                assert f"{h['name']} not measured: {h['not_measured']}" in " ".join(run.stdout.split()), method
    rob = json.loads((runs["robustness"][0] / "results.json").read_text())["metrics"]
    assert all(v is None for v in rob["rrm"].values())  # 100.0 on the code before
    mr = json.loads((runs["instruction-following"][0] / "results.json").read_text())["metrics"]
    assert mr["mr_weighted"] is None  # 1.0 on the code before: "unread" matched "unread"
    gc = printed[tmp / "gc"]
    assert gc.stdout.count("GC@1 not measured") >= 2


@pytest.mark.slow
def test_the_report_leaderboards_compare_and_export_say_not_measured(unread, tmp_path):
    from vlmcheck.export import export_runs
    from vlmcheck.report.html import build_report

    tmp, runs, printed = unread
    folders = [f for fs in runs.values() for f in fs]
    page = build_report(folders, tmp_path / "report.html").read_text()
    first = page[page.index('id="decisions"'):page.index("<h2>Summary")]
    # the first screen: every run left out with its reason, no leader, no margin, no tie
    assert first.count("left out, not measured") == len(folders)
    assert "leads" not in first and "+0.000" not in first and "cannot be separated from" not in first
    summary = page[page.index("<h2>Summary"):page.index("Leaderboards by method")]
    assert summary.count("not measured") == len(folders)
    sections = page[page.index('<section class="run"'):]
    assert sections.count("not measured: ") == len(folders)  # each run's own section says it too
    boards = page[page.index("Leaderboards by method"):]
    boards = boards.split("<h2>", 1)[0]  # up to the next section
    assert "100.0000" not in boards and "1.0000" not in boards
    assert boards.count("not measured") == len(runs["robustness"]) + len(runs["genception"])  # the tables of 2
    # compare: the headline is named not measured, never a difference of it
    rob = _cli("compare", *runs["robustness"], cwd=tmp_path)
    assert rob.returncode == 0 and rob.stdout.count("RRM (image and text corrupted) not measured") == 2
    gc = _cli("compare", *runs["genception"], "-o", tmp_path / "lb.json", cwd=tmp_path)
    assert gc.returncode == 0 and gc.stdout.count("GC@1 not measured") == 2 and "+0.000" not in gc.stdout
    assert "cannot be separated" not in gc.stdout.replace("cannot be separated from (Holm", "")
    # export: the headline row null, with the reason
    export_runs(folders, tmp_path / "x", "csv")
    with open(tmp_path / "x" / "metrics.csv", newline="") as f:
        heads = [r for r in csv.DictReader(f) if r["headline"] == "True"]
    assert len(heads) == len(folders) and all(r["value"] == "" and r["not_measured"] for r in heads)
    with open(tmp_path / "x" / "runs.csv", newline="") as f:
        assert all(r["value"] == "" and r["not_measured"] for r in csv.DictReader(f))
