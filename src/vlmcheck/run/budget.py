"""``--max-cost USD`` (docs/usage.md, "Before a run: dry run and cost cap"): no call goes out and no new sample
starts once the cost spent plus what is on its way would pass the cap, priced by the server's usage, not the
estimate, which can be far below what it bills."""

from __future__ import annotations

import asyncio
import math
import warnings
from typing import Any

from ..core.tokens import image_tokens, text_tokens
from ..store.db import RunStore, StoreError
from .prices import cost_of, image_rule, prices_for


class BudgetStop(BaseException):
    """A call that would pass ``--max-cost``: not sent.  A BaseException, so no method's ``except Exception``
    turns it into a failed sample: the sample is left unrecorded for a resume (its paid calls stay cached)."""


class UsageWarning(UserWarning):
    """A provider's usage could not be used (missing, negative, not a number): the call is priced at its
    estimate instead."""


def check_max_cost(value: Any) -> float | None:
    """``--max-cost`` as a finite number above 0, or None; a ValueError in one sentence otherwise."""
    if value is None:
        return None
    try:
        cap = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"--max-cost {value!r}: give a number of US dollars above 0, e.g. 5") from None
    if not math.isfinite(cap) or cap <= 0:
        raise ValueError(f"--max-cost {value}: give a number of US dollars above 0, e.g. 5")
    return cap


def request_tokens(model_id: str, request: dict[str, Any]) -> tuple[float, float]:
    """(input, output) tokens of a canonical request (run/calls.py) by the estimate's rules (run/estimate.py),
    continuations counted as input, the output at the request's ``max_tokens``."""
    rule = image_rule(model_id)
    tokens = 0.0
    for m in request.get("messages") or ():
        for part in m.get("content") or ():
            if part.get("type") == "text":
                tokens += text_tokens(part.get("text") or "")
            elif part.get("type") == "image" and part.get("size"):
                tokens += image_tokens(*part["size"], rule)
    for c in request.get("continuations") or ():
        tokens += text_tokens(c)
    config = request.get("config") or {}
    out = config.get("max_tokens") if "config" in request else 0
    return tokens, float(out if isinstance(out, (int, float)) and out > 0 else (512 if "config" in request else 0))


def _finite(n: Any) -> float:
    """A token count from a store or a counter: never negative, never NaN (old stores may hold either)."""
    try:
        x = float(n or 0)
    except (TypeError, ValueError):
        return 0.0
    return x if math.isfinite(x) and x > 0 else 0.0


def _price(model_id: str, input_tokens: Any, output_tokens: Any, calls: Any = 1) -> float:
    """USD of ``calls`` calls with these tokens (an image generator bills each call); 0 where no price is known."""
    p = prices_for(model_id)
    images = calls if p and p.get("image") else 0
    return cost_of(model_id, _finite(input_tokens), _finite(output_tokens), images) or 0.0


