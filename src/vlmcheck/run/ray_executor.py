"""The Ray executor (``--executor ray``): samples run in Ray Core actors; this process stays the only writer.

For local models and white-box attacks on several GPUs or machines.  Never the default, never imported
unless asked; ``pip install 'vlmcheck[ray]'``.

* **Workers.**  ``--workers N`` actors (``--gpus-per-worker G`` each), each rebuilding the task from its
  spec - so each loads the task's local models once - and running whole samples with its own session and
  scheduler.  API concurrency budgets (``--max-concurrency``, a model's ``?concurrency=``) are divided
  among the workers.  API keys come from the workers' environment, never through Ray.
* **Dispatch.**  The driver hands out samples one at a time as slots free up (no static split), so a slow
  worker or a slow sample holds back nothing else.
* **One writer.**  Workers never open the run store.  They read the call cache through a small reader actor
  placed on the driver's node (SQLite opened read-only), keep new calls and artifacts in memory and hand
  them back; the driver commits a finished sample's calls, artifacts and journal row in one transaction.
  Every few seconds it also collects the calls of samples still running, so a worker that dies - its node
  removed, its process killed - loses at most those few seconds: its samples go back to the queue and the
  worker that takes them finds their finished calls in the cache.
* **Resume.**  As for any run: a driver killed with ``kill -9`` resumes with the samples it had committed and
  the calls it had collected.

Results equal a local run's (tested byte for byte on the reference world, with nodes removed mid-run).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import os
import sqlite3
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

from ..core.images import encode_image, image_hash
from ..store.db import artifact_path
from .calls import Session, file_keys
from ..core.progress import Progress
from .scheduler import RetryPolicy, Scheduler
from .task import Sample, execute_sample

_SAMPLE: contextvars.ContextVar[str | None] = contextvars.ContextVar("vlmcheck_ray_sample", default=None)
DRAIN_EVERY_S = 2.0


class ExecutorError(RuntimeError):
    """The Ray executor cannot go on (Ray missing, no worker left); one sentence for the user."""


def import_ray():
    """Ray, kept on the loopback interface on machines where Ray would look for another (see Ray's
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``); a clear sentence when the extra is not installed."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise ExecutorError("--executor ray needs Ray: pip install 'vlmcheck[ray]'") from None
    return ray


# ----------------------------------------------------------------------------- in the workers


class WorkerStore:
    """The part of :class:`~vlmcheck.store.db.RunStore` a sample uses, inside a Ray worker: the run's cache
    read through the reader actor, new calls and artifacts held until the driver takes them."""

    def __init__(self, folder: Path, reader: Any) -> None:
        self.folder = folder
        self.reader = reader
        self.calls: dict[str, Any] = {}
        self.pending: dict[str, dict[str, list]] = {}  # sample id -> {"calls", "errors", "artifacts"}

    def _bucket(self) -> dict[str, list]:
        return self.pending.setdefault(_SAMPLE.get() or "", {"calls": [], "errors": [], "artifacts": []})

    def get_call(self, key: str) -> Any:
        return self.calls.get(key)

    async def aget_call(self, key: str) -> Any:
        if key in self.calls:
            return self.calls[key]
        hit = await self.reader.get.remote(key)
        if hit is not None:
            self.calls[key] = hit
        return hit

    def put_call(self, key: str, **row: Any) -> None:
        self.calls[key] = row["response"]
        self._bucket()["calls"].append({"key": key, **row})

    def put_call_error(self, key: str, **row: Any) -> None:
        self._bucket()["errors"].append({"key": key, **row})

    def put_image(self, img) -> str:
        rel = artifact_path(image_hash(img))
        target = self.folder / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(encode_image(img, "PNG"))
        self._bucket()["artifacts"].append(rel)
        return rel

    def image_path(self, rel: str) -> Path:
        target = self.folder / rel
        if not target.exists():  # an artifact of an earlier session, in the driver's run folder
            import ray

            data = ray.get(self.reader.artifact.remote(rel))
            if data is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        return target

    def take(self, sample_id: str) -> dict[str, list]:
        """The sample's new calls and artifacts (bytes) since the last take."""
        got = self.pending.pop(sample_id, {"calls": [], "errors": [], "artifacts": []})
        got["artifacts"] = [(rel, (self.folder / rel).read_bytes()) for rel in dict.fromkeys(got["artifacts"])]
        return got


