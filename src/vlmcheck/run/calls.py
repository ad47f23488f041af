"""Cached, scheduled access to models: what methods call instead of adapters.  ``session.vlm(model)`` and the
other wrappers key each call by its canonical request (images by hash), return the stored answer on a hit, else
call under the scheduler (limits, retries) and store the answer or the final error,
:class:`~vlmcheck.run.scheduler.CallFailed`, which the runner records as that sample's error."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections import Counter, defaultdict
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)
Image = lazy_module("PIL.Image")  # Pillow on first use (vlmcheck/_lazy.py)

from ..core import inputs
from ..core.answers import split_reasoning
from ..core.printable import json_encoder
from ..core.images import image_hash, load_image
from ..core.messages import Message, canonical_messages
from ..core.roles import Capabilities, Generation, GenerationConfig, Loglikelihood, require
from ..core.spec import identity_of
from ..store.db import RunStore
from .batch import BatchCollector
from .budget import request_tokens, warn_usage
from .scheduler import CallFailed, Scheduler
from .server_checks import ServerChecks, answers_from_a_server


#: a request as it is in its call key (and, valid UTF-8, as the store keeps it)
request_json = json_encoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def call_key(role: str, model: str, request: Any, template: str | None, request_text: str | None = None) -> str:
    """The sha256 of the call's JSON, {model, request, role, template} with keys sorted, no spaces, text as is
    (:data:`request_json`); ``request_text``: ``request`` already in that JSON."""
    text = request_json(request) if request_text is None else request_text
    payload = (f'{{"model":{request_json(model)},"request":{text},"role":{request_json(role)},'
               f'"template":{request_json(template)}}}')
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()  # same key for valid text


@dataclass
class CallCounters:
    hits: int = 0
    calls: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usage_estimated: int = 0  # calls whose provider usage was unusable, counted at the estimate (run/budget.py)
    by_model: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def count(self, model: str, what: str, n: int = 1) -> None:
        setattr(self, what, getattr(self, what) + n)
        self.by_model[model][what] += n


# Version 2: call keys name the model by its identity (no endpoint, no placement); 3: a dataset file sent as it
# is is keyed by its bytes, not its pixels (core/messages.py).  An older store keeps its keys, and its cache.
KEY_VERSION = 3


def key_version_of(store: Any) -> int:
    """The key version of a run store: recorded, else 1 for a store that holds a run (from before version 2),
    else :data:`KEY_VERSION` for a new one."""
    return store.get_meta("key_version") or (1 if store.get_meta("spec") else KEY_VERSION)


#: the first key version that keys files sent as they are by their bytes
FILE_KEYS_SINCE = 3


_identity = functools.lru_cache(maxsize=256)(identity_of)


def cache_model_id(model: Any, key_version: int = KEY_VERSION) -> str:
    """The model's name in call keys."""
    return model.model_id if key_version < 2 else _identity(model.model_id)


_NO_ANSWER = object()  # what waiting samples get from a call that failed or was cancelled


