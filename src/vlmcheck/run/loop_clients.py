"""HTTP clients per event loop: the openai SDK's clients and aiohttp sessions are bound to the loop that first used
them (reused from another, a second ``asyncio.run``, they fail with "Event loop is closed"), so adapters get theirs
from :class:`PerLoopClients`, which builds a fresh set whenever the running loop changes.  The runner closes them
(:func:`close_loop_clients`) before its loop ends; otherwise they close themselves at the loop's shutdown.
"""

from __future__ import annotations

import asyncio
import weakref
from contextlib import suppress
from typing import Any, Callable

_ALL: "weakref.WeakSet[PerLoopClients]" = weakref.WeakSet()


class PerLoopClients:
    def __init__(self, factory: Callable[[], Any], n: int = 1) -> None:
        self.factory = factory
        self.n = max(1, n)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: list[Any] = []
        self._next = 0
        self._closer: Any = None
        _ALL.add(self)

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._clients, self._next = loop, [self.factory() for _ in range(self.n)], 0
            self._closer = _close_at_shutdown(self)
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
                with suppress(Exception):  # closing is best effort
                    await close()


def _close_at_shutdown(pool: PerLoopClients) -> Any:
    """Close ``pool``'s clients when the running loop shuts down (else aiohttp prints "Unclosed client session").

    asyncio has no shutdown callback, but ``asyncio.run`` (any PEP 525 loop owner) finalises the async generators
    still suspended while the loop can run coroutines: this one suspends at once and closes the clients in its
    ``finally``.  The loop holds it weakly; the pool keeps the strong reference."""

    async def closer():
        try:
            yield
        finally:
            await pool.aclose()

    gen = closer()
    with suppress(StopIteration):
        gen.asend(None).send(None)  # first step: registers with the loop, then suspends at the yield
    return gen


async def close_loop_clients() -> None:
    for pool in list(_ALL):
        await pool.aclose()
