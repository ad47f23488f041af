"""The Ray executor: the same outputs as a local run (byte for byte), on ``ray.init(num_cpus=2)`` and on a
simulated three-node cluster with a node removed mid-run; a worker killed mid-run is replaced and the
requests the server saw are counted; cache reads in place or through the reader actors; a driver killed with
-9 leaves no Ray process behind and resumes with no call repeated for a completed sample.  Ray stays on the
loopback interface."""

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
from vlmcheck.run.ray_reaper import session_processes  # noqa: E402
from vlmcheck.run.ray_worker import CacheReader, WorkerStore, open_same_store  # noqa: E402
from vlmcheck.world.make import make_world  # noqa: E402

from conftest import FakeServer, distinct_images  # noqa: E402

# every test starts a Ray cluster (tens of seconds each); one at a time, on one xdist worker (make test)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(autouse=True)
def _own_ray_instance(monkeypatch):
    """ray.init(address=...) leaves RAY_ADDRESS set, which would make a later ray.init() join a cluster an earlier
    test shut down."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def _done(run: Path) -> int:
    db = run / "store.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("SELECT COUNT(*) FROM samples WHERE status = 'done'").fetchone()[0]
    except sqlite3.Error:
        return 0


def _describe_meanwhile(run: Path, data: Path, server, options: RunOptions, done_at: int, action):
    """A describe run on Ray in a thread; once ``done_at`` of its samples are done, ``action()``; the run's
    result once it ends."""
    out: dict = {}

    def go():
        out["res"] = run_task(DescribeTask(DescribeSpec(vlm=f"openai:fake-vlm@{server.base_url}", data=str(data))),
                              run, options)

    t = threading.Thread(target=go)
    t.start()
    deadline = time.time() + 120
    while _done(run) < done_at and time.time() < deadline:
        time.sleep(0.05)
    action()
    t.join(300)
    assert not t.is_alive() and "res" in out
    return out["res"]


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
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                            "include_dashboard": False})
    nodes = [cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1") for _ in range(2)]
    finished_before = []
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        caplog.set_level("WARNING", logger="vlmcheck")

        def remove_a_node():
            finished_before.append(_done(tmp_path / "ray"))
            cluster.remove_node(nodes[0])

        res = _describe_meanwhile(tmp_path / "ray", data, server, RunOptions(progress=False, executor="ray", workers=3,
                                                                             max_concurrency=3), 3, remove_a_node)
    finally:
        ray.shutdown()
        cluster.shutdown()
        server.stop()
    assert any("Ray worker" in r.getMessage() and "lost" in r.getMessage() for r in caplog.records)
    assert res.results["counts"]["done"] == 12 and res.results["counts"]["failed"] == 0
    assert finished_before[0] >= 3
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


def _session_of(pid: int) -> str:
    """The Ray session folder a process holds files open in (not /tmp/ray/session_latest: another Ray instance
    on the machine may have started since)."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        parts = Path(target).parts
        for i, part in enumerate(parts):
            if part.startswith("session_2"):
                return str(Path(*parts[: i + 1]))
    raise AssertionError(f"process {pid} holds no Ray session file open")


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
        session_dir = _session_of(proc.pid)  # the Ray instance this driver started
        os.kill(proc.pid, signal.SIGKILL)  # the driver alone: what it started must not outlive it
        proc.wait()
        gone_by = time.time() + 30
        while session_processes(session_dir) and time.time() < gone_by:
            time.sleep(0.5)
        assert session_processes(session_dir) == [], "Ray processes outlived their driver"
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


def _worker_pids() -> list[int]:
    """The sample workers of this process's Ray instance."""
    ours = set(session_processes(ray._private.worker._global_node.get_session_dir_path()))
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
    return [int(line.split()[0]) for line in out if "ray::SampleWorker" in line and int(line.split()[0]) in ours]


def test_a_worker_killed_mid_run_is_replaced_and_every_request_is_counted(tmp_path):
    server = FakeServer(0.4, tmp_path)
    data = _manifest(tmp_path, 16)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        def kill_a_worker():
            pids = _worker_pids()
            assert len(pids) == 2, pids
            os.kill(pids[0], signal.SIGKILL)

        res = _describe_meanwhile(tmp_path / "ray", data, server, RunOptions(progress=False, executor="ray", workers=2,
                                                                             max_concurrency=2), 3, kill_a_worker)
        # this process stays joined to Ray: the run's actors (workers, reader, tally) must not outlive the run
        from ray._private import state as ray_state

        time.sleep(1.0)
        assert [a for a in ray_state.actors().values() if a["State"] == "ALIVE"] == []
    finally:
        ray.shutdown()
        server.stop()
    results = res.results
    assert results["counts"]["done"] == 16 and results["counts"]["failed"] == 0
    ex = results["executor"]
    assert ex["lost"] == 1 and len(ex["replaced_after_s"]) == 1 and ex["replaced_after_s"][0] < 30
    assert ex["cache_reads"] == {"in place": 3}  # two at the start and the replacement, all on this node
    # every request the server saw is counted, the repeat of the killed worker's sample included; the tally hears
    # of a request before the server does (ray_worker), so a kill between the two counts its one slot's request
    # that never reached the server
    seen = server.requests()
    assert len(seen) <= results["session"]["requests"] <= len(seen) + 1
    assert len({r["digest"] for r in seen}) == 16 and len(seen) <= 17