class Session:
    def __init__(self, store: RunStore, scheduler: Scheduler | None = None, key_version: int = KEY_VERSION) -> None:
        self.store = store
        self.scheduler = scheduler or Scheduler()
        self.counters = CallCounters()
        self.checks = ServerChecks()
        self.key_version = key_version
        self.file_keys = key_version >= FILE_KEYS_SINCE
        self._batches: dict[str, Any] = {}
        self._journal_keys: dict[str, set[str]] = {}
        self._flights: dict[str, asyncio.Future] = {}  # call key -> the answer of the call on its way
        #: ``--max-cost`` (run/budget.py): asked before every call that goes out; None: no cap
        self.budget: Any = None
        self._usage_warned: set[str] = set()

    def usage_of(self, model_id: str, request: dict[str, Any], usage: Any) -> tuple[int, int]:
        """A call's (input, output) tokens: the provider's where they are valid, else the estimate's for this
        request (run/budget.py), with a UsageWarning once per model: never zero or negative for a paid call."""
        why = getattr(usage, "invalid", None)
        if not why:
            return usage.input_tokens, usage.output_tokens
        warn_usage(model_id, why, self._usage_warned)
        self.counters.count(model_id, "usage_estimated")
        tin, tout = request_tokens(model_id, request)
        return int(round(tin)), int(round(tout))

    def batch_for(self, model: Any) -> Any:
        """The model's :class:`~vlmcheck.run.batch.BatchCollector` (``?batch=1``), made on first use inside the
        run's loop, where it re-attaches to the model's open journaled batches."""
        collector = self._batches.get(model.model_id)
        if collector is None:
            backend = getattr(model, "batch", None) or model.batch_backend
            collector = self._batches[model.model_id] = BatchCollector(
                self.store, backend, model.model_id, journal_model=cache_model_id(model, self.key_version),
                window=getattr(model, "batch_window", 2.0), poll=getattr(model, "batch_poll", 30.0),
                max_attempts=self.scheduler.retry.max_attempts, usage_of=self.usage_of)
        return collector

    def _journaled(self, model: Any) -> set[str]:
        """Keys in the model's open journaled batches when the session began: a resume without ``?batch=1``
        waits for those batches (paid for already) instead of sending their requests again."""
        journal_model = cache_model_id(model, self.key_version)
        keys = self._journal_keys.get(journal_model)
        if keys is None:
            reader = getattr(self.store, "open_batch_keys", None)  # a Ray worker's store has no journal
            keys = self._journal_keys[journal_model] = reader(journal_model) if reader is not None else set()
        return keys

    def vlm(self, model: Any) -> "CachedVLM":
        return CachedVLM(self, model, role="vlm")

    def text(self, model: Any) -> "CachedVLM":
        return CachedVLM(self, model, role="text")

    def generator(self, model: Any) -> "CachedGenerator":
        return CachedGenerator(self, model)

    def encoder(self, model: Any) -> "CachedEncoder":
        return CachedEncoder(self, model)

    async def lookup(self, key: str) -> Any:
        """The cached response for ``key`` or None; a store that asks another process (a Ray worker's) is
        awaited, never blocking the loop."""
        aget = getattr(self.store, "aget_call", None)
        return await aget(key) if aget is not None else self.store.get_call(key)

    async def cached(self, role: str, model: Any, request: Any, template: str | None, invoke,
                     batch_body=None) -> tuple[Any, bool]:
        """Return (response JSON, was_hit), from the store or by calling ``invoke`` once (the roles' calls, and a
        method's own cached step: VHExpansion's attack).  ``invoke`` is an async fn returning (response JSON, usage);
        ``batch_body``, for a model with a batch backend, gives the provider request body to batch instead."""
        model_id = model.model_id
        request_text = request_json(request)  # encoded once, for the key and for the store
        key = call_key(role, cache_model_id(model, self.key_version), request, template, request_text)
        hit = await self.lookup(key)
        loop = asyncio.get_running_loop()
        if hit is None and (flight := self._flights.get(key)) is not None and flight.get_loop() is loop:
            # the same request is on its way for another sample (a blind question asked of two images, one
            # prompt of two repeats): one call, whose answer both get, as a cache hit would give it
            hit = await asyncio.shield(flight)
            if hit is _NO_ANSWER:
                # that call's first try failed (or it was cancelled): this sample makes its own call now, as a
                # sample with a request of its own would, never queued behind another sample's retries (a queue
                # behind one failing request waits out all its backoffs)
                hit = await self.lookup(key)  # unless that call's retry has answered since
                if hit is None:
                    return await self._call(key, role, model, request, invoke, batch_body, request_text)
        if hit is not None:
            self.counters.count(model_id, "hits")
            return hit, True
        flight = self._flights[key] = loop.create_future()

        def release() -> None:  # the flight ends; after a failure its waiters go their own way
            if not flight.done():
                flight.set_result(_NO_ANSWER)
            if self._flights.get(key) is flight:
                del self._flights[key]

        async def first_try_releases():
            try:
                return await invoke()
            except BaseException:
                release()  # at the first failed try, not after every retry
                raise

        try:
            response, hit = await self._call(key, role, model, request, first_try_releases, batch_body,
                                             request_text)
            if not flight.done():
                flight.set_result(response)
            return response, hit
        finally:
            release()

    def _paid(self, model_id: str, tin: int, tout: int) -> None:
        if self.budget is not None:
            self.budget.paid(model_id, tin, tout)
        self.counters.count(model_id, "calls")
        self.counters.count(model_id, "input_tokens", tin)
        self.counters.count(model_id, "output_tokens", tout)

    async def _call(self, key: str, role: str, model: Any, request: Any, invoke, batch_body,
                    request_text: str | None = None) -> tuple[Any, bool]:
        """The model called for ``key`` (a cache miss), directly or in a provider batch; its answer stored."""
        model_id = model.model_id
        started = time.perf_counter()
        held = await self.budget.acquire(model_id, request) if self.budget is not None else 0.0  # BudgetStop: not sent
        try:
            # a model without a batch backend (batch_body None) never looks at the journal
            if batch_body is not None and (getattr(model, "batch", None) is not None
                                           or key in self._journaled(model)):
                body = batch_body()
                await inputs.release_for_batch()  # one wave of misses is one batch, whatever the pixel budget
                # the collector stores every answer of a batch itself (also those of a re-attached batch that
                # no request of this session waits for)
                response, attempts = await self.batch_for(model).call(key, role, request, body)
                self._paid(model_id, *response.tokens)  # checked by usage_of, as a direct call's usage is
                return dict(response), False
            (response, usage), attempts = await self.scheduler.call(
                getattr(model, "concurrency_key", model_id), invoke, limit=getattr(model, "max_concurrency", None),
                timeout=getattr(model, "timeout", None))
            tin, tout = usage or (0, 0)
            self._paid(model_id, tin, tout)
            self.store.put_call(key, role=role, model=model_id, request=request, response=response,
                                attempts=attempts, input_tokens=tin, output_tokens=tout,
                                duration_s=time.perf_counter() - started, request_text=request_text)
            return response, False
        except CallFailed as failed:
            self.counters.count(model_id, "failures")
            self.store.put_call_error(key, role=role, model=model_id, request=request,
                                      error_type=failed.kind, message=str(failed.error), attempts=failed.attempts)
            raise
        finally:
            if self.budget is not None:
                self.budget.release(held)


