"""samples.jsonl and results.json, rebuilt from a run's store (after a run, a resume, a merge), streamed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..core.errors import shorten_middle
from ..core.files import write_text_atomic
from ..core.printable import json_text
from ..core.secrets import redact, redact_obj, redacted_json
from ..store.db import RunStore
from .prices import by_identity, usage_with_cost
from .task import Sample, Task

#: the longest failure example results.json keeps (shortened in its middle: its advice is at its end)
EXAMPLE_CHARS = 400

if TYPE_CHECKING:
    from .calls import Session


def write_outputs(store: RunStore, task: Task, samples: list[Sample], session: Session | None = None,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Rebuild samples.jsonl and results.json from the store, each record read from a cursor, written and let
    go.  A task's ``summary_folder()`` (``add(record)``, ``result(failed)``) folds its metrics in the same pass,
    keeping only what its statistics read; a task without one gets its finished records as a list."""
    order = {s.id: i for i, s in enumerate(samples)}
    path = store.folder / "samples.jsonl"
    tally = _Tally(task)
    try:
        write_text_atomic(path, _lines(store.iter_samples(task.name), order, tally))
    except _OutOfOrder:  # seen only in stores whose samples were renumbered; the whole run in memory, sorted
        tally = _Tally(task)
        records = sorted((r for r in store.iter_samples(task.name) if r["sample_id"] in order),
                         key=lambda r: order[r["sample_id"]])
        write_text_atomic(path, _lines(records, order, tally))
    failure_kinds: dict[str, dict[str, Any]] = {}  # per error type: its count and the first sample's message
    for r in tally.failed:
        said = shorten_middle(redact(" ".join(str(r["error"]["message"]).split())), EXAMPLE_CHARS)
        failure_kinds.setdefault(r["error"]["type"], {"count": 0, "example": said, "sample_id": r["sample_id"]})
        failure_kinds[r["error"]["type"]]["count"] += 1
    errors_by_type = {kind: e["count"] for kind, e in failure_kinds.items()}
    results = {
        "task": task.name,
        "spec": store.get_meta("spec"),
        "counts": {"samples": len(samples), "done": tally.n_done, "failed": len(tally.failed),
                   "pending": len(samples) - tally.n_done - len(tally.failed), "errors_by_type": errors_by_type,
                   "failure_kinds": failure_kinds},
        "metrics": tally.metrics(task),
        "usage": by_identity(usage_with_cost(store.call_stats())),
    }
    # the data's form, config, split(s), rows read and left out, with the reasons (datasets/base.py)
    if read := getattr(task, "data_read", None):
        results["data_read"] = read
    if session is not None:  # what this process did (a resumed run counts only its own calls)
        results["session"] = {"model_calls": session.counters.calls, "cache_hits": session.counters.hits,
                              "failed_calls": session.counters.failures, "retries": session.scheduler.retries,
                              "requests": session.scheduler.attempts}
        if (measured := session.checks.result()) is not None:  # what the server really returned, kept in the store
            store.set_meta("server_checks", measured)
    # a resumed run that made no call keeps what the calls that made its answers showed
    if (recorded := store.get_meta("server_checks")) is not None:
        results["server_checks"] = recorded
    if label := store.get_meta("label"):  # the run's --label; without one its model's id is shown (run/labels.py)
        results["label"] = label
    results.update(extra or {})
    write_text_atomic(store.folder / "results.json", json_text(redact_obj(results), indent=2, sort_keys=False) + "\n")
    return results


class _Tally:
    """What results.json needs of the samples as they stream by: the failures, and the finished ones folded
    into the task's ``summary_folder()`` or, for a task without one, kept for its ``summarize``."""

    def __init__(self, task: Task) -> None:
        make = getattr(task, "summary_folder", None)
        self.folder = make() if make is not None else None
        self.done: list[dict[str, Any]] = []
        self.failed: list[dict[str, Any]] = []
        self.n_done = 0

    def add(self, rec: dict[str, Any]) -> None:
        if rec["status"] == "done":
            self.n_done += 1
            (self.folder.add if self.folder is not None else self.done.append)(rec)
        elif rec["status"] == "error":
            self.failed.append(rec)

    def metrics(self, task: Task) -> Any:
        return self.folder.result(self.failed) if self.folder is not None else task.summarize(self.done, self.failed)


class _OutOfOrder(Exception):
    pass


def _lines(records: Iterable[dict[str, Any]], order: dict[str, int], tally: _Tally) -> Iterator[str]:
    """The run's records as samples.jsonl lines, in the run's order, each tallied as it goes by."""
    last = -1
    for rec in records:
        i = order.get(rec["sample_id"])
        if i is None:
            continue
        if i < last:  # the store's order (seq) is not the run's
            raise _OutOfOrder
        last = i
        yield redacted_json(rec, lambda obj: json_text(obj, sort_keys=True)) + "\n"
        tally.add(rec)


def record(store: RunStore, task_name: str, sample: Sample, outcome: dict[str, Any]) -> None:
    """A sample's outcome (``execute_sample``'s) in the store's journal: its result, or its error."""
    if outcome["status"] == "error":
        store.put_sample_error(task_name, sample.id, sample.seq, outcome["error_type"], outcome["message"],
                               outcome["partial"])
    else:
        store.put_sample(task_name, sample.id, sample.seq, outcome["result"])
