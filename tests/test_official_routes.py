"""The official figures reach every surface: a ChEF run on MME's release and a VHExpansion run on POPE's record
them in results.json (values computed here by hand from the scripted answers), the terminal prints them, the
export's metrics table and ``compare`` carry them, and the report shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from vlmcheck.core.roles import Capabilities, Generation
from vlmcheck.run.runner import RunOptions, run_task


def _img(path: Path, red: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (red, 0, 0)).save(path)


class ByImage:
    """Answers "Yes"/"No" from a script keyed by (the image's red value / 30, the question's text)."""

    model_id = "test:by-image"

    def __init__(self, script):
        self.capabilities = Capabilities()
        self.script = script

    async def generate(self, messages, config):
        last = messages[-1]
        red = round(last.images[0].to_pil().convert("RGB").getpixel((4, 4))[0] / 30)
        return Generation(text=self.script(red, last.text), finish_reason="stop")


def _mme(tmp_path: Path) -> Path:
    """Two perception images (existence), one cognition image (code_reasoning), MME's release layout."""
    root = tmp_path / "MME_Benchmark_release_version"
    for cat, name, red in (("existence", "1.jpg", 30), ("existence", "2.jpg", 60), ("code_reasoning", "3.png", 90)):
        _img(root / cat / name, red)
        (root / cat / name).with_suffix(".txt").write_text(f"Is there a cat? Please answer yes or no.\tYes\n"
                                                           f"Is there a dog? Please answer yes or no.\tNo\n")
    return root