#: The reasoning of every generation made by the current sample (the runner keeps it in samples.jsonl).
reasoning_trace: ContextVar[list[dict[str, Any]] | None] = ContextVar("vlmcheck_reasoning_trace", default=None)


def final_answer(gen: Generation) -> Generation:
    """``gen`` with its text reduced to the final answer: a reasoning model's thinking (``<think>`` blocks, or
    the provider's reasoning field) moves to ``reasoning``.  The cache keeps the raw reply; each read splits it."""
    answer, thought = split_reasoning(gen.text)
    if thought is None and not gen.reasoning:  # the usual answer: nothing to split or keep
        return gen
    reasoning = "\n\n".join(x for x in (gen.reasoning, thought) if x) or None
    if thought is not None:
        gen = gen.model_copy(update={"text": answer, "reasoning": reasoning})
    trace = reasoning_trace.get()
    if reasoning and trace is not None:
        trace.append({"answer": gen.text, "reasoning": reasoning})
    return gen


@dataclass(eq=False)  # compared and hashed by identity, as the model is
class _Wrapper:
    session: Session
    model: Any

    @property
    def model_id(self) -> str:
        return self.model.model_id

    @property
    def capabilities(self) -> Capabilities:
        return self.model.capabilities


@dataclass(eq=False)
class CachedVLM(_Wrapper):
    role: str = "vlm"

    async def generate(self, messages: list[Message], config: GenerationConfig | None = None,
                       *, template: str | None = None) -> Generation:
        config = config or GenerationConfig()
        request = {"messages": canonical_messages(messages, self.session.file_keys),
                   "config": config.model_dump(exclude_none=True)}

        made: list[Generation] = []

        async def invoke():
            gen = await self.model.generate(messages, config)
            made.append(gen)
            return gen.model_dump(mode="json"), self.session.usage_of(self.model.model_id, request, gen.usage)

        batch_body = ((lambda: self.model.batch_body(messages, config))
                      if getattr(self.model, "batch_backend", None) is not None else None)
        response, hit = await self.session.cached(self.role, self.model, request, template, invoke, batch_body)
        if made and not hit and made[-1].logprobs is None:
            # this sample's own call (its last attempt): without logprobs every field is a plain string, number or
            # None, so validating its stored JSON would give this very Generation back; not made a second time
            gen = made[-1]
        else:
            gen = Generation.model_validate(response)
        if answers_from_a_server(self.model):  # a dry run's stand-ins and local models make no server claim
            self.session.checks.observe(self.model.model_id, request, config, gen, fresh=bool(made) and not hit)
        return final_answer(gen)

    async def loglikelihood(self, messages: list[Message], continuations: list[str],
                            *, template: str | None = None) -> list[Loglikelihood]:
        require(self.model, "loglikelihood", "loglikelihood scoring")
        request = {"messages": canonical_messages(messages, self.session.file_keys), "continuations": continuations}

        async def invoke():
            out = await self.model.loglikelihood(messages, continuations)
            return [o.model_dump() for o in out], None

        response, _ = await self.session.cached("loglikelihood", self.model, request, template, invoke)
        return [Loglikelihood.model_validate(r) for r in response]


