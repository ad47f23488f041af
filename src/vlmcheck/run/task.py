"""What the runner asks of a method: the :class:`Task` protocol, its samples, one sample's execution, and the
registry of task names (run/registry.py), through which alone ``run/`` knows a method: it imports none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol

from pydantic import BaseModel

from ..core import inputs
from ..core.images import BadImageError
from .calls import Session, reasoning_trace
from ..core.registry import Registry
from .registry import TASKS, declared, register_task, task_class, task_from_spec, task_names  # noqa: F401
from .scheduler import CallFailed


@dataclass(frozen=True, slots=True)
class Sample:  # slotted: a run of a million samples holds a million of them (56 bytes each, not 150)
    id: str
    payload: Any
    seq: int = 0


class Task(Protocol):
    name: str

    @classmethod
    def from_spec(cls, task_spec: dict[str, Any]) -> "Task":
        """The task rebuilt from what :meth:`spec` returned (resume, merge, Ray workers)."""
        ...

    def samples(self) -> list[Sample]: ...

    def spec(self) -> dict[str, Any]:
        """Parameters that define the task (models, prompts, data fingerprint...)."""
        ...

    async def run_sample(self, sample: Sample, session: Session) -> dict[str, Any]: ...

    def summarize(self, records: list[dict[str, Any]], failed: list[dict[str, Any]] = ()) -> dict[str, Any]:
        """Metrics from the finished samples; ``failed`` holds the samples that raised (with any partial result)."""
        ...


class SpecTask:
    """Base for tasks defined by one pydantic spec in ``self.cfg``: rebuilt from it on resume, recorded as is."""

    spec_model: type[BaseModel]
    cfg: BaseModel
    # the kinds of dataset record it makes its items of (datasets.RECORD_KINDS: "images", "yes/no", ...), which
    # `vlmcheck list` matches against what each benchmark's forms carry
    reads: tuple[str, ...] = ()
    reports: str = ""  # its headline figure, in words
    # what it makes one sample of each, in order: an object with an ``id`` or a dict with an "id"
    items: list[Any]
    # its first N samples come from its dataset's first N rows, in order: then ``--limit N`` reads only those
    # rows of a streamed file (core/dataset_files.first_rows)
    follows_rows: bool = False

    @classmethod
    def from_spec(cls, task_spec: dict[str, Any]):
        return cls(cls.spec_model.model_validate(task_spec))

    def samples(self) -> list[Sample]:
        return [Sample(x["id"] if isinstance(x, dict) else x.id, x) for x in self.items]

    def spec(self) -> dict[str, Any]:
        return self.cfg.model_dump()

    def summarize(self, records: list[dict[str, Any]], failed: list[dict[str, Any]] = ()) -> dict[str, Any]:
        """The method's ``summary_folder()`` (``add(record)``, then ``result(failed)``: the summary folded one
        record at a time, as the runner streams a million of them) fed every record of a list."""
        fold = self.summary_folder()
        for r in records:
            fold.add(r)
        return fold.result(failed)

    @classmethod
    def samples_follow_rows(cls, task_spec: dict[str, Any]) -> bool:
        return cls.follows_rows


# ----------------------------------------------------------------------------- what a decision needs


class Outcome(NamedTuple):
    """One finished sample's contribution to one headline metric, read by ``compare``, the report's decisions and
    ``plan``: ``value`` the sample's per-sample outcome; ``unit`` the sampled unit it belongs to (the cluster a test
    resamples or flips: the source image where several answers share one); ``source`` the seed image's pixel
    hash where the method records one (a pair whose hashes differ is left out); ``stratum`` the category when
    the headline is a mean of per-category means (GenCeption's MMECeption score), None when it is a mean over
    the samples; ``binary`` the value is right (1) or wrong (0); ``low``, ``high`` the range one value can take
    (it caps an interval that too few units leave unbounded).

    Where the headline is a mean of ratios of counts pooled over the samples (CAST: verdicts pooled per cell,
    the cells averaged), ``counts`` holds the sample's (numerator, denominator) of each ratio, shape (K, 2), and
    ``pooled(num, den)`` the headline from the summed counts (arrays (..., K), vectorised over leading axes; a
    mean of the ratios num / den).  Every surface then compares that headline recomputed on the shared samples
    (``metrics/pooled.py``); ``value`` stays the sample's own share."""

    value: float
    unit: str
    source: str | None = None
    stratum: str | None = None
    binary: bool = False
    low: float = 0.0
    high: float = 1.0
    counts: Any = None
    pooled: Callable[[Any, Any], Any] | None = None


#: ``outcomes(result, run_metrics) -> {metric: Outcome}`` of one finished sample's ``result``; metrics named
#: as the run's headline are what the decisions compare
OutcomesFn = Callable[[dict[str, Any], dict[str, Any]], dict[str, Outcome]]


class DecidableTask(Protocol):
    """A task whose runs ``compare``, ``plan`` and the report's decisions can test: its class has
    ``decision_outcomes`` (a static :data:`OutcomesFn`)."""

    decision_outcomes: OutcomesFn


#: ``register_outcomes(name, fn)``: the per-sample outcomes of task ``name``'s results, for a task class that does
#: not carry ``decision_outcomes`` itself (the built-in methods register theirs in ``methods/outcomes.py``)
OUTCOMES: Registry[OutcomesFn] = Registry("task outcomes")
register_outcomes = OUTCOMES.add


def outcomes_for(name: str) -> OutcomesFn | None:
    """How to read task ``name``'s per-sample outcomes: registered, or its class's static ``decision_outcomes``;
    None: ``compare``, ``plan`` and the report list its runs as "no per-sample outcomes", never drop them."""
    return declared(name, OUTCOMES, "decision_outcomes", callable)


# ----------------------------------------------------------------------------- one sample


def error_type(exc: BaseException) -> str:
    if isinstance(exc, CallFailed):
        return f"model_call:{exc.kind}"
    if isinstance(exc, BadImageError):
        return "bad_image"
    return type(exc).__name__


async def execute_sample(task: Task, sample: Sample, session: Session) -> dict[str, Any]:
    """Run one sample: ``{"status": "done", "result"}`` or ``{"status": "error", "error_type", "message",
    "partial"}`` - every failure is the sample's, never the run's (the local and the Ray executor)."""
    trace: list[dict[str, Any]] = []
    token = reasoning_trace.set(trace)  # a reasoning model's thinking, kept beside the sample's answers
    try:
        async with inputs.sample_lease():  # the sample's decoded images leave the pixel budget at its end
            result = await task.run_sample(sample, session)
        if trace and isinstance(result, dict):
            result = {**result, "reasoning_trace": trace}
        return {"status": "done", "result": result}
    except Exception as exc:  # noqa: BLE001 - every failure is recorded per sample
        return {"status": "error", "error_type": error_type(exc), "message": str(exc),
                "partial": getattr(exc, "partial", None)}
    finally:
        reasoning_trace.reset(token)
