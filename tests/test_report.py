"""The HTML report: content, escaping, and behaviour in headless Chromium."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlmcheck.core.roles import Capabilities, Generation
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.report.html import build_report
from vlmcheck import RunOptions, run_task

PAYLOAD = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">"</script>'


class Evil:
    model_id = "test:evil"
    capabilities = Capabilities()

    async def generate(self, messages, config):
        return Generation(text="A cat. " + PAYLOAD, finish_reason="stop")


@pytest.fixture
def evil_run(tmp_path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        Image.new("RGB", (16, 16), (i * 60, 0, 0)).save(data / f"img{i}.png")
    (data / "broken.png").write_bytes(b"not an image")
    run_task(DescribeTask(DescribeSpec(vlm="test:evil", data=str(data)), vlm=Evil()), tmp_path / "run",
             RunOptions(progress=False))
    return tmp_path / "run"


def test_run_writes_its_report_and_escapes(evil_run):
    page = (evil_run / "report.html").read_text()
    assert "<script>window.__pwned" not in page  # never raw in the page
    assert "onerror=\"window" not in page
    assert "bad_image" in page  # errors with reasons
    assert "test:evil" in page


def _chromium():
    pw = pytest.importorskip("playwright.sync_api")
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    return pw, exe


def _open(page_path: Path):
    pw, exe = _chromium()
    p = pw.sync_playwright().start()
    browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    started = time.perf_counter()
    page.goto(page_path.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=15_000)
    ready = time.perf_counter() - started
    return p, browser, page, dialogs, ready


@pytest.mark.slow
def test_payload_is_inert_in_a_browser(evil_run):
    p, browser, page, dialogs, _ = _open(evil_run / "report.html")
    try:
        assert page.evaluate("window.__pwned") is None
        assert not dialogs
        cell = page.locator("table.samples tbody tr[data-id='img0.png'] td").nth(3)
        assert PAYLOAD in cell.inner_text()  # shown as text
        assert page.locator("table.samples img[src='x']").count() == 0
    finally:
        browser.close()
        p.stop()


def _big_run(folder: Path, n: int = 2000) -> Path:
    folder.mkdir(parents=True)
    img = folder / "x.png"
    Image.new("RGB", (64, 64), "blue").save(img)
    rows = []
    for i in range(n):
        ok = i % 7 != 0
        rows.append({"sample_id": f"case-{i:04d}", "seq": i, "status": "done", "task": "vhexpansion", "result": {
            "image": str(img), "question": f"Is there a cat {i}?", "answer": "yes", "meta": {},
            "negation": {"ok": True, "question": "Is there no cat?", "answer": "no"},
            "variants": {"original": {"answer": "Yes." if ok else "No.", "parsed": "yes" if ok else "no",
                                      "correct": ok, "params": {}},
                         "vhx_jpeg": {"image": "x.png", "answer": "Yes.", "parsed": "yes", "correct": True,
                                      "params": {"corruption": "jpeg_compression"}}}}})
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "results.json").write_text(json.dumps({
        "task": "vhexpansion", "spec": {"task_spec": {"vlm": "test:model"}, "seed": 0, "n_samples": n},
        "counts": {"samples": n, "done": n, "failed": 0, "pending": 0},
        "metrics": {"variants": {"original": {"accuracy": 6 / 7, "symmetric_accuracy": 0.8, "yes_ratio": 0.86,
                                              "new_vh_cases": 0}}}}))
    return folder


@pytest.mark.slow
def test_two_thousand_samples_interactive_fast(tmp_path):
    run = _big_run(tmp_path / "big")
    other = _big_run(tmp_path / "big2")
    # a second model that differs on one sample, for the disagreement filter
    lines = (other / "samples.jsonl").read_text().splitlines()
    rec = json.loads(lines[5])
    rec["result"]["variants"]["original"]["parsed"] = "no"
    lines[5] = json.dumps(rec)
    (other / "samples.jsonl").write_text("\n".join(lines) + "\n")
    page_path = build_report([run, other], tmp_path / "report.html")
    p, browser, page, dialogs, ready = _open(page_path)
    try:
        print(f"2 x 2000 samples: interactive after {ready:.2f} s")
        assert ready < 3.0
        sec = page.locator("section.run").first
        assert sec.locator("table.samples tbody tr").count() == 50  # paged
        assert "page 1 / 40" in sec.locator(".page").inner_text()
        sec.locator(".only-failures").check()
        assert "(286 rows)" in sec.locator(".page").inner_text()  # i % 7 == 0 for i < 2000
        sec.locator(".only-failures").uncheck()
        sec.locator(".only-disagree").check()
        assert "(1 rows)" in sec.locator(".page").inner_text()
        sec.locator(".only-disagree").uncheck()
        sec.locator(".search").fill("case-1999")
        rows = sec.locator("table.samples tbody tr")
        assert rows.count() == 1 and rows.first.get_attribute("data-id") == "case-1999"
    finally:
        browser.close()
        p.stop()


@pytest.mark.slow
def test_a_large_run_keeps_its_first_page_in_the_report_and_loads_the_rest_on_demand(tmp_path):
    """4,500 samples (more than INLINE_MAX = 2,000): the page holds 50 rows, the rest are 5 script files of
    1,000 rows and an index, loaded from a plain folder when a page or a filter needs them."""
    run = _big_run(tmp_path / "big", n=4500)
    other = _big_run(tmp_path / "big2", n=4500)
    lines = (other / "samples.jsonl").read_text().splitlines()
    rec = json.loads(lines[4321])  # the runs disagree on one sample, deep in the run
    rec["result"]["variants"]["original"]["parsed"] = "no"
    lines[4321] = json.dumps(rec)
    (other / "samples.jsonl").write_text("\n".join(lines) + "\n")
    page_path = build_report([run, other], tmp_path / "report.html")
    files = tmp_path / "report_files"
    assert sorted(f.name for f in files.glob("rows-0-*.js")) == [f"rows-0-{k}.js" for k in range(5)] + [
        "rows-0-index.js"]
    small = _big_run(tmp_path / "small", n=300)
    assert page_path.stat().st_size < 3 * build_report([small], tmp_path / "small.html").stat().st_size
    p, browser, page, dialogs, ready = _open(page_path)
    try:
        assert ready < 3.0
        sec = page.locator("section.run").first
        rows = sec.locator("table.samples tbody tr")
        assert rows.count() == 50 and "page 1 / 90 (4500 of 4500 rows)" in sec.locator(".page").inner_text()
        sec.locator(".next").click()  # rows 50-99: the first file loads
        page.wait_for_selector("section#run-0 table.samples tr[data-id='case-0050']")
        assert rows.count() == 50 and rows.last.get_attribute("data-id") == "case-0099"
        sec.locator(".only-failures").check()  # over every row: i % 7 == 0 for i < 4500, 643 of them
        page.wait_for_function("() => document.querySelector('section#run-0 .page').textContent"
                               ".includes('(643 of 4500 rows)')")
        sec.locator(".only-failures").uncheck()
        sec.locator(".only-disagree").check()
        page.wait_for_selector("section#run-0 table.samples tr[data-id='case-4321']")
        assert rows.count() == 1 and "(1 of 4500 rows)" in sec.locator(".page").inner_text()
        sec.locator(".only-disagree").uncheck()
        sec.locator(".search").fill("case-3999")
        page.wait_for_selector("section#run-0 table.samples tr[data-id='case-3999']")
        assert rows.count() == 1
        assert not dialogs
    finally:
        browser.close()
        p.stop()


@pytest.mark.slow
def test_a_report_made_again_removes_the_rows_files_it_no_longer_uses(tmp_path):
    """An earlier build's rows files that the new page does not load are removed once the new page is written;
    the folder holds rows files only (the images are linked, never copied)."""
    big = _big_run(tmp_path / "big", n=3500)  # 4 chunk files + an index
    page_path = build_report([big], tmp_path / "report.html")
    files = tmp_path / "report_files"
    assert sorted(f.name for f in files.iterdir()) == [f"rows-0-{k}.js" for k in range(4)] + ["rows-0-index.js"]
    smaller = _big_run(tmp_path / "smaller", n=2500)  # 3 chunks now
    build_report([smaller], page_path)
    assert sorted(f.name for f in files.glob("rows-*.js")) == [f"rows-0-{k}.js" for k in range(3)] + [
        "rows-0-index.js"]
    build_report([_big_run(tmp_path / "small", n=10)], page_path)  # fits in the page: no rows file at all
    assert not list(files.glob("rows-*.js"))


def test_images_are_linked_by_their_bytes_never_copied(tmp_path):
    """A PNG, JPEG, GIF, WebP or BMP is linked where it lies (relative to the page), whatever its name says; a
    file that is no image or is missing gets nothing; a TIFF (no browser shows it) a small embedded JPEG."""
    import base64
    import io

    from vlmcheck.report.thumbs import THUMB, _Thumbs

    rng = np.random.default_rng(1)
    data = tmp_path / "data dir"
    data.mkdir()
    pixels = Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8))
    for name, fmt in [("a.png", "PNG"), ("b.jpg", "JPEG"), ("c.gif", "GIF"), ("d.webp", "WEBP"), ("e.bmp", "BMP"),
                      ("jpeg-named.png", "JPEG")]:
        pixels.save(data / name, format=fmt)
    pixels.save(data / "f.tif", format="TIFF")
    (data / "text.png").write_text("not an image")
    thumbs = _Thumbs(tmp_path / "out" / "report_files")
    for name in ("a.png", "b.jpg", "c.gif", "d.webp", "e.bmp", "jpeg-named.png"):
        row = thumbs.image(data / name, name)
        assert row["thumb"] == row["full"] == f"../data%20dir/{name}"
    tiff = thumbs(data / "f.tif")
    assert tiff.startswith("data:image/jpeg;base64,")
    with Image.open(io.BytesIO(base64.b64decode(tiff.split(",", 1)[1]))) as img:
        assert max(img.size) == THUMB
    assert thumbs(data / "text.png") is None and thumbs.full(tmp_path / "missing.png") is None
    assert not (tmp_path / "out").exists()  # nothing written


def test_an_image_link_is_the_relative_path_of_the_whole_file(tmp_path, monkeypatch):
    """The link is made from its folder's relative path, worked out once per folder: the same text as the file's
    own path relative to the page, quoted, wherever the page and the images lie (above, below, beside, deeper)."""
    import os
    from urllib.parse import quote

    from vlmcheck.report.thumbs import _Thumbs

    png = b"\x89PNG\r\n\x1a\n" + bytes(8)
    folders = [".", "a", "a/b", "a/b/c", "x y", "a/%20", "\u00e9/\u00fc", "a/b/report", "deep/1/2/3"]
    files = []
    for folder in folders:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        for name in ("1.png", "sp ace.png", "q?#.png", "\u00e9.png", "zz"):
            (tmp_path / folder / name).write_bytes(png)
            files.append(str(tmp_path / folder / name))
    for folder in (".", "a", os.fsdecode(b"not-utf8-\xff")):  # a name or folder that is not UTF-8: a file URL
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / os.fsdecode(b"bad\xff\xfe.png")).write_bytes(png)
        files.append(str(tmp_path / folder / os.fsdecode(b"bad\xff\xfe.png")))
        (tmp_path / folder / "ok.png").write_bytes(png)
        files.append(str(tmp_path / folder / "ok.png"))
    monkeypatch.chdir(tmp_path / "a")
    for out in ("a/b/report/r_files", "r_files", "a/r_files", "deep/1/2/3/r_files", "q/r/r_files"):
        thumbs = _Thumbs(tmp_path / out)
        page = os.path.abspath(tmp_path / out / "..")
        for f in files + [f.replace(str(tmp_path), f"{tmp_path}/./") for f in files] + [os.path.relpath(f) for f in files]:
            try:
                want = quote(Path(os.path.relpath(os.path.abspath(f), page)).as_posix())
            except ValueError:
                want = Path(os.path.abspath(f)).as_uri()
            assert thumbs(f) == want, (f, out)


def test_the_reliability_diagram_is_in_data_coordinates():
    # Accuracy against mean confidence per bin on [0, 1] axes; the diagonal runs from (0, 0) to (1, 1) in data
    # coordinates (it used to be drawn in bin-number space, a near-vertical line inside bin 0).
    from vlmcheck.report.charts import reliability_figure

    bins = [{"n": 5, "confidence": 0.35, "accuracy": 0.2}, {"n": 5, "confidence": 0.62, "accuracy": 0.6},
            {"n": 4, "confidence": 0.91, "accuracy": 1.0}]
    fig = reliability_figure(bins)
    ax = fig.axes[0]
    assert ax.get_xlim() == (0.0, 1.0) and ax.get_ylim() == (0.0, 1.0)
    diagonal, points = ax.lines[0], ax.lines[1]
    assert list(diagonal.get_xdata()) == [0, 1] and list(diagonal.get_ydata()) == [0, 1]
    assert list(points.get_xdata()) == [0.35, 0.62, 0.91] and list(points.get_ydata()) == [0.2, 0.6, 1.0]
    assert [t.get_text() for t in ax.texts] == ["5", "5", "4"]  # bin counts


def _folder(path, task, metrics, samples=()):
    path.mkdir()
    (path / "results.json").write_text(json.dumps({"task": task, "metrics": metrics, "counts": {}, "spec": {}}))
    (path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return path


def test_headlines_say_what_the_numbers_are(tmp_path):
    from vlmcheck.report.html import build_report, headline, headline_of

    mmb = {"vanilla_accuracy": 0.6, "circular_accuracy": 0.4, "settings": {"standard": {"accuracy": 0.6}}}
    rob = {"acc_random": 0.25, "rrm": {"image": 60.0, "text": 90.0, "both": 45.0},
           "settings": {"corrupt:both": {"accuracy": 0.5}, "original": {"accuracy": 0.8}}}
    # a results.json that records no headline is not read by guesswork: one sentence naming the version that
    # wrote it, and no number
    old = {"task": "chef", "spec": {"vlmcheck_version": "0.0.9"}, "metrics": mmb}
    assert headline(old) == ("-", None)
    assert "written by vlmcheck 0.0.9" in headline_of(old)["not_measured"]
    pope_sample = {"sample_id": "p0", "status": "done", "task": "chef", "seq": 0, "result": {
        "question": "Is there a cat?", "options": ["Yes", "No"],
        "settings": {"standard": {"pred": 1, "correct": True}}}}
    runs = [_folder(tmp_path / "rob", "chef", rob), _folder(tmp_path / "mmb", "chef", mmb),
            _folder(tmp_path / "pope", "chef", {"pope": {"accuracy": 1.0}, "settings": {"standard": {"accuracy": 1.0}}},
                    [pope_sample]),
            _folder(tmp_path / "vhx", "vhexpansion", {"variants": {
                "original": {"accuracy": 0.5, "symmetric_accuracy": 0.0, "yes_ratio": 1.0, "new_vh_cases": 3},
                "vhx_jpeg": {"accuracy": 0.5, "symmetric_accuracy": 0.25, "yes_ratio": 0.6, "new_vh_cases": 2}}})]
    page = build_report(runs, tmp_path / "r.html").read_text()
    # clean before corrupted, and the RRM figures
    assert page.index("<td>original</td>") < page.index("<td>corrupt:both</td>")
    assert "image 60.0; text 90.0; both 45.0" in page
    assert "VanillaEval accuracy 0.6000" in page and "CircularEval accuracy 0.4000" in page
    # the degenerate answerer is named, on the variant where it happens only
    assert page.count("answered yes to every question") == 1
    # POPE answers read as Yes / No
    blocks = [json.loads(b.split("</script>")[0]) for b in page.split('<script type="application/json" class="rows">')[1:]]
    pope_rows = [r for rows in blocks for r in rows if r["id"] == "p0"]
    assert [r["answer"] for r in pope_rows] == ["No"]


def test_s_curves_carry_a_bootstrap_band_and_cast_heatmaps_a_colour_bar(tmp_path):
    from vlmcheck.report.charts import _cast_heatmaps, _s_curve, s_curves

    def sample(i, s):
        return {"sample_id": str(i), "status": "done", "result": {"s": s}}

    run = {"results": {"spec": {"task_spec": {"vlm": "m"}}},
           "samples": [sample(0, [0.5, 0.4]), sample(1, [0.5, 0.2]), {"sample_id": "x", "status": "error"}]}
    (curve,) = s_curves([run])
    # by hand: t=1 both images 0.5, so every resample gives 0.5; t=2 values {0.4, 0.2}: resample means are
    # 0.2, 0.3 or 0.4, so the 2.5th and 97.5th percentiles are 0.2 and 0.4
    assert curve["model"] == "m"
    assert curve["steps"][0] == {"t": 1, "mean": 0.5, "lo": 0.5, "hi": 0.5, "n": 2}
    assert curve["steps"][1]["mean"] == pytest.approx(0.3)
    assert (curve["steps"][1]["lo"], curve["steps"][1]["hi"]) == pytest.approx((0.2, 0.4))
    svg = _s_curve([run])
    assert "95% CI over images" in svg and ">m<" in svg.replace("</text>", "<").replace("> ", ">")
    mods = ["text", "image", "both"]
    top = {"free": {g: {v: {"score": 0.5} for v in mods} for g in mods}}
    (heat,) = _cast_heatmaps({"results": {"metrics": {"topk": {"top3": top}}}})
    assert "consistency" in heat["svg"] and heat["svg"].count("0.50") >= 9


@pytest.mark.slow
def test_report_v2_images_lightbox_contents_sorting_and_csv(evil_run, tmp_path):
    """In Chromium: every row's images load and open full size; a contents entry per section; tables sort;
    each CSV link holds its table."""
    from urllib.parse import unquote

    img = tmp_path / "photo.png"
    Image.new("RGB", (600, 400), (10, 120, 200)).save(img)
    (tmp_path / "adv.png").write_bytes(img.read_bytes())
    vhx = _folder(tmp_path / "vhx", "vhexpansion", {"variants": {
        "original": {"accuracy": 1.0, "symmetric_accuracy": 1.0, "yes_ratio": 0.5, "new_vh_cases": 0},
        "adv": {"accuracy": 0.0, "symmetric_accuracy": 0.0, "yes_ratio": 0.5, "new_vh_cases": 2}}},
        [{"sample_id": "v0", "status": "done", "task": "vhexpansion", "seq": 0, "result": {
            "image": str(img), "question": "Is there a sky?", "answer": "yes",
            "negation": {"ok": True, "question": "Is there no sky?"},
            "variants": {"original": {"answer": "Yes", "correct": True, "neg_answer": "No", "neg_correct": True},
                         "adv": {"image": "../adv.png", "answer": "No", "correct": False,
                                 "neg_answer": "Yes", "neg_correct": False}}}}])
    page_path = build_report([evil_run, vhx], tmp_path / "v2.html")
    p, browser, page, dialogs, _ = _open(page_path)
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.reload()
        page.wait_for_selector("body[data-ready='1']")
        # contents: one link per h2, each pointing at an existing heading
        links = page.locator("nav#toc a")
        # decisions (these hand-made runs record no headline: each left out with its reason), summary, the two runs
        assert links.count() == page.locator("h2").count() == 4
        for k in range(links.count()):
            target = links.nth(k).get_attribute("href")[1:]
            assert page.locator(f"[id='{target}']").count() == 1
        # every image loads (broken.png of the describe run has no picture at all, not a broken one)
        page.evaluate("() => Promise.all(Array.from(document.images).filter(i => i.src).map(i => i.decode()"
                      ".catch(() => null)))")
        broken = page.evaluate("Array.from(document.images).filter(i => i.src && i.closest('#lightbox') === null"
                               " && !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
        assert broken == []
        describe_imgs = page.locator("section#run-0 table.samples img[data-full]")
        assert describe_imgs.count() == 3  # img0..img2; the broken file has none
        # VHExpansion: both variants with each answer marked, the negated answer too
        vrow = page.locator("section#run-1 table.samples tr[data-id='v0']")
        assert vrow.locator("img").count() == 2
        text = vrow.inner_text()
        assert "Yes \u2713" in text and "No \u2717" in text and "negated: Yes \u2717" in text
        assert "negated: Is there no sky?" in text
        # lightbox: the full-size copy, closed by Escape
        vrow.locator("img").first.click()
        box = page.locator("#lightbox")
        assert box.is_visible()
        page.wait_for_function("document.querySelector('#lightbox img').complete", timeout=10_000)  # loads first
        assert page.evaluate("document.querySelector('#lightbox img').naturalWidth") == 600
        page.keyboard.press("Escape")
        assert not box.is_visible()
        # sorting the VHExpansion table by accuracy, both directions
        table = page.locator("section#run-1 h3 + table").first
        header = table.locator("tr").first.locator("th").nth(1)
        header.click()
        firsts = lambda: table.locator("tr").nth(1).locator("td").first.inner_text()  # noqa: E731
        assert firsts() == "original"
        header.click()
        assert firsts() == "adv"
        # the table's CSV link holds exactly what the table shows, in its current order
        href = table.locator("xpath=following-sibling::a[@class='csv'][1]").get_attribute("href")
        csv = unquote(href.split(",", 1)[1]).splitlines()
        shown = [",".join(c.strip() for c in r.split("\t")) for r in table.inner_text().splitlines()]
        assert csv[0].startswith("variant,accuracy") and len(csv) == 3
        assert [c.split(",")[0] for c in csv[1:]] == ["adv", "original"]
        assert csv == shown
        assert not errors and not dialogs
    finally:
        browser.close()
        p.stop()


def _h(name, value, ci95=None):
    """A headline as results.json records it (metrics.headline)."""
    return {"name": name, "value": value, "ci95": ci95, "interval": None, "higher_is_better": True}


def test_one_report_for_many_runs_ranks_each_method(tmp_path):
    from vlmcheck.report.html import build_report

    runs = []
    for name, task, metrics in [
            ("v1", "vhexpansion", {"headline": _h("symmetric accuracy", 0.4, [0.3, 0.5])}),
            ("v2", "vhexpansion", {"headline": _h("symmetric accuracy", 0.7, [0.6, 0.8])}),
            ("c1", "chef", {"desideratum": "calibration", "headline": _h("overall", 0.9), "settings": {}}),
            ("c2", "chef", {"desideratum": "calibration", "headline": _h("overall", 0.8), "settings": {}}),
            ("h1", "chef", {"desideratum": "hallucination", "headline": _h("POPE accuracy", 0.5), "settings": {}})]:
        f = _folder(tmp_path / name, task, metrics)
        res = json.loads((f / "results.json").read_text())
        res["spec"] = {"task_spec": {"vlm": f"model-{name}"}}
        (f / "results.json").write_text(json.dumps(res))
        runs.append(f)
    html = build_report(runs, tmp_path / "all.html").read_text()
    section = html.split("<h2>Leaderboards by method</h2>")[1].split("<h2>")[0]
    # vhexpansion: v2 (0.7) ranks above v1 (0.4); calibration: c1 above c2; a single hallucination run: no board
    assert "<h3>vhexpansion</h3>" in section and "<h3>chef: calibration</h3>" in section
    assert "hallucination" not in section
    vhx = section.split("<h3>vhexpansion</h3>")[1].split("</table>")[0]
    assert vhx.index("model-v2") < vhx.index("model-v1") and "[0.6000, 0.8000]" in vhx
    cal = section.split("<h3>chef: calibration</h3>")[1].split("</table>")[0]
    assert cal.index("model-c1") < cal.index("model-c2")


def test_a_rows_detail_is_the_head_of_its_indented_json():
    """Encoding stops once the shown characters are there; what is shown is json.dumps's text, cut."""
    from vlmcheck.report.html import _json_head

    rec = {"answer": "ünï\u2028code", "steps": [{"s": i / 7, "path": Path(f"/x/{i}")} for i in range(400)],
           "nested": {"a": [[1, 2], {"b": None}], "t": True}}
    for obj in (rec, [], {}, "text", 3.5, {"k": list(range(2000))}):
        for limit in (0, 1, 17, 600, 6000, 10 ** 6):
            assert _json_head(obj, limit) == json.dumps(obj, indent=1, ensure_ascii=False, default=str)[:limit]


