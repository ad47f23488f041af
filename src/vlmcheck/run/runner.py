"""The resumable runner: :func:`run_task` runs, concurrently, the samples of a task the store's journal does not
mark done or failed, then rebuilds ``results.json`` and ``samples.jsonl`` from the store (run/outputs.py), so an
interrupted-and-resumed run writes what an uninterrupted one would.  It writes no report (``api.py`` does)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from .._version import __version__
from ..core.images import DEFAULT_MAX_FILE_BYTES
from ..core import inputs, remote
from ..core.inputs import DEFAULT_PIXEL_BUDGET
from ..core.roles import SupportsPreflight
from ..core.spec import PROVIDERS, identity_of
from .loop_clients import close_loop_clients
from ..store.db import DB_NAME, GROUP_COMMIT_S, RunStore
from .calls import FILE_KEYS_SINCE, KEY_VERSION, Session, key_version_of  # noqa: F401  (KEY_VERSION re-exported)
from ..core.progress import Progress
from ..datasets.base import choices_line
from .scheduler import RetryPolicy, Scheduler
from .folder import RunFolderInUse, folder_lock  # noqa: F401  (re-exported: where callers have found them)
from .folder import MARKER, RunFolderExists, _empty_run_folder, check_folder, leave_nothing, mark_run_folder
from . import options as options_table
from .first_calls import FirstCalls, RunRefused
from .outputs import record, write_outputs
from .task import Sample, Task, execute_sample
from .budget import Budget, BudgetStop, check_max_cost, recorded_max_cost
from .data_pin import data_difference, data_pins, without_data_paths


class _RunOptions(BaseModel):
    """The runner's options that the table (run/options.py) does not have, or has in another form."""

    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    clear_failed: bool = False  # forget failed samples first, so they run again (retry-failed)
    # the input policy (core/inputs.py; docs/usage.md): file size, pixels in flight, http(s) read/total timeouts
    max_image_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, ge=1)
    pixel_budget: int = Field(default=DEFAULT_PIXEL_BUDGET, ge=1)
    url_read_timeout_s: float = Field(default=remote.READ_TIMEOUT_S, gt=0)
    url_total_timeout_s: float = Field(default=remote.TOTAL_TIMEOUT_S, gt=0)
    shard: tuple[int, int] | None = None  # (i, N)
    executor: Literal["local", "ray"] = "local"
    max_cost: float | None = Field(None, gt=0, allow_inf_nan=False)


#: The runner's options: the fields above, and the table's options but the command line's own (``CLI_ONLY``),
#: with the table's type, default and bounds (report and track: done by whoever asked for the run).
RunOptions = create_model("RunOptions", __base__=_RunOptions, __module__=__name__, **{
    o.name: (o.kind, Field(o.default, ge=o.cli.get("min"), le=o.cli.get("max")))
    for o in options_table.RUN_OPTIONS if o.name not in (*options_table.CLI_ONLY, *_RunOptions.model_fields)
    and not o.name.endswith("_mb")})


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"i/N"`` -> (i, N) with 0 <= i < N."""
    if text is None:
        return None
    i, sep, n = str(text).partition("/")
    try:
        index, count = int(i), int(n)
    except ValueError:
        index, count = -1, 0
    if not sep or count < 1 or not 0 <= index < count:
        raise ValueError(f"--shard {text!r}: give i/N with 0 <= i < N, e.g. 0/4")
    return index, count


def run_options(**values: Any):
    """The runner's RunOptions from the table's values (missing ones at their default); ValueError for a bad one."""
    unknown = sorted(set(values) - set(options_table.BY_NAME))
    if unknown:
        raise ValueError(f"unknown run option(s) {', '.join(unknown)}")
    v = {**options_table.defaults(), **values}
    v["max_cost"] = check_max_cost(v["max_cost"])  # 0, NaN, infinity: one sentence, not a traceback
    if v["executor"] not in ("local", "ray"):
        raise ValueError(f"--executor {v['executor']!r}: use local or ray")
    shard = v["shard"]
    v["shard"] = parse_shard(shard) if isinstance(shard, str) or shard is None else tuple(shard)
    fields = {k: x for k, x in v.items() if k not in options_table.CLI_ONLY and not k.endswith("_mb")}
    return RunOptions(**fields, max_image_bytes=int(v["max_image_mb"] * 1e6),
                      pixel_budget=int(v["pixel_budget_mb"] * 1e6))


def in_shard(sample_id: str, shard: tuple[int, int] | None) -> bool:
    """Whether a sample belongs to ``shard``: a hash of its id, so the assignment never depends on the order
    or number of samples and is the same on every resume."""
    if shard is None:
        return True
    digest = hashlib.sha256(sample_id.encode("utf-8")).hexdigest()
    return int(digest[:16], 16) % shard[1] == shard[0]


def git_commit(here: Path | None = None) -> str | None:
    """The commit of the vlmcheck checkout this code runs from, for the run spec; None for an installed copy
    (under ``site-packages``), without asking git: the repository around a ``.venv`` is the user's."""
    here = here or Path(__file__).resolve().parent
    if any(part in ("site-packages", "dist-packages") for part in here.parts):
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@dataclass
class RunResult:
    folder: Path
    results: dict[str, Any]
    counters: Any


