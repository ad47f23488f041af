"""Issue 49 item 4: budgets that hold.  A fake server whose usage is missing, negative, text, NaN or nested; a
first wave priced before it is sent; the budget kept by a resume; bad caps and prices refused in one sentence."""

import json
import os
import warnings

import pytest

from conftest import FakeServer, distinct_images, run_cli
from vlmcheck import RunOptions, run_task
from vlmcheck.core.roles import Usage
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run.budget import UsageWarning

# USD per 1M tokens: the fake server's fixed usage (10 in, 2 out) is then $25 + $20 = $45 a call
PRICE = "price_in=2500000&price_out=10000000"


@pytest.mark.parametrize("value, n, why", [
    (None, 0, "missing"), (-5, 0, "negative"), ("ten", 0, "not a number"), (float("nan"), 0, "not a number"),
    ({"a": 1}, 0, "not a number"), (True, 0, "not a number"), (2.5, 0, "whole"), ("12", 12, None), (7.0, 7, None),
    (3, 3, None)])
def test_usage_counts_are_checked(value, n, why):
    u = Usage.reported(value, 1)
    assert u.input_tokens == n and u.output_tokens == 1
    assert (u.invalid is None) if why is None else (why in u.invalid)
    assert "invalid" not in u.model_dump()  # never stored


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["missing", "negative", "string", "nan", "nested"])
def test_broken_usage_is_priced_at_the_estimate_and_the_answers_kept(mode, tmp_path):
    """Before: no usage field gave $0 spent and no warning; negative usage -$40,000,000 spent and the cap never
    stopped the run; usage as text, NaN or nested failed every sample and discarded the paid answers.  Now every
    answer is kept, every call is priced at its estimate (above $0) with a UsageWarning, and the cap stops the
    run."""
    data = distinct_images(tmp_path / "imgs", 6)
    server = FakeServer(0.0, tmp_path, "--usage", mode)
    try:
        vlm = f"openai:gpt-4o@{server.base_url}?{PRICE}"
        opts = dict(progress=False, report=False, preflight=False, max_concurrency=1)
        with pytest.warns(UsageWarning, match=r"gpt-4o.*: the provider.s usage is unusable"):
            res = run_task(DescribeTask(DescribeSpec(vlm=vlm, data=str(data), max_tokens=8)), tmp_path / "free",
                           RunOptions(**opts))
        assert res.results["counts"]["done"] == 6 and res.results["counts"]["failed"] == 0
        usage, = res.results["usage"].values()
        assert usage["input_tokens"] > 6 * 255 and usage["output_tokens"] == 6 * 8  # the estimate's counts
        assert usage["cost_usd"] > 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UsageWarning)
            capped = run_task(DescribeTask(DescribeSpec(vlm=vlm, data=str(data), max_tokens=8)), tmp_path / "cap",
                              RunOptions(**opts, max_cost=usage["cost_usd"] / 3))
        b = capped.results["budget"]
        assert b["stopped"] and 0 < capped.results["counts"]["done"] < 6
        assert 0 < b["spent_usd"] <= usage["cost_usd"] / 3 and b["usage_estimated_calls"] == b["done"]
    finally:
        server.stop()


def test_the_first_wave_is_priced_before_it_is_sent(tmp_path, fake_server):
    """Before: 18 samples at once, $3,600 spent against a $1 cap (nothing is known before the first sample ends).
    Now each call is priced before it goes out: not one is sent."""
    data = distinct_images(tmp_path / "imgs", 18)
    vlm = f"openai:gpt-4o@{fake_server.base_url}?{PRICE}"
    res = run_task(DescribeTask(DescribeSpec(vlm=vlm, data=str(data))), tmp_path / "run",
                   RunOptions(progress=False, report=False, preflight=False, max_concurrency=18, max_cost=1.0))
    assert fake_server.requests() == []
    assert res.results["budget"]["stopped"] and res.results["budget"]["spent_usd"] == 0
    assert res.results["counts"]["done"] == 0 and res.results["counts"]["failed"] == 0  # left for a resume


