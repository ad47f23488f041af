"""Micro-batching: concurrent async requests served in batches by one worker thread."""

from __future__ import annotations

import asyncio
from typing import Any


class Batcher:
    """Collects concurrent requests into batches for one worker thread."""

    def __init__(self, run_batch, batch_size: int, wait_s: float = 0.005) -> None:
        self.run_batch = run_batch
        self.batch_size = batch_size
        self.wait_s = wait_s
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def submit(self, key: Any, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (e.g. a second asyncio.run)
            self._loop, self._queue = loop, asyncio.Queue()
            self._worker = loop.create_task(self._work())
        fut = loop.create_future()
        await self._queue.put((key, item, fut))
        return await fut

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            key, item, fut = await self._queue.get()
            batch = [(item, fut)]
            await asyncio.sleep(self.wait_s)
            held = []
            while len(batch) < self.batch_size and not self._queue.empty():
                k2, i2, f2 = self._queue.get_nowait()
                (batch if k2 == key else held).append((i2, f2) if k2 == key else (k2, i2, f2))
            for h in held:
                self._queue.put_nowait(h)
            try:
                results = await asyncio.to_thread(self.run_batch, key, [b[0] for b in batch])
            except Exception as exc:  # noqa: BLE001 - delivered to every waiter
                for _, f in batch:
                    if not f.done():
                        f.set_exception(exc)
            else:
                for (_, f), r in zip(batch, results):
                    if not f.done():
                        f.set_result(r)
