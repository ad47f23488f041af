"""Nothing unbounded (issue 32, items 6-9): replies and answers are capped, bad values are refused, odd output
folders and URL credentials on resume are each one sentence."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI, run_cli as cli


def _last(p) -> str:
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    return lines[-1] if lines else ""


def _photo(tmp_path: Path) -> Path:
    from PIL import Image

    (tmp_path / "img").mkdir(exist_ok=True)
    Image.new("RGB", (16, 16), (60, 10, 200)).save(tmp_path / "img" / "0.png")
    return tmp_path / "img"


@pytest.mark.slow
@pytest.mark.parametrize("http", ["aiohttp", "sdk"])
@pytest.mark.parametrize("fault", ["gzipbomb", "huge"])
def test_a_reply_is_read_only_up_to_its_cap_and_memory_stays_flat(tmp_path, fake_server, http, fault):
    images = _photo(tmp_path)
    spec = f"openai:fake@{fake_server.base_url}?http={http}"
    code = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stderr.write(p.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
        "sys.exit(p.returncode)\n")
    p = subprocess.run([sys.executable, "-c", code, *CLI, "describe", "--vlm", spec, "--data", str(images), "--out",
                        str(tmp_path / "run"), "--prompt", f"Describe [fault={fault}]", "--no-progress",
                        "--no-preflight"], capture_output=True, text=True, timeout=600)
    peak = float(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 1, p.stderr[-2000:]  # the sample failed, the run did not crash
    import json

    row = json.loads((tmp_path / "run" / "samples.jsonl").read_text().splitlines()[0])
    assert row["error"]["type"] == "model_call:too_large" and "max_response_mb" in row["error"]["message"]
    # 1 GB of inflated gzip or 200 MB of answer never reach memory: a run of this CLI peaks near 300 MB
    assert peak < 600, f"peak RSS {peak:.0f} MB"
    print(f"{fault} over {http}: peak RSS {peak:.0f} MB")


@pytest.mark.slow
def test_an_answer_longer_than_its_cap_is_not_stored(tmp_path, fake_server):
    images = _photo(tmp_path)
    for spec, ok in ((f"openai:fake@{fake_server.base_url}?max_answer_chars=100000", False),
                     (f"openai:fake@{fake_server.base_url}?max_answer_chars=3000000", True)):
        out = tmp_path / f"run{ok}"
        p = cli("describe", "--vlm", spec, "--data", images, "--out", out, "--prompt", "Describe [fault=longx9]",
                "--no-progress", "--no-preflight")
        assert p.returncode == (0 if ok else 1), p.stderr[-2000:]
        text = (out / "samples.jsonl").read_text()
        assert ("max_answer_chars" in text) != ok and (len(text) > 2_000_000) == ok


@pytest.mark.parametrize("args, words", [
    (["describe", "--vlm", "openai:m@http://127.0.0.1:9/v1?concurrency=-5"], "concurrency=-5 must be at least 0"),
    (["describe", "--vlm", "openai:m@http://127.0.0.1:9/v1?timeout=-1"], "timeout=-1 must be above 0"),
    (["describe", "--vlm", "openai:m@http://127.0.0.1:9/v1?temprature=0"], "unknown parameter(s) temprature"),
    (["describe", "--vlm", "ref:photo", "--max-tokens", "-5"], "--max-tokens"),
    (["describe", "--vlm", "ref:photo", "--max-tokens", "0"], "--max-tokens"),
])
def test_values_that_were_accepted_silently_are_refused(tmp_path, args, words):
    p = cli(*args, "--data", _photo(tmp_path), "--out", tmp_path / "run", "--no-progress")
    assert p.returncode == 2 and words in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and not (tmp_path / "run" / "store.sqlite").exists()


@pytest.mark.parametrize("row, words", [
    ({"image": "img/0.png", "keywords": [1, 2]}, "'keywords' must be a list of words"),
    ({"image": "img/0.png", "keywords": "cat"}, "'keywords' must be a list of words"),
    ({"image": "img/0.png", "id": {"a": 1}}, "'id' must be a string or an integer"),
])
def test_manifest_values_of_the_wrong_kind_are_refused(tmp_path, row, words):
    import json

    _photo(tmp_path)
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    p = cli("describe", "--vlm", "ref:photo", "--data", tmp_path / "m.jsonl", "--out", tmp_path / "run",
            "--no-progress")
    assert p.returncode == 2 and words in _last(p), p.stderr[-2000:]


@pytest.mark.slow
def test_dangling_and_looping_symlinks_as_outputs_are_one_sentence(tmp_path):
    images = _photo(tmp_path)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "x")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for out, words in (("dangling", "does not exist"), ("loop", "loops")):
        for args in (["describe", "--vlm", "ref:photo", "--data", images, "--out", tmp_path / out, "--no-progress"],
                     ["merge", tmp_path / out, tmp_path / "nothing"]):
            p = cli(*args)
            assert p.returncode == 2 and words in _last(p), (args, p.stderr[-1500:])


@pytest.mark.slow
def test_read_only_output_folders_are_one_sentence(tmp_path):
    # root ignores permission bits; the immutable attribute stops root too
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(tmp_path)]).returncode != 0:
        pytest.skip("chattr +i is not available on this file system: no read-only folder can be made for root")
    subprocess.run(["chattr", "-i", str(tmp_path)], check=True)
    images = _photo(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    assert cli("describe", "--vlm", "ref:photo", "--data", images, "--out", ro / "prev", "--no-progress").returncode == 0
    subprocess.run(["chattr", "+i", str(ro), str(ro / "prev")], check=True)
    try:
        for args in (["describe", "--vlm", "ref:photo", "--data", images, "--out", ro / "new", "--no-progress"],
                     ["describe", "--vlm", "ref:photo", "--data", images, "--out", ro / "prev", "--resume",
                      "--no-progress"],
                     ["report", ro / "prev", "-o", ro / "r.html"],
                     ["export", ro / "prev", "--out", ro / "tables"]):
            p = cli(*args)
            assert p.returncode == 2 and ("permission" in _last(p) or "cannot write" in _last(p)), (args, p.stderr)
    finally:
        subprocess.run(["chattr", "-i", str(ro), str(ro / "prev")], check=True)


@pytest.mark.slow
def test_a_run_made_with_url_credentials_asks_for_them_on_resume(tmp_path, fake_server):
    images = _photo(tmp_path)
    host = fake_server.base_url.replace("http://", "")
    spec = f"openai:fake@http://alice:pw-Hunter2-s3cret@{host}"
    run = tmp_path / "run"
    p = cli("describe", "--vlm", spec, "--data", images, "--out", run, "--no-progress")
    assert p.returncode == 0, p.stderr
    env = {k: v for k, v in os.environ.items() if k != "VLMCHECK_URL_CREDENTIALS"}
    p = cli("resume", run, "--no-progress", env=env)
    assert p.returncode == 2 and "VLMCHECK_URL_CREDENTIALS" in _last(p) and "user:password" in _last(p)
    p = cli("resume", run, "--no-progress", env={**env, "VLMCHECK_URL_CREDENTIALS": "alice:pw-Hunter2-s3cret"})
    assert p.returncode == 0, p.stderr
    p = cli("describe", "--vlm", spec, "--data", images, "--out", run, "--resume", "--no-progress", env=env)
    assert p.returncode == 0, p.stderr  # the full URL again
    for path in run.rglob("*"):
        if path.is_file():
            assert b"pw-Hunter2-s3cret" not in path.read_bytes(), path