def test_a_resume_keeps_the_budget_unless_another_is_given(tmp_path, fake_server):
    """Before: `vlmcheck resume` dropped the budget silently and ran every sample left.  Now the cap is in the
    spec and holds on a resume that gives none; a resume that gives one uses it."""
    data = distinct_images(tmp_path / "imgs", 6)
    # $10 an output token, the input free: the fake server's 2 output tokens, and the estimate's max_tokens=2,
    # are $20 a call: a $50 cap holds 2 samples
    vlm = f"openai:gpt-4o@{fake_server.base_url}?price_in=0&price_out=10000000"
    task = lambda: DescribeTask(DescribeSpec(vlm=vlm, data=str(data), max_tokens=2))  # noqa: E731
    opts = dict(progress=False, report=False, preflight=False, max_concurrency=1)
    first = run_task(task(), tmp_path / "run", RunOptions(**opts, max_cost=50.0))
    assert first.results["counts"]["done"] == 2 and first.results["budget"]["stopped"]
    spec = json.loads((tmp_path / "run" / "results.json").read_text())["spec"] if "spec" in first.results else None
    sent = len(fake_server.requests())
    again = run_task(task(), tmp_path / "run", RunOptions(**opts, resume=True))
    assert len(fake_server.requests()) == sent and again.results["counts"]["done"] == 2
    assert again.results["budget"]["max_cost_usd"] == 50.0
    more = run_task(task(), tmp_path / "run", RunOptions(**opts, resume=True, max_cost=1000.0))
    assert more.results["counts"]["done"] == 6 and len(fake_server.requests()) == sent + 4
    assert spec is None or spec.get("max_cost") == 50.0


@pytest.mark.parametrize("price", ["price_in=abc&price_out=1", "price_in=-1&price_out=1", "price_in=nan&price_out=1",
                                   "price_in=1&price_out=inf"])
def test_bad_prices_are_refused_before_any_call(price):
    """Before: ``?price_in=abc`` gave a traceback; negative or NaN prices turned the cap off."""
    from vlmcheck.core.spec import SpecError, load_model

    with pytest.raises(SpecError, match="price_"):
        load_model(f"openai:gpt-4o@http://127.0.0.1:9/v1?{price}")


@pytest.mark.parametrize("cap", [0, -1, float("nan"), float("inf"), "abc"])
def test_bad_caps_are_refused(cap):
    from vlmcheck.run.budget import check_max_cost

    with pytest.raises(ValueError, match="--max-cost"):
        check_max_cost(cap)


@pytest.mark.slow
def test_bad_caps_and_prices_are_refused_in_one_sentence_by_the_cli(tmp_path, image_folder):
    """Before: `--max-cost 0` and `?price_in=abc` gave tracebacks."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    cases = [(["--vlm", "ref:photo", "--max-cost", "0"], "--max-cost"),
             (["--vlm", "openai:gpt-4o@http://127.0.0.1:9/v1?price_in=abc&price_out=1"], "price_in")]
    for i, (args, word) in enumerate(cases):
        p = run_cli("describe", "--data", str(image_folder), "--out", str(tmp_path / f"r{i}"), "--no-preflight",
                    "--no-progress", *args, env=env)
        assert p.returncode == 2, (args, p.returncode, p.stderr[-500:])
        assert "Traceback" not in p.stderr and word in p.stderr, (args, p.stderr)
        assert len([line for line in p.stderr.splitlines() if line.strip()]) == 1, p.stderr
        assert not (tmp_path / f"r{i}" / "store.sqlite").exists()


BATCH = "batch=1&batch_window=0.2&batch_poll=0.05"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["missing", "negative", "string", "nan", "nested"])
def test_a_provider_batch_with_broken_usage_is_priced_at_the_estimate_and_the_answers_kept(mode, tmp_path):
    """``?batch=1`` (the OpenAI Batch API of the fake server, through the SDK): before, a batch whose usage was
    missing, negative, text, NaN or nested was stored and counted as 0 tokens: $0 spent, no warning, and a resume
    priced it at $0 too.  Now batched answers pass the same check as direct ones (Session.usage_of): a
    UsageWarning, the estimate's counts in the results and in the store, a spend above $0; every answer kept."""
    import sqlite3

    data = distinct_images(tmp_path / "imgs", 4)
    server = FakeServer(0.0, tmp_path, "--usage", mode, "--batch-delay", "0.2")
    try:
        vlm = f"openai:gpt-4o@{server.base_url}?{PRICE}&{BATCH}"
        with pytest.warns(UsageWarning, match=r"gpt-4o.*: the provider.s usage is unusable"):
            res = run_task(DescribeTask(DescribeSpec(vlm=vlm, data=str(data), max_tokens=8)), tmp_path / "run",
                           RunOptions(progress=False, report=False, preflight=False))
        assert [r["n"] for r in server.requests() if "batch_create" in r] == [4]  # it did go as one batch
        assert res.results["counts"]["done"] == 4 and res.results["counts"]["failed"] == 0
        usage, = res.results["usage"].values()
        # the estimate's counts: each 16-px image is one 512-px tile (85 + 170 tokens), the output max_tokens
        assert usage["input_tokens"] > 4 * 255 and usage["output_tokens"] == 4 * 8
        assert usage["cost_usd"] > 0
        with sqlite3.connect(tmp_path / "run" / "store.sqlite") as db:  # what a resume prices from
            rows = db.execute("SELECT input_tokens, output_tokens FROM calls").fetchall()
        assert len(rows) == 4 and all(tin > 255 and tout == 8 for tin, tout in rows), rows
    finally:
        server.stop()