def run_spec(task: Task, samples: list[Sample], options: RunOptions) -> dict[str, Any]:
    fingerprint = hashlib.sha256("\n".join(s.id for s in samples).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return {
        "vlmcheck_version": __version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "task": task.name,
        "task_spec": task.spec(),
        # the data by content: a resume compares these, not the paths as typed (run/data_pin.py)
        "data": data_pins(task.spec()),
        "seed": options.seed,
        "limit": options.limit,
        "max_concurrency": options.max_concurrency,
        "n_samples": len(samples),
        "sample_ids_fingerprint": fingerprint,
        "shard": list(options.shard) if options.shard else None,
        # --max-cost: kept by a resume that gives none (never compared: a resume may raise or lower it)
        "max_cost": options.max_cost,
    }


async def run_task_async(task: Task, folder: str | os.PathLike, options: RunOptions | None = None) -> RunResult:
    options = options or RunOptions()
    folder = check_folder(folder)
    token = inputs.active_policy.set(options_table.input_policy(options, dirs={}))
    existed, held = folder.exists(), False
    try:
        with folder_lock(folder):
            held = True  # only a run that held the lock cleans up: another process's lock file is never touched
            return await _run_locked(task, folder, options)
    except BaseException as exc:
        if held:
            if isinstance(exc, RunRefused):  # its store is closed: what it made goes
                _empty_run_folder(folder)
            leave_nothing(folder, existed)
        raise
    finally:
        inputs.active_policy.reset(token)


async def _run_locked(task: Task, folder: Path, options: RunOptions) -> RunResult:
    if (folder / DB_NAME).exists() and not (options.resume or options.overwrite):
        raise RunFolderExists(f"{folder} already holds a run; pass --resume to continue it or --overwrite")
    if options.overwrite and (folder / DB_NAME).exists():
        _empty_run_folder(folder)
    for stale in folder.glob(".*.tmp"):  # temp files of a writer killed mid-write; we hold the folder's lock
        stale.unlink(missing_ok=True)
    samples = select_samples(task, options)
    for d in getattr(task, "data_read", None) or ():  # what the run reads and what was chosen, said first
        print(choices_line(d), file=sys.stderr, flush=True)
    if options.resume and options.max_cost is None:  # the budget a run was started with holds on its resumes
        options = options.model_copy(update={"max_cost": recorded_max_cost(folder / DB_NAME)})
    spec = run_spec(task, samples, options)  # before the store: a spec that cannot be made leaves no store
    new_store = not (folder / DB_NAME).exists()
    if new_store and samples and options.preflight:  # before the store: a refused run leaves no folder behind
        await preflight(task)
    # a resumed store must hold a run: an empty or half-made one says so instead of silently starting over
    store = RunStore(folder, existing=options.resume and not new_store, group_commit=GROUP_COMMIT_S)
    try:
        try:  # a resumed store must hold this run; then the spec (and a new store's key version) recorded
            mark_run_folder(folder)
            key_version = key_version_of(store)
            store.set_meta("key_version", key_version)
            check_spec(folder, store.get_meta("spec"), spec, getattr(task, "spec_model", None), key_version)
            store.set_meta("spec", spec)
        except BaseException:
            if new_store:  # never leave a store without a spec, which no resume could use
                store.close()
                for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", MARKER):
                    (folder / name).unlink(missing_ok=True)
            raise
        if options.label is not None and options.label.strip():
            store.set_meta("label", options.label.strip())
        models: set[str] = set()
        _map_model_strings(spec["task_spec"], lambda x: models.add(x) or x)
        sessions = store.get_meta("sessions") or []
        store.set_meta("sessions", sessions + [{"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                "models": sorted(models), "executor": options.executor}])
        if options.clear_failed:
            store.clear_failed(task.name)
        session = start_session(store, options, store.get_meta("key_version"))
        todo = [s for s in samples if s.id not in store.sample_status(task.name)]
        budget = None
        if options.max_cost is not None:
            if options.executor == "ray":
                raise ValueError("--max-cost runs in this process; drop --executor ray or --max-cost")
            budget = session.budget = Budget(options.max_cost, store, session.counters)
        if todo and options.preflight and not new_store:
            await preflight(task)
        extra: dict[str, Any] = {}
        first = FirstCalls(len(todo)) if new_store and todo and options.preflight else None
        try:
            if options.executor == "ray" and todo:
                from .ray_executor import run_samples_ray

                ran = await run_samples_ray(task, todo, session, options, already=len(samples) - len(todo),
                                            total=len(samples))
                extra["executor"] = ran["executor"]  # the workers' requests, repeats of a lost worker's included
                session.scheduler.retries = ran["requests"]["retries"]
                session.scheduler.attempts = ran["requests"]["first"] + ran["requests"]["retries"]
            else:
                await _run_samples(task, todo, session, options, already=len(samples) - len(todo),
                                   total=len(samples), budget=budget, first=first)
        finally:
            await close_loop_clients()
        if first is not None and first.refusal is not None:  # the run's reason, not the samples': no folder left
            raise RunRefused(first.refusal)
        if budget is not None:
            finished = sum(1 for v in store.sample_status(task.name).values() if v == "done")
            extra["budget"] = budget.summary(finished, len(samples))
        results = write_outputs(store, task, samples, session, extra)
        return RunResult(folder, results, session.counters)
    finally:
        store.close()


def start_session(store: RunStore, options: RunOptions, key_version: int) -> Session:
    """A session on the run's store; files read as its keys name them (a store from before key version 3 keys
    them by their pixels: read decoded, as it did)."""
    inputs.active_policy.set(replace(inputs.active_policy.get(), file_keys=key_version >= FILE_KEYS_SINCE))
    return Session(store, Scheduler(options.max_concurrency, options.retry, seed=options.seed),
                   key_version=key_version)


def select_samples(task: Task, options: RunOptions) -> list[Sample]:
    """The run's samples: the task's, numbered, cut to ``--limit``, this shard's only."""
    samples = [Sample(s.id, s.payload, i) for i, s in enumerate(task.samples())]
    if options.limit is not None:
        samples = samples[: options.limit]
    return [s for s in samples if in_shard(s.id, options.shard)]  # seq stays the index in the whole run


def check_spec(folder: Path, previous: dict[str, Any] | None, spec: dict[str, Any], spec_model: Any,
               key_version: int) -> None:
    """Refuse (one sentence) to resume a store whose recorded spec is another run's: another shard, other models
    (by identity), data or settings.  Writes nothing: ``--dry-run`` asks it too (run/estimate.py)."""
    if not previous:
        return
    old_task = previous.get("task_spec")
    if spec_model is not None and isinstance(old_task, dict):
        # recorded by an earlier vlmcheck: a field added since (e.g. ``repeats=1``) takes its default, so the run
        # resumes instead of looking like another run; a spec of another model is compared as recorded
        with contextlib.suppress(ValueError):
            old_task = spec_model.model_validate(old_task).model_dump()
    if (previous.get("shard") or None) != spec["shard"]:
        raise RunFolderExists(f"{folder} holds shard {_shard_text(previous.get('shard'))} of a run, not "
                              f"{_shard_text(spec.get('shard'))}; use that shard's own folder")
    # the same models (by identity since key version 2: endpoints and placement may change), data (by
    # content where the run pinned it: run/data_pin.py) and settings
    pins = previous.get("data") if spec.get("data") else None
    if pins and (why := data_difference(previous, spec)):
        raise RunFolderExists(f"{folder} holds a run on other data: {why}; give that data, or use a new folder "
                              "or --overwrite")
    old_spec, new_spec = without_data_paths(old_task, pins), without_data_paths(spec["task_spec"], pins)
    if (identity_spec(old_spec) != identity_spec(new_spec) if key_version >= 2 else old_spec != new_spec):
        raise RunFolderExists(f"{folder} holds a run with a different task spec; use a new folder or --overwrite")


def _shard_text(shard: Any) -> str:
    return f"{shard[0]}/{shard[1]}" if shard else "none (the whole run)"


def _map_model_strings(obj: Any, fn: Any) -> Any:
    """``obj`` (a task spec) with ``fn`` applied to every model spec string in it (a string whose provider is
    registered: a built-in one is found without scanning the installed packages), the rest kept."""
    if isinstance(obj, dict):
        return {k: _map_model_strings(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_model_strings(v, fn) for v in obj]
    if isinstance(obj, str) and ":" in obj and obj.split(":", 1)[0] in PROVIDERS:
        return fn(obj)
    return obj


def identity_spec(task_spec: Any) -> Any:
    """``task_spec`` with every model spec string replaced by the model's identity (ModelSpec.identity)."""
    return _map_model_strings(task_spec, identity_of)


async def preflight(task: Task) -> None:
    """One cheap check of every model the task holds that can check itself (API adapters: ``GET /models``): an
    unreachable server, a rejected key or a model not served stops the run at once, not after every retry."""
    by_id = {getattr(m, "model_id", None): m for m in vars(task).values() if isinstance(m, SupportsPreflight)}
    for model in by_id.values():  # a model held twice (a judge that is also the describer) checked once
        await model.preflight()


async def _run_samples(task: Task, todo: list[Sample], session: Session, options: RunOptions,
                       already: int, total: int, budget: Any = None, first: Any = None) -> None:
    store, pending = session.store, iter(todo)  # one event loop: the workers take turns without a lock
    progress = Progress(task.name, total, already, enabled=options.progress)

    async def worker() -> None:
        while True:
            # the run refused (run/first_calls.py), or --max-cost reached: the rest waits for a resume
            if (first is not None and first.refusal is not None) or (budget is not None and not budget.may_start()):
                return
            sample = next(pending, None)
            if sample is None:
                if budget is not None:
                    budget.started -= 1  # counted as started by may_start, but there was none
                return
            try:
                outcome = await execute_sample(task, sample, session)
            except BudgetStop:  # a call would pass --max-cost: the sample waits for a resume, its paid calls kept
                return
            finally:
                if budget is not None:
                    budget.finished += 1
            record(store, task.name, sample, outcome)
            progress.advance(failed=outcome["status"] == "error")
            if first is not None and first.observe(outcome):
                return

    # An eighth more samples than call slots (at least 2; none for --max-concurrency 1): they wait at the
    # scheduler with their inputs read, so a freed slot is refilled at once, not after a sample's file I/O; as
    # full as twice as many keep it (docs/benchmarks.md), for less peak memory.
    ahead = 0 if options.max_concurrency == 1 else max(2, options.max_concurrency // 8)
    n_workers = max(1, min(options.max_concurrency + ahead, len(todo)))
    if any(getattr(m, "batch", None) is not None for m in vars(task).values()):
        # provider batches: every sample's requests should reach the collector in the same window
        n_workers = max(1, min(len(todo), 50_000))
    with progress:
        await asyncio.gather(*(worker() for _ in range(n_workers)))


def run_task(task: Task, folder: str | os.PathLike, options: RunOptions | None = None) -> RunResult:
    return asyncio.run(run_task_async(task, folder, options))


def retry_failed(task: Task, folder: str | os.PathLike, options: RunOptions | None = None) -> RunResult:
    """Forget the failed samples of ``folder`` and run them again (completed ones stay)."""
    options = (options or RunOptions()).model_copy(update={"resume": True, "overwrite": False, "clear_failed": True})
    return run_task(task, folder, options)

