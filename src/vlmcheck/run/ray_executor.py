"""The Ray executor's driver (``--executor ray``; docs/usage.md, "Ray", says how it hands out samples, replaces
lost workers and grows): samples run in Ray actors (:mod:`.ray_worker`); this process stays the only writer."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections import deque
from contextlib import suppress
from typing import Any

from ..core.data import hfds_cache_root
from ..core.progress import Progress
from . import ray_reaper
from .calls import Session
from .options import POLICY_FIELDS
from .ray_worker import CacheReader, RequestTally, SampleWorker
from .outputs import record

DRAIN_EVERY_S = 2.0
START_TIMEOUT_S = 300.0
log = logging.getLogger("vlmcheck")


class ExecutorError(RuntimeError):
    """The Ray executor cannot go on (Ray missing, no worker left); one sentence for the user."""


def _write(store, got: dict[str, list]) -> None:
    for rel, data in got["artifacts"]:
        store.put_artifact_bytes(rel, data)
    for c in got["calls"]:  # as the worker's store was given them (ray_worker.WorkerStore)
        store.put_call(**c)
    for e in got["errors"]:
        store.put_call_error(**e)


def _said(exc: BaseException) -> str:
    """An exception's message on one line, cut short: Ray's run over many."""
    return " ".join(str(exc).split())[:300]


def _session_dir(ray) -> str | None:
    node = getattr(getattr(ray, "_private", None), "worker", None)
    node = getattr(getattr(node, "_global_node", None), "get_session_dir_path", None)
    return node() if node is not None else None


async def run_samples_ray(task, todo: list, session: Session, options, already: int, total: int) -> dict[str, Any]:
    """Run ``todo`` on Ray actors; returns what ``results.json`` records of the executor."""
    if any(getattr(m, "batch", None) is not None for m in vars(task).values()):
        raise ExecutorError("a provider batch API (batch=1) gathers requests in one process: use the local executor")
    # Ray kept on the loopback interface on machines where it would look for another interface
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise ExecutorError("--executor ray needs Ray: pip install 'vlmcheck[ray]'") from None
    started_here = not ray.is_initialized()  # then this process starts Ray, and shuts it down
    if started_here:
        # logging ERROR: Ray's own warnings (e.g. that token authentication is on) are noise on a user's console
        where = {"address": options.ray_address} if options.ray_address else {"_node_ip_address": "127.0.0.1"}
        try:
            ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR, **where)
        except Exception as exc:  # noqa: BLE001 - Ray's own message names the cause
            raise ExecutorError(f"could not start or join Ray ({_said(exc)})") from None
    reaper = ray_reaper.start(_session_dir(ray)) if started_here and not options.ray_address else None
    pool = None
    try:
        pool = _Pool(ray, task, session, options)
        await pool.wait_first()
        await _dispatch(pool, task, todo, session, options, already, total)
        return await pool.summary()
    finally:
        if pool is not None:
            pool.close()
        if started_here:
            ray.shutdown()
        if reaper is not None:
            reaper.stdin.close()  # the watcher ends what Ray left, and itself


#: how long the end of a run waits for its workers to remove their temp folders
CLEANUP_S = 5.0


class _Pool:
    """The sample workers: started, lost, replaced, grown as nodes join."""

    why = "every worker failed at start"  # the last start failure's message, once there is one

    def __init__(self, ray, task, session: Session, options) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.ray, self.options = ray, options
        store = session.store
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.auto = not options.workers
        self.target = options.workers or max(1, min(8, cpus))
        self.slots = max(1, math.ceil(options.max_concurrency / self.target))
        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        # reads for workers on nodes without the run folder: several threads, one connection each
        inputs_root = str(hfds_cache_root())
        reader = ray.remote(CacheReader).options(num_cpus=0, max_concurrency=8,
                                                 scheduling_strategy=here).remote(str(store.folder), inputs_root)
        self.tally = ray.remote(RequestTally).options(num_cpus=0, scheduling_strategy=here).remote()
        self.helpers = [reader, self.tally]
        policy = options.model_dump(include=set(POLICY_FIELDS))
        # a CPU each, or a share where there are more workers than CPUs (API-bound workers mostly wait)
        worker_cls = ray.remote(SampleWorker).options(num_cpus=min(1.0, cpus / self.target),
                                                      num_gpus=options.gpus_per_worker, max_concurrency=self.slots + 4)
        args = (type(task), task.spec(), session.key_version, self.slots, options.retry.model_dump(), options.seed,
                policy, reader, self.target, {"db": str(store.path), "sessions": store.get_meta("sessions")},
                self.tally, inputs_root)
        self._new = lambda: worker_cls.remote(*args)
        self.actors: dict[int, Any] = {}  # live workers by number
        self.load: dict[int, int] = {}
        self.starting: dict[asyncio.Future, tuple[int, Any, float | None]] = {}  # ping -> (number, actor, lost at)
        self.count = 0
        self.failed_starts = 0  # in a row
        self.lost = 0
        self.replace_s: list[float] = []
        self.reads: dict[str, int] = {}
        for _ in range(self.target):
            self.add()

    def add(self, lost_at: float | None = None) -> None:
        actor = self._new()
        fut = asyncio.wrap_future(actor.ping.remote().future())
        self.starting[fut] = (self.count, actor, lost_at)
        self.count += 1

    def started(self, fut: asyncio.Future) -> None:
        """A ping answered (the worker is up, its models loaded) or failed (it could not start)."""
        i, actor, lost_at = self.starting.pop(fut)
        if fut.exception() is not None:
            self.failed_starts += 1
            self.why = _said(fut.exception())
            log.warning("a Ray worker could not start (%s)", self.why)
            if self.failed_starts < 3 and lost_at is not None:
                self.add(lost_at)
            return
        self.failed_starts = 0
        self.actors[i], self.load[i] = actor, 0
        how = fut.result()["reads"]
        self.reads[how] = self.reads.get(how, 0) + 1
        if lost_at is not None:
            self.replace_s.append(round(time.monotonic() - lost_at, 2))
            log.warning("Ray worker %d replaced the lost one after %.1f s; %d of %d up", i, self.replace_s[-1],
                        len(self.actors), self.target)

    def lose(self, i: int) -> None:
        if self.actors.pop(i, None) is not None:
            self.load.pop(i, None)
            self.lost += 1
            if self.failed_starts < 3:
                self.add(time.monotonic())

    def close(self) -> None:
        """End this run's actors (in a process that stays joined to Ray they would otherwise outlive the run),
        each asked first to remove its temp folder, for at most :data:`CLEANUP_S` in all."""
        refs = []
        for actor in self.actors.values():
            with suppress(Exception):  # already gone
                refs.append(actor.cleanup.remote())
        if refs:
            with suppress(Exception):  # a worker lost meanwhile: its node's temp folder is the OS's
                self.ray.wait(refs, num_returns=len(refs), timeout=CLEANUP_S)
        for actor in [*self.actors.values(), *(a for _, a, _ in self.starting.values()), *self.helpers]:
            with suppress(Exception):  # already gone
                self.ray.kill(actor)

    def grow(self) -> None:
        """Without ``--workers``: more workers as nodes join (up to 8)."""
        want = max(1, min(8, int(self.ray.cluster_resources().get("CPU", 1)))) if self.auto else 0
        while self.target < want:
            self.target += 1
            self.add()

    async def wait_first(self) -> None:
        """Until one worker is up; one sentence when none can start."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.actors:
            if not self.starting:
                raise ExecutorError(f"no Ray worker could start: {self.why}")
            done, _ = await asyncio.wait(list(self.starting), timeout=max(0.0, deadline - time.monotonic()),
                                         return_when=asyncio.FIRST_COMPLETED)
            if not done:
                raise ExecutorError(f"no Ray worker started within {START_TIMEOUT_S:.0f} s - does the cluster have "
                                    f"{self.options.gpus_per_worker:g} GPU(s) free per worker?")
            for fut in done:
                self.started(fut)

    async def summary(self) -> dict[str, Any]:
        requests = await asyncio.wrap_future(self.tally.total.remote().future())
        return {"executor": {"kind": "ray", "workers": self.target, "lost": self.lost,
                             "replaced_after_s": self.replace_s, "cache_reads": self.reads},
                "requests": requests}


