"""SDK clients per event loop.

The openai and anthropic SDK clients keep connection pools bound to the event
loop that first used them; reused from another loop (a second ``asyncio.run``
in a notebook or script) they fail with "Event loop is closed".  Adapters
therefore get their clients from :class:`PerLoopClients`, which builds a fresh
set whenever the running loop changes, and hands them out round-robin.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable


class PerLoopClients:
    def __init__(self, factory: Callable[[], Any], n: int = 1) -> None:
        self.factory = factory
        self.n = max(1, n)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: list[Any] = []
        self._next = 0

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._clients, self._next = loop, [self.factory() for _ in range(self.n)], 0
        self._next = (self._next + 1) % self.n
        return self._clients[self._next]