class CachedGenerator(_Wrapper):
    async def generate_image(self, prompt: str, seed: int | None = None, *, template: str | None = None
                             ) -> tuple[Image.Image, str]:
        """Return (image, artifact path relative to the run folder)."""
        request = {"prompt": prompt, "seed": seed}
        store = self.session.store

        async def invoke():
            img = await self.model.generate_image(prompt, seed)
            rel = store.put_image(img)
            return {"artifact": rel, "sha256": image_hash(img), "size": [img.width, img.height]}, None

        response, _ = await self.session.cached("generator", self.model, request, template, invoke)
        return load_image(store.image_path(response["artifact"])), response["artifact"]


class CachedEncoder(_Wrapper):
    async def encode(self, images: list[Image.Image]) -> np.ndarray:
        """Embed ``images``; each image is cached separately by its pixel hash."""
        store = self.session.store
        model_id = self.model.model_id
        cache_id = cache_model_id(self.model, self.session.key_version)
        keys = [call_key("encoder", cache_id, {"image": image_hash(img)}, None) for img in images]
        rows: list[list[float] | None] = [await self.session.lookup(k) for k in keys]
        missing = [i for i, r in enumerate(rows) if r is None]
        self.session.counters.count(model_id, "hits", len(images) - len(missing))
        if missing:
            async def invoke():
                mat = await self.model.encode([images[i] for i in missing])
                return np.asarray(mat, dtype=np.float32).tolist(), None

            provider_key = getattr(self.model, "concurrency_key", model_id)
            try:
                (vectors, _), attempts = await self.session.scheduler.call(
                    provider_key, invoke, timeout=getattr(self.model, "timeout", None))
            except CallFailed:
                self.session.counters.count(model_id, "failures")
                raise
            self.session.counters.count(model_id, "calls")
            for i, vec in zip(missing, vectors):
                store.put_call(keys[i], role="encoder", model=model_id, request={"image": image_hash(images[i])},
                               response=vec, attempts=attempts)
                rows[i] = vec
        return np.asarray(rows, dtype=np.float32)
