"""Run a task and write its report: what the public API (``vlmcheck.run_task``), the CLI, a sweep and the
demo call.

The runner (``run/runner.py``) returns results and writes ``results.json`` and ``samples.jsonl``; the report
sits above the methods it shows, so the runner never imports it.  Whoever asks for a run writes the report,
through the functions here, unless ``RunOptions.report`` is off.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Iterator

from .run import runner as _runner
from .run.runner import RunOptions, RunResult
from .run.task import Task

log = logging.getLogger(__name__)


def results_state(folder: str | os.PathLike) -> str | None:
    """What the report shows of a run: its results.json less this process's call counts (None: no results)."""
    import json

    try:
        results = json.loads((Path(folder) / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    results.pop("session", None)
    return json.dumps(results, sort_keys=True)


@contextlib.contextmanager
def _reported(folder: str | os.PathLike, options: RunOptions) -> Iterator[None]:
    """What follows a run that returned: its report, unless its results are what they were and the report exists
    (a resume of a finished run then costs no report; a new vlmcheck version changes the recorded spec); then the
    run logged to ``RunOptions.track``'s trackers. Each tracker is checked before the run starts (a tracker that
    cannot log is one sentence, a :class:`~vlmcheck.track.TrackerError`, and no run); one that fails after the run
    loses nothing: the run folder holds every result, and the warning names the command that logs it later."""
    from .track import _sentence, check_trackers, track_runs

    folder = Path(folder)
    before = results_state(folder) if options.report else None
    trackers = check_trackers(options.track) if options.track else []
    yield
    if options.report and not (before is not None and (folder / "report.html").is_file()
                               and results_state(folder) == before):
        write_run_report(folder)
    for t in trackers:
        try:
            track_runs([folder], [t.name], options.track_group, trackers=[t])
        except Exception as exc:  # noqa: BLE001 (the tracker's own errors: the results are safe on disk)
            log.warning("could not log %s to %s (%s); the run folder holds every result: `vlmcheck track %s "
                        "--to %s` logs it", folder, t.name, _sentence(exc), folder, t.name)


def write_run_report(folder: str | os.PathLike) -> None:
    """The run's own ``report.html``; a report failure never fails the run (its results are already written)."""
    try:
        from .report.html import write_run_report as write

        write(Path(folder))
    except Exception as exc:  # noqa: BLE001
        log.warning("could not write %s/report.html: %s", folder, exc)


async def run_task_async(task: Task, folder: str | os.PathLike, options: RunOptions | None = None) -> RunResult:
    """Run ``task`` into ``folder`` (resumable; see :mod:`vlmcheck.run.runner`), then write its report and log it
    to the trackers asked for."""
    options = options or RunOptions()
    with _reported(folder, options):
        return await _runner.run_task_async(task, folder, options)


def run_task(task: Task, folder: str | os.PathLike, options: RunOptions | None = None) -> RunResult:
    """Synchronous :func:`run_task_async`."""
    options = options or RunOptions()
    with _reported(folder, options):
        return _runner.run_task(task, folder, options)


def retry_failed(task: Task, folder: str | os.PathLike, options: RunOptions | None = None) -> RunResult:
    """Run again only the failed samples of ``folder`` (finished ones are kept), then write the report."""
    options = options or RunOptions()
    with _reported(folder, options):
        return _runner.retry_failed(task, folder, options)


def merge_runs(shards: list[str | Path], out: str | Path, report: bool = True, overwrite: bool = False
               ) -> dict[str, Any]:
    """Join the folders of a ``--shard i/N`` run into ``out`` (:mod:`vlmcheck.run.merge`), then its report."""
    from .run import merge as _merge  # here, not at the top: a run that merges nothing does not load it

    results = _merge.merge_runs(shards, out, overwrite=overwrite)
    if report:
        write_run_report(out)
    return results
