"""Nothing the user owns is lost (issue 32, items 1-4): an empty --out, --overwrite among the user's files, a merge
killed at any moment, damaged rows in a store."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import CLI, run_cli


def cli(*args, cwd=None, timeout=600):
    return run_cli(*args, cwd=cwd)


def _error(p) -> str:
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    return lines[-1] if lines else ""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("w")
    assert cli("world", "make", d / "w", "--n", "8", "--size", "64").returncode == 0
    return d / "w"


def _plant_user_files(folder: Path) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {"thesis.tex": b"\\documentclass{article}", "data/results.csv": b"a,b\n1,2\n", ".bashrc": b"alias x=y"}
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return files


def _survived(folder: Path, files: dict[str, bytes]) -> bool:
    return all((folder / rel).read_bytes() == data for rel, data in files.items())


@pytest.mark.slow
def test_an_empty_out_is_an_error_and_runs_nowhere(tmp_path, world):
    files = _plant_user_files(tmp_path / "home")
    for args in (["--out", ""], ["--out="]):
        p = cli("describe", "--vlm", "ref:describer", "--data", world, *args, "--overwrite", cwd=tmp_path / "home")
        assert p.returncode == 2 and "--out is empty" in _error(p)
    p = cli("resume", "", cwd=tmp_path / "home")
    assert p.returncode == 2 and "empty path argument" in _error(p)
    assert _survived(tmp_path / "home", files) and not (tmp_path / "home" / "store.sqlite").exists()
    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask
    from vlmcheck.run.runner import RunFolderExists

    with pytest.raises(RunFolderExists, match="empty"):
        run_task(DescribeTask(DescribeSpec(vlm="ref:describer", data=str(world))), "", RunOptions(progress=False))


@pytest.mark.slow
def test_overwrite_never_deletes_a_users_files(tmp_path, world):
    # a folder that holds a store among the user's files (a run made there with an older version, `--out .`)
    home = tmp_path / "home"
    files = _plant_user_files(home)
    assert cli("describe", "--vlm", "ref:describer", "--data", world, "--out", home, "--no-progress").returncode == 0
    assert (home / "store.sqlite").exists() and (home / ".vlmcheck-run").exists()
    p = cli("describe", "--vlm", "ref:describer", "--data", world, "--out", home, "--overwrite", "--no-progress")
    assert p.returncode == 2 and "not a vlmcheck run's" in _error(p) and "thesis.tex" in _error(p)
    assert _survived(home, files) and (home / "store.sqlite").exists()
    # a run folder of its own is overwritten, and only the run's files go
    run = tmp_path / "run"
    assert cli("describe", "--vlm", "ref:describer", "--data", world, "--out", run, "--no-progress").returncode == 0
    before = sorted(p.name for p in run.iterdir())
    p = cli("describe", "--vlm", "ref:describer?level=0.3", "--data", world, "--out", run, "--overwrite",
            "--no-progress")
    assert p.returncode == 0, p.stderr
    assert sorted(p.name for p in run.iterdir()) == before
    assert json.loads((run / "results.json").read_text())["spec"]["task_spec"]["vlm"] == "ref:describer?level=0.3"


@pytest.fixture(scope="module")
def shards(tmp_path_factory, world):
    d = tmp_path_factory.mktemp("shards")
    for i in range(3):
        p = cli("describe", "--vlm", "ref:describer?level=0.3", "--data", world, "--out", d / f"s{i}", "--shard",
                f"{i}/3", "--no-progress")
        assert p.returncode == 0, p.stderr
    clean = d / "clean"
    assert cli("merge", clean, *(d / f"s{i}" for i in range(3))).returncode == 0
    return d


def _outputs(folder: Path) -> tuple[bytes, dict]:
    results = json.loads((folder / "results.json").read_text())
    return (folder / "samples.jsonl").read_bytes(), {k: results[k] for k in ("counts", "metrics", "usage")}


@pytest.mark.slow
def test_a_merge_killed_anywhere_leaves_nothing_or_the_result_and_merges_again(shards):
    inputs = [shards / f"s{i}" for i in range(3)]
    clean = _outputs(shards / "clean")
    snapshot = {p: p.read_bytes() for s in inputs for p in s.rglob("*") if p.is_file() and "store" not in p.name}
    t0 = time.monotonic()
    # timed as the killed merges run: a process of its own
    assert subprocess.run([*CLI, "merge", shards / "timed", *inputs], capture_output=True).returncode == 0
    span = time.monotonic() - t0
    rng = random.Random(7)
    mine = shards / ".killed0.merge-notes"  # a user's file whose name starts like a merge's temp folder
    mine.write_text("keep me")
    for i in range(20):
        out = shards / f"killed{i % 4}"
        child = subprocess.Popen(CLI + ["merge", str(out), *map(str, inputs)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, span))
        child.kill()
        child.wait()
        # nothing, or a complete merge (an earlier one, or this one)
        if out.exists() and (out / "store.sqlite").exists():
            if (out / "results.json").exists():
                assert _outputs(out) == clean, f"kill {i}"
        again = cli("merge", out, *inputs)
        assert again.returncode == 0, (i, again.stderr[-1500:])
        assert _outputs(out) == clean, f"kill {i}"
    assert not [p for p in shards.glob(".killed*.merge-*") if p != mine]  # no unfinished merge folder left
    assert mine.read_text() == "keep me"
    # the shards were only read
    assert all(p.read_bytes() == data for p, data in snapshot.items())


def test_merge_refuses_an_input_as_out_and_replaces_another_run_only_when_asked(shards, world, tmp_path):
    inputs = [shards / f"s{i}" for i in range(3)]
    p = cli("merge", inputs[0], *inputs)
    assert p.returncode == 2 and "one of the shards" in _error(p)
    other = tmp_path / "other"
    assert cli("describe", "--vlm", "ref:describer", "--data", world, "--out", other, "--no-progress").returncode == 0
    p = cli("merge", other, *inputs)
    assert p.returncode == 2 and "--overwrite" in _error(p)
    p = cli("merge", other, *inputs, "--overwrite")
    assert p.returncode == 0, p.stderr
    assert _outputs(other) == _outputs(shards / "clean")
    files = _plant_user_files(tmp_path / "mine")
    p = cli("merge", tmp_path / "mine", *inputs, "--overwrite")
    assert p.returncode == 2 and "not a vlmcheck run's" in _error(p) and _survived(tmp_path / "mine", files)


def test_a_damaged_cache_row_is_a_miss_and_is_replaced(tmp_path, world):
    run = tmp_path / "run"
    assert cli("describe", "--vlm", "ref:describer", "--data", world, "--out", run, "--no-progress").returncode == 0
    db = sqlite3.connect(run / "store.sqlite")
    n_calls = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    db.execute("UPDATE calls SET response = '{not json'")  # every cached answer damaged
    sid = db.execute("SELECT sample_id FROM samples ORDER BY seq LIMIT 1").fetchone()[0]
    db.execute("UPDATE samples SET result = '{\"broken' WHERE sample_id = ?", (sid,))
    db.commit()
    db.close()
    # the damaged sample is a failed sample (exit 1, retry-failed named), not a traceback
    p = cli("resume", run, "--no-progress")
    assert p.returncode == 1 and "retry-failed" in _error(p)
    rows = {json.loads(x)["sample_id"]: json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()}
    assert rows[sid]["status"] == "error" and rows[sid]["error"]["type"] == "damaged_record"
    p = cli("retry-failed", run, "--no-progress")
    assert p.returncode == 0, p.stderr
    rows = {json.loads(x)["sample_id"]: json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()}
    assert all(r["status"] == "done" for r in rows.values())
    db = sqlite3.connect(run / "store.sqlite")
    rows = db.execute("SELECT key, status, response FROM calls").fetchall()
    assert len(rows) == n_calls
    def parses(text):
        try:
            return bool(json.loads(text))
        except ValueError:
            return False

    # the damaged sample's calls were misses and now hold new answers (the other samples were not read again)
    assert any(status == "ok" and parses(resp) for _, status, resp in rows)
    from vlmcheck.store.db import RunStore

    key = rows[0][0]
    db.execute("UPDATE calls SET status = 'ok', response = 'nope' WHERE key = ?", (key,))
    db.commit()
    db.close()
    with RunStore(run, existing=True) as store:
        assert store.get_call(key) is None and store.get_call(key) is None


def test_a_damaged_spec_is_one_sentence(tmp_path, world):
    run = tmp_path / "run"
    assert cli("describe", "--vlm", "ref:describer", "--data", world, "--out", run, "--no-progress").returncode == 0
    db = sqlite3.connect(run / "store.sqlite")
    db.execute("UPDATE meta SET value = '{\"task\": ' WHERE key = 'spec'")
    db.commit()
    db.close()
    for args in (["resume", run], ["retry-failed", run],
                 ["describe", "--vlm", "ref:describer", "--data", world, "--out", run, "--resume"]):
        p = cli(*args, "--no-progress")
        msg = _error(p)
        assert p.returncode == 2 and "run spec is damaged" in msg and "store.sqlite" in msg, (args, p.stderr)


def test_a_file_name_that_is_not_utf8_is_one_sample_kept_losslessly(tmp_path):
    from PIL import Image

    folder = tmp_path / "imgs"
    folder.mkdir()
    Image.new("RGB", (32, 32), "red").save(folder / "ok.png")
    Image.new("RGB", (32, 32), "blue").save(os.fsdecode(bytes(folder) + b"/bad\xff\xfe.png"))
    run = tmp_path / "run"
    p = cli("describe", "--vlm", "ref:describer", "--data", folder, "--out", run, "--no-progress")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    ids = sorted(json.loads(x)["sample_id"] for x in (run / "samples.jsonl").read_text().splitlines())
    assert ids == ["bad\\xff\\xfe.png", "ok.png"]  # the bad bytes as escapes: the name is kept, the id unique
    assert (run / "report.html").stat().st_size > 1000
    again = cli("resume", run, "--no-progress")
    assert again.returncode == 0 and "0 model calls" in again.stderr
    assert cli("export", run, "--out", tmp_path / "t", "--format", "parquet").returncode == 0


def test_a_run_that_cannot_record_its_spec_leaves_no_store(tmp_path, world, monkeypatch):
    from vlmcheck import RunOptions
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask
    from vlmcheck.run.runner import run_task

    class Unrecordable(DescribeTask):
        def spec(self):
            return {**super().spec(), "bad": "\udcff"}  # text no UTF-8 store can hold... but json_text escapes it

    ok = run_task(Unrecordable(DescribeSpec(vlm="ref:describer", data=str(world))), tmp_path / "a",
                  RunOptions(progress=False))
    assert ok.results["counts"]["done"] == 8
    from vlmcheck.store.db import RunStore, StoreError

    real = RunStore.set_meta

    def failing(self, key, value):  # the disk fills up as the spec is written
        if key == "spec":
            raise StoreError("no space left")
        return real(self, key, value)

    monkeypatch.setattr(RunStore, "set_meta", failing)
    with pytest.raises(StoreError):
        run_task(DescribeTask(DescribeSpec(vlm="ref:describer", data=str(world))), tmp_path / "b",
                 RunOptions(progress=False))
    monkeypatch.setattr(RunStore, "set_meta", real)
    assert not (tmp_path / "b" / "store.sqlite").exists()
    p = cli("describe", "--vlm", "ref:describer", "--data", world, "--out", tmp_path / "b", "--resume",
            "--no-progress")
    assert p.returncode == 0, p.stderr  # nothing half-made stands in the way