def test_a_rows_detail_is_jsons_indented_text_whichever_encoder_writes_it(monkeypatch):
    """A row's "show" text is json.dumps(indent=1)'s, cut at DETAIL_CHARS, for records as samples.jsonl holds them
    (JSON's types): written by pydantic-core's encoder where it writes that text, by json's where it would not
    (floats below 1e-4, text that is not valid UTF-8, very long text); long number vectors shown as their length."""
    from vlmcheck.report import html
    from vlmcheck.report.html import DETAIL_CHARS, _detail

    def dumped(obj):
        return json.dumps(obj, indent=1, ensure_ascii=False)[:DETAIL_CHARS]

    plain = [{"answer": "ünï\u2028code \"q\" <b>", "s": [i / 7 for i in range(10)], "n": [None, True, False],
              "big": 2 ** 70, "neg": -2 ** 63, "x": 1e16, "y": 0.0001, "z": -0.0, "nan": float("nan"),
              "inf": [float("inf"), -float("inf")], "e": {}, "l": [], "deep": {"a": [[1, {"b": [2.5e20]}]]}},
             {"steps": [{"s": i / 3, "t": "w" * 50} for i in range(400)]},  # longer than DETAIL_CHARS: cut
             [], {}, "text", 3.5]
    for rec in plain:
        assert _detail(rec) == dumped(rec)
    vec = {"embedding": [0.5] * 1280, "short": [0.5] * 16}
    assert _detail(vec) == dumped({"embedding": "[1280 numbers]", "short": [0.5] * 16})
    slow = [{"p": 1e-05}, {"p": [3.2e-05, 1e-06]}, {"name": "a\udcffb.png"}, {"answer": "x" * 70_000}]
    for rec in slow:
        assert _detail(rec) == dumped(rec)

    def no_json_head(obj, limit):  # the plain records never reach json's slow encoder
        raise AssertionError("json_head used for a plain record")

    monkeypatch.setattr(html, "_json_head", no_json_head)
    for rec in plain:
        assert _detail(rec) == dumped(rec)
    with pytest.raises(AssertionError, match="json_head used"):
        _detail(slow[0])