class SampleWorker:
    """A Ray actor (async): the task rebuilt from its spec, samples run on request."""

    def __init__(self, task_cls: Any, task_spec: dict[str, Any], key_version: int, max_concurrency: int,
                 retry: dict[str, Any], seed: int, input_policy: dict[str, Any], reader: Any, workers: int) -> None:
        from ..core import inputs

        # the task's class travels by reference (its module is imported in the worker), its spec by value
        self.task = task_cls.from_spec(task_spec)
        for model in vars(self.task).values():  # a model's API budget is shared by all workers
            limit = getattr(model, "max_concurrency", None)
            if isinstance(limit, int) and limit > 0:
                model.max_concurrency = max(1, math.ceil(limit / workers))
        self.folder = Path(tempfile.mkdtemp(prefix="vlmcheck-ray-"))
        self.store = WorkerStore(self.folder, reader)
        self.scheduler = Scheduler(max_concurrency, RetryPolicy.model_validate(retry), seed=seed)
        self.key_version = key_version
        self.policy = inputs.InputPolicy(allow_outside=input_policy["allow_outside"],
                                         max_file_bytes=input_policy["max_image_bytes"],
                                         budget=inputs.PixelBudget(input_policy["pixel_budget"]),
                                         file_keys=file_keys(key_version))

    async def run(self, sample_id: str, seq: int, payload: Any) -> dict[str, Any]:
        from ..core import inputs
        _SAMPLE.set(sample_id)
        inputs.set_policy(self.policy)
        # a session per sample (one scheduler for all): its counters are this sample's own
        session = Session(self.store, self.scheduler, key_version=self.key_version)
        outcome = await execute_sample(self.task, Sample(sample_id, payload, seq), session)
        outcome.update(self.store.take(sample_id))
        outcome["counts"] = (session.counters.hits, session.counters.calls)
        return outcome

    async def drain(self) -> dict[str, dict[str, list]]:
        """The calls (and artifacts) of samples still running, finished so far."""
        return {sid: self.store.take(sid) for sid in list(self.store.pending)}

    async def ping(self) -> int:
        return os.getpid()


