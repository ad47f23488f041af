"""Provider batch APIs (``?batch=1``; docs/usage.md, "Provider batch APIs"): cache misses gathered into batches,
each journaled in the run store before its first poll, so a resumed run re-attaches to it and resubmits nothing;
the provider side (:class:`BatchBackend`) lives with the adapters (:mod:`vlmcheck.models.batch_api`)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from ..core.errors import ModelCallError
from ..core.roles import Usage
from ..store.db import RunStore
from .scheduler import CallFailed

log = logging.getLogger("vlmcheck.batch")

#: what the providers charge for batched tokens, as a share of the direct price (both say "50% off")
BATCH_PRICE_FACTOR = 0.5


class BatchBackend(Protocol):
    provider: str

    async def submit(self, items: list[tuple[str, dict[str, Any]]]) -> str:
        """Send ``(custom_id, request body)`` items as one batch; return the batch id."""

    async def ended(self, batch_id: str) -> bool:
        """Whether the batch has stopped processing (finished, failed, expired or cancelled)."""

    async def results(self, batch_id: str) -> dict[str, Any]:
        """Per custom_id: the parsed generation (a Generation, or a Generation as JSON) or the item's error."""


class BatchAnswer(dict):
    """A batched answer (a Generation as JSON) with the (input, output) tokens it was stored and is priced with:
    the provider's where they passed the usage check, else the estimate's."""

    tokens: tuple[int, int] = (0, 0)


@dataclass
class _Item:
    key: str
    role: str
    request: Any
    body: dict[str, Any]
    future: asyncio.Future = field(repr=False)
    attempt: int = 1


