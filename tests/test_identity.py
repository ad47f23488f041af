"""A model's identity (what it is) keys the call cache and the resume check; its placement (endpoint,
concurrency, timeout, device, batch size, transport, prices) may change between sessions of one run."""

from __future__ import annotations

import pytest

from conftest import FakeServer
from vlmcheck.core.spec import ModelSpec, load_model
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run import calls, runner
from vlmcheck.run.runner import RunFolderExists, RunOptions, run_task


def test_identity_drops_the_endpoint_and_placement_parameters_only():
    spec = ModelSpec.parse("openai:gpt-4o@http://h:8000/v1?concurrency=8&logprobs=1&timeout=30&http=httpx"
                           "&price_in=2.5&price_out=10&max_tokens_param=max_completion_tokens")
    assert spec.identity() == "openai:gpt-4o?logprobs=1"
    assert ModelSpec.parse("hf:org/m?device=cuda&dtype=bfloat16&batch_size=4&adapter=a").identity() == \
        "hf:org/m?adapter=a&dtype=bfloat16"
    # an unknown parameter may change outputs: it stays in the identity
    assert ModelSpec.parse("openai:m@http://x/v1?revision=3").identity() == "openai:m?revision=3"
    # credentials never reach it
    assert "sk-" not in ModelSpec.parse("openai:m@http://x/v1?api_key=sk-secret123456").identity()


def _task(server: FakeServer, folder, params: str = "") -> DescribeTask:
    vlm = load_model(f"openai:fake@{server.base_url}{params}")
    return DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(folder)), vlm=vlm)


def _samples(run):
    return (run / "samples.jsonl").read_text()


def test_moving_the_server_and_changing_concurrency_keeps_the_cache(tmp_path, image_folder):
    (tmp_path / "a").mkdir()
    a = FakeServer(0.0, tmp_path / "a")
    try:
        first = run_task(_task(a, image_folder, "?concurrency=2"), tmp_path / "run", RunOptions(progress=False))
        assert first.results["session"]["model_calls"] == 6
    finally:
        a.stop()
    before = _samples(tmp_path / "run")
    # a run killed after its calls were cached and before its samples were journaled: every sample is redone
    # from the cache
    import sqlite3

    with sqlite3.connect(tmp_path / "run" / "store.sqlite") as db:
        db.execute("DELETE FROM samples")
    (tmp_path / "b").mkdir()
    b = FakeServer(0.0, tmp_path / "b")
    try:
        again = run_task(_task(b, image_folder, "?concurrency=5&timeout=30"), tmp_path / "run",
                         RunOptions(progress=False, resume=True, max_concurrency=3))
        assert again.results["session"]["model_calls"] == 0 and again.results["session"]["cache_hits"] == 6
        assert b.requests() == []  # the new server was never asked
        assert _samples(tmp_path / "run") == before
        # the run records each session's placement
        store = runner.RunStore(tmp_path / "run", existing=True)
        sessions, key_version = store.get_meta("sessions"), store.get_meta("key_version")
        store.close()
        assert key_version == 3
        assert [s["models"] for s in sessions] == [[f"openai:fake@{a.base_url}?concurrency=2"],
                                                  [f"openai:fake@{b.base_url}?concurrency=5&timeout=30"]]
        # a parameter that changes answers is another model: the resume is refused
        with pytest.raises(RunFolderExists, match="different task spec"):
            run_task(_task(b, image_folder, "?logprobs=1"), tmp_path / "run", RunOptions(progress=False, resume=True))
    finally:
        b.stop()


def test_a_store_from_before_identity_keys_keeps_resuming(tmp_path, image_folder, monkeypatch):
    server = FakeServer(0.0, tmp_path)
    try:
        # a run made with version-1 keys (the whole model id), as every store before this change
        monkeypatch.setattr(calls, "KEY_VERSION", 1)
        monkeypatch.setattr(runner, "KEY_VERSION", 1)
        run_task(_task(server, image_folder), tmp_path / "run", RunOptions(progress=False))
        monkeypatch.undo()
        store = runner.RunStore(tmp_path / "run", existing=True)
        assert store.get_meta("key_version") == 1
        store.close()
        again = run_task(_task(server, image_folder), tmp_path / "run", RunOptions(progress=False, resume=True))
        assert again.results["session"]["model_calls"] == 0
        # its keys hold the endpoint, so a moved endpoint is still another task spec for it
        with pytest.raises(RunFolderExists):
            run_task(_task(server, image_folder, "?timeout=30"), tmp_path / "run",
                     RunOptions(progress=False, resume=True))
    finally:
        server.stop()
