"""A damaged, read-only or full store ends in one sentence and exit 2 - never a traceback, never a silent redo."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI, run_cli
from PIL import Image

from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run.runner import RunOptions, run_task
from vlmcheck.store.db import DB_NAME, RunStore, StoreError


def _data(folder: Path, n: int = 4) -> Path:
    (folder / "img").mkdir(parents=True)
    for i in range(n):
        Image.new("RGB", (12, 12), (30 * i, 90, 200)).save(folder / "img" / f"{i}.png")
    (folder / "m.jsonl").write_text("".join(json.dumps({"id": f"p{i}", "image": f"img/{i}.png"}) + "\n"
                                            for i in range(n)))
    return folder / "m.jsonl"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("finished")
    manifest = _data(base)
    run_task(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), base / "run",
             RunOptions(progress=False, report=False))
    return base


def _cli(*args, env=None, **kw):
    env = {**(env or os.environ), "COLUMNS": "500"}  # no wrapping: one sentence is one line
    if kw:  # a process of its own: its limits (preexec_fn) must not bind the test's
        return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120, env=env, **kw)
    return run_cli(*args, env=env)


def _one_sentence(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in err and err.startswith("error:"), err
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, err


def _damage_half(p: Path):
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _damage_pages(p: Path):
    data = bytearray(p.read_bytes())
    data[100:] = os.urandom(len(data) - 100)  # the header survives, every page is garbage
    p.write_bytes(bytes(data))


def _half_initialised(p: Path):
    p.unlink()
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.commit()
    db.close()


def _no_spec(p: Path):
    db = sqlite3.connect(p)
    db.execute("DELETE FROM meta")
    db.commit()
    db.close()


DAMAGE = {
    "zero-byte": (lambda p: p.write_bytes(b""), "is empty (0 bytes)"),
    "truncated-header": (lambda p: p.write_bytes(p.read_bytes()[:10]), "is not an SQLite database"),
    "truncated-half": (_damage_half, "--overwrite"),
    "garbage": (lambda p: p.write_bytes(os.urandom(8192)), "is not an SQLite database"),
    "garbage-pages": (_damage_pages, "--overwrite"),
    "text-file": (lambda p: p.write_text("hello, I am not a database\n" * 50), "is not an SQLite database"),
    "half-initialised": (_half_initialised, "never fully set up"),
    "no-spec": (_no_spec, "holds no run spec"),
    "directory": (lambda p: (p.unlink(), p.mkdir()), "--overwrite"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_store_says_so_on_resume_and_on_run_resume(finished_run, tmp_path, kind):
    damage, needle = DAMAGE[kind]
    run = tmp_path / "run"
    shutil.copytree(finished_run / "run", run)
    for extra in ("store.sqlite-wal", "store.sqlite-shm"):
        (run / extra).unlink(missing_ok=True)
    damage(run / DB_NAME)
    _one_sentence(_cli("resume", run, "--no-progress"), "store.sqlite", needle)
    _one_sentence(_cli("describe", "--vlm", "ref:photo", "--data", finished_run / "m.jsonl", "--out", run,
                       "--resume", "--no-progress"), "store.sqlite", needle)
    if kind == "zero-byte":  # nothing was redone behind the user's back
        assert (run / DB_NAME).stat().st_size == 0


def test_run_store_refuses_an_empty_file_in_process(tmp_path):
    (tmp_path / DB_NAME).write_bytes(b"")
    with pytest.raises(StoreError, match="empty"):
        RunStore(tmp_path)


def _unprivileged() -> list[str]:
    """A command prefix that makes file permissions bind: root ignores them unless it drops its capabilities."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions cannot be made to bind")
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]


@pytest.mark.slow
def test_a_read_only_run_folder(tmp_path):
    manifest = _data(tmp_path)
    run = tmp_path / "run"
    run_task(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), run,
             RunOptions(progress=False, report=False, limit=2))
    for p in [run, *run.rglob("*")]:
        os.chmod(p, 0o555 if p.is_dir() else 0o444)
    try:
        cmd = [*_unprivileged(), sys.executable, "-m", "vlmcheck.cli", "resume", str(run), "--no-progress"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "500"})
        _one_sentence(proc, "store.sqlite", "cannot write there")
    finally:
        for p in [run, *run.rglob("*")]:
            os.chmod(p, 0o755)


def _small_disk():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000))


@pytest.mark.slow
def test_a_file_size_limit_during_a_run(tmp_path):
    manifest = _data(tmp_path, n=60)
    proc = _cli("describe", "--vlm", "ref:photo", "--data", manifest, "--out", tmp_path / "run",
                "--no-progress", preexec_fn=_small_disk)
    _one_sentence(proc, "disk")


@pytest.mark.slow
def test_a_full_disk_during_a_run(tmp_path):
    # A real ENOSPC: a 96 kB tmpfs mounted in a private user and mount namespace (no privileges needed).
    small = tmp_path / "small"
    small.mkdir()
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("user namespaces are not available: no way to mount a small disk")
    manifest = _data(tmp_path, n=200)
    inner = (f"mount -t tmpfs -o size=96k tmpfs {small} && COLUMNS=500 exec {sys.executable} -m vlmcheck.cli "
             f"describe --vlm ref:photo --data {manifest} --out {small}/run --no-progress")
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", inner], capture_output=True, text=True, timeout=300)
    _one_sentence(proc, "disk is full")
