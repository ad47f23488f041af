"""The micro-batcher: the next batch prepared while the current one runs (issue 51 item 4), answers and order kept,
a failing batch failing only its own requests."""

import asyncio
import threading
import time

import pytest

from vlmcheck.run.batching import Batcher


class Model:
    """A fake model: ``prepare`` and ``run`` log when they start and end; ``run`` holds the 'device' for
    ``run_s``; items named 'bad-prep' or 'bad-run' fail their batch's preparation or run."""

    def __init__(self, run_s=0.05, prep_s=0.03):
        self.run_s, self.prep_s = run_s, prep_s
        self.events: list[tuple[str, int, float]] = []
        self.batches: list[list[str]] = []
        self.busy = threading.Lock()
        self._n = 0

    def prepare(self, key, items):
        self._n += 1
        n = self._n
        self.events.append(("prep-start", n, time.perf_counter()))
        time.sleep(self.prep_s)
        if "bad-prep" in items:
            raise ValueError("the processor refused this batch")
        self.events.append(("prep-end", n, time.perf_counter()))
        return n, [f"{key}:{x}" for x in items]

    def run(self, key, prepared):
        n, items = prepared
        assert self.busy.acquire(blocking=False), "two batches on the model at once"
        try:
            self.events.append(("run-start", n, time.perf_counter()))
            self.batches.append(items)
            time.sleep(self.run_s)
            if any(x.endswith("bad-run") for x in items):
                raise RuntimeError("CUDA out of memory")
            self.events.append(("run-end", n, time.perf_counter()))
            return [x.upper() for x in items]
        finally:
            self.busy.release()

    def unprepared(self, key, items):  # the same work in one step: the batcher without prefetch
        return self.run(key, self.prepare(key, items))


async def _submit_all(batcher, items, key="k"):
    async def one(x):
        try:
            return await batcher.submit(key, x)
        except Exception as exc:  # noqa: BLE001
            return exc
    return await asyncio.gather(*(one(x) for x in items))


def test_answers_and_order_same_with_and_without_prefetch():
    items = [f"i{n}" for n in range(21)]
    m1, m2 = Model(0.01, 0.005), Model(0.01, 0.005)
    with_prefetch = asyncio.run(_submit_all(Batcher(m1.run, 4, prepare=m1.prepare), items))
    without = asyncio.run(_submit_all(Batcher(m2.unprepared, 4), items))
    assert with_prefetch == without == [f"K:{x}".upper() for x in items]
    assert all(len(b) <= 4 for b in m1.batches)
    assert sorted(x for b in m1.batches for x in b) == sorted(f"k:{x}" for x in items)  # each item once


def test_next_batch_prepared_while_current_runs():
    m = Model(run_s=0.15, prep_s=0.1)
    asyncio.run(_submit_all(Batcher(m.run, 4, prepare=m.prepare), [f"i{n}" for n in range(16)]))
    t = {(e, n): ts for e, n, ts in m.events}
    assert len(m.batches) == 4
    for n in (2, 3, 4):
        # batch n's preparation began before batch n-1 finished on the model: it overlapped, not followed
        assert t[("prep-start", n)] < t[("run-end", n - 1)]
        # and the model went straight on: no preparation between two batches (idle well under prep_s)
        assert t[("run-start", n)] - t[("run-end", n - 1)] < 0.05


def test_failing_preparation_or_run_fails_only_its_batch():
    m = Model(0.02, 0.005)
    items = ["a0", "a1", "bad-prep"]
    others = ["b0", "b1", "b2"]

    async def go():
        batcher = Batcher(m.run, 3, prepare=m.prepare)
        first = await _submit_all(batcher, items)
        second = await _submit_all(batcher, ["c0", "bad-run"])
        third = await _submit_all(batcher, others)
        return first, second, third

    first, second, third = asyncio.run(go())
    assert all(isinstance(r, ValueError) for r in first)
    assert all(isinstance(r, RuntimeError) for r in second)
    assert third == ["K:B0", "K:B1", "K:B2"]


def test_keys_never_share_a_batch():
    m = Model(0.01, 0.0)

    async def go():
        b = Batcher(m.run, 8, prepare=m.prepare)
        return await asyncio.gather(*(b.submit("t0" if i % 2 else "t1", f"x{i}") for i in range(10)))

    out = asyncio.run(go())
    assert out == [f"{'T0' if i % 2 else 'T1'}:X{i}" for i in range(10)]
    assert all(len({x.split(":")[0] for x in batch}) == 1 for batch in m.batches)


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_second_event_loop_gets_its_own_worker(prefetch):
    m = Model(0.0, 0.0)
    b = Batcher(m.run, 2, prepare=m.prepare) if prefetch else Batcher(m.unprepared, 2)
    assert asyncio.run(_submit_all(b, ["a", "b", "c"])) == ["K:A", "K:B", "K:C"]
    assert asyncio.run(_submit_all(b, ["d"])) == ["K:D"]


def test_next_batch_starts_when_the_current_ends_even_while_the_event_loop_is_busy():
    """The prepared next batch waits on the model's own thread, not on the event loop (issue 51: no idle between
    batches): a loop held up by other work (a store write, a report) when a batch ends does not delay the next."""
    m = Model(run_s=0.15, prep_s=0.01)

    async def go():
        batcher = Batcher(m.run, 4, prepare=m.prepare)
        work = asyncio.ensure_future(_submit_all(batcher, [f"i{n}" for n in range(8)]))
        await asyncio.sleep(0.08)  # batch 1 is on the model and batch 2 prepared
        time.sleep(0.3)  # the loop is busy elsewhere across the end of batch 1 (~0.15 s)
        return await work

    assert asyncio.run(go()) == [f"K:I{n}" for n in range(8)]
    t = {(e, n): ts for e, n, ts in m.events}
    assert t[("run-start", 2)] - t[("run-end", 1)] < 0.05