async def _dispatch(pool: _Pool, task, todo, session, options, already, total) -> None:
    from ray.exceptions import RayActorError

    store = session.store
    queue = deque(todo)
    inflight: dict[asyncio.Future, tuple[int, Any]] = {}
    progress = Progress(task.name, total, already, enabled=options.progress)
    loop = asyncio.get_running_loop()

    def lose(i: int, why: str) -> None:
        if i in pool.actors:
            pool.lose(i)
            back = [inflight.pop(f)[1] for f in [f for f, (j, _) in inflight.items() if j == i]]
            queue.extendleft(reversed(back))
            log.warning("Ray worker %d lost (%s); %d of its samples go back to the queue, a new worker is asked for",
                        i, why, len(back))

    with progress:
        next_drain = loop.time() + DRAIN_EVERY_S
        while queue or inflight:
            for i in sorted(pool.actors, key=lambda k: pool.load[k]):
                while queue and pool.load[i] < pool.slots:
                    s = queue.popleft()
                    fut = asyncio.wrap_future(pool.actors[i].run.remote(s.id, s.seq, s.payload).future())
                    inflight[fut] = (i, s)
                    pool.load[i] += 1
            if not inflight and not pool.actors and not pool.starting:
                raise ExecutorError(f"every Ray worker was lost and none could be started again; {len(queue)} "
                                    "samples are not done - resume the run when the cluster is back")
            timeout = max(0.05, next_drain - loop.time())
            done, _ = await asyncio.wait(list(inflight) + list(pool.starting), timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                if fut in pool.starting:
                    pool.started(fut)
                    continue
                if fut not in inflight:
                    continue
                i, s = inflight.pop(fut)
                if i in pool.load:
                    pool.load[i] -= 1
                try:
                    out = fut.result()
                except RayActorError as exc:
                    lose(i, type(exc).__name__)
                    queue.appendleft(s)
                    continue
                with store.transaction():  # the sample's calls, artifacts and journal row together
                    _write(store, out)
                    record(store, task.name, s, out)
                for what, n in out["counts"].items():
                    setattr(session.counters, what, getattr(session.counters, what) + n)
                progress.advance(failed=out["status"] == "error")
            if loop.time() >= next_drain:
                next_drain = loop.time() + DRAIN_EVERY_S
                pool.grow()
                for i in list(pool.actors):
                    if not pool.load.get(i):
                        continue
                    try:
                        got = await asyncio.wait_for(asyncio.wrap_future(pool.actors[i].drain.remote().future()), 30)
                    except (RayActorError, asyncio.TimeoutError) as exc:
                        lose(i, type(exc).__name__)
                        continue
                    with store.transaction():
                        for part in got.values():
                            _write(store, part)
