"""What runs inside Ray (``--executor ray``; docs/usage.md, "Ray"): :class:`SampleWorker`, which runs whole
samples of the task rebuilt from its spec, and the two small actors on the driver's node (:class:`CacheReader`,
:class:`RequestTally`)."""

from __future__ import annotations

import contextvars
import dataclasses
import json
import math
import os
import shutil
import sqlite3
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

from ..core import inputs
from ..core.images import encode_image, image_hash
from ..store.artifacts import artifact_path
from .calls import FILE_KEYS_SINCE, Session
from .scheduler import RetryPolicy, Scheduler
from .options import input_policy as run_input_policy
from .task import Sample, execute_sample

_SAMPLE: contextvars.ContextVar[str | None] = contextvars.ContextVar("vlmcheck_ray_sample", default=None)
_CALL_SQL = "SELECT response FROM calls WHERE key = ? AND status = 'ok'"


def open_same_store(db_path: str, sessions: Any) -> sqlite3.Connection | None:
    """``store.sqlite`` opened read-only where this node sees it and it is the driver's store (the same
    sessions record), else None."""
    if not Path(db_path).is_file():
        return None
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)
        row = db.execute("SELECT value FROM meta WHERE key = 'sessions'").fetchone()
    except sqlite3.Error:
        return None
    if row is not None and _answer(row) == sessions:
        return db
    db.close()
    return None


def _answer(row: tuple | None) -> Any:
    """A stored answer, or None: none stored, or one that does not parse (a miss, as in RunStore.get_call)."""
    try:
        return json.loads(row[0])
    except (TypeError, ValueError):  # TypeError: no row
        return None


def _paths_under(obj: Any, root: str) -> list[str]:
    """The strings in ``obj`` (a sample's payload: dicts, lists, dataset items) naming a file under ``root``."""
    if isinstance(obj, str):
        return [obj] if obj.startswith(root) else []
    if isinstance(obj, dict):
        obj = obj.values()
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # ImageItem and other records
        obj = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    elif not isinstance(obj, (list, tuple)):
        return []
    return [path for v in obj for path in _paths_under(v, root)]


async def fetch_missing(payload: Any, root: str, fetch) -> int:
    """Write each file under ``root`` that ``payload`` names and this node lacks, from ``fetch(path)`` (the
    driver's bytes, or None); how many were fetched."""
    n = 0
    for path in dict.fromkeys(_paths_under(payload, root.rstrip(os.sep) + os.sep)):
        target = Path(path)
        if target.exists():
            continue
        data = await fetch(path)
        if data is None:
            continue  # the sample fails on its own, naming the file
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        n += 1
    return n


