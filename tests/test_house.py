"""What a newcomer meets in the CLI (issue 31): tables that keep the names of their rows, conventional help,
outputs others can read, an offline example sweep, ranks as people write them."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest
from conftest import run_cli as _cli
from rich.console import Console

from vlmcheck.report import terminal


def _render(table, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width).print(table)
    return buf.getvalue()


@pytest.mark.parametrize("width", [80, 60])
def test_a_table_never_cuts_the_column_that_names_its_rows(width):
    model = "ref:describer?level=0.1&robust=1"
    rows = [["genception-world", model, "CAST Top-3 cross-modal consistency", "0.7123", "0/24"]] * 2
    text = _render(terminal.table(["method", "model", "metric", "value", "failed"], rows,
                                  keys=["method", "model"]), width)
    assert text.count(model) == 2 and text.count("genception-world") == 2
    # without the key columns rich cuts them: the test can fail
    cut = _render(terminal.table(["method", "model", "metric", "value", "failed"], rows), width)
    assert cut.count(model) < 2


def test_chef_list_in_a_log_keeps_every_recipe_name():
    env = {**os.environ, "COLUMNS": "80"}
    p = _cli("chef", "list", env=env)
    assert p.returncode == 0, p.stderr
    from vlmcheck.methods.chef import shipped_recipes

    for name in shipped_recipes():
        assert name in p.stdout, name


@pytest.mark.slow
def test_help_uses_conventional_metavars_and_keeps_brackets():
    env = {**os.environ, "COLUMNS": "120"}
    describe = _cli("describe", "--help", env=env).stdout
    assert "pip install 'vlmcheck[ray]'" in " ".join(describe.split())
    assert "<str>" not in describe and "<int" not in describe and "<path>" not in describe
    assert "--vlm SPEC" in describe and "--seed INTEGER" in describe
    export = _cli("export", "--help", env=env).stdout
    assert "Usage: vlmcheck export [OPTIONS] RUN..." in export and "{" not in export and "list[" not in export
    merge = _cli("merge", "--help", env=env).stdout
    assert "Usage: vlmcheck merge [OPTIONS] OUT SHARD..." in merge


@pytest.mark.slow
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_outputs_get_the_umask_mode(tmp_path, umask, mode):
    assert _cli("world", "make", tmp_path / "w", "--n", "3", "--size", "64", umask=umask).returncode == 0
    run = tmp_path / "run"
    p = _cli("vhx", "run", "--vlm", "ref:describer", "--cases", tmp_path / "w", "--out", run, "--perturb", "",
             "--no-progress", umask=umask)
    assert p.returncode == 0, p.stderr
    assert _cli("export", run, "--out", tmp_path / "t", "--format", "parquet", umask=umask).returncode == 0
    for f in (run / "results.json", run / "samples.jsonl", run / "report.html", tmp_path / "t" / "runs.parquet"):
        assert stat.S_IMODE(f.stat().st_mode) == mode, f


@pytest.mark.slow
def test_the_offline_example_sweep_runs_here(tmp_path):
    p = _cli("run", "--example", "offline")
    assert p.returncode == 0 and "ref:describer" in p.stdout and "openai:gpt" not in p.stdout
    # the commands its header gives, then the sweep (3 samples per run to keep it short)
    assert _cli("world", "make", "world", "--n", "6", "--size", "96", cwd=tmp_path).returncode == 0
    assert _cli("world", "pairs", "pairs", "--n", "3", cwd=tmp_path).returncode == 0
    (tmp_path / "sweep.yaml").write_text(p.stdout + "  limit: 3\n")
    run = _cli("run", "sweep.yaml", "--no-progress", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(list((tmp_path / "runs" / "sweep").glob("*/*/results.json"))) == 8
    assert _cli("run", "--example", "api").returncode == 2


def test_ranks_print_as_integers_and_ties_with_an_equals_sign():
    assert terminal.rank_text(1.0, [1.0, 2.0, 2.0]) == "1"
    assert terminal.rank_text(2.0, [1.0, 2.0, 2.0]) == "2="
    buf = io.StringIO()
    old = terminal.tables  # result tables: stdout
    terminal.tables = Console(file=buf, width=120)
    try:
        terminal.leaderboard({"metric": "GC@3", "models": {
            "a": {"rank": 1.0, "GC@3": 0.9, "ci95": [0.8, 1.0]}, "b": {"rank": 2.0, "GC@3": 0.5, "ci95": [0.4, 0.6]},
            "c": {"rank": 2.0, "GC@3": 0.5, "ci95": [0.4, 0.6]}}})
    finally:
        terminal.tables = old
    text = buf.getvalue()
    first_cells = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert first_cells == ["1", "2=", "2="]


def test_the_public_run_task_writes_the_report_and_the_runner_does_not(tmp_path):
    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask
    from vlmcheck.run import runner
    from vlmcheck.world.make import make_world

    world = make_world(tmp_path / "w", n=2, size=64)
    task = DescribeTask(DescribeSpec(vlm="ref:describer", data=str(world)))
    runner.run_task(task, tmp_path / "bare", RunOptions(progress=False))
    assert (tmp_path / "bare" / "results.json").exists() and not (tmp_path / "bare" / "report.html").exists()
    run_task(task, tmp_path / "api", RunOptions(progress=False))
    assert (tmp_path / "api" / "report.html").stat().st_size > 1000


def test_cli_modules_are_thin():
    # one hop from a command to its code: cli.COMMANDS names its module (tests/test_startup.py)
    src = Path(__file__).resolve().parents[1] / "src" / "vlmcheck" / "cli"
    for f in src.glob("*.py"):
        assert len(f.read_text().splitlines()) <= 400, f
