"""Small things a new user meets at an 80-column terminal: each checked at ``COLUMNS=80``."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from conftest import FakeServer, distinct_images, run_cli

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args, cwd=None, columns=80):
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    out = run_cli(*args, cwd=cwd, env=env)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return out


def test_chef_list_is_one_aligned_line_per_recipe_at_80_columns():
    from vlmcheck.methods.chef import shipped_recipes

    p = _cli("chef", "list")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    names = list(shipped_recipes())
    assert len(lines) <= len(names) + 2  # a heading, a line per recipe, a pointer to --long
    assert lines[0].split() == ["recipe", "desideratum", "scenario", "inferencer"]  # headings whole, one line
    assert all(len(ln) <= 80 and ln == ln.rstrip() for ln in lines)
    for name, ln in zip(names, lines[1:]):
        assert ln.split()[0] == name
    long = _cli("chef", "list", "--long")
    assert long.returncode == 0 and all(len(ln) <= 80 and ln == ln.rstrip() for ln in long.stdout.splitlines())
    assert "ChEF Table 7 - robustness" in " ".join(long.stdout.split())


@pytest.mark.parametrize("model", ["tiny-qwen", "a-model-label-that-is-long-enough-to-push-the-figures-over-the-edge"])
def test_a_figure_is_never_parted_from_its_name_at_80_columns(model):
    from rich.console import Console

    from vlmcheck.methods import view_lines
    from vlmcheck.report import terminal

    m = {"T": 1, "GC@1": {"score": 0.3151, "ci95": [0.2764, 0.3608], "categories": 3, "image_mean": 0.32},
         "chains": {"scored": 10, "failed": 0}, "refusal_rate": 0.0, "GC_FID@1": 12.25}
    buf = io.StringIO()
    old, terminal.tables = terminal.tables, Console(file=buf, width=80)
    try:
        terminal.show(view_lines.genception(model, m))
    finally:
        terminal.tables = old
    lines = buf.getvalue().splitlines()
    assert len(lines) > 1 and all(len(ln) <= 80 for ln in lines)
    assert any("GC@1 = 0.3151 [0.2764, 0.3608]" in ln for ln in lines), lines
    assert any("GC_FID@1 = 12.25" in ln for ln in lines)


@pytest.fixture
def server(tmp_path):
    s = FakeServer(0.0, tmp_path)
    yield s
    s.stop()


def _cases(tmp_path: Path, n: int, question: str = "Is there a cat?") -> Path:
    folder = distinct_images(tmp_path / "cases", n)
    with open(folder / "cases.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"image": f"img{i}.png", "question": question, "answer": "yes"}) + "\n")
    return folder / "cases.jsonl"


def test_vhx_says_an_ignored_temperature_once(server, tmp_path):
    """Five samples: the warning is given during the run (after four of them), and not again at its end."""
    run = _cli("vhx", "run", "--vlm", f"openai:m@{server.base_url}", "--cases", _cases(tmp_path, 5), "--out",
               tmp_path / "v", "--perturb", "", "--negator", "", "--no-progress", "--repeats", "2",
               "--temperature", "0.7", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("ignore the temperature") == 1, run.stderr
    checks = json.loads((tmp_path / "v" / "results.json").read_text())["server_checks"]
    assert checks["sampling"]["ignored"] and checks["warnings"]  # the run's details keep it (the report shows it)


def test_a_run_whose_every_sample_failed_prints_no_table(server, tmp_path):
    run = _cli("vhx", "run", "--vlm", f"openai:m@{server.base_url}", "--cases",
               _cases(tmp_path, 2, "[fault=400] Is there a cat?"), "--out", tmp_path / "v", "--perturb", "",
               "--negator", "", "--no-progress", cwd=tmp_path)
    assert run.returncode == 1 and "2 x model_call:bad_request" in run.stderr
    assert run.stdout == ""


def test_the_readme_sends_people_to_load_tables():
    readme = (ROOT / "README.md").read_text()
    assert "load_tables" in readme and "load_runs" not in readme


def test_chefs_tidy_table_names_its_truths(tmp_path):
    from vlmcheck.export import iter_sample_rows

    run = tmp_path / "chef"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"task": "chef", "spec": {"task_spec": {"vlm": "openai:m"}},
                                                  "counts": {"samples": 1, "done": 1}, "metrics": {}}))
    (run / "samples.jsonl").write_text(json.dumps({"sample_id": "q1", "seq": 0, "status": "done", "task": "chef",
                                                   "result": {"answer": 2, "options": ["a", "b", "c"],
                                                              "settings": {"shuffled": {"answer": 0, "pred": 1}}}})
                                       + "\n")
    (row,) = iter_sample_rows(run)
    assert row["truth"] == 0 and row["sample.truth"] == 2 and row["pred"] == 1 and row["setting"] == "shuffled"
    assert "answer" not in row and "sample.answer" not in row
