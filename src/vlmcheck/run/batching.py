"""Micro-batching: concurrent async requests served in batches by one worker thread.

With a ``prepare`` step (a model's processor: tokenising, image preprocessing, the copy to the device), the next
batch is formed and prepared in a second thread while the current one runs, and handed to the model's thread
before the current batch ends: the model goes from one batch to the next without waiting for the event loop
(no idle between batches).  A batch whose preparation or run fails fails its own requests only.
"""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable


class Batcher:
    """Collects concurrent requests into batches for one worker thread: ``run_batch(key, items)`` returns one
    result per item, in order; with ``prepare``, ``run_batch(key, prepare(key, items))``."""

    def __init__(self, run_batch: Callable[[Any, Any], list], batch_size: int, wait_s: float = 0.005,
                 prepare: Callable[[Any, list], Any] | None = None) -> None:
        self.run_batch = run_batch
        self.prepare = prepare
        self.batch_size = batch_size
        self.wait_s = wait_s
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # the model's own thread: batches run there one after another, the next one queued while one runs
        self._model_thread = ThreadPoolExecutor(1, thread_name_prefix="vlmcheck-batch")

    async def submit(self, key: Any, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (e.g. a second asyncio.run)
            self._loop, self._queue = loop, asyncio.Queue()
            self._worker = loop.create_task(self._work())
        fut = loop.create_future()
        await self._queue.put((key, item, fut))
        return await fut

    async def _form(self, running: asyncio.Task | None) -> tuple[Any, list[tuple[Any, asyncio.Future]]]:
        """The next batch: the oldest request and up to ``batch_size`` - 1 more with its key.  While the model is
        busy (``running``), it waits for more requests until the batch is full or the model is free; when the
        model is idle, a moment (``wait_s``) for concurrent requests to arrive."""
        assert self._queue is not None
        key, item, fut = await self._queue.get()
        batch = [(item, fut)]
        if running is None or running.done():
            await asyncio.sleep(self.wait_s)
        held = []
        while len(batch) < self.batch_size:
            if self._queue.empty():
                if running is None or running.done():
                    break
                getter = asyncio.ensure_future(self._queue.get())
                await asyncio.wait({getter, running}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    break
                k2, i2, f2 = getter.result()
            else:
                k2, i2, f2 = self._queue.get_nowait()
            if k2 == key:
                batch.append((i2, f2))
            else:
                held.append((k2, i2, f2))
        for h in held:
            self._queue.put_nowait(h)
        return key, batch

    @staticmethod
    def _deliver(batch: list[tuple[Any, asyncio.Future]], results: list | None, exc: BaseException | None) -> None:
        for i, (_, f) in enumerate(batch):
            if f.done():
                continue
            if exc is not None:
                f.set_exception(exc)
            else:
                f.set_result(results[i])  # type: ignore[index]

    def _start(self, key: Any, payload: Any, batch: list[tuple[Any, asyncio.Future]]) -> asyncio.Task:
        """Queue the batch on the model's thread now (it starts there the moment the batch before it ends, with
        no round trip through the event loop); the task returned delivers its results."""
        done = asyncio.wrap_future(self._model_thread.submit(contextvars.copy_context().run, self.run_batch, key,
                                                             payload))

        async def deliver() -> None:
            try:
                results = await done
            except Exception as exc:  # noqa: BLE001 - delivered to every waiter of this batch
                self._deliver(batch, None, exc)
            else:
                self._deliver(batch, results, None)

        return asyncio.get_running_loop().create_task(deliver())

    async def _work(self) -> None:
        running: asyncio.Task | None = None  # the model's current batch
        while True:
            key, batch = await self._form(running)
            payload: Any = [b[0] for b in batch]
            if self.prepare is not None:
                try:  # in its own thread, while `running` goes on in the model's
                    payload = await asyncio.to_thread(self.prepare, key, payload)
                except Exception as exc:  # noqa: BLE001 - this batch's requests fail, the next batch runs
                    self._deliver(batch, None, exc)
                    continue
            started = self._start(key, payload, batch)  # behind `running` on the model's thread
            if running is not None:
                await running
            running = started
            if self.prepare is None:  # no preparation to overlap: one batch at a time, as before
                await running
