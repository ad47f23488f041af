"""Provider batch APIs (``?batch=1``) against the local fake of both protocols, driven by the real SDKs:
one batch for a run's misses, answers equal to direct calls, the discount, retries of failed items, and a
run killed while its batch is in flight that re-attaches with 0 resubmissions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from PIL import Image

from vlmcheck import RunOptions, run_task
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run.scheduler import RetryPolicy

from conftest import CLI, FakeServer, run_cli

FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)
BATCH = "batch=1&batch_window=0.3&batch_poll=0.1"


@pytest.fixture
def batch_server(tmp_path):
    server = FakeServer(0.0, tmp_path, "--batch-delay", "0.5")
    yield server
    server.stop()


def _manifest(folder: Path, prompts: list[str]) -> Path:
    (folder / "img").mkdir(parents=True, exist_ok=True)
    rows = []
    for i, prompt in enumerate(prompts):
        Image.new("RGB", (12 + i, 12), (30 * i % 255, 90, 200)).save(folder / "img" / f"{i}.png")
        rows.append({"id": f"s{i}", "image": f"img/{i}.png", "prompt": prompt})
    path = folder / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _answers(run: Path) -> dict[str, str]:
    return {r["sample_id"]: r["result"]["answer"] for r in map(json.loads, (run / "samples.jsonl").read_text()
                                                                .splitlines()) if r["status"] == "done"}


def _creates(server: FakeServer) -> list[dict]:
    return [r for r in server.requests() if "batch_create" in r]


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_runs_misses_go_in_one_batch_with_the_direct_answers_at_half_price(batch_server, tmp_path, monkeypatch,
                                                                             provider):
    if provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
        base = f"anthropic:claude-fake@{batch_server.base_url[:-len('/v1')]}"
    else:
        base = f"openai:fake-vlm@{batch_server.base_url}"
    data = _manifest(tmp_path / "data", ["Describe."] * 6)
    direct = run_task(DescribeTask(DescribeSpec(vlm=f"{base}?price_in=2&price_out=10", data=str(data))),
                      tmp_path / "direct", RunOptions(progress=False, retry=FAST))
    batched = run_task(DescribeTask(DescribeSpec(vlm=f"{base}?price_in=2&price_out=10&{BATCH}", data=str(data))),
                       tmp_path / "batched", RunOptions(progress=False, retry=FAST, max_concurrency=2))
    creates = _creates(batch_server)
    # every sample's request in one batch, although only 2 samples may run at once otherwise
    assert len(creates) == 1 and creates[0]["n"] == 6 and creates[0]["provider"] == provider
    assert _answers(tmp_path / "batched") == _answers(tmp_path / "direct") and len(_answers(tmp_path / "direct")) == 6
    u_direct = next(iter(direct.results["usage"].values()))
    u_batch = next(iter(batched.results["usage"].values()))
    assert u_batch["input_tokens"] == u_direct["input_tokens"] > 0
    assert u_batch["cost_usd"] == pytest.approx(u_direct["cost_usd"] / 2) and u_batch["batch_price_factor"] == 0.5
    # batch=1 is placement: the direct run's cache serves a batched rerun with no batch at all
    again = run_task(DescribeTask(DescribeSpec(vlm=f"{base}?price_in=2&price_out=10&{BATCH}", data=str(data))),
                     tmp_path / "direct", RunOptions(progress=False, retry=FAST, resume=True))
    assert again.counters.calls == 0 and len(_creates(batch_server)) == 1


def test_failed_items_follow_the_retry_policy(batch_server, tmp_path):
    data = _manifest(tmp_path / "data", ["Describe. [fault=500x1]", "Describe. [fault=400]", "Describe."])
    run_task(DescribeTask(DescribeSpec(vlm=f"openai:fake-vlm@{batch_server.base_url}?{BATCH}", data=str(data))),
             tmp_path / "run", RunOptions(progress=False, retry=FAST))
    rows = {r["sample_id"]: r for r in map(json.loads, (tmp_path / "run" / "samples.jsonl").read_text().splitlines())}
    # the 500 is retried in a second batch and answered; the 400 fails at once, with its cause
    assert rows["s0"]["status"] == "done" and rows["s2"]["status"] == "done"
    assert rows["s1"]["status"] == "error" and "bad_request" in rows["s1"]["error"]["message"]
    assert [c["n"] for c in _creates(batch_server)] == [3, 1]


def _kill_once_its_batch_is_out(cmd: list[str], server: FakeServer) -> None:
    """Start the command and kill -9 it (with its process group) right after its batch was created."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.time() + 60
    while not _creates(server) and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the journal is written right after the batch is created
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_a_killed_run_reattaches_to_its_batch_and_resubmits_nothing(tmp_path):
    server = FakeServer(0.0, tmp_path, "--batch-delay", "4")
    try:
        data = _manifest(tmp_path / "data", ["Describe."] * 5)
        spec = f"openai:fake-vlm@{server.base_url}?{BATCH}"
        cmd = [*CLI, "describe", "--vlm", spec, "--data", str(data), "--out", str(tmp_path / "run")]
        _kill_once_its_batch_is_out(cmd, server)
        assert len(_creates(server)) == 1
        res = run_cli("resume", str(tmp_path / "run"))
        assert res.returncode == 0, res.stderr[-1500:]
        assert len(_creates(server)) == 1  # re-attached: the batch was never sent again
        answers = _answers(tmp_path / "run")
        assert len(answers) == 5 and all(a.startswith("Answer ") for a in answers.values())
    finally:
        server.stop()


