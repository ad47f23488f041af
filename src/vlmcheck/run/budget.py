"""``--max-cost USD`` (issue 35): no new sample starts once the cost already spent plus the cost of the samples in
flight would pass the cap.

Spent: every call the run's store holds from earlier sessions plus this session's, priced from the usage the
providers returned (run/prices.prices_for: a spec's price_in/price_out, else prices.json; batch calls at
half price).  In flight: the samples started and not finished, each at this session's mean cost per finished
sample (before the first one finishes, nothing is known: the first wave starts).  Models without a known price
cost nothing here, and the results say which were not priced.
"""

from __future__ import annotations

from typing import Any

from .prices import cost_of, prices_for


class Budget:
    def __init__(self, cap: float, store: Any, counters: Any) -> None:
        self.cap, self.counters = cap, counters
        self.before = self._cost({m: {**e, "calls": e.get("ok", 0)} for m, e in store.call_stats().items()})
        self.started = self.finished = 0
        self.stopped = False

    @staticmethod
    def _cost(by_model: dict[str, dict[str, Any]]) -> float:
        total = 0.0
        for model, e in by_model.items():
            p = prices_for(model)
            images = e.get("calls", 0) if p and p.get("image") else 0
            total += cost_of(model, e.get("input_tokens", 0), e.get("output_tokens", 0), images) or 0.0
        return total

    def spent(self) -> float:
        return self.before + self._cost(self.counters.by_model)

    def may_start(self) -> bool:
        """Whether one more sample may start; once it may not, none will in this session."""
        if self.stopped:
            return False
        spent_here = self.spent() - self.before
        per_sample = spent_here / self.finished if self.finished else 0.0
        in_flight = self.started - self.finished
        if self.spent() + (in_flight + 1) * per_sample > self.cap:
            self.stopped = True
            return False
        self.started += 1
        return True

    def done(self) -> None:
        self.finished += 1

    def summary(self, done: int, total: int) -> dict[str, Any]:
        unpriced = sorted(m for m in self.counters.by_model if prices_for(m) is None)
        return {"max_cost_usd": self.cap, "spent_usd": round(self.spent(), 6), "stopped": self.stopped,
                "done": done, "samples": total, "unpriced_models": unpriced}


def budget_message(b: dict[str, Any]) -> str:
    return (f"budget of ${b['max_cost_usd']:g} reached after {b['done']} of {b['samples']} samples "
            f"(${b['spent_usd']:.4f} spent); resume with a higher --max-cost")
