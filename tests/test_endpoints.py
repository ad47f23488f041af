"""One model served by several endpoints: `openai:MODEL@URL1,URL2` (or `@file:`): balancing by requests in
flight, failover when one dies mid-run, a preflight of every endpoint, the serving endpoint recorded with each
call and never in its key."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest

from conftest import FakeServer, distinct_images
from vlmcheck.core.spec import ModelSpec, SpecError, load_model
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.core.errors import PreflightError
from vlmcheck.run.runner import RunOptions, run_task


@pytest.fixture
def servers(tmp_path):
    out = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        out.append(FakeServer(0.05, tmp_path / name, "--models", "fake,other"))
    yield out
    for s in out:
        s.stop()


@pytest.fixture
def images(tmp_path):
    return distinct_images(tmp_path / "imgs", 24, colour=lambda i: (10 * i, 200 - 5 * i, 60), name="{i:02d}.png")


def _run(spec: str, images, out, **kw):
    vlm = load_model(spec)
    return run_task(DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(images)), vlm=vlm), out,
                    RunOptions(progress=False, **kw))


def _endpoints(run) -> list[str]:
    with sqlite3.connect(run / "store.sqlite") as db:
        return [json.loads(r[0]).get("endpoint") for r in db.execute("SELECT response FROM calls")]


def test_requests_are_balanced_and_each_call_records_its_endpoint(servers, images, tmp_path):
    a, b = servers
    res = _run(f"openai:fake@{a.base_url},{b.base_url}?concurrency=3", images, tmp_path / "run")
    assert res.results["counts"]["done"] == 24
    na, nb = len(a.requests()), len(b.requests())
    assert na + nb == 24 and min(na, nb) >= 8  # fewest-in-flight keeps both busy
    served = _endpoints(tmp_path / "run")
    assert served.count(a.base_url) == na and served.count(b.base_url) == nb


def test_an_endpoint_that_dies_mid_run_fails_over_with_no_failed_sample(servers, images, tmp_path):
    a, b = servers

    def kill_after_some_requests():  # mid-run by construction, not by a timer a slow machine could outrun
        deadline = time.monotonic() + 60
        while len(a.requests()) < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        a.stop()

    killer = threading.Thread(target=kill_after_some_requests)
    killer.start()
    t0 = time.monotonic()
    res = _run(f"openai:fake@{a.base_url},{b.base_url}?concurrency=2&cooldown=60", images, tmp_path / "run")
    killer.join()
    assert res.results["counts"] == {**res.results["counts"], "done": 24, "failed": 0}
    served = _endpoints(tmp_path / "run")
    # a answered some before it died (requests it had received but not answered went to b), b the rest
    assert 0 < served.count(a.base_url) <= len(a.requests()) < 24
    assert served.count(a.base_url) + served.count(b.base_url) == 24
    assert time.monotonic() - t0 < 60  # no retry backoff was needed: the failover is immediate


def test_the_preflight_checks_every_endpoint(tmp_path, images):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    good = FakeServer(0.0, tmp_path / "a", "--models", "fake")
    wrong = FakeServer(0.0, tmp_path / "b", "--models", "something-else")
    try:
        vlm = load_model(f"openai:fake@{good.base_url},{wrong.base_url}")
        import asyncio

        with pytest.raises(PreflightError, match=f"{wrong.base_url}.*does not serve model 'fake'"):
            asyncio.run(vlm.preflight())
    finally:
        good.stop()
        wrong.stop()


def test_endpoints_from_a_file_and_their_cache_survives_a_new_set(servers, images, tmp_path):
    a, b = servers
    listing = tmp_path / "endpoints.txt"
    listing.write_text(f"# the fleet\n{a.base_url}\n\n{b.base_url}\n")
    spec = ModelSpec.parse(f"openai:fake@file:{listing}?concurrency=4")
    assert spec.endpoints == [a.base_url, b.base_url] and spec.identity() == "openai:fake"
    _run(f"openai:fake@{a.base_url}", images, tmp_path / "run")
    again = _run(f"openai:fake@file:{listing}?concurrency=4", images, tmp_path / "run", resume=True)
    assert again.results["session"]["model_calls"] == 0
    for bad, why in ((f"openai:fake@file:{tmp_path / 'nope.txt'}", "cannot read the endpoints file"),
                     (f"openai:fake@{a.base_url},", "empty endpoint"),
                     (f"openai:fake@{a.base_url},ftp://x", "http:// or https://"),
                     ("openai:fake@http://u:p@h1/v1,http://v:q@h2/v1", "different credentials")):
        with pytest.raises(SpecError, match=why):
            ModelSpec.parse(bad)
    with pytest.raises(SpecError, match="several endpoints"):
        load_model(f"openai-image:dall-e-3@{a.base_url},{b.base_url}", "generator")


def test_concurrency_is_per_endpoint_also_after_one_fails_and_usage_is_one_row(tmp_path, images):
    # two endpoints at concurrency=4, one of them dead from the start: the survivor never serves more than 4 at
    # once (it used to get all 8), and results.json's usage is one row for the model, whatever its placement
    (tmp_path / "a").mkdir()
    live = FakeServer(0.2, tmp_path / "a")
    dead = "http://127.0.0.1:9/v1"  # the discard port: connection refused
    try:
        res = _run(f"openai:fake@{live.base_url},{dead}?concurrency=4&cooldown=60", images, tmp_path / "run",
                   preflight=False, max_concurrency=16)
        assert res.results["counts"]["done"] == 24
        seen = [r["in_flight"] for r in live.requests()]
        assert len(seen) == 24 and max(seen) == 4
        (model, entry), = res.results["usage"].items()
        assert model == "openai:fake" and entry["ok"] == 24
        moved = _run(f"openai:fake@{live.base_url}", images, tmp_path / "run", resume=True, limit=24)
        assert list(moved.results["usage"]) == ["openai:fake"]
    finally:
        live.stop()
