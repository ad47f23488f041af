"""Issue 49 items 5 and 6: --dry-run is the real command without calls (the same refusals, nothing written in the
run folder, no copy of the store, the user's folder named); a run's data pinned by its content, so a resume from
anywhere reads the same data or refuses, and the same data by another path resumes.  Also: the commit a run
records is vlmcheck's own checkout's, never that of a repository an installed copy sits in."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest

from conftest import distinct_images
from vlmcheck import RunOptions, run_task
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run.estimate import dry_run
from vlmcheck.run.folder import RunFolderExists

OPTS = dict(progress=False, report=False)


def _task(data, prompt="Describe this image in detail.", vlm="ref:photo"):
    return DescribeTask(DescribeSpec(vlm=vlm, data=str(data), prompt=prompt))


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


@pytest.fixture
def done_run(tmp_path):
    data = distinct_images(tmp_path / "imgs", 4)
    run_task(_task(data), tmp_path / "run", RunOptions(**OPTS))
    return data, tmp_path / "run"


def test_a_dry_run_makes_the_real_commands_refusals(done_run):
    """Before: on a folder holding a run with another prompt, --dry-run said "0 calls, $0" (exit 0) where the
    real command refused (exit 2)."""
    data, run = done_run
    other = _task(data, prompt="Name every object.")
    with pytest.raises(RunFolderExists) as real:
        run_task(other, run, RunOptions(**OPTS, resume=True))
    with pytest.raises(RunFolderExists) as dry:
        dry_run(_task(data, prompt="Name every object."), run, RunOptions(**OPTS, resume=True))
    assert str(dry.value) == str(real.value) and "different task spec" in str(dry.value)
    with pytest.raises(RunFolderExists, match="already holds a run; pass --resume"):  # as the real command
        dry_run(_task(data), run, RunOptions(**OPTS))


def test_a_dry_run_writes_nothing_in_the_run_folder_and_copies_no_store(done_run, monkeypatch):
    """Before: it left -wal/-shm files in the run folder and copied the whole store to a temp folder (2,012 MB of
    temp space for a 2.1 GB store)."""
    data, run = done_run
    con = sqlite3.connect(run / "store.sqlite")  # a store of 8 MB: a copy would show
    con.execute("CREATE TABLE ballast(x BLOB)")
    con.executemany("INSERT INTO ballast VALUES (?)", [(os.urandom(1 << 20),) for _ in range(8)])
    con.commit()
    con.close()
    assert not (run / "store.sqlite-wal").exists()
    before = _listing(run)
    temp_sizes = []
    real_tempdir = tempfile.TemporaryDirectory

    class Measured(real_tempdir):
        def cleanup(self):
            temp_sizes.append(sum(p.stat().st_size for p in Path(self.name).rglob("*") if p.is_file()))
            super().cleanup()

    monkeypatch.setattr(tempfile, "TemporaryDirectory", Measured)
    est = dry_run(_task(data), run, RunOptions(**OPTS, resume=True))
    assert est["samples"]["to_run"] == 0 and est["totals"]["calls"] == 0
    assert _listing(run) == before  # no -wal, no -shm, nothing touched
    assert temp_sizes and max(temp_sizes) < 2 << 20, temp_sizes  # the simulation's own writes only


def test_a_dry_run_on_a_damaged_store_names_the_users_folder(done_run):
    """Before: its messages named its own temp copy (and suggested resuming it)."""
    data, run = done_run
    (run / "store.sqlite").write_bytes(b"not a database at all" * 10)
    with pytest.raises(Exception) as exc:
        dry_run(_task(data), run, RunOptions(**OPTS, resume=True))
    assert str(run) in str(exc.value) and "vlmcheck-dry-run" not in str(exc.value)


def _forget(run: Path, n: int) -> None:
    """As if the run had been stopped before its last ``n`` samples."""
    con = sqlite3.connect(run / "store.sqlite")
    ids = [r[0] for r in con.execute("SELECT sample_id FROM samples ORDER BY sample_id DESC LIMIT ?", (n,))]
    con.executemany("DELETE FROM samples WHERE sample_id = ?", [(i,) for i in ids])
    con.commit()
    con.close()


def _hashes(run: Path) -> dict[str, str]:
    return {r["sample_id"]: r["result"]["image_sha256"]
            for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}


def test_a_resume_from_another_folder_reads_the_runs_own_data(tmp_path, monkeypatch):
    """Before: the spec kept --data as typed, so `vlmcheck resume` from another folder read that folder's
    `imgs`: the run ended with answers from two datasets, exit 0."""
    from vlmcheck.cli._common import task_of

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    distinct_images(a / "imgs", 4)
    distinct_images(b / "imgs", 4, colour=lambda i: (200, 10 * i, 30))  # the same names, other pictures
    monkeypatch.chdir(a)
    run = tmp_path / "run"
    run_task(_task("imgs"), run, RunOptions(**OPTS))
    first = _hashes(run)
    _forget(run, 2)
    monkeypatch.chdir(b)
    task, spec = task_of(run)  # what `vlmcheck resume RUN` runs
    run_task(task, run, RunOptions(**OPTS, resume=True))
    assert _hashes(run) == first  # every answer from dataset A
    # from B, `describe --data imgs --resume`: B's `imgs` under the same typed path is refused in one sentence,
    # never mixed in
    _forget(run, 2)
    with pytest.raises(RunFolderExists, match="holds a run on other data"):
        run_task(_task("imgs"), run, RunOptions(**OPTS, resume=True))
    assert _hashes(run) == first


def test_the_same_data_by_another_path_resumes(done_run, tmp_path, monkeypatch):
    """Before: `describe --resume` with the absolute path of the same data was refused as "a different task
    spec"."""
    data, run = done_run
    monkeypatch.chdir(tmp_path)
    _forget(run, 1)
    res = run_task(_task(os.path.relpath(data)), run, RunOptions(**OPTS, resume=True))
    assert res.results["counts"]["done"] == 4
    link = tmp_path / "same"
    link.symlink_to(data)
    _forget(run, 1)
    assert run_task(_task(link), run, RunOptions(**OPTS, resume=True)).results["counts"]["done"] == 4


