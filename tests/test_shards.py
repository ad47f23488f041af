"""`--shard i/N` splits a run by a hash of the sample id; `vlmcheck merge` unions the shard folders into the
run one process would have written."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
ENV = {**os.environ, "COLUMNS": "200"}


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    p = run_cli(*args, env=ENV)
    if ok:
        assert p.returncode == 0, p.stderr[-2000:]
    return p


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("shards")
    cli("world", "make", str(d / "w"), "--n", "8")
    vhx = ["vhx", "run", "--vlm", "ref:describer?level=0.3", "--cases", str(d / "w"), "--perturb",
           "vhx_jpeg,vhx_brightness", "--no-progress"]
    cli(*vhx, "--out", str(d / "whole"))
    for i in range(3):
        cli(*vhx, "--out", str(d / f"s{i}"), "--shard", f"{i}/3")
    return d


def _ids(folder: Path) -> list[str]:
    return [json.loads(x)["sample_id"] for x in (folder / "samples.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_shards_split_by_a_hash_of_the_sample_id(runs):
    whole = _ids(runs / "whole")
    parts = [_ids(runs / f"s{i}") for i in range(3)]
    assert sorted(sum(parts, [])) == sorted(whole) and sum(map(len, parts)) == len(whole)
    for i, part in enumerate(parts):  # by hand: sha256 of the id, first 16 hex digits, modulo N
        assert part == [s for s in whole if int(hashlib.sha256(s.encode()).hexdigest()[:16], 16) % 3 == i]
    # a shard's samples keep their index in the whole run
    seq = {json.loads(x)["sample_id"]: json.loads(x)["seq"] for x in (runs / "s1" / "samples.jsonl").read_text().splitlines()}
    assert all(seq[s] == whole.index(s) for s in seq)


@pytest.mark.slow
def test_merge_writes_the_run_one_process_would_have_written(runs):
    out = runs / "merged"
    cli("merge", str(out), *(str(runs / f"s{i}") for i in range(3)))
    assert (out / "samples.jsonl").read_bytes() == (runs / "whole" / "samples.jsonl").read_bytes()
    merged, whole = (json.loads((f / "results.json").read_text()) for f in (out, runs / "whole"))
    assert merged["metrics"] == whole["metrics"] and merged["counts"] == whole["counts"]
    # every artifact a sample names is in the merged folder
    for line in (out / "samples.jsonl").read_text().splitlines():
        for v in json.loads(line)["result"]["variants"].values():
            if "image" in v:
                assert (out / v["image"]).is_file()
    # idempotent: merging again changes nothing; a resume of the merged run makes no call
    cli("merge", str(out), *(str(runs / f"s{i}") for i in range(3)))
    assert (out / "samples.jsonl").read_bytes() == (runs / "whole" / "samples.jsonl").read_bytes()
    p = cli("resume", str(out), "--no-progress")
    assert "0 model calls" in p.stderr


@pytest.mark.slow
def test_a_partial_merge_reports_pending_and_wrong_inputs_say_why(runs):
    p = cli("merge", str(runs / "partial"), str(runs / "s0"), str(runs / "s2"))
    pending = len(_ids(runs / "s1"))
    assert f"{pending} pending" in p.stderr
    assert json.loads((runs / "partial" / "results.json").read_text())["counts"]["pending"] == pending
    # resuming a shard's folder as another shard is refused
    p = cli("vhx", "run", "--vlm", "ref:describer?level=0.3", "--cases", str(runs / "w"), "--perturb",
            "vhx_jpeg,vhx_brightness", "--no-progress", "--out", str(runs / "s0"), "--resume", "--shard", "1/3",
            ok=False)
    assert p.returncode == 2 and "shard 0/3" in p.stderr and "Traceback" not in p.stderr
    # shards of another run
    cli("vhx", "run", "--vlm", "ref:describer?level=0.1", "--cases", str(runs / "w"), "--perturb", "vhx_jpeg",
        "--no-progress", "--out", str(runs / "other"), "--shard", "1/3")
    p = cli("merge", str(runs / "bad"), str(runs / "s0"), str(runs / "other"), ok=False)
    assert p.returncode == 2 and "different runs" in p.stderr
    for bad in ("3/3", "a/b", "1", "-1/2"):
        p = cli("vhx", "run", "--vlm", "ref:describer", "--cases", str(runs / "w"), "--out", str(runs / "x"),
                "--shard", bad, ok=False)
        assert p.returncode == 2 and "i/N" in p.stderr and "Traceback" not in p.stderr
