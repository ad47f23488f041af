"""The Ray executor: the same outputs as a local run (byte for byte), on ``ray.init(num_cpus=2)`` and on a
simulated three-node cluster with a node removed mid-run; a driver killed with -9 resumes with no call
repeated for a completed sample.  Ray stays on the loopback interface."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray")

from vlmcheck import RunOptions, run_task  # noqa: E402
from vlmcheck.methods.describe import DescribeSpec, DescribeTask  # noqa: E402
from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec  # noqa: E402
from vlmcheck.world.make import make_world  # noqa: E402

from conftest import FakeServer, distinct_images  # noqa: E402


def _done(run: Path) -> int:
    db = run / "store.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("SELECT COUNT(*) FROM samples WHERE status = 'done'").fetchone()[0]
    except sqlite3.Error:
        return 0


def _manifest(tmp_path: Path, n: int) -> Path:
    distinct_images(tmp_path / "imgs", n)
    rows = [{"id": f"s{i:02d}", "image": f"imgs/img{i}.png", "prompt": "Describe."} for i in range(n)]
    path = tmp_path / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_ray_run_equals_a_local_run_byte_for_byte(tmp_path):
    make_world(tmp_path / "w", n=8, seed=0)

    def task():
        return VHExpansionTask(VHXSpec(vlm="ref:describer?level=0.1", cases=str(tmp_path / "w")))

    local = run_task(task(), tmp_path / "local", RunOptions(progress=False))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        remote = run_task(task(), tmp_path / "ray", RunOptions(progress=False, executor="ray", workers=2))
    finally:
        ray.shutdown()
    assert (tmp_path / "ray" / "samples.jsonl").read_bytes() == (tmp_path / "local" / "samples.jsonl").read_bytes()
    assert remote.results["metrics"] == local.results["metrics"]
    assert remote.results["counts"]["failed"] == 0
    # the artifacts the workers made (perturbed images) are in the driver's run folder
    assert sorted(p.name for p in (tmp_path / "ray" / "artifacts").rglob("*.png")) == \
        sorted(p.name for p in (tmp_path / "local" / "artifacts").rglob("*.png"))


def test_a_node_removed_mid_run_loses_no_sample_and_repeats_no_finished_call(tmp_path, caplog):
    from ray.cluster_utils import Cluster

    server = FakeServer(0.4, tmp_path)
    data = _manifest(tmp_path, 12)
    spec = f"openai:fake-vlm@{server.base_url}"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                            "include_dashboard": False})
    nodes = [cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1") for _ in range(2)]
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        out: dict = {}

        def go():
            out["res"] = run_task(DescribeTask(DescribeSpec(vlm=spec, data=str(data))), tmp_path / "ray",
                                  RunOptions(progress=False, executor="ray", workers=3, max_concurrency=3))

        caplog.set_level("WARNING", logger="vlmcheck")
        t = threading.Thread(target=go)
        t.start()
        deadline = time.time() + 120
        while _done(tmp_path / "ray") < 3 and time.time() < deadline:
            time.sleep(0.05)
        finished_before = _done(tmp_path / "ray")
        cluster.remove_node(nodes[0])
        t.join(300)
        assert not t.is_alive() and "res" in out
    finally:
        ray.shutdown()
        cluster.shutdown()
        server.stop()
    res = out["res"]
    assert any("Ray worker" in r.getMessage() and "lost" in r.getMessage() for r in caplog.records)
    assert res.results["counts"]["done"] == 12 and res.results["counts"]["failed"] == 0
    assert finished_before >= 3
    (tmp_path / "l").mkdir()
    local_server = FakeServer(0.0, tmp_path / "l")
    try:
        run_task(DescribeTask(DescribeSpec(vlm=f"openai:fake-vlm@{local_server.base_url}", data=str(data))),
                 tmp_path / "local", RunOptions(progress=False))
    finally:
        local_server.stop()
    a = [json.loads(x) for x in (tmp_path / "ray" / "samples.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (tmp_path / "local" / "samples.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["result"]["answer"]) for r in a] == [(r["sample_id"], r["result"]["answer"]) for r in b]
    # one request per image, plus at most the one in flight on the removed node
    seen = Counter(r["digest"] for r in server.requests())
    assert len(seen) == 12 and sum(seen.values()) <= 13, seen


def test_a_driver_killed_with_minus_9_resumes_without_repeating_finished_calls(tmp_path):
    server = FakeServer(0.3, tmp_path)
    data = _manifest(tmp_path, 16)
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "vlmcheck.cli", "describe", "--vlm", f"openai:fake-vlm@{server.base_url}",
           "--data", str(data), "--out", str(run), "--executor", "ray", "--workers", "2", "--max-concurrency", "2",
           "--no-progress"]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        deadline = time.time() + 120
        while _done(run) < 4 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray instance it started
        proc.wait()
        done_before = _done(run)
        assert 4 <= done_before < 16
        with sqlite3.connect(f"file:{run / 'store.sqlite'}?mode=ro", uri=True) as con:
            finished = {r[0] for r in con.execute("SELECT sample_id FROM samples WHERE status = 'done'")}
        # Ray's workers are not in the killed process group: on a loaded machine one may still send a request
        # before it notices its raylet is gone, so count what the server saw once it has been quiet for 1 s
        requests_before, quiet_by = -1, time.time() + 20
        while requests_before != len(server.requests()) and time.time() < quiet_by:
            requests_before = len(server.requests())
            time.sleep(1.0)
        res = subprocess.run([sys.executable, "-m", "vlmcheck.cli", "resume", str(run), "--executor", "ray",
                              "--workers", "2", "--no-progress"], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
    finally:
        server.stop()
    rows = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and all(r["status"] == "done" for r in rows)
    # the finished samples' requests were not sent again: each of the 16 digests was asked for at most twice
    # (a sample in flight at the kill may repeat its call), and the resume sent none for the finished ones
    after = server.requests()[requests_before:]
    answers = {r["sample_id"]: r["result"]["answer"] for r in rows}
    finished_digests = {answers[s].split()[1] for s in finished}
    assert not finished_digests & {r["digest"] for r in after}
    assert len(after) <= 16 - len(finished)
