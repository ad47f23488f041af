"""The run store: one SQLite database (WAL mode) per run folder: the call cache, the sample journal, artifacts
(store/artifacts.py), the run spec and provider batches in flight.  Every statement that writes a call or a sample
is here, next to the schema, so the store's guarantees can be checked in one file: first writer wins, and a run's
answers and samples are committed at once or, under load, in groups (docs/architecture.md, "Invariants";
:meth:`RunStore._write`).  WAL with ``synchronous=NORMAL`` is durable against process crashes (not power loss).
Everything stored is redacted JSON text, never pickle; a store that cannot be used raises :class:`StoreError`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import operator
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from ..core.printable import json_text_encoder, printable, utf8_text
from ..core.secrets import redact, redacted_json
from . import artifacts
from .artifacts import Artifacts
from .errors import StoreError, check_store_file, store_error  # noqa: F401  (StoreError, store_error re-exported)
from .group_commit import GROUP_COMMIT_S, GroupCommit  # noqa: F401  (re-exported)

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    response TEXT,
    error_type TEXT,
    error_message TEXT,
    attempts INTEGER NOT NULL DEFAULT 1,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    duration_s REAL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS samples (
    task TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'error')),
    result TEXT,
    error_type TEXT,
    error_message TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (task, sample_id)
);
CREATE INDEX IF NOT EXISTS samples_order ON samples(task, seq, sample_id);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'ended')),
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_items (
    batch_id TEXT NOT NULL,
    key TEXT NOT NULL,
    role TEXT NOT NULL,
    request TEXT NOT NULL,
    PRIMARY KEY (batch_id, key)
);
"""

DB_NAME = "store.sqlite"
log = logging.getLogger(__name__)
_DAMAGED = object()  # a stored value that is not JSON


def _uri(path: Path, read_only: bool, immutable: bool = False) -> str:
    from urllib.request import pathname2url

    return f"file:{pathname2url(str(path.absolute()))}" + (
        "?mode=ro&immutable=1" if immutable else "?mode=ro" if read_only else "")


_compact_json = json_text_encoder(sort_keys=True, separators=(",", ":"))


_dumps = functools.partial(redacted_json, dumps=_compact_json)


def _request_dumps(request: Any, text: str | None) -> str:
    """``_dumps(request)``, from ``text`` when that is ``request``'s compact sorted JSON already: the same
    encoder, so the same text, unless it holds a lone surrogate (then encoded again, escaped, as _dumps does)."""
    if text is None or not utf8_text(text):
        return _dumps(request)
    return redacted_json(request, lambda obj: text if obj is request else _compact_json(obj))


#: the columns that name a row of a table that :meth:`RunStore._upsert` writes
_ROW_KEYS = {"calls": "key", "samples": "task, sample_id"}