@pytest.mark.slow
def test_a_resume_without_batch_1_waits_for_the_open_batch_instead_of_paying_twice(tmp_path):
    server = FakeServer(0.0, tmp_path, "--batch-delay", "3")
    try:
        data = _manifest(tmp_path / "data", ["Describe."] * 4)
        args = ["describe", "--data", str(data), "--out", str(tmp_path / "run")]
        _kill_once_its_batch_is_out([*CLI, *args, "--vlm", f"openai:fake-vlm@{server.base_url}?{BATCH}"], server)
        # resumed with direct calls: the 4 journaled requests wait for their batch; nothing is sent twice
        res = run_cli(*args, "--vlm", f"openai:fake-vlm@{server.base_url}?batch_poll=0.1", "--resume")
        assert res.returncode == 0, res.stderr[-1500:]
        assert len(_creates(server)) == 1
        assert [r for r in server.requests() if r.get("path", "").endswith("/chat/completions")] == []
        assert len(_answers(tmp_path / "run")) == 4
        import sqlite3

        with sqlite3.connect(tmp_path / "run" / "store.sqlite") as db:
            assert db.execute("SELECT status FROM batches").fetchall() == [("ended",)]
    finally:
        server.stop()


def test_one_wave_is_one_batch_whatever_the_pixel_budget(batch_server, tmp_path):
    """30 photos of ~190 kB (each holds its data URL, ~255 kB) under a 1 MB budget: before, a sample
    waiting for its batch kept its share, two samples fit, and the wave went as batch after batch."""
    import numpy as np

    (tmp_path / "data" / "img").mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows = []
    for i in range(30):
        noise = rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
        Image.fromarray(noise).save(tmp_path / "data" / "img" / f"{i}.png")
        rows.append(json.dumps({"id": f"s{i}", "image": f"img/{i}.png"}) + "\n")
    (tmp_path / "data" / "manifest.jsonl").write_text("".join(rows))
    res = run_task(DescribeTask(DescribeSpec(vlm=f"openai:fake-vlm@{batch_server.base_url}?{BATCH}",
                                             data=str(tmp_path / "data" / "manifest.jsonl"))),
                   tmp_path / "run", RunOptions(progress=False, retry=FAST, pixel_budget=1_000_000))
    assert res.results["counts"]["done"] == 30
    assert [c["n"] for c in _creates(batch_server)] == [30]


def test_genception_warns_that_each_step_is_a_batch_round_trip(batch_server, tmp_path, caplog):
    from vlmcheck.methods.genception import GenCeptionSpec, GenCeptionTask
    from vlmcheck.world.make import make_world

    make_world(tmp_path / "w", n=2)
    with caplog.at_level("WARNING", logger="vlmcheck"):
        GenCeptionTask(GenCeptionSpec(vlm=f"openai:fake-vlm@{batch_server.base_url}?{BATCH}",
                                      generator="ref:renderer", encoder="ref:pixels", data=str(tmp_path / "w"), T=3))
    assert any("one batch round trip" in r.getMessage() for r in caplog.records)


def test_a_wave_larger_than_the_providers_file_limit_goes_as_several_batches(tmp_path):
    import asyncio

    from vlmcheck.models.batch_api import AnthropicBatches, OpenAIBatches
    from vlmcheck.run.batch import ITEM_OVERHEAD, BatchCollector, approx_json_bytes
    from vlmcheck.store.db import RunStore

    # the size estimate is close to the JSON a batch file holds (a chat body with a base64 image)
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Describe the image."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 100_000}}]}], "max_tokens": 32}
    assert abs(approx_json_bytes(body) - len(json.dumps(body))) < 0.01 * len(json.dumps(body))
    assert (OpenAIBatches.max_items, OpenAIBatches.max_bytes) == (50_000, 200_000_000)
    assert (AnthropicBatches.max_items, AnthropicBatches.max_bytes) == (100_000, 256_000_000)

    class Backend:
        provider = "test"

        def __init__(self):
            self.batches = []

        async def submit(self, items):
            self.batches.append([k for k, _ in items])
            return f"b{len(self.batches)}"

        async def ended(self, batch_id):
            return True

        async def results(self, batch_id):
            return {k: {"text": f"answer {k}"} for k in self.batches[int(batch_id[1:]) - 1]}

    backend = Backend()
    size = approx_json_bytes({"x": "a" * 1000}) + ITEM_OVERHEAD
    limit = 2 * size + 10  # two items fit in one batch file, three do not

    async def main():
        with RunStore(tmp_path, existing=False) as store:
            c = BatchCollector(store, backend, "m", window=0.05, poll=0.01, max_bytes=limit)
            return await asyncio.gather(*(c.call(f"k{i}", "vlm", {"i": i}, {"x": "a" * 1000}) for i in range(7)))

    answers = asyncio.run(main())
    assert [a["text"] for a, _ in answers] == [f"answer k{i}" for i in range(7)]
    # one wave of 7 requests: 4 batches of at most 2, every one within the limit, each request once
    assert [len(b) for b in backend.batches] == [2, 2, 2, 1]
    assert sorted(k for b in backend.batches for k in b) == sorted(f"k{i}" for i in range(7))
