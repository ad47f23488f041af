"""samples.jsonl and results.json, rebuilt from a run's store (after a run, a resume, a merge).

Streamed: records come from a cursor and go to the file as they are read; see :func:`write_outputs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.files import json_text, write_lines_atomic, write_text_atomic
from ..core.secrets import redact_obj
from ..store.db import RunStore
from .prices import by_identity, usage_with_cost
from .task import Sample, Task

if TYPE_CHECKING:
    from .calls import Session


def _write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json_text(redact_obj(obj), indent=2, sort_keys=False) + "\n")


def write_outputs(store: RunStore, task: Task, samples: list[Sample], session: Session | None = None,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Rebuild samples.jsonl and results.json from the store.

    Streamed: each record is read from a cursor, written to samples.jsonl and let go.  A task with a
    ``summary_folder()`` (an object with ``add(record)`` and ``result(failed)``) folds its summary in the same
    pass, so memory does not grow with the run beyond a few bytes a sample (describe); any other task gets its
    finished records as a list, as before."""
    order = {s.id: i for i, s in enumerate(samples)}
    make_folder = getattr(task, "summary_folder", None)
    folder = make_folder() if make_folder is not None else None
    done: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    n_done = 0

    def keep(rec: dict[str, Any]) -> None:
        nonlocal n_done
        if rec["status"] == "done":
            n_done += 1
            folder.add(rec) if folder is not None else done.append(rec)
        elif rec["status"] == "error":
            failed.append(rec)

    def lines():
        last = -1
        for rec in store.iter_samples(task.name):
            i = order.get(rec["sample_id"])
            if i is None:
                continue
            if i < last:  # the store's order (seq) is not the run's: written in the run's order instead
                raise _OutOfOrder
            last = i
            yield json_text(redact_obj(rec), sort_keys=True) + "\n"
            keep(rec)

    try:
        write_lines_atomic(store.folder / "samples.jsonl", lines())
    except _OutOfOrder:  # seen only in stores whose samples were renumbered; the whole run in memory, sorted
        folder = make_folder() if make_folder is not None else None
        done, failed, n_done = [], [], 0
        records = sorted((r for r in store.iter_samples(task.name) if r["sample_id"] in order),
                         key=lambda r: order[r["sample_id"]])
        write_lines_atomic(store.folder / "samples.jsonl",
                           (json_text(redact_obj(rec), sort_keys=True) + "\n" for rec in records))
        for rec in records:
            keep(rec)
    errors_by_type: dict[str, int] = {}
    for r in failed:
        errors_by_type[r["error"]["type"]] = errors_by_type.get(r["error"]["type"], 0) + 1
    results = {
        "task": task.name,
        "spec": store.get_meta("spec"),
        "counts": {"samples": len(samples), "done": n_done, "failed": len(failed),
                   "pending": len(samples) - n_done - len(failed), "errors_by_type": errors_by_type},
        "metrics": folder.result(failed) if folder is not None else task.summarize(done, failed),
        "usage": by_identity(usage_with_cost(store.call_stats())),
    }
    if session is not None:  # what this process did (a resumed run counts only its own calls)
        results["session"] = {"model_calls": session.counters.calls, "cache_hits": session.counters.hits,
                              "failed_calls": session.counters.failures, "retries": session.scheduler.retries}
    results.update(extra or {})
    _write_json_atomic(store.folder / "results.json", results)
    return results


class _OutOfOrder(Exception):
    pass