@pytest.mark.slow
def test_chef_mme_run_records_and_prints_the_mme_score(tmp_path, capsys):
    from vlmcheck.export import metric_rows
    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe
    from vlmcheck.methods.compare import compare_runs
    from vlmcheck.report.terminal import results as print_results

    # image 1: says yes to both (cat right, dog wrong); image 2: right twice; image 3: says no to both (cat wrong)
    def script(img, text):
        if img == 1:
            return "Yes"
        if img == 2:
            return "Yes" if "cat" in text else "No"
        return "No"

    data = _mme(tmp_path)
    task = ChefTask(ChefSpec(vlm="test:by-image", recipe=resolve_recipe("mme"), data=str(data),
                             inferencer="direct"), vlm=ByImage(script))
    res = run_task(task, tmp_path / "run", RunOptions(progress=False, report=False)).results
    off = res["metrics"]["official"]
    # existence: 3 of 4 right (75) + 1 of 2 images both right (50) = 125; code_reasoning: 1/2 (50) + 0/1 = 50
    assert off["benchmark"] == "mme"
    assert off["perception"]["value"] == pytest.approx(125.0)
    assert off["cognition"]["value"] == pytest.approx(50.0)
    assert res["metrics"]["settings"]["standard"]["accuracy"] == pytest.approx(4 / 6)  # plain accuracy beside
    print_results(res)
    out = capsys.readouterr().out
    assert "MME score" in out and "perception" in out and "125" in out
    rows = {r["metric"]: r for r in metric_rows(tmp_path / "run")}
    assert rows["official.perception"]["value"] == pytest.approx(125.0)
    cmp = compare_runs([tmp_path / "run", tmp_path / "run"])
    assert cmp["official"][0]["figures"]["perception"]["value"] == pytest.approx(125.0)
    from vlmcheck.report.terminal import comparisons

    comparisons(cmp)
    said = " ".join(capsys.readouterr().out.split())
    assert "official figures, test:by-image: perception 125.0000; cognition 50.0000" in said
    assert not any(c["metric"].startswith("official.") for c in cmp["comparisons"])  # MME's scores: sums, unpaired
    from vlmcheck.report.html import build_report

    build_report([tmp_path / "run"], tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert "Official figures" in page and "MME score" in page and "125.0000" in page


def _pope(tmp_path: Path) -> Path:
    out = tmp_path / "pope"
    out.mkdir()
    rows = [(1, "a.jpg", "Is there a cat in the image?", "yes"), (2, "a.jpg", "Is there a dog in the image?", "no"),
            (3, "b.jpg", "Is there a cat in the image?", "yes"), (4, "b.jpg", "Is there a dog in the image?", "no")]
    _img(out / "a.jpg", 30)
    _img(out / "b.jpg", 60)
    (out / "coco_pope_random.json").write_text("".join(
        json.dumps({"question_id": i, "image": im, "text": t, "label": lab}) + "\n" for i, im, t, lab in rows))
    return out


@pytest.mark.slow
def test_vhx_pope_run_records_popes_figures(tmp_path):
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec

    # image a: yes to everything (cat right, dog wrong); image b: right on both.  Negations are answered too,
    # but POPE's figures read the case's own question only.
    def script(img, text):
        if " not " in text or "n't" in text:
            return "No"
        return "Yes" if img == 1 or "cat" in text else "No"

    task = VHExpansionTask(VHXSpec(vlm="ref:describer", cases=str(_pope(tmp_path) / "coco_pope_random.json"),
                                   perturb=[]), vlm=ByImage(script))
    m = run_task(task, tmp_path / "run", RunOptions(progress=False, report=False)).results["metrics"]
    off = m["official"]
    # TP 2 (a-cat, b-cat), FP 1 (a-dog), TN 1 (b-dog), FN 0
    assert off["accuracy"]["value"] == pytest.approx(3 / 4)
    assert off["precision"]["value"] == pytest.approx(2 / 3)
    assert off["recall"]["value"] == pytest.approx(1.0)
    assert off["f1"]["value"] == pytest.approx(0.8)
    assert off["yes_ratio"]["value"] == pytest.approx(3 / 4)  # the model's yes answers, not the truth's 2/4


def test_items_count_toward_their_benchmarks_figure_on_every_route(tmp_path):
    """Release, LAMM meta file and VLMEvalKit TSV of ScienceQA; MMBench's TSV with circular copies (grouped by
    the question they copy); a source named for nothing declares nothing."""
    import base64
    import io

    from vlmcheck.methods.chef.scenarios import load_scenario

    root = tmp_path / "scienceqa"
    root.mkdir()
    (root / "problems.json").write_text(json.dumps({"5": {
        "question": "Which is north?", "choices": ["Maine", "Ohio"], "answer": 0, "hint": "", "image": "image.png",
        "subject": "social science", "split": "test"}}))
    (root / "pid_splits.json").write_text(json.dumps({"test": ["5"]}))
    _img(root / "images" / "test" / "5" / "image.png", 30)
    lamm = tmp_path / "2D_Benchmark"
    _img(lamm / "scienceqa_images" / "5.png", 30)
    (lamm / "meta_file").mkdir()
    (lamm / "meta_file" / "VQA_ScienceQA.json").write_text(json.dumps([
        {"id": 5, "image": "scienceqa_images/5.png", "query": "Which is north?", "gt_choice": 0,
         "gt_choices": ["Maine", "Ohio"]}]))
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (30, 0, 0)).save(buf, "PNG")
    b64 = base64.b64encode(buf.getvalue()).decode()
    (tmp_path / "ScienceQA_TEST.tsv").write_text(f"index\tquestion\tA\tB\tanswer\timage\n0\tWhich is north?\tMaine"
                                                 f"\tOhio\tA\t{b64}\n")
    for source in (str(root), f"lamm:{lamm}", str(tmp_path / "ScienceQA_TEST.tsv")):
        items = load_scenario("scienceqa", source)
        assert [it["meta"]["official"]["benchmark"] for it in items] == ["scienceqa"], source
    (tmp_path / "MMBench_DEV_EN.tsv").write_text(
        "index\tquestion\tA\tB\tanswer\timage\n"
        f"3\tQ?\tx\ty\tA\t{b64}\n1000003\tQ?\ty\tx\tB\t3\n")
    items = load_scenario("mmbench", str(tmp_path / "MMBench_DEV_EN.tsv"), circular=True)
    assert [(it["meta"]["official"], it["meta"]["rotation"]) for it in items] == [
        ({"benchmark": "mmbench", "group": "3"}, 0), ({"benchmark": "mmbench", "group": "3"}, 1)]
    (tmp_path / "photos.tsv").write_text(f"index\tquestion\tA\tB\tanswer\timage\n0\tQ?\tx\ty\tA\t{b64}\n")
    assert "official" not in load_scenario("mc", str(tmp_path / "photos.tsv"))[0]["meta"]