class Budget:
    def __init__(self, cap: float, store: Any, counters: Any) -> None:
        self.cap, self.counters = check_max_cost(cap), counters
        self.before = self._cost({m: {**e, "calls": e.get("ok", 0)} for m, e in store.call_stats().items()})
        self.started = self.finished = 0
        self.reserved = 0.0  # estimated cost of the calls on their way
        self.stopped = False  # no call goes out any more
        self.closed = False  # no sample starts any more (the calls of those in flight are still asked for one by one)
        self.in_flight = 0  # calls sent and not yet back
        self.priced = 0  # calls of this session whose answer came back and was priced
        self.dearest = 0.0  # the highest price of one call this session (the server's usage, not the estimate)
        self._wake: asyncio.Event | None = None  # set when a call comes back: the calls held for it go on

    @staticmethod
    def _cost(by_model: dict[str, dict[str, Any]]) -> float:
        return sum(_price(m, e.get("input_tokens"), e.get("output_tokens"), e.get("calls", 0))
                   for m, e in by_model.items())

    def spent(self) -> float:
        return self.before + self._cost(self.counters.by_model)

    async def acquire(self, model_id: str, request: dict[str, Any]) -> float:
        """:meth:`reserve` for a call about to be sent, after waiting while another call is out and no answer of
        this session has been priced yet: the first price comes from the server, not from the estimate."""
        while not self.priced and self.in_flight and not self.stopped:
            if self._wake is None:
                self._wake = asyncio.Event()
            await self._wake.wait()
        held = self.reserve(model_id, request)
        self.in_flight += 1
        return held

    def paid(self, model_id: str, input_tokens: float, output_tokens: float) -> None:
        """The price of one answer as the server counted its tokens: the floor of every later reservation."""
        self.priced += 1
        self.dearest = max(self.dearest, _price(model_id, input_tokens, output_tokens))

    def reserve(self, model_id: str, request: dict[str, Any]) -> float:
        """Hold the cost of one call before it is sent (the higher of its estimate and the dearest call priced so
        far) until :meth:`release`; :class:`BudgetStop` where it would pass the cap."""
        if self.stopped:
            raise BudgetStop()
        tin, tout = request_tokens(model_id, request)
        entry = self.counters.by_model.get(model_id) or {}
        if entry.get("calls") and "config" in request:  # the run's own mean output for this model
            tout = _finite(entry.get("output_tokens")) / entry["calls"]
        cost = max(_price(model_id, tin, tout), self.dearest)
        if self.spent() + self.reserved + cost > self.cap:
            self.stopped = True
            raise BudgetStop()
        self.reserved += cost
        return cost

    def release(self, cost: float) -> None:
        self.reserved = max(0.0, self.reserved - cost)
        self.in_flight = max(0, self.in_flight - 1)
        if self._wake is not None:
            self._wake.set()
            self._wake = None

    def may_start(self) -> bool:
        """Whether one more sample may start; once it may not, none will in this session."""
        if self.stopped or self.closed:
            return False
        per_sample = (self.spent() - self.before) / self.finished if self.finished else 0.0
        if self.spent() + (self.started - self.finished + 1) * per_sample > self.cap:  # the ones in flight, and one
            self.closed = True
            return False
        self.started += 1
        return True

    def summary(self, done: int, total: int) -> dict[str, Any]:
        unpriced = sorted(m for m in self.counters.by_model if prices_for(m) is None)
        return {"max_cost_usd": self.cap, "spent_usd": round(self.spent(), 6), "stopped": self.stopped or self.closed,
                "done": done, "samples": total, "unpriced_models": unpriced, "calls": self.counters.calls,
                "dearest_call_usd": round(self.dearest, 6), "usage_estimated_calls": self.counters.usage_estimated}


def warn_usage(model_id: str, why: str, seen: set[str]) -> None:
    """One :class:`UsageWarning` per model and session."""
    if model_id in seen:
        return
    seen.add(model_id)
    warnings.warn(UsageWarning(f"{model_id}: the provider's usage is unusable ({why}); its calls are priced at "
                               f"the estimate (run/budget.py)"), stacklevel=2)


def recorded_max_cost(store_path: Any) -> float | None:
    """The ``--max-cost`` recorded in the spec of the run store at ``store_path`` (read only), or None: what a
    resume that gives none keeps."""
    try:
        with RunStore(store_path.parent, read_only=True, untouched=True) as store:
            value = store.get_meta("spec").get("max_cost")
    except (StoreError, AttributeError):
        return None  # the store's own checks say what is wrong with it when the run opens it
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def budget_message(b: dict[str, Any]) -> str:
    """What a stop by the budget means: what was spent, on how many calls, the dearest; how many samples are
    complete (an incomplete one's paid answers are kept for the resume)."""
    calls = b.get("calls")
    on = f" on {calls} call{'s' if calls != 1 else ''} this session" if calls is not None else ""
    dearest = f", the dearest ${b['dearest_call_usd']:.4f}" if b.get("dearest_call_usd") else ""
    return (f"budget of ${b['max_cost_usd']:g} reached: ${b['spent_usd']:.4f} spent{on}{dearest}; "
            f"{b['done']} of {b['samples']} samples complete, every answer paid for is kept; "
            f"resume with a higher --max-cost")
