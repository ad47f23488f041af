"""Dataset readers and sweeps against hostile and broken files: secrets never written on any route, one rule for
every file a reader opens (a regular file, inside the dataset, within a size cap), work bounded by what was
asked, content-addressed release caches, and one sentence (never a traceback) for every malformed file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

KEY = "PLANTEDsecret0123456789abcdefXYZ"
ENVKEY = "PLANTEDenv0123456789abcdefXYZ"


def _cli(*args, env=None, cwd=None, timeout=120):
    e = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "vlmcheck.cli", *args], capture_output=True, text=True, env=e,
                          cwd=cwd, timeout=timeout)


def _manifest(tmp_path: Path) -> Path:
    (tmp_path / "img").mkdir(exist_ok=True)
    rows = []
    for i in range(2):
        Image.new("RGB", (12 + i, 12), (i * 60, 50, 200)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"id": f"s{i}", "image": f"img/{i}.png", "prompt": "Describe."})
    path = tmp_path / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _grep(root: Path, *needles: str) -> list[str]:
    hits = []
    for p in [root, *root.rglob("*")]:
        if p.name in ("sweep.yaml", "server-log.jsonl"):  # the user's own config; the fake server's request log
            continue
        for n in needles:
            if n in p.name or n[:12] in p.name:
                hits.append(f"name {p}")
        if p.is_file():
            data = p.read_bytes()
            for n in needles:
                if n.encode() in data or n[:12].encode() in data:
                    hits.append(str(p))
    return hits


def test_a_planted_key_is_written_nowhere_on_any_route(fake_server, tmp_path, capsys, monkeypatch):
    """A key in a sweep's model spec (YAML), on the command line, in the environment and in the endpoint URL's
    userinfo: every file a sweep, a run, a report and an export write, and the terminal, hold none of them."""
    _manifest(tmp_path)
    url = fake_server.base_url
    host = url.split("://", 1)[1]
    specs = [f"openai:fake-a@{url}?api_key={KEY}",                       # the key as a spec parameter
             f"openai:fake-b@http://user:{KEY}X@{host}"]                   # the key as the URL's password
    (tmp_path / "sweep.yaml").write_text(
        "out: sw\nmodels:\n" + "".join(f"  - {json.dumps(s)}\n" for s in specs)
        + "methods:\n  - method: describe\n    data: manifest.jsonl\n")
    env = {"OPENAI_API_KEY": ENVKEY, "VLMCHECK_URL_CREDENTIALS": "1", "VLMCHECK_CACHE": str(tmp_path / "cache")}
    outs = [_cli("run", "sweep.yaml", "--no-progress", env=env, cwd=tmp_path)]
    outs.append(_cli("describe", "--vlm", specs[0], "--data", "manifest.jsonl", "--out", "one", "--no-progress",
                     env=env, cwd=tmp_path))
    outs.append(_cli("report", "sw", "--out", "rep.html", env=env, cwd=tmp_path))
    outs.append(_cli("export", "sw", "--out", "exp", env=env, cwd=tmp_path))
    for o in outs[:2]:
        assert o.returncode == 0, o.stderr[-2000:]
    # the Python API: the same spec, in this process
    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask

    monkeypatch.setenv("OPENAI_API_KEY", ENVKEY)
    run_task(DescribeTask(DescribeSpec(vlm=specs[0], data=str(tmp_path / "manifest.jsonl"))), tmp_path / "api",
             RunOptions(progress=False))
    captured = capsys.readouterr()
    assert KEY[:12] not in captured.out + captured.err
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 10
    assert _grep(tmp_path / "sw", KEY, ENVKEY) == []
    assert _grep(tmp_path, KEY, ENVKEY) == []
    for o in outs:
        for n in (KEY, ENVKEY):
            assert n[:12] not in o.stdout + o.stderr