@pytest.mark.slow
def test_mme_score_is_the_same_from_the_release_the_hub_copy_and_the_tsv(tmp_path):
    """The replica of the first test written as MME's release, its Hub copy (lmms-lab/MME: question_id, image,
    question, answer, category; the folder named for MME) and VLMEvalKit's MME.tsv (the second question names
    the first's index), none of them named on the command line: the same MME score from each."""
    import base64

    import pyarrow as pa
    import pyarrow.parquet as pq

    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe

    release = _mme(tmp_path)
    hub_rows, tsv_lines, index = [], ["index\timage\tquestion\tanswer\tcategory"], 0
    for cat, name in (("existence", "1.jpg"), ("existence", "2.jpg"), ("code_reasoning", "3.png")):
        data = (release / cat / name).read_bytes()
        for k, (q, a) in enumerate((("Is there a cat? Please answer yes or no.", "Yes"),
                                    ("Is there a dog? Please answer yes or no.", "No"))):
            hub_rows.append({"question_id": name, "image": {"bytes": data, "path": name}, "question": q, "answer": a,
                             "category": cat})
            cell = base64.b64encode(data).decode() if k == 0 else str(index - 1)
            tsv_lines.append(f"{index}\t{cell}\t{q}\t{a}\t{cat}")
            index += 1
    snap = tmp_path / "MME"
    (snap / "data").mkdir(parents=True)
    (snap / "README.md").write_text("# lmms-lab/MME\n")
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({k: pa.array([r[k] for r in hub_rows], image if k == "image" else pa.string())
                      for k in hub_rows[0]})
    pq.write_table(table, snap / "data" / "test-00000-of-00001.parquet")
    (tmp_path / "MME.tsv").write_text("\n".join(tsv_lines) + "\n")

    def script(img, text):  # as in the first test: 125 perception, 50 cognition
        return "Yes" if img == 1 or (img == 2 and "cat" in text) else "No"

    for name, source in (("release", str(release)), ("hub", f"hfds:{snap}"), ("tsv", str(tmp_path / "MME.tsv"))):
        task = ChefTask(ChefSpec(vlm="test:by-image", recipe=resolve_recipe("mme"), data=source, inferencer="direct"),
                        vlm=ByImage(script))
        off = run_task(task, tmp_path / name, RunOptions(progress=False, report=False)).results["metrics"]["official"]
        assert (off["perception"]["value"], off["cognition"]["value"]) == (pytest.approx(125.0),
                                                                           pytest.approx(50.0)), name
        assert off["categories"]["existence"]["images"] == 2, name


@pytest.mark.slow
def test_compare_pairs_two_runs_on_popes_share_figures(tmp_path):
    """Two VHExpansion runs of POPE: compare tests the official shares question by question (accuracy, recall,
    yes ratio), with the differences computed here by hand; precision (its questions differ by run) is not."""
    from vlmcheck.methods.compare import compare_runs
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec

    cases = str(_pope(tmp_path) / "coco_pope_random.json")
    yes_man = lambda img, text: "No" if " not " in text or "n't" in text else "Yes"  # noqa: E731
    right = lambda img, text: ("No" if " not " in text or "n't" in text else  # noqa: E731
                               "Yes" if "cat" in text else "No")
    for name, script in (("a", yes_man), ("b", right)):
        task = VHExpansionTask(VHXSpec(vlm=f"test:{name}", cases=cases, perturb=[]), vlm=ByImage(script))
        run_task(task, tmp_path / name, RunOptions(progress=False, report=False))
    cmp = compare_runs([tmp_path / "a", tmp_path / "b"])
    got = {c["metric"]: c for c in cmp["comparisons"] if c["metric"].startswith("official.")}
    assert set(got) == {"official.accuracy", "official.recall", "official.yes_ratio"}
    # a says yes to all 4 (right on the 2 cats), b is right on all 4: accuracy 2/4 - 4/4, recall 1 - 1,
    # yes ratio 4/4 - 2/4
    assert got["official.accuracy"]["difference"] == pytest.approx(-0.5)
    assert got["official.recall"]["difference"] == pytest.approx(0.0)
    assert got["official.yes_ratio"]["difference"] == pytest.approx(0.5)
    assert got["official.accuracy"]["n_paired"] == 4
