"""``vlmcheck data inspect`` shows exactly what a run sends (ScienceQA's hint under "Context:", as ChEF's run
words it; the options as the standard instruction lists them) and checks that every image it names can be
opened, listing the ones that cannot (missing files, damaged embedded bytes), without writing anything."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from PIL import Image
from typer.testing import CliRunner

from vlmcheck.cli import app


def _img(path: Path, colour=(10, 20, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), colour).save(path)


def _inspect(*args: str) -> dict:
    out = CliRunner().invoke(app, ["data", "inspect", *args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_inspect_shows_the_scienceqa_prompt_the_run_sends(tmp_path):
    from vlmcheck.methods.chef.recipe import format_query
    from vlmcheck.methods.chef.scenarios import load_scenario

    root = tmp_path / "scienceqa"
    root.mkdir()
    (root / "problems.json").write_text(json.dumps({"5": {
        "question": "Which of these states is farthest north?", "choices": ["West Virginia", "Louisiana"],
        "answer": 0, "hint": "Figure: a map.", "image": "image.png", "subject": "social science", "split": "test"}}))
    (root / "pid_splits.json").write_text(json.dumps({"test": ["5"]}))
    _img(root / "images" / "test" / "5" / "image.png")
    info = _inspect(str(root))
    text = info["rows"][0]["text"]
    assert text == ("Context: Figure: a map.\nWhich of these states is farthest north?\nOptions:\nA. West Virginia\n"
                    "B. Louisiana")                                   # was "Hint: Figure: a map." and no "Options:"
    item = load_scenario("scienceqa", str(root))[0]                 # what ChEF's scienceqa recipe asks
    assert text == format_query(item["question"], item["options"])
    assert info["unopenable_images"] == {"count": 0, "examples": []}
    assert info["official_figure"].startswith("ScienceQA accuracy")  # what a run will report beside its own


def test_inspect_lists_images_that_cannot_be_opened(tmp_path):
    d = tmp_path / "tsv"
    _img(d / "ok.png")
    (d / "damaged.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
    (d / "MME.tsv").write_text("index\tquestion\tanswer\timage_path\tcategory\n"
                               "1\tIs it red?\tYes\tok.png\tcolor\n"
                               "2\tIs it blue?\tNo\tmissing.png\tcolor\n"
                               "3\tIs it green?\tNo\tdamaged.png\tcolor\n")
    info = _inspect(f"mme:{d / 'MME.tsv'}")
    bad = {Path(b["path"]).name: b["why"] for b in info["unopenable_images"]["examples"]}
    assert info["unopenable_images"]["count"] == 2 and set(bad) == {"missing.png", "damaged.png"}
    assert "not found" in bad["missing.png"]
    assert info["official_figure"].startswith("MME score (perception, cognition)")
    out = CliRunner().invoke(app, ["data", "inspect", f"mme:{d / 'MME.tsv'}"])
    said = " ".join(out.output.split())
    assert "2 images that cannot be opened" in said and "missing.png" in said


def test_inspect_checks_embedded_images_without_writing_them(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    import io

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buf, "PNG")
    good = base64.b64encode(buf.getvalue()).decode()
    junk = base64.b64encode(b"\xff\xd8\xff" + b"not a jpeg at all, long enough to not be an index" * 2).decode()
    (tmp_path / "POPE.tsv").write_text("index\tquestion\tanswer\timage\n"
                                       f"1\tIs there a cat?\tyes\t{good}\n2\tIs there a dog?\tno\t{junk}\n")
    info = _inspect(f"pope:{tmp_path / 'POPE.tsv'}")
    assert info["unopenable_images"]["count"] == 1
    assert info["unopenable_images"]["examples"][0]["path"].endswith(".jpg")
    assert not (tmp_path / "cache").exists()  # inspect reads, never writes
