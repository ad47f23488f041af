"""GenCeption: formula, chains, incompleteness, resume, FID, categories, leaderboard, human baseline."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from vlmcheck.core.errors import ModelCallError
from vlmcheck.core.roles import Generation
from vlmcheck.core.spec import load_model
from vlmcheck.methods.genception import P_DESC, GenCeptionSpec, GenCeptionTask, category_group
from vlmcheck.methods.leaderboard import leaderboard
from vlmcheck.metrics.stats import frechet_distance, gc_at
from vlmcheck.run.runner import RunOptions, retry_failed, run_task
from vlmcheck.world.make import make_world


def test_gc_at_hand_computed():
    # GC@3 = (1*0.9 + 2*0.8 + 3*0.6) / 6 = 4.3 / 6
    assert gc_at([0.9, 0.8, 0.6]) == pytest.approx(4.3 / 6)
    assert gc_at([0.9, 0.8, 0.6], 1) == pytest.approx(0.9)
    assert gc_at([0.9, 0.8, 0.6], 2) == pytest.approx((0.9 + 1.6) / 3)
    assert gc_at([0.5] * 5) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        gc_at([0.9, 0.8], 3)  # an incomplete chain has no GC@3


def test_frechet_distance_matches_torchmetrics():
    torch = pytest.importorskip("torch")
    from torchmetrics.image.fid import FrechetInceptionDistance

    class Identity(torch.nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1).double()

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(60, 8)), rng.normal(1.0, 2.0, size=(70, 8))
    fid = FrechetInceptionDistance(feature=Identity(), input_img_size=(8,), normalize=True)
    fid.update(torch.tensor(a), real=True)
    fid.update(torch.tensor(b), real=False)
    assert frechet_distance(a, b) == pytest.approx(float(fid.compute()), rel=1e-6)
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)


def test_category_groups_know_mme_and_world():
    assert category_group("commonsense_reasoning") == "visual"
    assert category_group("OCR") == "textual"
    assert category_group("numerical_calculation") == "textual"
    assert category_group("artwork") == "visual"
    assert category_group("code") == "textual"
    assert category_group("shape") == "visual"
    assert category_group("bananas") is None


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gcworld")
    make_world(out, n=16, seed=2)
    return out


def _task(world, spec="ref:describer", T=3, model=None):
    return GenCeptionTask(GenCeptionSpec(vlm=spec, generator="ref:renderer", encoder="ref:pixels", data=str(world),
                                         T=T), vlm=model)


def test_chain_outputs_and_error_ordering(world, tmp_path):
    results = {}
    for lv in (0.0, 0.3):
        res = run_task(_task(world, f"ref:describer?level={lv}"), tmp_path / str(lv), RunOptions(progress=False))
        results[lv] = res.results["metrics"]
        rows = [json.loads(x) for x in (tmp_path / str(lv) / "samples.jsonl").read_text().splitlines()]
        r = rows[0]["result"]
        assert r["complete"] and len(r["steps"]) == 3 and len(r["s"]) == 3
        for step in r["steps"]:
            assert (tmp_path / str(lv) / step["image"]).is_file()  # X_t kept losslessly
            assert step["description"] and len(step["embedding"]) == len(r["embedding0"])
        assert r["gc"]["GC@3"] == pytest.approx(gc_at(r["s"]))
    m0, m1 = results[0.0], results[0.3]
    assert m0["GC@3"]["mean"] == pytest.approx(1.0)  # error-free describer + renderer: no drift
    assert m1["GC@3"]["mean"] < m0["GC@3"]["mean"]
    assert m1["GC@3"]["ci95"][0] <= m1["GC@3"]["mean"] <= m1["GC@3"]["ci95"][1]
    assert set(m1["by_category"]) == {"existence", "count", "position", "color", "shape", "ocr", "numerical",
                                      "code"}
    assert m1["groups"]["visual"]["categories"] == 5 and m1["groups"]["textual"]["categories"] == 3
    assert "GC_FID@3" in m1["fid"] and "warning" in m1["fid"]  # 16 images < 50: warned
    assert m1["s@3_unweighted"]["mean"] == pytest.approx(m1["s_mean"][2])


class FlakyDescriber:
    """Wraps ref:describer; fails once on the second description of one image (a dropped connection)."""

    def __init__(self, fail: bool) -> None:
        self.inner = load_model("ref:describer?level=0.2", "vlm")
        self.model_id = self.inner.model_id
        self.capabilities = self.inner.capabilities
        self.fail = fail
        self.calls = 0

    async def generate(self, messages, config):
        self.calls += 1
        if self.fail and self.calls == 2:  # one chain at a time: this is t = 2 of the first chain
            raise ModelCallError("connection reset", kind="bad_request", retryable=False)
        return await self.inner.generate(messages, config)


def test_chain_resumes_midway_without_repeating_calls(world, tmp_path):
    clean = FlakyDescriber(fail=False)
    run_task(_task(world, clean.model_id, model=clean), tmp_path / "clean", RunOptions(progress=False,
                                                                                      max_concurrency=1))
    flaky = FlakyDescriber(fail=True)
    res = run_task(_task(world, flaky.model_id, model=flaky), tmp_path / "run", RunOptions(progress=False,
                                                                                          max_concurrency=1))
    assert res.results["counts"]["failed"] == 1
    inc = res.results["metrics"]["chains"]["incomplete_list"]
    assert inc[0]["t"] == 2 and inc[0]["stage"] == "describe"
    assert res.results["metrics"]["GC@3"]["n"] == 15  # excluded, not normalised over fewer terms
    first_calls = flaky.calls
    again = FlakyDescriber(fail=False)
    retry_failed(_task(world, again.model_id, model=again), tmp_path / "run", RunOptions(progress=False))
    assert again.calls == 2  # t = 2 and t = 3 of the failed chain only; t = 1 came from the store
    assert first_calls == clean.calls - 2 + 1  # the failed call, and the two never made
    a = json.loads((tmp_path / "run" / "results.json").read_text())["metrics"]
    b = json.loads((tmp_path / "clean" / "results.json").read_text())["metrics"]
    assert a == b


class RefusingDescriber:
    def __init__(self) -> None:
        self.inner = load_model("ref:describer", "vlm")
        self.model_id = "test:refuser"
        self.capabilities = self.inner.capabilities
        self.n = 0

    async def generate(self, messages, config):
        self.n += 1
        if self.n == 2:
            return Generation(text="I'm sorry, I can't help with that.", finish_reason="stop")
        return await self.inner.generate(messages, config)


def test_refusal_makes_an_incomplete_chain(world, tmp_path):
    vlm = RefusingDescriber()
    res = run_task(_task(world, "test:refuser", model=vlm), tmp_path, RunOptions(progress=False, max_concurrency=1))
    chains = res.results["metrics"]["chains"]
    assert chains["incomplete"] == 1 and chains["incomplete_by_reason"] == {"refusal": 1}
    assert res.results["metrics"]["GC@3"]["n"] == 15


def test_leaderboard_gc_rank_and_correlations(world, tmp_path):
    folders = []
    for lv in (0.0, 0.1, 0.3):
        f = tmp_path / f"l{lv}"
        run_task(_task(world, f"ref:describer?level={lv}"), f, RunOptions(progress=False))
        folders.append(f)
    ext = tmp_path / "ext.csv"
    with ext.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "benchmark", "score"])
        for lv, score in ((0.0, 90), (0.1, 70), (0.3, 40)):
            w.writerow([f"ref:describer?level={lv}", "MMB", score])
    board = leaderboard(folders, ext)
    models = list(board["models"])
    assert models == ["ref:describer?level=0.0", "ref:describer?level=0.1", "ref:describer?level=0.3"]
    r = board["models"]["ref:describer?level=0.3"]
    assert r["rank"] == 3.0
    assert r["gc_rank"] == pytest.approx((5 * r["rank_visual"] + 3 * r["rank_textual"]) / 8)
    assert board["correlations"]["MMB"]["kendall"] == pytest.approx(1.0)
    assert board["correlations"]["MMB"]["spearman"] == pytest.approx(1.0)


def test_human_baseline_gc1(world, tmp_path):
    rows = [json.loads(x) for x in (world / "manifest.jsonl").read_text().splitlines()]
    humans = tmp_path / "humans.csv"
    with humans.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image", "text"])
        for r in rows[:8]:  # humans described half of the images, in their own words
            w.writerow([str(world / r["image"]), r["description"].replace("there is", "you can see")])
    res = run_task(_task(world, f"human:{humans}", T=1), tmp_path / "run", RunOptions(progress=False))
    m = res.results["metrics"]
    assert m["chains"]["complete"] == 8 and m["chains"]["incomplete_by_reason"] == {"refusal": 8}
    assert m["GC@1"]["mean"] == pytest.approx(1.0)


def test_default_prompt_is_table_1():
    assert P_DESC.startswith("Please write a clear, precise, detailed, and concise description of all elements")
    assert P_DESC.endswith("You must complete the description using less than 500 words.")


def test_hugging_face_dataset_with_image_column(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    from PIL import Image as PILImage

    from vlmcheck.core.data import load_image_dataset
    from vlmcheck.methods.cast import corpus_from

    imgs = [PILImage.new("RGB", (16, 16), c) for c in ("red", "blue", "green")]
    ds = datasets.Dataset.from_dict({"image": imgs, "cat": ["a", "b", "a"], "description": ["x", "y", "z"]},
                                    features=datasets.Features({"image": datasets.Image(),
                                                                "cat": datasets.Value("string"),
                                                                "description": datasets.Value("string")}))
    ds.save_to_disk(str(tmp_path / "ds"))
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    items = load_image_dataset(f"hfds:{tmp_path / 'ds'}?category_column=cat")
    assert [it.category for it in items] == ["a", "b", "a"]
    assert PILImage.open(items[1].path).getpixel((0, 0)) == (0, 0, 255)
    scenes = corpus_from(f"hfds:{tmp_path / 'ds'}?description_column=description")
    assert [s["description"] for s in scenes] == ["x", "y", "z"]
