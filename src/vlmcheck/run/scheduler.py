"""Async scheduling of model calls: bounded concurrency per provider, and retries of the error kinds
:mod:`vlmcheck.core.errors` marks retryable, with exponential backoff and full jitter (sleep uniform(0,
min(cap, base * 2**attempt))), never sooner than a server's Retry-After.  A call's slot is free while it sleeps.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel

from ..core.errors import ModelCallError

T = TypeVar("T")


class RetryPolicy(BaseModel):
    max_attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 30.0
    malformed_attempts: int = 3  # malformed answers are retried, but only a few times (counted on their own)
    call_timeout: float | None = 600.0  # seconds; a hung call becomes a 'timeout' error
    max_retry_after: float = 120.0  # a server's Retry-After is honoured up to this many seconds

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None) -> float:
        backoff = rng.uniform(0, min(self.max_delay, self.base_delay * (2 ** (attempt - 1))))
        return backoff if retry_after is None else max(min(retry_after, self.max_retry_after), backoff)


class CallFailed(RuntimeError):
    """A model call that failed for good, after ``attempts`` tries."""

    def __init__(self, error: ModelCallError, attempts: int) -> None:
        super().__init__(f"{error} (after {attempts} attempt{'s' if attempts != 1 else ''})")
        self.error, self.kind, self.attempts = error, error.kind, attempts


def classify_exception(exc: BaseException) -> ModelCallError:
    """Map exceptions that escaped an adapter's own translation."""
    if isinstance(exc, ModelCallError):
        return exc
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return ModelCallError("timeout", "call timed out")
    if isinstance(exc, (ConnectionError, OSError)):
        return ModelCallError("connection", f"{type(exc).__name__}: {exc}")
    raise exc  # a programming error: let it surface


class Scheduler:
    def __init__(self, max_concurrency: int = 16, retry: RetryPolicy | None = None, seed: int = 0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.max_concurrency = max_concurrency
        self.retry = retry or RetryPolicy()
        self._rng = random.Random(seed)
        self._sleep = sleep
        self._limits: dict[str, asyncio.Semaphore] = {}
        self.retries = 0  # total retries performed, for reporting
        self.attempts = 0  # requests started (first tries and retries): what the servers saw
        self.on_attempt: Callable[[int], None] | None = None  # told of each attempt as it starts (Ray's tally)

    def _semaphore(self, key: str, limit: int | None) -> asyncio.Semaphore:
        sem = self._limits.get(key)
        if sem is None:
            n = min(limit, self.max_concurrency) if limit else self.max_concurrency
            sem = self._limits[key] = asyncio.Semaphore(max(1, n))
        return sem

    async def call(self, key: str, fn: Callable[[], Awaitable[T]], *, limit: int | None = None,
                   timeout: float | None = None) -> tuple[T, int]:
        """Run ``fn`` with retries; return (result, attempts) or raise :class:`CallFailed`.  Each attempt has a total
        deadline, the shorter of the model's ``timeout`` and the policy's ``call_timeout``: the SDKs' own timeouts
        are idle timeouts, which a server that trickles one byte at a time never trips."""
        sem = self._semaphore(key, limit)
        deadline = min((t for t in (timeout, self.retry.call_timeout) if t), default=None)
        attempt = malformed = 0
        while True:
            attempt += 1
            try:
                async with sem:
                    self.attempts += 1
                    if self.on_attempt is not None:
                        self.on_attempt(attempt)
                    try:
                        # the deadline on this task itself: wait_for made a task per call to run it in
                        async with asyncio.timeout(deadline):
                            result = await fn()
                    except TimeoutError:
                        if deadline is None:
                            raise
                        raise ModelCallError("timeout", f"no complete answer within {deadline:g} s "
                                                        "(the call's total deadline)") from None
                return result, attempt
            except Exception as exc:  # noqa: BLE001 - classified below (a cancellation is no Exception)
                err = classify_exception(exc)
                malformed += err.kind == "malformed"
                if (not err.retryable or attempt >= self.retry.max_attempts
                        or malformed >= self.retry.malformed_attempts):
                    raise CallFailed(err, attempt) from exc
                self.retries += 1
                await self._sleep(self.retry.delay(attempt, self._rng, err.retry_after))
