"""Hardening: first-writer-wins store, bounded Retry-After, malformed counted on its own, one process per
run folder, any text survives samples.jsonl, atomic outputs."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time

import pytest
from PIL import Image

from vlmcheck.core.errors import ModelCallError
from vlmcheck.core.files import read_jsonl, write_text_atomic
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run.runner import RunFolderInUse, RunOptions, folder_lock, run_task
from vlmcheck.run.scheduler import CallFailed, RetryPolicy, Scheduler
from vlmcheck.store.db import RunStore


def test_the_cache_keeps_the_first_answer_and_errors_never_overwrite_it(tmp_path):
    with RunStore(tmp_path) as s:
        s.put_call_error("k", role="vlm", model="m", request={}, error_type="server", message="boom", attempts=2)
        s.put_call("k", role="vlm", model="m", request={}, response={"text": "first"}, attempts=3)  # error -> ok
        s.put_call("k", role="vlm", model="m", request={}, response={"text": "second"}, attempts=1)
        s.put_call_error("k", role="vlm", model="m", request={}, error_type="timeout", message="late", attempts=6)
        assert s.get_call("k") == {"text": "first"}
        assert s.call_stats()["m"] == {"ok": 1, "error": 0, "attempts": 3, "input_tokens": 0, "output_tokens": 0}
        s.put_sample_error("t", "a", 0, "x", "failed first")
        s.put_sample("t", "a", 0, {"v": 1})  # a retried failure becomes done
        s.put_sample("t", "a", 0, {"v": 2})
        s.put_sample_error("t", "a", 0, "x", "late failure")
        rec = list(s.iter_samples("t"))[0]
        assert rec["status"] == "done" and rec["result"] == {"v": 1}


def test_retry_after_is_capped():
    policy = RetryPolicy(max_retry_after=120)
    rng = random.Random(0)
    assert policy.delay(1, rng, 3600.0) == 120.0
    assert policy.delay(1, rng, 7.0) >= 7.0
    slept = []

    async def sleep(s):
        slept.append(s)

    calls = []

    async def fn():
        calls.append(1)
        if len(calls) == 1:
            raise ModelCallError("rate_limit", "slow down", status=429, retry_after=3600.0)
        return "ok"

    sched = Scheduler(retry=RetryPolicy(max_retry_after=5.0), sleep=sleep)
    assert asyncio.run(sched.call("p", fn)) == ("ok", 2)
    assert slept == [5.0]


def test_a_malformed_reply_counts_toward_its_own_limit():
    async def sleep(s):
        pass

    seq = ["rate_limit", "rate_limit", "malformed", "server", "ok"]

    async def fn():
        kind = seq.pop(0)
        if kind == "ok":
            return "done"
        raise ModelCallError(kind, kind)

    sched = Scheduler(retry=RetryPolicy(max_attempts=6, malformed_attempts=2), sleep=sleep)
    # the malformed reply is the 3rd attempt, but only the 1st malformed one: the call goes on
    assert asyncio.run(sched.call("p", fn)) == ("done", 5)
    seq[:] = ["malformed", "server", "malformed", "ok"]
    with pytest.raises(CallFailed) as info:
        asyncio.run(sched.call("p", fn))
    assert info.value.kind == "malformed" and info.value.attempts == 3


def _photos(tmp_path, n=3):
    (tmp_path / "img").mkdir()
    rows = []
    for i in range(n):
        Image.new("RGB", (16, 16), (60 * i, 10, 200)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"id": f"p{i}", "image": f"img/{i}.png"})
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "m.jsonl"


_HOLD = """
import sys, time
from pathlib import Path
from vlmcheck.run.runner import folder_lock
with folder_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_one_process_per_run_folder(tmp_path):
    manifest = _photos(tmp_path)
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderInUse, match=f"run folder in use by PID {holder.pid}"):
            run_task(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), run,
                     RunOptions(progress=False, resume=True))
        proc = subprocess.run([sys.executable, "-m", "vlmcheck.cli", "describe", "--vlm", "ref:photo", "--data",
                               str(manifest), "--out", str(run), "--resume"], capture_output=True, text=True)
        assert proc.returncode == 2
        assert f"run folder in use by PID {holder.pid}" in proc.stdout + proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr
    finally:
        holder.kill()
        holder.wait()
    # the kernel released the dead holder's lock: the run proceeds
    res = run_task(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), run,
                   RunOptions(progress=False, resume=True))
    assert res.results["counts"]["done"] == 3
    # and --overwrite keeps working while we hold the lock file
    res = run_task(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), run,
                   RunOptions(progress=False, overwrite=True))
    assert res.results["counts"]["done"] == 3


def test_nested_lock_in_one_process_is_refused(tmp_path):
    with folder_lock(tmp_path):
        with pytest.raises(RunFolderInUse, match=str(os.getpid())):
            with folder_lock(tmp_path):
                pass


class _Separators:
    """A VLM whose answers hold every line separator str.splitlines() knows."""

    model_id = "test:separators"

    def __init__(self) -> None:
        from vlmcheck.core.roles import Capabilities

        self.capabilities = Capabilities()

    async def generate(self, messages, config):
        from vlmcheck.core.roles import Generation

        return Generation(text="a\u2028b\u2029c\u0085d\x1ce\x1df\x1eg\x0bh\x0ci", finish_reason="stop")


def test_any_text_survives_samples_jsonl_and_the_report(tmp_path):
    manifest = _photos(tmp_path)
    vlm = _Separators()
    res = run_task(DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(manifest)), vlm=vlm), tmp_path / "run",
                   RunOptions(progress=False))
    assert res.results["counts"]["done"] == 3
    rows = read_jsonl(tmp_path / "run" / "samples.jsonl")
    assert [r["result"]["answer"] for r in rows] == ["a\u2028b\u2029c\u0085d\x1ce\x1df\x1eg\x0bh\x0ci"] * 3
    assert (tmp_path / "run" / "report.html").stat().st_size > 1000  # written, not silently skipped
    proc = subprocess.run([sys.executable, "-m", "vlmcheck.cli", "report", str(tmp_path / "run"), "-o",
                           str(tmp_path / "r.html")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_atomic_writes_use_unique_temp_names_and_leave_nothing_behind(tmp_path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "one")
    write_text_atomic(target, "two")
    assert target.read_text() == "two" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_kill_while_writing_the_report_never_leaves_a_partial_file(tmp_path):
    # Write a large report over and over in a child and kill it at random moments: report.html is always
    # either absent or a complete page.
    manifest = _photos(tmp_path, n=2)
    run = tmp_path / "run"
    run_task(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), run, RunOptions(progress=False))
    code = ("import sys\nfrom pathlib import Path\nfrom vlmcheck.report.html import build_report\n"
            "while True:\n    build_report([Path(sys.argv[1])], Path(sys.argv[2]))\n")
    out = tmp_path / "rep.html"
    for i in range(5):
        child = subprocess.Popen([sys.executable, "-c", code, str(run), str(out)])
        time.sleep(2.0 + 0.37 * i)
        child.kill()
        child.wait()
        if out.exists():
            text = out.read_text(encoding="utf-8")
            assert text.rstrip().endswith("</html>"), f"partial report after kill {i}"
