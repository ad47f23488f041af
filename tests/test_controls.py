"""Issue 35: the blind control (how much of a score needs the image)."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from PIL import Image

from vlmcheck import RunOptions, run_task
from vlmcheck.core.roles import Capabilities, Generation
from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec
from vlmcheck.world.make import make_world


class Recorder:
    """Says yes to everything and records what each request carried."""

    model_id = "test:recorder"

    def __init__(self, text_only: bool = True) -> None:
        self.capabilities = Capabilities(text_only=text_only)
        self.requests: list[tuple[str, list]] = []

    async def generate(self, messages, config):
        last = messages[-1]
        self.requests.append((last.text, [im.to_pil() for im in last.images]))
        return Generation(text="Yes.")


def _cases(tmp_path, n=4):
    rows = []
    for i in range(n):
        Image.new("RGB", (20, 12), (40 * i, 0, 0)).save(tmp_path / f"{i}.png")
        rows.append({"image": f"{i}.png", "question": f"Is there a circle number {i}?",
                     "answer": "yes" if i % 2 == 0 else "no"})
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "cases.jsonl"


@pytest.mark.parametrize("text_only", [True, False])
def test_blind_requests_carry_no_image_or_a_grey_one_and_say_which(tmp_path, text_only):
    model = Recorder(text_only)
    task = VHExpansionTask(VHXSpec(vlm="test:recorder", cases=str(_cases(tmp_path)), negator=None, perturb=[],
                                   blind=True), vlm=model)
    res = run_task(task, tmp_path / "run", RunOptions(progress=False, report=False))
    assert len(model.requests) == 8  # each question sighted, then blind
    blind = [imgs for _, imgs in model.requests if not imgs or imgs[0].getextrema() == ((128, 128),) * 3]
    assert len(blind) == 4
    if text_only:
        assert all(imgs == [] for imgs in blind)
    else:  # a model that requires an image: a uniform grey one of the same size
        assert all(len(imgs) == 1 and imgs[0].size == (20, 12) for imgs in blind)
    rec = json.loads((tmp_path / "run" / "samples.jsonl").read_text().splitlines()[0])["result"]
    assert rec["variants"]["blind"]["params"]["image"] == ("no image" if text_only else "grey image 20x12")
    assert "image" not in rec["variants"]["blind"]  # nothing stored: it saw no image of the case
    b = res.results["metrics"]["blind"]
    assert b["request"] == ["no image" if text_only else "grey image"]
    # says yes to all: right on the two "yes" cases with or without the image; no gain from seeing
    assert b["accuracy"] == 0.5 and b["vision_gain"]["difference"] == 0.0
    # two blind answers are wrong, but a control is not an expanded test case
    assert res.results["metrics"]["variants"]["blind"]["new_vh_cases"] == 0
    assert res.results["metrics"]["new_vh_cases_total"] == 0


def test_vision_gain_by_hand():
    from vlmcheck.methods.blind import VHXBlind
    from vlmcheck.metrics.clusters import Units

    def _blind(results):
        fold = VHXBlind(Units())
        for r in results:
            fold.add(r)
        return fold.result()

    # 8 cases on 4 images (2 each); sighted right on 6, blind right on 2
    sighted = [1, 1, 1, 1, 1, 1, 0, 0]
    blind = [1, 0, 0, 0, 1, 0, 0, 0]
    results = [{"image": f"img{i // 2}", "variants": {"original": {"correct": bool(s)},
                                                      "blind": {"correct": bool(b), "params": {"image": "no image"}}}}
               for i, (s, b) in enumerate(zip(sighted, blind))]
    out = _blind(results)
    assert out["accuracy"] == 2 / 8 and out["share_right_blind"] == 2 / 8
    g = out["vision_gain"]
    # differences per case: 0 1 1 1 0 1 0 0 -> mean 4 / 8; per image the means are 0.5, 1, 0.5, 0
    assert g["difference"] == pytest.approx(0.5) and g["n"] == 8 and g["n_units"] == 4
    assert g["ci95"][0] <= 0.5 <= g["ci95"][1] and g["ci95"][0] >= 0.0  # no image loses by seeing
    # an image-level bootstrap of 4 images can only give means that are averages of 0.5, 1, 0.5, 0
    assert g["ci95"][1] <= 1.0 and "cluster bootstrap" in g["method"]
    assert out["vision_gain"]["difference"] == pytest.approx(sum(sighted) / 8 - sum(blind) / 8)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("blindworld")
    make_world(out, n=40, seed=7)
    return out


@pytest.mark.slow
def test_the_world_describer_answers_blind_from_its_prior_and_a_rerun_makes_no_call(world, tmp_path):
    task = VHExpansionTask(VHXSpec(vlm="ref:describer", cases=str(world), perturb=[], blind=True))
    res = run_task(task, tmp_path / "run", RunOptions(progress=False, report=False)).results
    b = res["metrics"]["blind"]
    # balanced yes/no: the prior alone is near chance; the image adds a clear gain at error level 0
    assert 0.4 <= b["accuracy"] <= 0.6
    assert res["metrics"]["variants"]["original"]["accuracy"] == 1.0
    assert b["vision_gain"]["difference"] > 0.3 and b["vision_gain"]["ci95"][0] > 0
    assert b["vision_gain_symmetric"]["difference"] > 0.3
    again = run_task(VHExpansionTask(VHXSpec(vlm="ref:describer", cases=str(world), perturb=[], blind=True)),
                     tmp_path / "run", RunOptions(progress=False, report=False, resume=True)).results
    assert again["session"]["model_calls"] == 0 and again["metrics"]["blind"] == b
    # a noisier describer gains less from the image
    noisy = run_task(VHExpansionTask(VHXSpec(vlm="ref:describer?level=0.3", cases=str(world), perturb=[],
                                             blind=True)),
                     tmp_path / "noisy", RunOptions(progress=False, report=False)).results["metrics"]["blind"]
    assert noisy["vision_gain"]["difference"] < b["vision_gain"]["difference"]


@pytest.mark.slow
def test_chef_pope_blind_setting_and_the_report_flags_items_right_blind(world, tmp_path):
    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe
    from vlmcheck.methods.pope import build_pope, load_annotations
    from vlmcheck.report.html import build_report

    cases = build_pope(load_annotations(world / "objects.jsonl"), "adversarial", n_images=40, per_image=2)
    (world / "pope.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    task = ChefTask(ChefSpec(vlm="ref:describer", recipe=resolve_recipe("hallucination"), data=str(world / "pope.jsonl"),
                             blind=True))
    res = run_task(task, tmp_path / "pope", RunOptions(progress=False, report=False)).results
    m = res["metrics"]
    assert "blind" not in m["settings"] and m["blind"]["sighted_setting"] == "standard"
    assert 0.4 <= m["blind"]["accuracy"] <= 0.6 and m["blind"]["vision_gain"]["ci95"][0] > 0
    assert m["headline"]["name"] == "POPE accuracy"  # the headline stays the sighted one
    page = build_report([tmp_path / "pope"], tmp_path / "r.html").read_text()
    assert "vision gain (blind control)" in page and "[right without the image]" in page
    # a recipe whose answers are judged, not chosen, has no blind control: one clear error
    with pytest.raises(ValueError, match="blind control"):
        ChefTask(ChefSpec(vlm="ref:describer", recipe=resolve_recipe("fsc147"), data=str(world / "counting.jsonl"),
                          blind=True))


# ----------------------------------------------------------------------------- dry runs, costs, budgets

def test_image_tokens_by_each_providers_documented_examples():
    from vlmcheck.core.tokens import image_tokens

    # OpenAI: 1024 x 1024 high detail -> 768 x 768 -> 4 tiles of 512 -> 4 x 170 + 85 = 765; 2048 x 4096 ->
    # 1024 x 2048 -> 768 x 1536 -> 2 x 3 tiles -> 1105 (OpenAI's own examples)
    assert image_tokens(1024, 1024, "openai") == 765 and image_tokens(2048, 4096, "openai") == 1105
    # Anthropic: tokens = width x height / 750; 1092 x 1092 -> about 1590
    assert image_tokens(1092, 1092, "anthropic") == 1590
    # Gemini: 258 up to 384 px each way; larger images in 768-px tiles of 258
    assert image_tokens(384, 384, "gemini") == 258 and image_tokens(1024, 1024, "gemini") == 4 * 258


def _est(task, folder, **kw):
    from vlmcheck.run.estimate import dry_run

    return dry_run(task, folder, RunOptions(progress=False, report=False, **kw))


@pytest.mark.slow
def test_dry_run_counts_what_the_real_run_then_makes_and_nothing_after(world, tmp_path):
    from vlmcheck.methods.cast import CastSpec, CastTask
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask
    from vlmcheck.world.make import make_world_pairs

    pairs = make_world_pairs(tmp_path / "pairs", n=3, seed=0)
    cases = [
        ("describe", lambda: DescribeTask(DescribeSpec(vlm="ref:describer", data=str(world))), False),
        ("vhx", lambda: VHExpansionTask(VHXSpec(vlm="ref:describer?level=0.1", cases=str(world),
                                                perturb=["vhx_jpeg"], blind=True)), False),
        ("cast", lambda: CastTask(CastSpec(vlm="ref:describer", pairs=str(pairs))), True),
    ]
    for name, make, multi_step in cases:
        folder = tmp_path / name
        est = _est(make(), folder, limit=10)
        assert not (folder / "store.sqlite").exists()  # nothing written where the run will go
        real = run_task(make(), folder, RunOptions(progress=False, report=False, limit=10)).results
        calls = real["session"]["model_calls"]
        if multi_step:  # CAST: as many validations as statements; the estimate assumes k of them
            assert est["totals"]["calls"] >= calls and est["totals"]["upper_bound"]
        else:
            assert est["totals"]["calls"] == calls, name
        assert est["samples"]["to_run"] == real["counts"]["samples"]
        again = _est(make(), folder, limit=10, resume=True)  # as the real command, a dry run needs --resume here
        assert again["totals"]["calls"] == 0 and again["samples"]["to_run"] == 0


@pytest.mark.slow
def test_dry_run_cost_against_the_fake_servers_bill_and_the_budget_stops_then_resumes(tmp_path, image_folder):
    import json as _json

    from conftest import FakeServer

    from vlmcheck.methods.describe import DescribeSpec, DescribeTask

    server = FakeServer(0.0, tmp_path, "--usage", "openai")
    try:
        vlm = f"openai:gpt-4o@{server.base_url}?price_in=2.5&price_out=10"
        env = {**__import__("os").environ, "OPENAI_API_KEY": "sk-test"}

        def cli(*args):
            return run_cli("describe", "--vlm", vlm, "--data", str(image_folder), "--out", str(tmp_path / "run"),
                           "--no-preflight", *args, env=env)

        # half the run, then the estimate of the rest from the run's own output tokens per call
        assert cli("--limit", "3").returncode == 0
        p = cli("--resume", "--dry-run", "--json")
        assert p.returncode == 0, p.stderr
        est = _json.loads(p.stdout)
        assert est["roles"]["describer"]["calls"] == 3 and est["roles"]["describer"]["output_from"] == "the run's mean"
        before = len(server.requests())
        spent_before = _json.loads((tmp_path / "run" / "results.json").read_text())["usage"]
        assert len(server.requests()) == before  # the dry run sent nothing
        assert cli("--resume").returncode == 0
        usage = _json.loads((tmp_path / "run" / "results.json").read_text())["usage"]
        (model, now), = usage.items()
        real = now["cost_usd"] - spent_before[model]["cost_usd"]
        assert len(server.requests()) - before == 3
        assert abs(est["totals"]["cost_usd"] - real) <= 0.10 * real, (est["totals"], real)

        # a budget: the cost of about two samples; the run stops with exit 1 and one sentence, then resumes
        per_sample = now["cost_usd"] / 6
        budget_run = tmp_path / "budget"

        def cli2(*args):
            return run_cli("describe", "--vlm", vlm, "--data", str(image_folder), "--out", str(budget_run),
                           "--no-preflight",
                           # a call is priced before it is sent, its output at max_tokens until one is back
                           # (run/budget.py): 8 keeps the first call under 2.5 samples' cost
                           "--max-concurrency", "1", "--max-tokens", "8", *args, env=env)

        stopped = cli2("--max-cost", f"{2.5 * per_sample:.8f}")
        assert stopped.returncode == 1 and "Traceback" not in stopped.stderr
        assert "budget of $" in stopped.stdout + stopped.stderr and "resume with a higher --max-cost" in (
            stopped.stdout + stopped.stderr)
        res = _json.loads((budget_run / "results.json").read_text())
        assert 0 < res["counts"]["done"] < 6 and res["budget"]["stopped"]
        assert res["budget"]["spent_usd"] <= 2.5 * per_sample + per_sample  # at most one sample in flight past it
        seen = len(server.requests())
        finished = cli2("--resume", "--max-cost", "1")
        assert finished.returncode == 0, finished.stderr
        done = _json.loads((budget_run / "results.json").read_text())
        assert done["counts"]["done"] == 6
        assert len(server.requests()) - seen == 6 - res["counts"]["done"]  # no call repeated
    finally:
        server.stop()


@pytest.mark.slow
def test_no_report_on_a_run_and_a_merge_and_the_report_on_demand(tmp_path, image_folder):

    def cli(*args):
        return run_cli(*map(str, args))

    for i in (0, 1):
        p = cli("describe", "--vlm", "ref:photo", "--data", image_folder, "--out", tmp_path / f"s{i}", "--shard",
                f"{i}/2", "--no-report", "--no-progress")
        assert p.returncode == 0, p.stderr
        assert (tmp_path / f"s{i}" / "results.json").is_file() and not (tmp_path / f"s{i}" / "report.html").exists()
    assert cli("merge", tmp_path / "m", tmp_path / "s0", tmp_path / "s1", "--no-report").returncode == 0
    assert (tmp_path / "m" / "results.json").is_file() and not (tmp_path / "m" / "report.html").exists()
    assert cli("report", tmp_path / "m", "-o", tmp_path / "m" / "report.html").returncode == 0
    assert (tmp_path / "m" / "report.html").is_file()


def test_a_run_recorded_before_new_spec_fields_resumes_with_no_call(world, tmp_path):
    # runs made by an earlier vlmcheck have no `blind`, `repeats` or `temperature` in their recorded spec; today's
    # spec model fills them with their defaults, so the run is the same run and resumes from its cache
    from vlmcheck.store.db import RunStore

    def task():
        return VHExpansionTask(VHXSpec(vlm="ref:describer", cases=str(world), perturb=[]))

    run_task(task(), tmp_path / "run", RunOptions(progress=False, report=False, limit=4))
    with RunStore(tmp_path / "run", existing=True) as store:
        spec = store.get_meta("spec")
        for key in ("blind",):
            spec["task_spec"].pop(key)
        store.set_meta("spec", spec)
    again = run_task(task(), tmp_path / "run", RunOptions(progress=False, report=False, resume=True, limit=4))
    assert again.results["session"]["model_calls"] == 0 and again.results["counts"]["done"] == 4


@pytest.mark.slow
def test_a_folder_where_a_file_is_expected_is_one_sentence(world, tmp_path):

    p = run_cli("chef", "run", "--recipe", "hallucination", "--vlm", "ref:describer", "--data", str(world), "--out",
                str(tmp_path / "run"))
    assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr
    assert "a folder, where a file was expected" in p.stdout + p.stderr


@pytest.mark.slow
def test_cast_blind_validation_withholds_the_images_and_reports_the_gain(world, tmp_path):
    from vlmcheck.methods.cast import CastSpec, CastTask, validation_prompt
    from vlmcheck.world.make import make_world_pairs

    pairs = make_world_pairs(tmp_path / "pairs", n=3, seed=0)
    task = CastTask(CastSpec(vlm="ref:describer", pairs=str(pairs), blind=True))
    pair = task.items[0]
    imgs = (Image.new("RGB", (30, 20), "red"), Image.new("RGB", (30, 20), "blue"))
    seen = task._messages(validation_prompt("yes_no", "image"), "image", pair, task.shown(imgs), "Both are red.",
                          None)
    blind = task._messages(validation_prompt("yes_no", "image"), "image", pair, task.shown(imgs), "Both are red.", None,
                           blind=True)
    assert len(seen[0].images) == 1 and blind[0].images == [] and blind[0].text == seen[0].text
    saved = task.vlm.capabilities
    task.vlm.capabilities = Capabilities(text_only=False)  # a model that requires an image: a grey one
    try:
        grey = task._messages(validation_prompt("yes_no", "image"), "image", pair, task.shown(imgs), "Both are red.",
                              None,
                              blind=True)
    finally:
        task.vlm.capabilities = saved
    assert grey[0].images[0].to_pil().getextrema() == ((128, 128),) * 3
    assert grey[0].images[0].width == seen[0].images[0].width

    res = run_task(CastTask(CastSpec(vlm="ref:describer", pairs=str(pairs), blind=True)), tmp_path / "run",
                   RunOptions(progress=False, report=False)).results["metrics"]
    b = res["blind"]
    assert b["n"] > 0 and b["request"] == ["no image"] and b["sighted_consistency"] == 1.0
    assert b["vision_gain"]["difference"] == pytest.approx(1.0 - b["consistency"]) and b["consistency"] < 0.8
