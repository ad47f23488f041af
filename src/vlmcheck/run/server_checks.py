"""What the server really returned, measured on a run's calls (docs/usage.md, "Capabilities: declared, then
measured"): sampling honoured, token log-probabilities present, usage reported; kept in results.json as
``server_checks``.  Only real answers from a server are checked (:func:`answers_from_a_server`)."""

from __future__ import annotations

import functools
import hashlib
import logging
from typing import Any

from ..core.printable import json_encoder
from ..core.roles import Generation, GenerationConfig
from ..core.spec import ModelSpec, SpecError, registration

_key_json = json_encoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@functools.lru_cache(maxsize=256)
def _on_a_server(model_id: str) -> bool:
    try:
        entry = registration(ModelSpec.parse(model_id).provider)
    except (SpecError, ValueError):
        return True
    return not (entry is not None and entry.billing == "local")  # the provider's registration says where it runs


def answers_from_a_server(model: Any) -> bool:
    """Whether ``model``'s answers tell anything about a server: not a dry run's stand-in, nor a model that runs
    in this process (``ref:``, ``hf:``: registered as billed "local")."""
    return not getattr(model, "dry_run", False) and _on_a_server(str(model.model_id))


class ServerChecks:
    """What the server really returned, measured on the run's calls, not assumed from the adapter's declared
    capabilities: sampling ignored (said at once when the first :attr:`EARLY` groups of requests that differ by
    their seed alone each got one answer), token log-probabilities missing, usage not reported."""

    EARLY = 4  # groups of seeds compared before the warning (about one repeated sample per group)
    MAX_GROUPS = 256  # memory stays bounded on a long run: later groups are not followed

    def __init__(self) -> None:
        self.groups: dict[str, dict[int, str]] = {}  # request without its seed -> seed -> hash of the answer
        self.logprobs_asked = self.logprobs_missing = 0
        self.fresh = self.no_usage = 0
        self.warned: set[str] = set()

    def observe(self, model_id: str, request: Any, config: GenerationConfig, gen: Generation, fresh: bool) -> None:
        if config.temperature > 0 and config.seed is not None:
            group = hashlib.sha256(_key_json({"model": model_id, "messages": request["messages"], "config": {
                k: v for k, v in request["config"].items() if k != "seed"}}).encode("utf-8", "surrogatepass")
            ).hexdigest()
            seeds = self.groups.get(group)
            if seeds is None and len(self.groups) < self.MAX_GROUPS:
                seeds = self.groups[group] = {}
            if seeds is not None:
                seeds[config.seed] = hashlib.sha256(gen.text.encode("utf-8", "surrogatepass")).hexdigest()
                if "sampling_ignored" not in self.warned and self._sampling_ignored(self.EARLY):
                    self.warned.add("sampling_ignored")
                    logging.getLogger("vlmcheck").warning("%s", self.sampling_sentence(config.temperature))
        if config.logprobs:
            self.logprobs_asked += 1
            self.logprobs_missing += gen.logprobs is None and bool(gen.text)
        if fresh:
            self.fresh += 1
            self.no_usage += not (gen.usage.input_tokens or gen.usage.output_tokens)

    def _compared(self) -> list[dict[int, str]]:
        return [g for g in self.groups.values() if len(g) > 1]

    def _sampling_ignored(self, at_least: int) -> bool:
        compared = self._compared()
        return len(compared) >= at_least and all(len(set(g.values())) == 1 for g in compared)

    @staticmethod
    def sampling_sentence(temperature: float | None = None) -> str:
        shown = "" if temperature is None else f" ({temperature:g})"
        return (f"the server seems to ignore the temperature{shown}: every request sent with several seeds got "
                "one and the same answer for each seed (or the model is that certain), so the spread over repeats "
                "and judge samples is zero by construction; make the server sample (e.g. do_sample in the model's "
                "generation config) or drop --repeats")

    def result(self) -> dict[str, Any] | None:
        """results.json's ``server_checks`` (None when nothing was measured)."""
        out: dict[str, Any] = {}
        warnings: list[str] = []
        compared = self._compared()
        if compared:
            same = sum(len(set(g.values())) == 1 for g in compared)
            out["sampling"] = {"requests_compared": len(compared), "identical_across_seeds": same}
            if same == len(compared) and len(compared) >= 2:
                out["sampling"]["ignored"] = True
                warnings.append(self.sampling_sentence())
                if "sampling_ignored" in self.warned:  # said during the run: the end of the run says it no more
                    out["said"] = [warnings[-1]]
        if self.logprobs_asked:
            out["logprobs"] = {"asked": self.logprobs_asked, "missing": self.logprobs_missing}
            if self.logprobs_missing:
                warnings.append(f"{self.logprobs_missing} of {self.logprobs_asked} answers that asked for token "
                                "log-probabilities came without them: the server does not return them")
        if self.fresh:
            out["usage"] = {"calls": self.fresh, "without_usage": self.no_usage}
            if self.no_usage == self.fresh:
                warnings.append(f"none of the {self.fresh} answers reported token usage: costs, --max-cost and "
                                "the usage table count each call at its estimate for this server")
        return {**out, "warnings": warnings} if out else None
