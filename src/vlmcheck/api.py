"""Run a task and write its report: what the public API (``vlmcheck.run_task``), the CLI, a sweep and the
demo call.

The runner (``run/runner.py``) returns results and writes ``results.json`` and ``samples.jsonl``; the report
sits above the methods it shows, so the runner never imports it.  Whoever asks for a run writes the report,
through the functions here, unless ``RunOptions.report`` is off.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from .run import merge as _merge
from .run import runner as _runner
from .run.runner import RunOptions, RunResult
from .run.task import Task

log = logging.getLogger(__name__)


def write_run_report(folder: str | os.PathLike) -> None:
    """The run's own ``report.html``; a report failure never fails the run (its results are already written)."""
    try:
        from .report.html import write_run_report as write

        write(Path(folder))
    except Exception as exc:  # noqa: BLE001
        log.warning("could not write %s/report.html: %s", folder, exc)


async def run_task_async(task: Task, folder: str | os.PathLike, options: RunOptions | None = None) -> RunResult:
    """Run ``task`` into ``folder`` (resumable; see :mod:`vlmcheck.run.runner`), then write its report."""
    options = options or RunOptions()
    result = await _runner.run_task_async(task, folder, options)
    if options.report:
        write_run_report(folder)
    return result


def run_task(task: Task, folder: str | os.PathLike, options: RunOptions | None = None) -> RunResult:
    """Synchronous :func:`run_task_async`."""
    options = options or RunOptions()
    result = _runner.run_task(task, folder, options)
    if options.report:
        write_run_report(folder)
    return result


def retry_failed(task: Task, folder: str | os.PathLike, options: RunOptions | None = None) -> RunResult:
    """Run again only the failed samples of ``folder`` (finished ones are kept), then write the report."""
    options = options or RunOptions()
    result = _runner.retry_failed(task, folder, options)
    if options.report:
        write_run_report(folder)
    return result


def merge_runs(shards: list[str | Path], out: str | Path, report: bool = True) -> dict[str, Any]:
    """Join the folders of a ``--shard i/N`` run into ``out`` (:mod:`vlmcheck.run.merge`), then its report."""
    results = _merge.merge_runs(shards, out)
    if report:
        write_run_report(out)
    return results
