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


def test_a_feature_set_folded_row_by_row_gives_the_frechet_distance_by_hand():
    from scipy import linalg

    from vlmcheck.metrics.stats import FeatureSet, frechet_between

    def folded(rows):
        fs = FeatureSet()
        for r in rows:
            fs.add(r)
        return fs

    # 1-D, 3 samples each (more samples than dimensions: moments): (mu_x - mu_y)^2 + (sd_x - sd_y)^2
    x, y = folded([[1.0], [2.0], [3.0]]), folded([[4.0], [6.0], [8.0]])
    assert x.rows is None and x.n == 3 and x.dim == 1
    assert frechet_between(x, y) == pytest.approx((2 - 6) ** 2 + (1 - 2) ** 2)
    # full rank, 40 and 30 samples of 6 dimensions, against scipy's sqrtm on numpy's covariances
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(40, 6)), rng.normal(0.5, 1.5, size=(30, 6))
    c1, c2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    ref = ((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(c1 + c2 - 2 * np.real(linalg.sqrtm(c1 @ c2)))
    fa, fb = folded(a), folded(b)
    assert fa.rows is None and fa.total.shape == (6,) and fa.outer.shape == (6, 6)  # d x d, not 40 rows
    assert frechet_between(fa, fb) == pytest.approx(ref, rel=1e-9)
    # no more rows than dimensions: the rows are kept and the exact few-samples path is taken
    wide_a, wide_b = rng.normal(size=(5, 12)), rng.normal(size=(7, 12))
    fa, fb = folded(wide_a), folded(wide_b)
    assert len(fa.rows) == 5 and frechet_between(fa, fb) == frechet_distance(wide_a, wide_b)
    with pytest.raises(ValueError):
        frechet_between(folded([[1.0]]), fb)


@pytest.mark.slow
def test_round_trip_genception_folds_its_summary_without_keeping_descriptions_or_embeddings(world, tmp_path):
    task = _task(world, "ref:describer?level=0.3")
    run_task(task, tmp_path, RunOptions(progress=False))
    records = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    folder = task.summary_folder()
    for r in records:
        folder.add(r)
    assert folder.result([]) == task.summarize(records, [])
    # the image's hash orders the chains for the bootstrap (the same interval in any listing order)
    assert set(folder.scored[0]) == {"s", "category", "refused_at", "repeats", "image"}  # image: 16 hex digits
    dim = len(records[0]["result"]["embedding0"])
    assert all(f.n == len(records) for f in folder.features)
    assert all(f.rows is None or len(f.rows) <= dim for f in folder.features)


def test_frechet_distance_with_fewer_samples_than_dimensions_by_hand():
    # 1-D features embedded in 5 dimensions, 3 samples each: C_x = diag(var_x, 0, ...), C_y likewise, so
    # Tr((C_x C_y)^(1/2)) = sqrt(var_x var_y) and the distance is (mu_x - mu_y)^2 + (sd_x - sd_y)^2
    x = np.zeros((3, 5))
    y = np.zeros((3, 5))
    x[:, 0] = [1.0, 2.0, 3.0]  # mean 2, variance 1
    y[:, 0] = [4.0, 6.0, 8.0]  # mean 6, variance 4
    assert frechet_distance(x, y) == pytest.approx((2 - 6) ** 2 + (1 - 2) ** 2)
    # and both paths (n < d: singular values; n >= d: eigh) agree with scipy's sqrtm on a full-rank case
    from scipy import linalg

    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(40, 6)), rng.normal(0.5, 1.5, size=(30, 6))
    c1, c2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    ref = ((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(c1 + c2 - 2 * np.real(linalg.sqrtm(c1 @ c2)))
    assert frechet_distance(a, b) == pytest.approx(ref, rel=1e-9)
    wide_a, wide_b = rng.normal(size=(5, 12)), rng.normal(size=(7, 12))
    w1, w2 = np.cov(wide_a, rowvar=False), np.cov(wide_b, rowvar=False)
    ev = np.linalg.eigvals(w1 @ w2)
    ref = ((wide_a.mean(0) - wide_b.mean(0)) ** 2).sum() + np.trace(w1 + w2) - 2 * np.sqrt(np.clip(ev.real, 0, None)).sum()
    assert frechet_distance(wide_a, wide_b) == pytest.approx(ref, rel=1e-6)


def test_category_groups_know_mme_and_world():
    assert category_group("commonsense_reasoning") == "visual"
    assert category_group("OCR") == "textual"
    assert category_group("numerical_calculation") == "textual"
    assert category_group("artwork") == "visual"
    assert category_group("code") == "textual"
    assert category_group("shape") == "visual"
    assert category_group("bananas") is None


@pytest.fixture(scope="module")
def world(world_of) -> Path:
    return world_of(n=16, seed=2)


def _task(world, spec="ref:describer", T=3, model=None):
    return GenCeptionTask(GenCeptionSpec(vlm=spec, generator="ref:renderer", encoder="ref:pixels", data=str(world),
                                         T=T), vlm=model)


@pytest.mark.slow  # ~5 s of CPU
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
    assert m0["GC@3"]["score"] == pytest.approx(1.0)  # error-free describer + renderer: no drift
    assert m1["GC@3"]["score"] < m0["GC@3"]["score"]
    assert m1["GC@3"]["ci95"][0] <= m1["GC@3"]["score"] <= m1["GC@3"]["ci95"][1]
    assert set(m1["by_category"]) == {"existence", "count", "position", "color", "shape", "ocr", "numerical",
                                      "code"}
    assert m1["groups"]["visual"]["categories"] == 5 and m1["groups"]["textual"]["categories"] == 3
    assert "GC_FID@3" in m1["fid"] and "warning" in m1["fid"]  # 16 images < 50: warned
    assert m1["s@3_unweighted"]["score"] == pytest.approx(m1["s_mean"][2])


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


@pytest.mark.slow
def test_chain_resumes_midway_without_repeating_calls(world, tmp_path):
    clean = FlakyDescriber(fail=False)
    run_task(_task(world, clean.model_id, model=clean), tmp_path / "clean", RunOptions(progress=False,
                                                                                      max_concurrency=1))
    flaky = FlakyDescriber(fail=True)
    res = run_task(_task(world, flaky.model_id, model=flaky), tmp_path / "run", RunOptions(progress=False,
                                                                                          max_concurrency=1))
    assert res.results["counts"]["failed"] == 1
    inc = res.results["metrics"]["chains"]["failed_list"]
    assert inc[0]["t"] == 2 and inc[0]["stage"] == "describe"
    assert res.results["metrics"]["chains"]["failed"] == 1
    assert res.results["metrics"]["GC@3"]["n"] == 15  # excluded, not normalised over fewer terms
    first_calls = flaky.calls
    again = FlakyDescriber(fail=False)
    retry_failed(_task(world, again.model_id, model=again), tmp_path / "run", RunOptions(progress=False))
    assert again.calls == 2  # t = 2 and t = 3 of the failed chain only; t = 1 came from the store
    assert first_calls == clean.calls - 2 + 1  # the failed call, and the two never made
    a = json.loads((tmp_path / "run" / "results.json").read_text())["metrics"]
    b = json.loads((tmp_path / "clean" / "results.json").read_text())["metrics"]
    assert a == b


class ScriptedDescriber:
    """Wraps ref:describer; ``script(n, text)`` rewrites the n-th description (1-based, one chain at a time)."""

    def __init__(self, script, model_id="test:scripted") -> None:
        self.inner = load_model("ref:describer", "vlm")
        self.model_id = model_id
        self.capabilities = self.inner.capabilities
        self.script = script
        self.n = 0

    async def generate(self, messages, config):
        self.n += 1
        g = await self.inner.generate(messages, config)
        return g.model_copy(update={"text": self.script(self.n, g.text)})


def test_a_refusal_goes_to_the_generator_as_algorithm_1_does(world, tmp_path):
    # The 2nd description asked for is a refusal.  Algorithm 1 sends every Q_t to the generator: the refused
    # step's X_t is what the generator draws for the refusal text, and the chain goes on from it.
    import asyncio

    from vlmcheck.core.spec import load_model
    from vlmcheck.metrics.stats import cosine
    from vlmcheck.methods.genception import P_GEN

    refusal = "I apologize, but I can't help with that."
    vlm = ScriptedDescriber(lambda n, text: refusal if n == 2 else text)
    res = run_task(_task(world, vlm.model_id, model=vlm), tmp_path, RunOptions(progress=False, max_concurrency=1))
    m = res.results["metrics"]
    assert m["chains"]["scored"] == 16 and m["chains"]["refused"] == 1 and m["chains"]["failed"] == 0
    assert m["refusal_rate"] == pytest.approx(1 / 16)
    rows = [json.loads(x)["result"] for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    (r,) = [r for r in rows if r.get("refused_at")]
    t0 = r["refused_at"]
    # by hand, the refused step: the generator's image of P_Gen(refusal), encoded, cosine with X0's embedding
    gen, enc = load_model("ref:renderer", "generator"), load_model("ref:pixels", "encoder")
    x_t = asyncio.run(gen.generate_image(P_GEN.format(description=refusal), seed=0))
    e_t = asyncio.run(enc.encode([x_t]))[0]
    assert r["s"][t0 - 1] == pytest.approx(cosine(np.array(r["embedding0"]), e_t))
    assert r["steps"][t0 - 1]["refused"] and r["steps"][t0 - 1]["description"] == refusal
    s = r["s"]
    assert len(s) == 3 and r["gc"]["GC@3"] == pytest.approx((1 * s[0] + 2 * s[1] + 3 * s[2]) / 6)  # eq. 3
    # the headline counts the chain as generated; beside it, the chains that never refused and the penalised
    honest = [x["gc"]["GC@3"] for x in rows if not x.get("refused_at")]
    assert m["GC@3"]["image_mean"] == pytest.approx((sum(honest) + r["gc"]["GC@3"]) / 16)
    assert m["GC@3_non_refused"]["image_mean"] == pytest.approx(sum(honest) / 15)
    pen = s[: t0 - 1] + [-1.0] * (3 - t0 + 1)
    by_hand = sum(t * v for t, v in zip((1, 2, 3), pen)) / 6
    assert m["GC@3_penalised"]["image_mean"] == pytest.approx((sum(honest) + by_hand) / 16)
    assert m["fid"]["n"] == 16  # every chain has an image at every step


def test_an_empty_answer_stops_its_chain_and_is_counted_apart(world, tmp_path):
    vlm = ScriptedDescriber(lambda n, text: "" if n == 2 else text, model_id="test:empty")
    res = run_task(_task(world, vlm.model_id, model=vlm), tmp_path, RunOptions(progress=False, max_concurrency=1))
    m = res.results["metrics"]
    assert m["chains"]["empty"] == 1 and m["chains"]["scored"] == 15
    assert m["chains"]["failed_by_reason"] == {"empty_description": 1}
    assert m["refusal_rate"] == pytest.approx(1 / 16)
    assert m["GC@3_penalised"]["n"] == 16 and m["GC@3"]["n"] == 15


@pytest.mark.parametrize("text, kind", [
    ("I'm sorry, but I can't help with that.", "refusal"),
    ("I apologize, but I can't help with that.", "refusal"),  # the old rule let this one through
    ("I'm sorry, but I can't help with describing this image because it may contain sensitive content and I "
     "want to be careful; I am unable to provide a description of people or places that might be private or "
     "identifying in any way at all.", "refusal"),  # 44 words: no length threshold
    ("I cannot be completely sure about every detail in this picture because it is small and somewhat blurry "
     "in places. The image shows a red circle in the top left.", None),  # a 20-word hedge, then a description
    ("I cannot read the small text, but the image shows a red circle.", None),
    ("Sorry, I cannot describe this. Is there anything else I can help with?", "refusal"),
    ("A red circle and a blue square on a white background.", None),
    ("", "empty"), ("   ", "empty"),
])
def test_one_structural_rule_classifies_refusals(text, kind):
    from vlmcheck.core.roles import Generation
    from vlmcheck.methods.refusals import refusal_kind

    assert refusal_kind(Generation(text=text)) == kind


def test_hedged_descriptions_are_descriptions(world, tmp_path):
    vlm = ScriptedDescriber(lambda n, text: "I cannot read the small text, but the image shows this. " + text
                            if n % 2 else text, model_id="test:hedger")
    res = run_task(_task(world, vlm.model_id, model=vlm), tmp_path, RunOptions(progress=False, max_concurrency=1))
    m = res.results["metrics"]
    assert m["chains"]["scored"] == 16 and m["chains"]["refused"] == 0 and m["refusal_rate"] == 0.0
    assert m["GC@3"]["n"] == 16


class NaNEncoder:
    """ref:pixels, except that one image's embedding is NaN."""

    def __init__(self, bad_sha: str) -> None:
        self.inner = load_model("ref:pixels", "encoder")
        self.model_id = "test:nan-encoder"
        self.capabilities = self.inner.capabilities
        self.bad = bad_sha

    async def encode(self, images):
        from vlmcheck.core.images import image_hash

        out = np.array(await self.inner.encode(images), dtype=np.float32)
        for i, im in enumerate(images):
            if image_hash(im) == self.bad:
                out[i, 0] = np.nan
        return out


def test_nan_embedding_is_an_error_for_that_chain(world, tmp_path):
    from vlmcheck.core.images import image_hash, load_image

    first = json.loads((world / "manifest.jsonl").read_text().splitlines()[0])
    enc = NaNEncoder(image_hash(load_image(world / first["image"])))
    task = GenCeptionTask(GenCeptionSpec(vlm="ref:describer", generator="ref:renderer", encoder=enc.model_id,
                                         data=str(world), T=2), encoder=enc)
    res = run_task(task, tmp_path, RunOptions(progress=False))
    m = res.results["metrics"]
    assert m["chains"]["failed"] == 1 and m["GC@2"]["n"] == 15
    assert np.isfinite(m["GC@2"]["score"]) and np.isfinite(m["GC_FID@2"])
    row = json.loads((tmp_path / "samples.jsonl").read_text().splitlines()[0])
    assert "non-finite embedding" in row["error"]["message"]


def _summary_of(records, T=1, categories=True):
    """GenCeption's summary over hand-made chains (s values given), without models."""
    task = object.__new__(GenCeptionTask)
    task.cfg = GenCeptionSpec(vlm="x", generator="g", encoder="e", data="d", T=T)
    rows = []
    for i, (cat, s) in enumerate(records):
        rows.append({"result": {"image": str(i), "category": cat, "complete": True, "s": list(s),
                                "embedding0": [float(i), 0.0], "steps": [{"embedding": [float(i), 1.0]}] * T}})
    return task.summarize(rows)


def test_overall_score_is_the_mean_of_category_means():
    # MME-like unequal categories: 1 existence image, 3 OCR images
    m = _summary_of([("existence", [0.9]), ("OCR", [0.3]), ("OCR", [0.4]), ("OCR", [0.2])])
    assert m["GC@1"]["score"] == pytest.approx((0.9 + (0.3 + 0.4 + 0.2) / 3) / 2)  # 0.6
    assert m["GC@1"]["image_mean"] == pytest.approx((0.9 + 0.3 + 0.4 + 0.2) / 4)  # 0.45
    assert m["GC@1"]["categories"] == 2 and m["GC@1"]["n"] == 4
    assert m["groups"]["visual"]["GC@1"] == pytest.approx(0.9)
    assert m["groups"]["textual"]["GC@1"] == pytest.approx(0.3)


def _write_run(folder: Path, vlm: str, metrics: dict) -> Path:
    folder.mkdir(parents=True)
    spec = {"task_spec": {"vlm": vlm, "generator": "g", "encoder": "e"}}
    (folder / "results.json").write_text(json.dumps({"task": "genception", "spec": spec, "metrics": metrics}))
    return folder


def test_leaderboard_ranks_on_category_means_not_image_means(tmp_path):
    # Model A: existence 0.9 (1 image), OCR 0.3 (9 images): category mean 0.6, image mean 0.36.
    # Model B: 0.5 everywhere: category mean 0.5, image mean 0.5.  MME ranks A first.
    a = _summary_of([("existence", [0.9])] + [("OCR", [0.3])] * 9)
    b = _summary_of([("existence", [0.5])] + [("OCR", [0.5])] * 9)
    assert a["GC@1"]["image_mean"] < b["GC@1"]["image_mean"]
    board = leaderboard([_write_run(tmp_path / "a", "A", a), _write_run(tmp_path / "b", "B", b)])
    assert list(board["models"]) == ["A", "B"]
    assert board["models"]["A"]["GC@1"] == pytest.approx(0.6) and board["models"]["A"]["rank"] == 1.0
    assert board["models"]["A"]["image_mean"] == pytest.approx(0.36)
    assert board["gc_rank_weights"] == {"benchmark": "MME", "visual": 10, "textual": 4}


def test_gc_rank_reproduces_genception_v1_table_2():
    from vlmcheck.methods.leaderboard import BENCHMARK_GROUPS, gc_rank

    # Vis mean (GC@1, GC@3, GC@5) and Txt mean (GC@1, GC@3) as printed in v1 Table 2.
    table = {
        "GPT-4V": {"visual": {1: 0.491, 3: 0.393, 5: 0.335}, "textual": {1: 0.375, 3: 0.246}},
        "mPLUG-Owl2": {"visual": {1: 0.366, 3: 0.287, 5: 0.243}, "textual": {1: 0.284, 3: 0.181}},
        "LLaVA-13B": {"visual": {1: 0.366, 3: 0.264, 5: 0.220}, "textual": {1: 0.291, 3: 0.174}},
        "LLaVA-7B": {"visual": {1: 0.339, 3: 0.255, 5: 0.215}, "textual": {1: 0.252, 3: 0.149}},
    }
    got = gc_rank(table, BENCHMARK_GROUPS["MME"])
    # By hand: mPLUG and LLaVA-13B tie on visual GC@1 and share rank 2.  Visual ranks 1, 2, 8/3, 4;
    # textual 1, (3+2)/2, (2+3)/2, 4; GC rank = 10/14 vis + 4/14 txt.
    assert got["mPLUG-Owl2"]["rank_visual"] == pytest.approx(2.0)
    assert got["LLaVA-13B"]["rank_visual"] == pytest.approx(8 / 3)
    assert got["LLaVA-13B"]["rank_textual"] == pytest.approx(2.5)
    printed = {"GPT-4V": 1.00, "mPLUG-Owl2": 2.14, "LLaVA-13B": 2.62, "LLaVA-7B": 4.00}
    assert {m: round(r["gc_rank"], 2) for m, r in got.items()} == printed


def test_gc_rank_uses_the_papers_columns_only():
    # T = 3: GC@1 and GC@3 count, GC@2 does not (v1 Table 2 prints GC@1, GC@3, GC@5).  By hand, MME weights:
    # visual A ranks (GC@1 1, GC@3 2) -> 1.5, B (2, 1) -> 1.5; textual A (1, 1) -> 1, B (2, 2) -> 2;
    # GC rank A = (10 * 1.5 + 4 * 1) / 14 = 19/14, B = (10 * 1.5 + 4 * 2) / 14 = 23/14: A first.
    # Counting GC@2 too would give A (10 * 5/3 + 4 * 4/3) / 14 = 22/14 and B 20/14: B first.
    from vlmcheck.methods.leaderboard import BENCHMARK_GROUPS, gc_rank, gc_rank_columns

    table = {"A": {"visual": {1: 0.9, 2: 0.1, 3: 0.5}, "textual": {1: 0.9, 2: 0.1, 3: 0.9}},
             "B": {"visual": {1: 0.8, 2: 0.9, 3: 0.6}, "textual": {1: 0.8, 2: 0.9, 3: 0.8}}}
    got = gc_rank(table, BENCHMARK_GROUPS["MME"])
    assert got["A"]["gc_rank"] == pytest.approx(19 / 14) and got["B"]["gc_rank"] == pytest.approx(23 / 14)
    assert gc_rank_columns(table, "visual") == [1, 3]


def test_ties_share_the_best_rank():
    from vlmcheck.metrics.stats import ranks

    # v2 Table 4's overall ranks read 5, 5, 7 for 0.344, 0.344, 0.314 below four better models
    r = ranks({"a": 0.463, "b": 0.451, "c": 0.462, "d": 0.458, "e": 0.344, "f": 0.344, "g": 0.314})
    assert [r[k] for k in "acdbefg"] == [1, 2, 3, 4, 5, 5, 7]


def test_gc_fid_is_the_t_weighted_average_of_fid(world, tmp_path):
    res = run_task(_task(world, "ref:describer?level=0.3"), tmp_path, RunOptions(progress=False))
    m = res.results["metrics"]
    rows = [json.loads(x)["result"] for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    X0 = np.array([r["embedding0"] for r in rows])
    fid = [frechet_distance(X0, np.array([r["steps"][t]["embedding"] for r in rows])) for t in range(3)]
    assert m["fid"]["fid@1"] == pytest.approx(fid[0]) and m["fid"]["fid@3"] == pytest.approx(fid[2])
    assert m["GC_FID@1"] == pytest.approx(fid[0])
    assert m["GC_FID@2"] == pytest.approx((1 * fid[0] + 2 * fid[1]) / 3)
    assert m["GC_FID@3"] == pytest.approx((1 * fid[0] + 2 * fid[1] + 3 * fid[2]) / 6)


def test_a_world_run_missing_categories_keeps_the_worlds_weights(tmp_path):
    # 3 scenes: existence, count, position only, all MME names too.  The world declares its name
    # (dataset.json), so the GC rank weights are the world's 5/3, not MME's 10/4.
    from vlmcheck.core.data import dataset_name
    from vlmcheck.methods.leaderboard import benchmark_weights, leaderboard

    small = tmp_path / "w3"
    make_world(small, n=3, seed=0)
    assert dataset_name(small) == "world" and dataset_name(small / "manifest.jsonl") == "world"
    assert dataset_name("hfds:lmms-lab/MME?split=test") == "MME"
    folders = []
    for lv in (0.0, 0.3):
        run_task(_task(small, f"ref:describer?level={lv}", T=1), tmp_path / f"r{lv}", RunOptions(progress=False))
        folders.append(tmp_path / f"r{lv}")
    cats = json.loads((folders[0] / "results.json").read_text())["metrics"]["by_category"]
    assert set(cats) <= {"existence", "count", "position"}
    assert benchmark_weights(cats) == ("MME", {"visual": 10, "textual": 4})  # what category overlap says
    assert leaderboard(folders)["gc_rank_weights"] == {"benchmark": "world", "visual": 5, "textual": 3}


@pytest.mark.slow
def test_leaderboard_gc_rank_fid_ranking_and_correlations(world, tmp_path):
    from scipy import stats

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
    assert models == ["describer (level=0.0)", "describer (level=0.1)", "describer (level=0.3)"]
    r = board["models"]["describer (level=0.3)"]
    assert r["rank"] == 3.0
    assert board["gc_rank_weights"] == {"benchmark": "world", "visual": 5, "textual": 3}
    assert r["gc_rank"] == pytest.approx((5 * r["rank_visual"] + 3 * r["rank_textual"]) / 8)
    corr = board["correlations"]["MMB"]
    assert set(corr) == {"GC@1", "GC@3", "s@3"}
    assert corr["GC@3"]["kendall"] == pytest.approx(1.0) and corr["GC@3"]["spearman"] == pytest.approx(1.0)
    assert corr["GC@3"]["kendall_p"] == pytest.approx(1 / 3)  # exact test, n = 3: 2 of 3! orders are as extreme
    xs = [board["models"][m]["s@3_unweighted"] for m in models]
    assert corr["s@3"]["pearson"] == pytest.approx(stats.pearsonr(xs, [90, 70, 40])[0])
    fr = board["fid_ranking"]
    assert fr["ranks"]["describer (level=0.0)"] == 1.0  # lower GC_FID is better
    assert fr["same_order"] is (fr["ranks"] == fr["cosine_ranks"])


@pytest.mark.slow  # ~2.5 s of CPU
def test_gc_fid_compares_models_on_the_images_every_model_completed(world, tmp_path):
    # model B's chain fails on one image (its 4th description call raises): B has 15 chains, A 16.  The
    # leaderboard's GC_FID@3_common is each model's GC_FID on the 15 images both completed (v2 eq. 4 by hand
    # from the stored features); each run's own figure, with its n, stays.
    from vlmcheck.methods.leaderboard import leaderboard

    def boom(n, text):
        if n == 4:
            raise RuntimeError("the server fell over")
        return text

    a, b = tmp_path / "a", tmp_path / "b"
    run_task(_task(world, "ref:describer?level=0.1"), a, RunOptions(progress=False))
    vlm = ScriptedDescriber(boom, model_id="test:flaky")
    run_task(_task(world, vlm.model_id, model=vlm), b, RunOptions(progress=False, max_concurrency=1))
    board = leaderboard([a, b])
    assert board["fid_common"]["n"] == 15
    rows_b = {json.loads(x)["sample_id"]: json.loads(x) for x in (b / "samples.jsonl").read_text().splitlines()}
    common = sorted(k for k, r in rows_b.items() if r["status"] == "done")
    assert len(common) == 15
    for folder, model in ((a, "describer"), (b, "flaky")):  # the models' ids (run/labels.py)
        rows = {json.loads(x)["sample_id"]: json.loads(x)["result"]
                for x in (folder / "samples.jsonl").read_text().splitlines()}
        x0 = np.array([rows[k]["embedding0"] for k in common])
        fid = [frechet_distance(x0, np.array([rows[k]["steps"][t]["embedding"] for k in common])) for t in range(3)]
        by_hand = (1 * fid[0] + 2 * fid[1] + 3 * fid[2]) / 6
        assert board["models"][model]["GC_FID@3_common"] == pytest.approx(by_hand)
    assert board["models"]["describer"]["fid_n"] == 16 and board["models"]["flaky"]["fid_n"] == 15
    assert board["fid_ranking"]["on"] == "GC_FID@3_common"


def test_human_baseline_per_category_with_hedged_descriptions(world, tmp_path):
    from vlmcheck.core.data import load_image_dataset
    from vlmcheck.methods.genception import per_category_sample

    items = load_image_dataset(world)
    chosen = per_category_sample(items, 1, seed=3)
    # one image per category, the same draw whatever the dataset order, another draw for another seed
    assert sorted(it.category for it in chosen) == sorted({it.category for it in items})
    assert [it.id for it in per_category_sample(items[::-1], 1, seed=3)][::-1] == [it.id for it in chosen]
    assert {it.id for it in per_category_sample(items, 2, seed=3)} >= set()  # at most 2 per category
    assert all(sum(it.category == c for it in per_category_sample(items, 2, seed=3)) <= 2
               for c in {it.category for it in items})
    rows = {json.loads(x)["image"]: json.loads(x) for x in (world / "manifest.jsonl").read_text().splitlines()}
    humans = tmp_path / "humans.csv"
    with humans.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image", "text"])
        for it in chosen:  # humans describe the drawn images, each opening with a hedge
            desc = rows[str(Path(it.path).relative_to(world))]["description"]
            w.writerow([it.path, "I cannot be completely sure, but " + desc.replace("there is", "you can see")])
    task = GenCeptionTask(GenCeptionSpec(vlm=f"human:{humans}", generator="ref:renderer", encoder="ref:pixels",
                                         data=str(world), T=1, per_category=1, seed=3))
    res = run_task(task, tmp_path / "run", RunOptions(progress=False))
    m = res.results["metrics"]
    assert m["chains"]["total"] == len(chosen) and m["chains"]["scored"] == len(chosen)
    assert m["chains"]["refused"] == 0 and m["chains"]["failed"] == 0
    assert m["GC@1"]["score"] == pytest.approx(1.0)
    # an image the humans did not describe is an error for that chain, not a refusal
    task = GenCeptionTask(GenCeptionSpec(vlm=f"human:{humans}", generator="ref:renderer", encoder="ref:pixels",
                                         data=str(world), T=1, per_category=2, seed=3))
    m = run_task(task, tmp_path / "run2", RunOptions(progress=False)).results["metrics"]
    assert m["chains"]["refused"] == 0 and m["chains"]["failed"] == m["chains"]["total"] - len(chosen)


def test_default_prompt_is_table_1():
    assert P_DESC.startswith("Please write a clear, precise, detailed, and concise description of all elements")
    assert P_DESC.endswith("You must complete the description using less than 500 words.")


def test_hugging_face_dataset_with_image_column(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    from PIL import Image as PILImage

    from vlmcheck.methods.cast import corpus_from
    from vlmcheck.methods.records import load_images as load_image_dataset

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