def _repo(root: Path) -> str:
    """A git repository at ``root`` with one commit; its HEAD."""
    import subprocess

    def run(*a):
        return subprocess.run(["git", "-C", str(root), *a], check=True, capture_output=True, text=True)

    root.mkdir(parents=True, exist_ok=True)
    run("init", "-q")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "first")
    return run("rev-parse", "HEAD").stdout.strip()


def test_the_recorded_commit_is_vlmchecks_own_never_the_users_repository(tmp_path, monkeypatch):
    """results.json's ``git_commit``: a checkout's HEAD (a clone, an editable install); an installed copy in a
    project's .venv, inside the user's repository, once recorded that repository's HEAD as vlmcheck's commit."""
    import subprocess

    from vlmcheck.run import runner

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    head = _repo(tmp_path / "vlmcheck-clone")
    checkout = tmp_path / "vlmcheck-clone" / "src" / "vlmcheck" / "run"
    checkout.mkdir(parents=True)
    assert runner.git_commit(checkout) == head

    users = _repo(tmp_path / "project")
    for packages in ("site-packages", "dist-packages"):
        installed = tmp_path / "project" / ".venv" / "lib" / "python3.11" / packages / "vlmcheck" / "run"
        installed.mkdir(parents=True)
        assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=installed, capture_output=True,
                              text=True).stdout.strip() == users  # what git alone would have said
        calls = []
        monkeypatch.setattr(runner.subprocess, "run", lambda *a, **k: calls.append(a))
        assert runner.git_commit(installed) is None
        assert calls == []  # decided without running git
        monkeypatch.undo()

    outside = tmp_path / "elsewhere" / "vlmcheck" / "run"  # no repository at all
    outside.mkdir(parents=True)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert runner.git_commit(outside) is None


def test_the_report_shows_a_commit_only_where_one_was_recorded(tmp_path, monkeypatch):
    from vlmcheck.run import runner

    data = distinct_images(tmp_path / "imgs", 2)
    for name, commit in (("installed", None), ("checkout", "0123abcd" * 5)):
        monkeypatch.setattr(runner, "git_commit", lambda commit=commit: commit)
        run_task(_task(data), tmp_path / name, RunOptions(progress=False))
        assert json.loads((tmp_path / name / "results.json").read_text())["spec"]["git_commit"] == commit
        page = (tmp_path / name / "report.html").read_text()
        assert ("git commit" in page) == (commit is not None)
        assert "None" not in page.split("Run spec")[1].split("</table>")[0]