class WorkerStore:
    """The part of :class:`~vlmcheck.store.db.RunStore` a sample uses, inside a Ray worker: the run's cache
    (read in place, or through the reader actors), new calls and artifacts held until the driver takes them."""

    def __init__(self, folder: Path, reader: Any, db: sqlite3.Connection | None = None) -> None:
        self.folder = folder
        self.reader = reader
        self.db = db
        self.calls: dict[str, Any] = {}
        self.pending: dict[str, dict[str, list]] = {}  # sample id -> {"calls", "errors", "artifacts"}

    def _bucket(self) -> dict[str, list]:
        return self.pending.setdefault(_SAMPLE.get() or "", {"calls": [], "errors": [], "artifacts": []})

    def get_call(self, key: str) -> Any:
        return self.calls.get(key)

    async def aget_call(self, key: str) -> Any:
        if key in self.calls:
            return self.calls[key]
        hit = (_answer(self.db.execute(_CALL_SQL, (key,)).fetchone()) if self.db is not None
               else await self.reader.get.remote(key))
        if hit is not None:
            self.calls[key] = hit
        return hit

    def put_call(self, key: str, **row: Any) -> None:
        row.pop("request_text", None)  # the driver's store encodes the request itself
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
                 retry: dict[str, Any], seed: int, input_policy: dict[str, Any], reader: Any, workers: int,
                 store: dict[str, Any], tally: Any, inputs_root: str) -> None:
        # the task's class travels by reference (its module is imported in the worker), its spec by value
        self.task = task_cls.from_spec(task_spec)
        for model in vars(self.task).values():  # a model's API budget is shared by all workers
            limit = getattr(model, "max_concurrency", None)
            if isinstance(limit, int) and limit > 0:
                model.max_concurrency = max(1, math.ceil(limit / workers))
        self.folder = Path(tempfile.mkdtemp(prefix="vlmcheck-ray-"))
        # removed by cleanup() (the driver asks before it ends the actor), else when the actor exits normally
        self._remove_folder = weakref.finalize(self, shutil.rmtree, str(self.folder), True)
        self.store = WorkerStore(self.folder, reader, open_same_store(store["db"], store["sessions"]))
        self.scheduler = Scheduler(max_concurrency, RetryPolicy.model_validate(retry), seed=seed)
        # fire and forget: the tally hears of a request before the server does
        self.scheduler.on_attempt = lambda attempt: tally.add.remote(attempt > 1)
        self.key_version = key_version
        self.reader, self.inputs_root = reader, inputs_root
        self.policy = run_input_policy(input_policy, file_keys=key_version >= FILE_KEYS_SINCE)

    async def run(self, sample_id: str, seq: int, payload: Any) -> dict[str, Any]:
        _SAMPLE.set(sample_id)
        inputs.active_policy.set(self.policy)
        await fetch_missing(payload, self.inputs_root, lambda path: self.reader.input_file.remote(path))
        # a session per sample (one scheduler for all): its counters are this sample's own
        session = Session(self.store, self.scheduler, key_version=self.key_version)
        outcome = await execute_sample(self.task, Sample(sample_id, payload, seq), session)
        outcome.update(self.store.take(sample_id))
        c = session.counters
        outcome["counts"] = {"hits": c.hits, "calls": c.calls, "failures": c.failures}
        return outcome

    async def drain(self) -> dict[str, dict[str, list]]:
        """The calls (and artifacts) of samples still running, finished so far."""
        return {sid: self.store.take(sid) for sid in list(self.store.pending)}

    async def cleanup(self) -> bool:
        """Remove this worker's temp folder (its artifacts were taken with each sample): the driver asks before
        it ends the actor, since one ended by ``ray.kill`` runs no exit handler."""
        if self.store.db is not None:
            self.store.db.close()
            self.store.db = None
        self._remove_folder()
        return not self.folder.exists()

    async def ping(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "reads": "in place" if self.store.db is not None else "reader actors"}


class CacheReader:
    """A Ray actor on the driver's node, run with several threads (``max_concurrency``): the run store's call
    cache and artifacts, read-only, one SQLite connection per thread."""

    def __init__(self, folder: str, inputs_root: str) -> None:
        self.folder = Path(folder)
        self.inputs_root = Path(inputs_root).resolve()
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = sqlite3.connect(f"file:{self.folder / 'store.sqlite'}?mode=ro", uri=True)
        return db

    def get(self, key: str) -> Any:
        return _answer(self._db().execute(_CALL_SQL, (key,)).fetchone())

    def artifact(self, rel: str) -> bytes | None:
        return _read_under(self.folder.resolve(), self.folder / rel)

    def input_file(self, path: str) -> bytes | None:
        """A dataset file from the driver's ``hfds:`` cache (nothing outside it)."""
        return _read_under(self.inputs_root, Path(path))


def _read_under(root: Path, path: Path) -> bytes | None:
    """The bytes of a file below ``root`` (resolved: no link leads out), else None."""
    target = path.resolve()
    return target.read_bytes() if root in target.parents and target.is_file() else None


class RequestTally:
    """A Ray actor (async, one loop: no lock) on the driver's node: the requests the workers started."""

    def __init__(self) -> None:
        self.counts = {"first": 0, "retries": 0}

    async def add(self, retry: bool) -> None:
        self.counts["retries" if retry else "first"] += 1

    async def total(self) -> dict[str, int]:
        return dict(self.counts)
