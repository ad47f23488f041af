import asyncio

import pytest
from PIL import Image

from vlmcheck.core.errors import ModelCallError, parse_retry_after
from vlmcheck.run.scheduler import CallFailed, RetryPolicy, Scheduler
from vlmcheck.store.db import RunStore


def test_store_cache_errors_and_journal(tmp_path):
    with RunStore(tmp_path) as s:
        s.put_call("k1", role="vlm", model="m", request={"a": 1}, response={"text": "hi"}, attempts=2,
                   input_tokens=5, output_tokens=1)
        s.put_call_error("k2", role="vlm", model="m", request={"a": 2}, error_type="server", message="boom",
                         attempts=6)
        assert s.get_call("k1") == {"text": "hi"}
        assert s.get_call("k2") is None  # an error is never served as an answer
        s.put_sample("t", "a", 0, {"x": 1})
        s.put_sample_error("t", "b", 1, "bad_image", "broken")
        assert s.sample_status("t") == {"a": "done", "b": "error"}
        assert s.clear_failed("t") == 1
        assert s.sample_status("t") == {"a": "done"}
        stats = s.call_stats()["m"]
        assert stats["ok"] == 1 and stats["input_tokens"] == 5
    with RunStore(tmp_path) as s:  # persisted
        assert s.get_call("k1") == {"text": "hi"}
        assert s._exec("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_artifacts_are_content_addressed(tmp_path):
    img = Image.new("RGB", (3, 3), (9, 9, 9))
    with RunStore(tmp_path) as s:
        rel = s.put_image(img)
        assert s.put_image(img.copy()) == rel
        assert (tmp_path / rel).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _run(coro):
    return asyncio.run(coro)


class Flaky:
    def __init__(self, errors):
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_retries_transient_errors_and_honours_retry_after():
    sleeps = []

    async def fake_sleep(s):
        sleeps.append(s)

    sched = Scheduler(4, RetryPolicy(max_attempts=5, base_delay=0.01, max_delay=0.02), sleep=fake_sleep)
    fn = Flaky([ModelCallError("rate_limit", "slow down", status=429, retry_after=7.0),
                ModelCallError("server", "oops", status=500), ModelCallError("timeout", "t")])
    result, attempts = _run(sched.call("p", fn))
    assert (result, attempts, fn.calls) == ("ok", 4, 4)
    assert sleeps[0] == 7.0  # Retry-After wins over a shorter backoff
    assert all(s <= 0.02 for s in sleeps[1:])
    # every attempt is a request the server saw: counted, and told as it starts (Ray's tally)
    told = []
    sched.on_attempt = told.append
    _run(sched.call("p", Flaky([ModelCallError("server", "oops", status=500)])))
    assert sched.attempts == 4 + 2 and sched.retries == 3 + 1 and told == [1, 2]


def test_bad_request_is_not_retried():
    sched = Scheduler(4, RetryPolicy(max_attempts=5, base_delay=0))
    fn = Flaky([ModelCallError("bad_request", "nope", status=400)])
    with pytest.raises(CallFailed) as info:
        _run(sched.call("p", fn))
    assert info.value.attempts == 1 and fn.calls == 1 and info.value.kind == "bad_request"


def test_gives_up_after_max_attempts():
    sched = Scheduler(4, RetryPolicy(max_attempts=3, base_delay=0))
    fn = Flaky([ModelCallError("server", "x")] * 10)
    with pytest.raises(CallFailed) as info:
        _run(sched.call("p", fn))
    assert info.value.attempts == 3 and fn.calls == 3


def test_concurrency_is_bounded_per_provider():
    sched = Scheduler(3)
    active, peak = 0, 0

    async def job():
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return 1

    async def main():
        await asyncio.gather(*(sched.call("p", job) for _ in range(20)))

    _run(main())
    assert peak == 3


def test_parse_retry_after():
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert parse_retry_after("garbage") is None


def test_one_call_for_a_request_already_on_its_way_and_its_own_after_one_that_failed(tmp_path):
    """Two samples asking the same thing at once make one call (the second gets its answer as a cache hit);
    when that call fails, the waiting sample makes its own."""
    import asyncio

    from vlmcheck.core.messages import Message
    from vlmcheck.core.roles import Capabilities, GenerationConfig, Generation, Usage
    from vlmcheck.run.calls import Session
    from vlmcheck.run.scheduler import RetryPolicy, Scheduler
    from vlmcheck.store.db import RunStore

    class Slow:
        model_id = "test:slow"
        capabilities = Capabilities()

        def __init__(self, fail_first: bool) -> None:
            self.calls, self.fail_first = 0, fail_first

        async def generate(self, messages, config):
            self.calls += 1
            await asyncio.sleep(0.05)
            if self.fail_first and self.calls == 1:
                raise ValueError("a bad request")
            return Generation(text=f"answer {self.calls}", usage=Usage(input_tokens=1, output_tokens=1))

    async def two(model, store):
        session = Session(store, Scheduler(4, RetryPolicy(max_attempts=1)))
        ask = lambda: session.vlm(model).generate([Message.user("same question")], GenerationConfig())  # noqa: E731
        out = await asyncio.gather(ask(), ask(), return_exceptions=True)
        return out, session.counters

    with RunStore(tmp_path / "a") as store:
        model = Slow(fail_first=False)
        (a, b), counters = asyncio.run(two(model, store))
        assert model.calls == 1 and a.text == b.text == "answer 1"
        assert counters.calls == 1 and counters.hits == 1
    with RunStore(tmp_path / "b") as store:
        model = Slow(fail_first=True)
        (a, b), counters = asyncio.run(two(model, store))
        assert model.calls == 2 and "a bad request" in str(a) and b.text == "answer 2"
