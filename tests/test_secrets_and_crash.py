"""A planted API key never reaches any file a run writes; kill -9 and resume."""

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from PIL import Image

from vlmcheck import RunOptions, run_task
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run.scheduler import RetryPolicy

PLANTED = "sk-test-PLANTEDkey-0123456789abcdefXYZ"


def _manifest(tmp_path: Path, prompts: list[str]) -> Path:
    (tmp_path / "img").mkdir(exist_ok=True)
    rows = []
    for i, prompt in enumerate(prompts):
        Image.new("RGB", (10, 10), (i * 8 % 255, 50, 255 - i * 8 % 255)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"id": f"s{i:03d}", "image": f"img/{i}.png", "prompt": prompt})
    path = tmp_path / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_planted_key_never_written(fake_server, tmp_path, monkeypatch, caplog):
    import logging

    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    manifest = _manifest(tmp_path, ["[fault=401echo] Describe.", "Describe.", "[fault=400] Describe."])
    task = DescribeTask(DescribeSpec(vlm=f"openai:fake@{fake_server.base_url}", data=str(manifest)))
    caplog.set_level(logging.DEBUG)
    logging.getLogger("vlmcheck.test").warning("key in a log line: %s", PLANTED)
    res = run_task(task, tmp_path / "run", RunOptions(progress=False, retry=RetryPolicy(base_delay=0.01)))
    assert res.results["counts"]["failed"] == 2
    samples = (tmp_path / "run" / "samples.jsonl").read_text()
    assert "Incorrect API key provided" in samples  # the echoing error was recorded...
    assert "[REDACTED]" in samples  # ...with the key masked
    # the server did receive the key, so the plant was real
    checked = 0
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert PLANTED.encode() not in data, path
            assert PLANTED[:12].encode() not in data, path
            checked += 1
    assert checked >= 3  # store, results.json, samples.jsonl
    from vlmcheck.core.secrets import install_log_redaction

    install_log_redaction(logging.getLogger())
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "key=%s", (PLANTED,), None)
    for f in logging.getLogger().filters:
        f.filter(record)
    assert PLANTED not in record.getMessage()


def _cli(*args) -> list[str]:
    return [sys.executable, "-m", "vlmcheck.cli", *args]


def _done_digests(run_dir: Path) -> set[str]:
    db = run_dir / "store.sqlite"
    if not db.exists():
        return set()
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT result FROM samples WHERE status = 'done'").fetchall()
    except sqlite3.OperationalError:
        return set()
    finally:
        con.close()
    return {json.loads(r[0])["answer"].split()[-1] for r in rows}