@functools.cache
def _upsert_sql(table: str, columns: tuple[str, ...], kept: int) -> str:
    return (f"INSERT INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT({_ROW_KEYS[table]}) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in columns[kept:]) + f" WHERE {table}.status = 'error'")


class RunStore(GroupCommit, Artifacts, contextlib.AbstractContextManager):
    """Thread-safe handle on a run folder's store."""

    def __init__(self, folder: str | os.PathLike, *, existing: bool = False, read_only: bool = False,
                 group_commit: float = 0.0, untouched: bool = False) -> None:
        """Open (or create) the store in ``folder``; ``existing=True`` requires one that holds a run;
        ``read_only=True`` never writes; ``group_commit``: seconds, :meth:`_write`; ``untouched=True``
        (``--dry-run``) makes no ``-wal``/``-shm`` file beside it where there is no WAL file."""
        self._init_group_commit(group_commit)
        self.folder = Path(folder)
        self.path = self.folder / DB_NAME
        self.read_only = read_only
        existing = existing or read_only
        self._lock = threading.RLock()
        self._damaged_keys: set[str] = set()
        if not read_only and not existing:  # a store that must exist: a mistyped folder is not made
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise store_error(self.path, exc) from None
        check_store_file(self.path, existing)
        try:
            # immutable where nothing is in a WAL file and nothing may (--dry-run) or can (a read-only folder,
            # where SQLite could not make the -shm file and refuses to open it) be made beside it
            self.immutable = immutable = read_only and not Path(f"{self.path}-wal").exists() and (
                untouched or not os.access(self.folder, os.W_OK))
            self._db = sqlite3.connect(_uri(self.path, read_only, immutable), uri=True, isolation_level=None,
                                       check_same_thread=False, timeout=30)
        except sqlite3.Error as exc:
            raise store_error(self.path, exc) from None
        try:
            if not read_only:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if existing and not {"calls", "samples", "meta"} <= tables:
                raise StoreError(f"{self.path} was never fully set up (the first run stopped before it began); "
                                 "start the run again with --overwrite")
            if existing and self._db.execute("SELECT 1 FROM meta WHERE key = 'spec'").fetchone() is None:
                raise StoreError(f"{self.path} holds no run spec (the first run stopped before it began); "
                                 "start the run again with --overwrite")
            if not read_only:
                self._db.executescript(SCHEMA + artifacts.SCHEMA)
        except StoreError:
            self._db.close()
            raise
        except (sqlite3.Error, OSError) as exc:
            self._db.close()
            raise store_error(self.path, exc) from None

    def close(self) -> None:
        """Commit the open group of writes (if any) and close; a commit that failed is raised after closing."""
        self._stop_committer()  # outside the lock: the committer may be waiting for it
        with self._lock:
            try:
                self.commit()
            finally:
                self._db.close()
            self._raise_failed_commit()  # the last group's commit failed in its timer

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[sqlite3.Connection]:
        """The connection under the lock; its errors (damaged pages, a full disk, read-only) as StoreError."""
        with self._lock:
            try:
                yield self._db
            except (sqlite3.DatabaseError, OSError) as exc:
                raise store_error(self.path, exc) from None

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._guarded() as db:
            return db.execute(sql, args)

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._guarded() as db:
            return db.execute(sql, args).fetchall()

    def _json(self, sql: str, args: tuple) -> tuple[bool, Any]:
        """(found, value) of the first row's JSON text; value :data:`_DAMAGED` where it is not JSON."""
        rows = self._rows(sql, args)
        try:
            return bool(rows), json.loads(rows[0][0]) if rows else None
        except (TypeError, ValueError):
            return True, _DAMAGED

    def set_meta(self, key: str, value: Any) -> None:
        self._exec("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, _dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        found, value = self._json("SELECT value FROM meta WHERE key = ?", (key,))
        if value is _DAMAGED:
            what = "run spec" if key == "spec" else f"run's {key!r} record"
            raise StoreError(f"{self.path}: the stored {what} is damaged (not JSON), so the run cannot be rebuilt "
                             "from it; start the run again with --overwrite (cached answers are lost) or in a new "
                             "folder")
        return value if found else default

    def get_call(self, key: str) -> dict[str, Any] | None:
        """The cached response for ``key``, or None (errors are never served).  A response that does not parse
        is a miss: logged once, and marked failed so that the new answer replaces it."""
        _, value = self._json("SELECT response FROM calls WHERE key = ? AND status = 'ok'", (key,))
        if value is not _DAMAGED:
            return value
        if key not in self._damaged_keys:
            self._damaged_keys.add(key)
            log.warning("%s: the cached answer of call %s is damaged (not JSON); calling the model again",
                        self.path, key[:16])
        if not self.read_only:
            self._exec("UPDATE calls SET status = 'error', error_type = 'damaged', error_message = "
                       "'the stored answer was not JSON' WHERE key = ? AND status = 'ok'", (key,))
        return None

    def _upsert(self, table: str, row: dict[str, Any], kept: int) -> None:
        """Insert ``row``, or write it over a failed one (first writer wins): every column after its first
        ``kept`` (which name the call or sample)."""
        self._write(_upsert_sql(table, tuple(row), kept), tuple(row.values()))

    def put_call(self, key: str, *, role: str, model: str, request: Any, response: Any, attempts: int,
                 input_tokens: int = 0, output_tokens: int = 0, duration_s: float | None = None,
                 request_text: str | None = None) -> None:
        """Store an answer; ``request_text``: ``request`` already as compact sorted JSON (its call key's,
        run/calls.py), kept as it is when it is valid UTF-8 instead of encoded again."""
        self._upsert("calls", {
            "key": key, "role": role, "model": model, "request": _request_dumps(request, request_text),
            "status": "ok", "response": _dumps(response), "attempts": attempts, "input_tokens": input_tokens,
            "output_tokens": output_tokens, "duration_s": duration_s, "error_type": None, "error_message": None,
            "created_at": time.time()}, kept=4)

    def put_call_error(self, key: str, *, role: str, model: str, request: Any, error_type: str,
                       message: str, attempts: int) -> None:
        self._upsert("calls", {
            "key": key, "role": role, "model": model, "request": _dumps(request), "status": "error",
            "error_type": error_type, "error_message": printable(redact(message)), "attempts": attempts,
            "created_at": time.time()}, kept=4)

    def call_stats(self) -> dict[str, Any]:
        keys = ("ok", "error", "attempts", "input_tokens", "output_tokens")
        rows = self._rows("SELECT model, TOTAL(status = 'ok'), TOTAL(status = 'error'), TOTAL(attempts), "
                          "TOTAL(input_tokens), TOTAL(output_tokens) FROM calls GROUP BY model")
        return {model: dict(zip(keys, map(int, sums))) for model, *sums in rows}

    def sample_status(self, task: str) -> dict[str, str]:
        return dict(self._rows("SELECT sample_id, status FROM samples WHERE task = ?", (task,)))

    def put_sample(self, task: str, sample_id: str, seq: int, result: Any) -> None:
        self._upsert("samples", {"task": task, "sample_id": sample_id, "seq": seq, "status": "done",
                                 "result": _dumps(result), "error_type": None, "error_message": None,
                                 "updated_at": time.time()}, kept=3)

    def put_sample_error(self, task: str, sample_id: str, seq: int, error_type: str, message: str,
                         partial: Any = None) -> None:
        self._upsert("samples", {"task": task, "sample_id": sample_id, "seq": seq, "status": "error",
                                 "result": _dumps(partial) if partial is not None else None,
                                 "error_type": error_type, "error_message": printable(redact(message)),
                                 "updated_at": time.time()}, kept=3)

    def clear_failed(self, task: str | None = None) -> int:
        """Forget failed samples (and failed calls) so that they run again."""
        where, args = ("", ()) if task is None else (" AND task = ?", (task,))
        with self._lock:
            n = self._exec("DELETE FROM samples WHERE status = 'error'" + where, args).rowcount
            self._exec("DELETE FROM calls WHERE status = 'error'")
        return n

    def iter_samples(self, task: str | None = None) -> Iterator[dict[str, Any]]:
        where, args = ("", ()) if task is None else (" WHERE task = ?", (task,))
        sql = f"SELECT task, sample_id, seq, status, result, error_type, error_message FROM samples{where} " \
              "ORDER BY task, seq, sample_id"
        damaged = []
        for t, sid, seq, status, result, etype, emsg in self._stream(sql, args):
            rec: dict[str, Any] = {"task": t, "sample_id": sid, "seq": seq, "status": status}
            if result is not None:
                try:
                    rec["result"] = json.loads(result)
                except (TypeError, ValueError):  # a damaged row: the sample failed, and retry-failed runs it again
                    status, etype, emsg = "error", "damaged_record", ("its stored result was damaged (not JSON); "
                                                                      "`vlmcheck retry-failed` runs it again")
                    rec["status"] = status
                    damaged.append((etype, emsg, t, sid))
            if status == "error":
                rec["error"] = {"type": etype, "message": emsg}
            yield rec
        if damaged and not self.read_only:  # marked once the read is over, never under an open cursor
            for args in damaged:
                self._exec("UPDATE samples SET status = 'error', result = NULL, error_type = ?, "
                           "error_message = ? WHERE task = ? AND sample_id = ?", args)

    def _stream(self, sql: str, args: tuple = (), chunk: int = 2000) -> Iterator[tuple]:
        """The rows of ``sql`` a chunk at a time, the lock held per chunk (never a million rows in memory)."""
        cur = self._exec(sql, args)
        try:
            while True:
                with self._guarded():
                    rows = cur.fetchmany(chunk)
                if not rows:
                    return
                yield from rows
        finally:
            cur.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything written inside lands together or not at all (the Ray executor's sample)."""
        with self._lock:
            self.commit()
            self._exec("BEGIN IMMEDIATE")
            try:
                yield
                self._exec("COMMIT")
            except BaseException:
                with contextlib.suppress(StoreError):  # the error that stopped it is the one raised
                    self._exec("ROLLBACK")
                raise

    def journal_batch(self, batch_id: str, provider: str, model: str, items: list[tuple[str, str, Any]]) -> None:
        """Record a provider batch and its (key, role, request) items before it is polled, to re-attach to."""
        with self.transaction(), self._guarded() as db:
            db.execute("INSERT OR REPLACE INTO batches(batch_id, provider, model, status, created_at) "
                       "VALUES (?, ?, ?, 'open', ?)", (batch_id, provider, model, time.time()))
            db.executemany("INSERT OR REPLACE INTO batch_items(batch_id, key, role, request) VALUES (?, ?, ?, ?)",
                           [(batch_id, k, role, _dumps(req)) for k, role, req in items])

    def open_batches(self, model: str) -> list[tuple[str, list[tuple[str, str, Any]]]]:
        """The model's journaled batches that have not been read back: (batch id, [(key, role, request)])."""
        rows = self._rows("SELECT b.batch_id, i.key, i.role, i.request FROM batches b JOIN batch_items i "
                          "ON i.batch_id = b.batch_id WHERE b.model = ? AND b.status = 'open' "
                          "ORDER BY b.created_at, b.batch_id", (model,))
        return [(bid, [(k, role, json.loads(req)) for _, k, role, req in items])
                for bid, items in itertools.groupby(rows, key=operator.itemgetter(0))]

    def open_batch_keys(self, model: str) -> set[str]:
        """The keys of the model's open journaled batches (requests not read)."""
        return {k for (k,) in self._rows("SELECT i.key FROM batch_items i JOIN batches b ON b.batch_id = i.batch_id "
                                         "WHERE b.model = ? AND b.status = 'open'", (model,))}

    def end_batch(self, batch_id: str) -> None:
        self._exec("UPDATE batches SET status = 'ended' WHERE batch_id = ?", (batch_id,))

    def absorb(self, other: "RunStore") -> None:
        """Union ``other``'s calls, samples and artifacts into this store (``vlmcheck merge``), idempotently: a row
        already here is kept, but a finished sample replaces a failed one."""
        with self._lock:
            self.commit()
            self._exec("ATTACH DATABASE ? AS other", (_uri(other.path, True, getattr(other, "immutable", False)),))
            try:
                with self.transaction():
                    self._exec("INSERT OR IGNORE INTO calls SELECT * FROM other.calls")
                    self._exec("INSERT INTO samples SELECT * FROM other.samples WHERE true "
                               "ON CONFLICT(task, sample_id) DO UPDATE SET status = excluded.status, "
                               "result = excluded.result, error_type = excluded.error_type, "
                               "error_message = excluded.error_message, updated_at = excluded.updated_at "
                               "WHERE samples.status = 'error' AND excluded.status = 'done'")
                    self._exec("INSERT OR IGNORE INTO artifacts SELECT * FROM other.artifacts")
            finally:
                self._exec("DETACH DATABASE other")
        for (rel,) in other._rows("SELECT path FROM artifacts"):
            if (other.folder / rel).is_file():
                self._write_file(rel, (other.folder / rel).read_bytes)