LONG_SPEC = "openai:Qwen/Qwen2.5-VL-72B-Instruct-AWQ@http://gpu-node-17.cluster.internal:8000/v1"


class Wordy:
    """A describer whose answer holds a 400-character word (a URL, a hash): nothing may stretch the page."""
    model_id = "test:wordy"
    capabilities = Capabilities()

    async def generate(self, messages, config):
        return Generation(text="A red square. " + "x" * 400, finish_reason="stop")


@pytest.mark.slow
def test_a_phone_sees_the_whole_report_without_scrolling_sideways(evil_run, tmp_path):
    """At 390 x 844 (a phone) the document is no wider than the viewport, with the first screen's decisions
    table, two runs of one method under a long model spec, a 400-character word in an answer and a VHExpansion
    run's images; every table's right edge is on screen."""
    data = evil_run.parent / "data"
    manifest = data / "keywords.jsonl"  # "red" in every answer: recall 1 everywhere, a Wilson bound as interval
    manifest.write_text("".join(json.dumps({"image": f"img{i}.png", "keywords": ["red"]}) + "\n" for i in range(3)))
    runs = []
    for name, spec in (("long", LONG_SPEC), ("short", "test:wordy")):
        run_task(DescribeTask(DescribeSpec(vlm=spec, data=str(manifest)), vlm=Wordy()), tmp_path / name,
                 RunOptions(progress=False, report=False, preflight=False))
        runs.append(tmp_path / name)
    img = tmp_path / "photo.png"
    Image.new("RGB", (600, 400), (10, 120, 200)).save(img)
    vhx = _folder(tmp_path / "vhx", "vhexpansion", {"variants": {
        "original": {"accuracy": 1.0, "symmetric_accuracy": 1.0, "yes_ratio": 0.5, "new_vh_cases": 0}}},
        [{"sample_id": "v0", "status": "done", "task": "vhexpansion", "seq": 0, "result": {
            "image": str(img), "question": "Is there a sky?", "answer": "yes", "negation": {"ok": True},
            "variants": {"original": {"answer": "Yes", "correct": True},
                         **{f"vhx_preset_{k}": {"image": "../photo.png", "answer": "No", "correct": False}
                            for k in range(4)}}}}])
    page_path = build_report([*runs, evil_run, vhx], tmp_path / "phone.html")
    html = page_path.read_text()
    assert '<table class="decisions cards">' in html and LONG_SPEC in html
    pw, exe = _chromium()
    p = pw.sync_playwright().start()
    browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
    try:
        for width, height in ((390, 844), (1440, 900)):
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(page_path.as_uri())
            page.wait_for_selector("body[data-ready='1']")
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")  # "show" opened
            doc = page.evaluate("document.documentElement.scrollWidth")
            assert doc <= width, f"the document is {doc} px wide in a {width} px viewport"
            wide = page.evaluate(f"Array.from(document.querySelectorAll('table')).filter(t => "
                                 f"t.getBoundingClientRect().right > {width} + 0.5).map(t => t.className)")
            assert wide == []
            assert page.locator("table.decisions tbody tr").count() == 1
            row = page.locator("table.decisions tbody tr").first.inner_text()
            # the leader's headline is 1 of 1 answered: its interval is the Wilson bound and says so
            assert "wilson bound" in row.lower() and "no: cannot be separated from wordy" in row  # its label
            # the margin says over whom and by which test; the 3 shared samples close the row
            assert "over wordy;" in row and row.split()[-1] == "3"
            page.close()
    finally:
        browser.close()
        p.stop()


