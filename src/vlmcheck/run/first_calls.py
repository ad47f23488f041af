"""The preflight's second half, on a new run's real requests (a server without ``GET /models``, or whose model
list says nothing of keys): a run whose first samples all fail for the run's reason (a key refused, no such
endpoint or model) is refused in one sentence quoting the server and leaves no run folder."""

from __future__ import annotations

from typing import Any

from ..core.errors import shorten_middle
from ..core.spec import SpecError

#: how many finished samples decide: the first ones, all failed for the run's reason, and none done
FIRST = 4


def run_reason(outcome: dict[str, Any]) -> str | None:
    """What to do about a failed sample whose cause is the run's: a key refused (HTTP 401, 403), an endpoint or
    model not there (HTTP 404); None for anything else."""
    kind, message = str(outcome.get("error_type") or ""), str(outcome.get("message") or "")
    if kind == "model_call:auth":
        return "set the right key (--api-key, OPENAI_API_KEY or ?key_env=NAME)"
    if kind == "model_call:bad_request" and "(HTTP 404)" in message:
        return "check the base URL and the model name"
    return None


class RunRefused(SpecError):
    """A new run refused on its first requests (the runner empties its folder)."""


class FirstCalls:
    """Watches a new run's first finished samples (``observe`` each; True: stop the run)."""

    def __init__(self, todo: int) -> None:
        self.need = max(1, min(FIRST, todo))
        self.seen = 0
        self.open = False  # a sample finished, or one failed for its own reason: the run goes on
        self.refusal: str | None = None

    def observe(self, outcome: dict[str, Any]) -> bool:
        if self.open or self.refusal is not None:
            return self.refusal is not None
        advice = run_reason(outcome) if outcome.get("status") == "error" else None
        if advice is None:
            self.open = True
            return False
        self.seen += 1
        if self.seen >= self.need:
            said = shorten_middle(" ".join(str(outcome.get("message") or "").split()), 300)
            first = "first request" if self.seen == 1 else f"first {self.seen} requests"
            self.refusal = (f"the server refused the run's {first} "
                            f"({said}); {advice}, then run again (nothing was kept; --no-preflight records such "
                            "failures as the samples' instead)")
        return self.refusal is not None