class BatchCollector:
    """Gathers one model's cache misses into provider batches (see the module docstring).  Made inside the
    run's event loop: it re-attaches to the model's open journaled batches at once."""

    def __init__(self, store: RunStore, backend: BatchBackend, model_id: str, *, journal_model: str | None = None,
                 window: float = 2.0, poll: float = 30.0, max_bytes: int | None = None, max_attempts: int = 6,
                 usage_of: Callable[[str, Any, Usage], tuple[int, int]] | None = None) -> None:
        # model_id names the model in the call cache; journal_model (its identity, no placement) in the
        # journal, so a resume with other placement settings still finds its open batches
        self.store, self.backend, self.model_id = store, backend, model_id
        self.journal_model = journal_model or model_id
        # the provider's limits on one batch (models/batch_api.py): a larger wave of misses goes as several batches
        self.max_items = getattr(backend, "max_items", 50_000)
        self.max_bytes = max_bytes or getattr(backend, "max_bytes", 200_000_000)
        self.window, self.poll, self.max_attempts = window, poll, max_attempts
        self.usage_of = usage_of  # (model_id, request, Usage) -> (input, output) tokens: the session's check
        self._buffer: list[_Item] = []
        self._buffer_bytes = 0
        self._flush_task: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._waiting: dict[str, asyncio.Future] = {}  # key -> its open (journaled) batch's answer
        for batch_id, items in store.open_batches(self.journal_model):
            futures = {key: asyncio.get_running_loop().create_future() for key, _, _ in items}
            self._waiting.update(futures)
            self._spawn(self._watch(batch_id, futures, {k: (r, q, 1) for k, r, q in items}))
            log.info("re-attached to %s batch %s (%d requests)", backend.provider, batch_id, len(items))

    async def call(self, key: str, role: str, request: Any, body: dict[str, Any]) -> tuple[BatchAnswer, int]:
        """The answer for one request (a Generation as JSON, with its checked :attr:`~BatchAnswer.tokens`) and
        the attempts it took."""
        attempt = 0
        while True:
            attempt += 1
            fut = self._waiting.pop(key, None)
            if fut is None:
                fut = asyncio.get_running_loop().create_future()
                self._enqueue(_Item(key, role, request, body, fut, attempt))
            outcome = await asyncio.shield(fut)
            if not isinstance(outcome, ModelCallError):
                return outcome, attempt
            if not outcome.retryable or attempt >= self.max_attempts:
                raise CallFailed(outcome, attempt)

    def _enqueue(self, item: _Item) -> None:
        size = approx_json_bytes(item.body) + ITEM_OVERHEAD
        if self._buffer and self._buffer_bytes + size > self.max_bytes:
            self._flush_now()  # this item would take the batch file past the provider's limit: it starts the next
        self._buffer.append(item)
        self._buffer_bytes += size
        if len(self._buffer) >= self.max_items:
            self._flush_now()
        elif self._flush_task is None:
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        # the window restarts while requests keep arriving, so one wave of samples makes one batch
        seen = -1
        while seen != len(self._buffer):
            seen = len(self._buffer)
            await asyncio.sleep(self.window)
        self._flush_task = None
        self._flush_now()

    def _flush_now(self) -> None:
        items, self._buffer, self._buffer_bytes = self._buffer, [], 0
        if items:
            self._spawn(self._submit(items))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _submit(self, items: list[_Item]) -> None:
        futures = {it.key: it.future for it in items}
        try:
            batch_id = await self.backend.submit([(it.key, it.body) for it in items])
        except Exception as exc:  # noqa: BLE001 - a failed submission fails its items (retryably, if it may)
            _settle(futures, _as_call_error(exc, "submitting the batch failed"))
            return
        # journaled before the first poll: a run killed from here on re-attaches instead of resubmitting
        self.store.journal_batch(batch_id, self.backend.provider, self.journal_model,
                                 [(it.key, it.role, it.request) for it in items])
        log.info("submitted %s batch %s (%d requests)", self.backend.provider, batch_id, len(items))
        await self._watch(batch_id, futures, {it.key: (it.role, it.request, it.attempt) for it in items})

    async def _watch(self, batch_id: str, futures: dict[str, asyncio.Future],
                     requests: dict[str, tuple[str, Any, int]]) -> None:
        """Wait for the batch to end, store its answers in the call cache, settle its requests."""
        started = time.monotonic()
        try:
            while not await self.backend.ended(batch_id):
                await asyncio.sleep(self.poll)
            results = await self.backend.results(batch_id)
        except Exception as exc:  # noqa: BLE001 - the batch cannot be read: its items fail retryably
            _settle(futures, _as_call_error(exc, f"reading batch {batch_id} failed"))
            return
        took = time.monotonic() - started
        for key, fut in futures.items():
            out = results.get(key, ModelCallError("server", f"batch {batch_id} returned no result for this request"))
            if not isinstance(out, ModelCallError):
                role, request, attempt = requests[key]
                out = self._answer(request, out)
                self.store.put_call(key, role=role, model=self.model_id, request=request, response=dict(out),
                                    attempts=attempt, input_tokens=out.tokens[0], output_tokens=out.tokens[1],
                                    duration_s=took)
            if not fut.done():
                fut.set_result(out)
        self.store.end_batch(batch_id)

    def _answer(self, request: Any, out: Any) -> BatchAnswer:
        """One item's answer as JSON, its usage checked as a direct call's is (never trusted)."""
        if hasattr(out, "model_dump"):  # a Generation, as the backends give it: its usage read by Usage.reported
            usage, out = out.usage, out.model_dump(mode="json")
        else:  # an answer already as JSON: its counts through the same check
            u = out.get("usage") if isinstance(out.get("usage"), dict) else {}
            usage = Usage.reported(u.get("input_tokens"), u.get("output_tokens"))
        answer = BatchAnswer(out)
        answer.tokens = (self.usage_of(self.model_id, request, usage) if self.usage_of is not None
                         else (usage.input_tokens, usage.output_tokens))
        return answer


#: bytes a batch file's line adds around a request body (custom_id, method, url, the JSON around them)
ITEM_OVERHEAD = 256


def approx_json_bytes(obj: Any) -> int:
    """The size of ``obj`` as JSON, from the lengths of its strings and a few bytes per item: close enough to
    split batches by the providers' file limits, without serialising every base64 image a second time."""
    if isinstance(obj, str):
        return len(obj.encode("utf-8", "surrogatepass")) + 2
    if isinstance(obj, dict):
        return 2 + sum(approx_json_bytes(k) + approx_json_bytes(v) + 2 for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return 2 + sum(approx_json_bytes(v) + 1 for v in obj)
    return len(str(obj)) + 1


def _as_call_error(exc: Exception, what: str) -> ModelCallError:
    return exc if isinstance(exc, ModelCallError) else ModelCallError(
        "connection", f"{what}: {type(exc).__name__}: {exc}")


def _settle(futures: dict[str, asyncio.Future], outcome: Any) -> None:
    for f in futures.values():
        if not f.done():
            f.set_result(outcome)