class CacheReader:
    """A Ray actor on the driver's node: the run store's call cache and artifacts, read-only."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self.db = sqlite3.connect(f"file:{self.folder / 'store.sqlite'}?mode=ro", uri=True, check_same_thread=False)

    def get(self, key: str) -> Any:
        row = self.db.execute("SELECT response FROM calls WHERE key = ? AND status = 'ok'", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def artifact(self, rel: str) -> bytes | None:
        path = (self.folder / rel).resolve()
        if self.folder.resolve() not in path.parents or not path.is_file():
            return None
        return path.read_bytes()


# ----------------------------------------------------------------------------- the driver


def _write(store, got: dict[str, list]) -> None:
    for rel, data in got["artifacts"]:
        store.put_artifact_bytes(rel, data)
    for c in got["calls"]:
        store.put_call(c["key"], role=c["role"], model=c["model"], request=c["request"], response=c["response"],
                       attempts=c["attempts"], input_tokens=c.get("input_tokens", 0),
                       output_tokens=c.get("output_tokens", 0), duration_s=c.get("duration_s"))
    for e in got["errors"]:
        store.put_call_error(e["key"], role=e["role"], model=e["model"], request=e["request"],
                             error_type=e["error_type"], message=e["message"], attempts=e["attempts"])


async def run_samples_ray(task, todo: list, session: Session, options, already: int, total: int) -> None:
    if any(getattr(m, "batch", None) is not None for m in vars(task).values()):
        raise ExecutorError("a provider batch API (batch=1) gathers requests in one process: use the local executor")
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "logging_level": logging.WARNING}
        if options.ray_address:
            kwargs["address"] = options.ray_address
        else:
            kwargs["_node_ip_address"] = "127.0.0.1"
        try:
            ray.init(**kwargs)
        except Exception as exc:  # noqa: BLE001 - Ray's own message names the cause
            raise ExecutorError(f"could not start or join Ray ({' '.join(str(exc).split())[:300]})") from None
    store = session.store
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n_workers = options.workers or max(1, min(8, cpus))
        slots = max(1, math.ceil(options.max_concurrency / n_workers))
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        reader = ray.remote(CacheReader).options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False)
        ).remote(str(store.folder))
        policy = {"allow_outside": options.allow_outside, "max_image_bytes": options.max_image_bytes,
                  "pixel_budget": options.pixel_budget}
        # a CPU each, or a share where there are more workers than CPUs (API-bound workers mostly wait)
        cpus_each = min(1.0, cpus / n_workers)
        worker_cls = ray.remote(SampleWorker).options(num_cpus=cpus_each, num_gpus=options.gpus_per_worker,
                                                      max_concurrency=slots + 4)
        actors = [worker_cls.remote(type(task), task.spec(), session.key_version, slots,
                                    options.retry.model_dump(), options.seed, policy, reader, n_workers)
                  for _ in range(n_workers)]
        actors = await _started(actors, options)
        await _dispatch(ray, task, todo, session, options, actors, slots, already, total)
    finally:
        if started_here:
            ray.shutdown()


async def _started(actors: list, options, timeout: float = 300.0) -> list:
    """The actors that came up (each has loaded the task's models); one sentence when none could."""
    futs = {asyncio.wrap_future(a.ping.remote().future()): a for a in actors}
    done, pending = await asyncio.wait(list(futs), timeout=timeout)
    ok = [futs[f] for f in done if f.exception() is None]
    if not ok:
        why = next((f.exception() for f in done if f.exception() is not None), None)
        detail = f": {' '.join(str(why).split())[:300]}" if why else (
            f"; none started within {timeout:.0f} s - does the cluster have {options.gpus_per_worker:g} GPU(s) "
            "free per worker?")
        raise ExecutorError(f"no Ray worker could start{detail}")
    if len(ok) < len(actors):
        logging.getLogger("vlmcheck").warning("%d of %d Ray workers started; running on those", len(ok),
                                              len(actors))
    return ok


async def _dispatch(ray, task, todo, session, options, actors, slots, already, total) -> None:
    from ray.exceptions import RayActorError

    store = session.store
    queue = deque(todo)
    live = set(range(len(actors)))
    load = {i: 0 for i in live}
    inflight: dict[asyncio.Future, tuple[int, Any]] = {}
    progress = Progress(task.name, total, already, enabled=options.progress)

    def lose(i: int, why: str) -> None:
        if i in live:
            live.discard(i)
            back = [inflight.pop(f)[1] for f in [f for f, (j, _) in inflight.items() if j == i]]
            queue.extendleft(reversed(back))
            logging.getLogger("vlmcheck").warning("Ray worker %d lost (%s); %d of its samples go to the others",
                                                  i, why, len(back))

    with progress:
        next_drain = asyncio.get_running_loop().time() + DRAIN_EVERY_S
        while queue or inflight:
            for i in sorted(live, key=lambda k: load[k]):
                while queue and load[i] < slots:
                    s = queue.popleft()
                    fut = asyncio.wrap_future(actors[i].run.remote(s.id, s.seq, s.payload).future())
                    inflight[fut] = (i, s)
                    load[i] += 1
            if not inflight:
                if not live:
                    raise ExecutorError(f"every Ray worker was lost; {len(queue)} samples are not done - resume "
                                        "the run when the cluster is back")
                continue
            timeout = max(0.05, next_drain - asyncio.get_running_loop().time())
            done, _ = await asyncio.wait(list(inflight), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                if fut not in inflight:
                    continue
                i, s = inflight.pop(fut)
                load[i] -= 1
                try:
                    out = fut.result()
                except RayActorError as exc:
                    lose(i, type(exc).__name__)
                    queue.appendleft(s)
                    continue
                with store.transaction():  # the sample's calls, artifacts and journal row together
                    _write(store, out)
                    if out["status"] == "error":
                        store.put_sample_error(task.name, s.id, s.seq, out["error_type"], out["message"],
                                               out["partial"])
                    else:
                        store.put_sample(task.name, s.id, s.seq, out["result"])
                hits, calls = out["counts"]
                session.counters.hits += hits
                session.counters.calls += calls
                progress.advance(failed=out["status"] == "error")
            if asyncio.get_running_loop().time() >= next_drain:
                next_drain = asyncio.get_running_loop().time() + DRAIN_EVERY_S
                for i in list(live):
                    if load[i] == 0:
                        continue
                    try:
                        got = await asyncio.wait_for(asyncio.wrap_future(actors[i].drain.remote().future()), 30)
                    except (RayActorError, asyncio.TimeoutError) as exc:
                        lose(i, type(exc).__name__)
                        continue
                    with store.transaction():
                        for part in got.values():
                            _write(store, part)