def test_genception_rows_show_their_chain_and_never_a_raw_embedding(tmp_path):
    """The samples table of a GenCeption run: X0 and every X_t as images (s(t) under each), and "show" writes a
    1,280-float embedding as its length."""
    from vlmcheck.report.html import _sample_rows
    from vlmcheck.report.thumbs import _Thumbs

    run = tmp_path / "gc"
    (run / "artifacts").mkdir(parents=True)
    src = tmp_path / "x0.png"
    Image.new("RGB", (32, 32), "red").save(src)
    for t in (1, 2):
        Image.new("RGB", (32, 32), (0, 40 * t, 0)).save(run / "artifacts" / f"x{t}.png")
    rec = {"sample_id": "g0", "status": "done", "result": {
        "image_path": str(src), "embedding0": [0.5] * 1280, "s": [0.9, 0.8], "complete": True,
        "steps": [{"t": t, "image": f"artifacts/x{t}.png", "s": s, "embedding": [0.25] * 1280,
                   "description": f"step {t}"} for t, s in ((1, 0.9), (2, 0.8))]}}
    row = next(_sample_rows({"task": "genception", "folder": run, "samples": [rec]},
                            _Thumbs(tmp_path / "report_files")))
    assert [(im["label"], im.get("note")) for im in row["images"]] == [("X0", None), ("X1", "s=0.900"),
                                                                       ("X2", "s=0.800")]
    assert [im["thumb"] for im in row["images"]] == ["x0.png", "gc/artifacts/x1.png", "gc/artifacts/x2.png"]
    assert '"embedding0": "[1280 numbers]"' in row["detail"] and "0.5," not in row["detail"]
    assert row["detail"].count("[1280 numbers]") == 3
