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
from conftest import run_cli
from PIL import Image

from vlmcheck.core.errors import ModelCallError
from vlmcheck.core.files import JsonlRecords, write_text_atomic
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck import RunOptions, run_task
from vlmcheck.run.runner import RunFolderInUse, folder_lock
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


@pytest.mark.slow  # a second Python process holds the folder: ~4 s of CPU
def test_one_process_per_run_folder(tmp_path):
    manifest = _photos(tmp_path)
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderInUse, match=f"run folder in use by PID {holder.pid}"):
            run_task(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), run,
                     RunOptions(progress=False, resume=True))
        proc = run_cli("describe", "--vlm", "ref:photo", "--data", str(manifest), "--out", str(run), "--resume")
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
    rows = list(JsonlRecords(tmp_path / "run" / "samples.jsonl"))
    assert [r["result"]["answer"] for r in rows] == ["a\u2028b\u2029c\u0085d\x1ce\x1df\x1eg\x0bh\x0ci"] * 3
    assert (tmp_path / "run" / "report.html").stat().st_size > 1000  # written, not silently skipped
    proc = run_cli("report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html"))
    assert proc.returncode == 0, proc.stderr


def test_atomic_writes_use_unique_temp_names_and_leave_nothing_behind(tmp_path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "one")
    write_text_atomic(target, "two")
    assert target.read_text() == "two" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.slow
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


# ----------------------------------------------------------------------------- credentials in URLs

def test_url_credentials_are_used_for_requests_and_never_written(fake_server, tmp_path):
    import base64

    from vlmcheck.core.secrets import redact
    from vlmcheck.core.spec import ModelSpec

    user, password = "alice", "pw-Hunter2-s3cret"
    token, sig = "tok-AbCdEf0123456789", "sig-9876543210zyxw"
    host = fake_server.base_url.replace("http://", "")
    spec = f"openai:fake@http://{user}:{password}@{host}?access_token={token}&sig={sig}&clients=1"
    parsed = ModelSpec.parse(spec)
    assert parsed.canonical() == f"openai:fake@{fake_server.base_url}?clients=1&login=url"
    manifest = _photos(tmp_path)
    res = run_task(DescribeTask(DescribeSpec(vlm=parsed.canonical(), data=str(manifest)), vlm=_load(parsed)),
                   tmp_path / "run", RunOptions(progress=False))
    assert res.results["counts"]["done"] == 3  # works with the default aiohttp transport
    reqs = fake_server.requests()
    basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    assert reqs and all(r["authorization"] == basic for r in reqs)
    assert all(f"access_token={token}" in r["query"] and f"sig={sig}" in r["query"] for r in reqs)
    for path in (tmp_path / "run").rglob("*"):  # store, results, samples, report
        if path.is_file():
            data = path.read_bytes()
            for secret in (password, token, sig, base64.b64encode(f"{user}:{password}".encode()).decode()):
                assert secret.encode() not in data, (path, secret)
    # an echoed part of a credential, of any length from 8 characters, anywhere in a message
    assert password[3:12] not in redact(f"bad login: {password[3:12]}...")
    assert token[-10:] not in redact(f"token ...{token[-10:]} rejected")


def _load(spec):
    from vlmcheck.core.spec import load_model

    return load_model(spec, "vlm")


def test_a_trickling_body_is_cut_at_the_total_deadline(fake_server, tmp_path):
    # One byte every 0.1 s: an idle timeout of 2 s never fires; the total deadline of 2 s does.
    from vlmcheck.core.messages import Message
    from vlmcheck.core.roles import GenerationConfig
    from vlmcheck.run.calls import Session
    from vlmcheck.core.spec import load_model

    model = load_model(f"openai:fake@{fake_server.base_url}?timeout=2", "vlm")

    async def main():
        with RunStore(tmp_path / "s") as store:
            session = Session(store, Scheduler(4, RetryPolicy(max_attempts=1)))
            return await session.vlm(model).generate([Message.user("[fault=trickle] hi")], GenerationConfig())

    t0 = time.monotonic()
    with pytest.raises(CallFailed, match="total deadline"):
        asyncio.run(main())
    assert time.monotonic() - t0 < 4.0


def test_retry_after_as_an_http_date():
    from email.utils import format_datetime
    from datetime import datetime, timedelta, timezone

    from vlmcheck.core.errors import parse_retry_after

    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 <= parse_retry_after(when) <= 30
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: no wait
    assert RetryPolicy().delay(1, random.Random(0), parse_retry_after("3600")) == 120.0


@pytest.mark.slow
def test_kill9_while_a_resume_writes_results_samples_and_report(tmp_path):
    # A finished run is resumed (which rewrites samples.jsonl, results.json and report.html) and killed at
    # random moments: every output is always either the old complete file or the new complete one, and a last
    # resume writes the same outputs as before.
    manifest = _photos(tmp_path, n=30)
    run = tmp_path / "run"
    cli = [sys.executable, "-m", "vlmcheck.cli"]
    first = run_cli("describe", "--vlm", "ref:photo", "--data", str(manifest), "--out", str(run), "--no-progress")
    assert first.returncode == 0, first.stderr
    before = {n: (run / n).read_text(encoding="utf-8") for n in ("samples.jsonl", "results.json", "report.html")}
    rng = random.Random(3)
    for i in range(8):
        child = subprocess.Popen(cli + ["resume", str(run), "--no-progress"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.6, 2.6))
        child.kill()
        child.wait()
        rows = list(JsonlRecords(run / "samples.jsonl"))
        assert len(rows) == 30 and all(r["status"] == "done" for r in rows), f"kill {i}"
        assert json.loads((run / "results.json").read_text())["counts"]["done"] == 30, f"kill {i}"
        assert (run / "report.html").read_text(encoding="utf-8").rstrip().endswith("</html>"), f"kill {i}"
    last = run_cli("resume", str(run), "--no-progress")
    assert last.returncode == 0, last.stderr
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]  # a killed writer's temp files are gone
    assert (run / "samples.jsonl").read_text(encoding="utf-8") == before["samples.jsonl"]
    a, b = json.loads((run / "results.json").read_text()), json.loads(before["results.json"])
    assert a["metrics"] == b["metrics"] and a["counts"] == b["counts"]