@pytest.mark.slow
def test_kill9_and_resume_equals_uninterrupted_run(tmp_path):
    from conftest import FakeServer, run_cli

    server = FakeServer(0.15, tmp_path)
    try:
        prompts = ["Describe."] * 24 + ["[fault=429x1] Describe.", "[fault=400] Describe."]
        manifest = _manifest(tmp_path, prompts)
        spec = f"openai:fake@{server.base_url}"
        crashed = tmp_path / "crashed"
        rng = random.Random(7)
        kills, segments = 0, []
        # one sample fails on purpose ([fault=400]): allowed, so the last segment exits 0
        args = ["describe", "--vlm", spec, "--data", str(manifest), "--out", str(crashed), "--max-concurrency", "3",
                "--no-progress", "--max-failures", "0.1"]
        first = True
        while True:
            start_log = len(server.requests())
            proc = subprocess.Popen(_cli(*args, *([] if first else ["--resume"])), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            first = False
            if kills < 4:
                time.sleep(rng.uniform(1.2, 2.2))
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
                    kills += 1
                    segments.append((start_log, len(server.requests()), _done_digests(crashed)))
                    continue
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()[-2000:]
            segments.append((start_log, len(server.requests()), _done_digests(crashed)))
            break
        assert kills >= 2, "the run finished before it could be killed twice"
        log = server.requests()
        # no request for a sample that a previous segment had completed
        for i, (_, _, done_before) in enumerate(segments[:-1]):
            later = {r["digest"] for r in log[segments[i + 1][0]:]}
            assert not (later & done_before), f"segment {i + 1} repeated completed calls"

        clean = tmp_path / "clean"
        out = run_cli("describe", "--vlm", spec, "--data", manifest, "--out", clean, "--max-concurrency", "3",
                      "--no-progress", "--max-failures", "0.1")  # the uninterrupted run: no kill, in this process
        assert out.returncode == 0, out.stderr[-2000:]
        a = json.loads((crashed / "results.json").read_text())
        b = json.loads((clean / "results.json").read_text())
        assert a["metrics"] == b["metrics"] and a["counts"] == b["counts"]
        assert a["counts"]["done"] == 25 and a["counts"]["failed"] == 1
        assert (crashed / "samples.jsonl").read_text() == (clean / "samples.jsonl").read_text()
    finally:
        server.stop()


def test_redact_masks_key_shapes_registered_keys_and_their_prefixes():
    from vlmcheck.core.secrets import REDACTED, redact, redact_obj, register_secret

    # Shapes of well-known keys are masked even when never registered.
    assert redact("key sk-abcdefghijklmnop1234 end") == f"key {REDACTED} end"
    assert redact("x-goog AIza" + "B" * 35) == f"x-goog {REDACTED}"
    assert redact("Authorization: BEARER abcdef.ghijkl-mn") == f"Authorization: BEARER {REDACTED}"
    assert redact("sk-short") == "sk-short"  # too short to be a key shape
    # A registered key, anywhere, and the 12-character prefix SDK errors sometimes echo.
    register_secret("zz-registered-0123456789")
    assert redact("got zz-registered-0123456789!") == f"got {REDACTED}!"
    assert redact("Incorrect API key provided: zz-registere***6789") == f"Incorrect API key provided: {REDACTED}***6789"
    # Clean and short strings come back unchanged; structures are walked.
    assert redact("a plain answer about a red cube") == "a plain answer about a red cube"
    assert redact("ok") == "ok"
    assert redact_obj({"a": ["x zz-registered-0123456789", 3], "b": None}) == {"a": [f"x {REDACTED}", 3], "b": None}


def test_redacted_json_equals_the_walk_without_walking_clean_records(monkeypatch):
    """redacted_json(obj) is json(redact_obj(obj)) for every object, and skips the walk when the JSON text shows
    nothing to redact."""
    import json

    from vlmcheck.core import secrets
    from vlmcheck.core.secrets import REDACTED, redact_obj, redacted_json, register_secret

    for name, value in (("_secrets", set()), ("_by_length", ()), ("_parts", ((), {})), ("_verbatim", True)):
        monkeypatch.setattr(secrets, name, value)  # a registry of this test's own
    walks = []
    real_walk = secrets.redact_obj
    monkeypatch.setattr(secrets, "redact_obj", lambda obj: walks.append(id(obj)) or real_walk(obj))

    def dumps(obj):
        return json.dumps(obj, sort_keys=True, ensure_ascii=False)

    key = "qq-registered-9876543210"
    register_secret(key)
    cases = [
        {"answer": "a red cube\non the left", "n": [1, 2.5, None, True], "k": "quote \" and \\ back"},
        {"answer": f"echo {key} here"},
        {"answer": "the key starts qq-registere and ends"},  # a run of 12 characters of the key
        {"answer": ["x", {"deep": "Bearer\nabcdefghijklmnop"}]},  # the whitespace JSON escapes
        {"answer": "token sk-" + "a" * 20},
        {"answer": "AIza" + "b" * 32},
        {"t": ("a", "b")},
    ]
    for obj in cases:
        assert redacted_json(obj, dumps) == dumps(real_walk(obj))
    # the walks that started at a whole record (a walk's own recursion passes through the patched name too)
    started = [i for i in walks if i in {id(c) for c in cases}]
    assert started == [id(c) for c in cases[1:6]]  # the two clean records never walked; the other five once
    assert REDACTED in redacted_json(cases[3], dumps) and "abcdefghijklmnop" not in redacted_json(cases[3], dumps)
    # a key JSON would escape ('"' inside): every object is walked, and masked all the same
    register_secret('ab"cdefghijkl')
    walks.clear()
    clean = {"answer": "clean"}
    assert redacted_json(clean, dumps) == dumps(clean) and walks[0] == id(clean)
    assert redacted_json({"answer": 'x ab"cdefghijkl'}, dumps) == dumps({"answer": f"x {REDACTED}"})