def test_cache_reads_in_place_on_the_drivers_node_and_through_reader_actors_elsewhere(tmp_path):
    import asyncio

    from vlmcheck.store.db import RunStore

    store = RunStore(tmp_path / "run")
    store.set_meta("sessions", [{"started": "2026-11-25T12:00:00"}])
    store.put_call("k1", role="vlm", model="m", request={"q": 1}, response={"text": "yes"}, attempts=1)
    store.put_call("k2", role="vlm", model="m", request={"q": 2}, response={"text": "no"}, attempts=1)
    store.close()
    db = str(tmp_path / "run" / "store.sqlite")
    with sqlite3.connect(db) as con:  # a damaged stored answer: a miss, as RunStore.get_call reads it
        con.execute("UPDATE calls SET response = '{not json' WHERE key = 'k2'")
    assert open_same_store(db, [{"started": "2026-11-25T12:00:00"}]) is not None
    assert open_same_store(db, [{"started": "another run"}]) is None  # a same-named folder of another run
    assert open_same_store(str(tmp_path / "elsewhere" / "store.sqlite"), []) is None  # a node without it
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        reader = ray.remote(CacheReader).options(max_concurrency=4).remote(str(tmp_path / "run"), str(tmp_path))
        for ws in (WorkerStore(tmp_path / "w1", reader, open_same_store(db, [{"started": "2026-11-25T12:00:00"}])),
                   WorkerStore(tmp_path / "w2", reader, None)):
            async def both(ws=ws):
                return await asyncio.gather(ws.aget_call("k1"), ws.aget_call("missing"), ws.aget_call("k2"))

            assert asyncio.run(both()) == [{"text": "yes"}, None, None]
        # the readers answer at once from several threads: 8 reads from 4 threads at a time
        assert ray.get([reader.get.remote("k1") for _ in range(8)]) == [{"text": "yes"}] * 8
    finally:
        ray.shutdown()


def test_a_node_without_the_drivers_hfds_cache_fetches_the_files_a_sample_names(tmp_path):
    import asyncio

    from vlmcheck.core.data import ImageItem
    from vlmcheck.run.ray_worker import fetch_missing

    # what the driver's node holds (its hfds cache) and what a sample's payload names
    cache = tmp_path / "cache" / "hfds"
    (cache / "k").mkdir(parents=True)
    (cache / "k" / "000000.png").write_bytes(b"png-0")
    (cache / "k" / "000001.png").write_bytes(b"png-1")
    (tmp_path / "secret.txt").write_text("not a dataset file")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        reader = ray.remote(CacheReader).remote(str(tmp_path / "run"), str(cache))
        assert ray.get(reader.input_file.remote(str(cache / "k" / "000001.png"))) == b"png-1"
        assert ray.get(reader.input_file.remote(str(cache / ".." / ".." / "secret.txt"))) is None  # confined
        assert ray.get(reader.input_file.remote(str(tmp_path / "secret.txt"))) is None
    finally:
        ray.shutdown()
    # the worker's side, on a "node" that lacks the files: fetched to the same path, once each
    served = {str(cache / "k" / "000000.png"): b"png-0", str(cache / "k" / "000001.png"): b"png-1"}
    asked: list[str] = []

    async def fetch(path):
        asked.append(path)
        return served.get(path)

    for f in (cache / "k").iterdir():
        f.unlink()
    payload = {"item": ImageItem(id="a", path=str(cache / "k" / "000000.png"), root=str(cache / "k")),
               "others": [str(cache / "k" / "000001.png"), str(cache / "k" / "000000.png"), "not a path", 3],
               "elsewhere": str(tmp_path / "secret.txt")}
    assert asyncio.run(fetch_missing(payload, str(cache), fetch)) == 2
    assert (cache / "k" / "000000.png").read_bytes() == b"png-0"
    assert (cache / "k" / "000001.png").read_bytes() == b"png-1"
    assert sorted(asked) == sorted(served)  # each once, nothing outside the cache asked for
    assert asyncio.run(fetch_missing(payload, str(cache), fetch)) == 0  # present now: nothing fetched


def test_without_workers_the_pool_grows_when_a_node_joins_mid_run(tmp_path):
    from ray.cluster_utils import Cluster

    server = FakeServer(0.4, tmp_path)
    data = _manifest(tmp_path, 60)  # ~12 s of answers: the joined node's worker takes some even on a loaded machine
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                            "include_dashboard": False})
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        res = _describe_meanwhile(tmp_path / "ray", data, server, RunOptions(progress=False, executor="ray",
                                                                             max_concurrency=2), 2,
                                  lambda: cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1"))  # a node joins
    finally:
        ray.shutdown()
        cluster.shutdown()
        server.stop()
    results = res.results
    assert results["counts"]["done"] == 60
    # one worker for the one CPU at the start, a second once the node joined (started, so it answered its ping)
    assert results["executor"]["workers"] == 2 and sum(results["executor"]["cache_reads"].values()) == 2
