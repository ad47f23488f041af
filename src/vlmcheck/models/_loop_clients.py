"""SDK clients per event loop.

The openai and anthropic SDK clients keep connection pools bound to the event
loop that first used them; reused from another loop (a second ``asyncio.run``
in a notebook or script) they fail with "Event loop is closed".  Adapters
therefore get their clients from :class:`PerLoopClients`, which builds a fresh
set whenever the running loop changes, and hands them out round-robin.

:func:`close_loop_clients` closes every client built on the running loop; the
runner calls it before its loop ends, so no connection pool is left unclosed.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Callable

_ALL: "weakref.WeakSet[PerLoopClients]" = weakref.WeakSet()


class PerLoopClients:
    def __init__(self, factory: Callable[[], Any], n: int = 1) -> None:
        self.factory = factory
        self.n = max(1, n)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: list[Any] = []
        self._next = 0
        _ALL.add(self)

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._clients, self._next = loop, [self.factory() for _ in range(self.n)], 0
        self._next = (self._next + 1) % self.n
        return self._clients[self._next]

    async def aclose(self) -> None:
        """Close the clients if they belong to the running loop."""
        if self._loop is not asyncio.get_running_loop():
            return
        clients, self._clients, self._loop = self._clients, [], None
        for client in clients:
            close = getattr(client, "close", None) or getattr(client, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass


async def close_loop_clients() -> None:
    for pool in list(_ALL):
        await pool.aclose()