@pytest.mark.slow
def test_a_provider_batch_is_priced_before_it_is_submitted(tmp_path, fake_server):
    """--max-cost with ``?batch=1``: each request is priced (at the batch price, half the direct one) before it
    joins a batch; those past the cap never reach the provider and their samples are left for a resume."""
    data = distinct_images(tmp_path / "imgs", 6)
    # the input free, $10 an output token: 2 output tokens (the estimate's max_tokens, and the fake server's
    # usage) are $20 a call directly, $10 batched: a $25 cap holds 2 batched calls
    vlm = f"openai:gpt-4o@{fake_server.base_url}?price_in=0&price_out=10000000&{BATCH}"
    res = run_task(DescribeTask(DescribeSpec(vlm=vlm, data=str(data), max_tokens=2)), tmp_path / "run",
                   RunOptions(progress=False, report=False, preflight=False, max_cost=25.0))
    created = [r["n"] for r in fake_server.requests() if "batch_create" in r]
    assert sum(created) == 2, created
    b = res.results["budget"]
    assert b["stopped"] and res.results["counts"]["done"] == 2 and b["spent_usd"] == pytest.approx(20.0)
    # under a cap below one batched call, nothing is submitted at all
    none = run_task(DescribeTask(DescribeSpec(vlm=vlm, data=str(data), max_tokens=2)), tmp_path / "none",
                    RunOptions(progress=False, report=False, preflight=False, max_cost=5.0))
    assert sum(r["n"] for r in fake_server.requests() if "batch_create" in r) == 2
    assert none.results["counts"]["done"] == 0 and none.results["budget"]["spent_usd"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["missing", "negative", "string"])
def test_an_anthropic_message_batch_with_broken_usage_is_priced_at_the_estimate(mode, tmp_path, monkeypatch):
    """The same check for Anthropic Message Batches (the fake server's, through the neutral client)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    data = distinct_images(tmp_path / "imgs", 3)
    server = FakeServer(0.0, tmp_path, "--usage", mode, "--batch-delay", "0.2")
    try:
        vlm = f"anthropic:claude-fake@{server.base_url[:-len('/v1')]}?{PRICE}&{BATCH}"
        with pytest.warns(UsageWarning, match=r"claude-fake.*: the provider.s usage is unusable"):
            res = run_task(DescribeTask(DescribeSpec(vlm=vlm, data=str(data), max_tokens=8)), tmp_path / "run",
                           RunOptions(progress=False, report=False, preflight=False))
        assert [r["n"] for r in server.requests() if "batch_create" in r] == [3]
        assert res.results["counts"]["done"] == 3
        usage, = res.results["usage"].values()
        assert usage["input_tokens"] > 3 * 3 and usage["output_tokens"] == 3 * 8 and usage["cost_usd"] > 0
    finally:
        server.stop()


def test_the_cap_holds_when_the_server_bills_far_more_than_the_estimate(tmp_path):
    """The server counts 1,000,000 prompt tokens a call ($10 at $10 per million) where the estimate says a few
    hundred ($0.003).  Before: 16 calls in flight each held at the estimate, $180-200 spent against a $25 cap.  Now
    the first call goes out alone, every later one is held at the dearest price seen ($10): the cap is passed by at
    most one call, and the message counts the calls and the complete samples."""
    from vlmcheck.run.budget import budget_message

    data = distinct_images(tmp_path / "imgs", 40)
    server = FakeServer(0.0, tmp_path, "--usage", "inflated")
    try:
        vlm = f"openai:gpt-4o@{server.base_url}?price_in=10&price_out=0"
        res = run_task(DescribeTask(DescribeSpec(vlm=vlm, data=str(data), max_tokens=8)), tmp_path / "run",
                       RunOptions(progress=False, report=False, preflight=False, max_concurrency=16, max_cost=25.0))
        b = res.results["budget"]
        assert b["stopped"] and b["spent_usd"] <= 25.0 + 10.0  # at most one call's cost over the cap
        assert b["dearest_call_usd"] == pytest.approx(10.0)
        assert len(server.requests()) == b["calls"] <= 3
        assert res.results["counts"]["done"] == b["done"] == b["calls"]  # every paid answer kept as a sample
        message = budget_message(b)
        assert f"on {b['calls']} calls this session" in message and "the dearest $10.0000" in message
        assert f"{b['done']} of 40 samples complete" in message
    finally:
        server.stop()
