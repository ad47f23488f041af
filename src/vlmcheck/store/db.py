"""The run store: one SQLite database (WAL mode) per run folder.

Why this module is long: every SQL statement of a run is here, next to the schema it reads and writes, so the
store's guarantees (first writer wins, one transaction per sample, key versions) can be checked in one file.

Tables
------
``calls``    content-addressed cache of model calls.  A row with status ``ok``
             is a cache hit; a row with status ``error`` records the last
             failure (type, message, attempts) and is never served as an answer.
``samples``  the per-sample journal: ``done`` with a JSON result, or ``error``
             with type and message.  A resumed run skips ``done`` and ``error``
             samples; ``retry-failed`` clears the ``error`` ones.
``artifacts`` images written content-addressed under ``artifacts/``.
``meta``     the run spec and other run-level facts.

Writes are first-writer-wins: a stored answer or finished sample is never
replaced, and an error never overwrites an answer (several workers may share
a cache).  Every write commits at once (autocommit), except in a run's store
(``group_commit``, see :meth:`RunStore._write`): there the answers and samples
that finish within 50 ms of the last commit are committed together, at most
50 ms later (``GROUP_COMMIT_S``).  A process killed with SIGKILL loses the calls in
flight and at most the last 50 ms of answers (a resume asks for those again).  WAL with
``synchronous=NORMAL`` is durable against process crashes (not power loss).
Everything stored is JSON text - no pickle - and passes through
:func:`vlmcheck.core.secrets.redact_obj`.

A store that cannot be used - empty, truncated, not SQLite, damaged, in a
read-only folder, on a full disk - raises :class:`StoreError`, one sentence
that names the file and what to do; the CLI prints it and exits 2.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from .._lazy import lazy_module

Image = lazy_module("PIL.Image")  # Pillow on first use (vlmcheck/_lazy.py)

from ..core.files import json_text_encoder, printable, utf8_text
from ..core.images import TRANSPORT_PNG_LEVEL, encode_image, image_hash, transport_bytes
from ..core.secrets import redact, redacted_json
from .errors import StoreError, store_error  # noqa: F401  (re-exported: where callers have found them)
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
CREATE TABLE IF NOT EXISTS artifacts (
    sha256 TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    width INTEGER,
    height INTEGER,
    created_at REAL NOT NULL
);
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
_SQLITE_HEADER = b"SQLite format 3\x00"


def _uri(path: Path, read_only: bool, immutable: bool = False) -> str:
    from urllib.request import pathname2url

    return f"file:{pathname2url(str(path.absolute()))}" + (
        "?mode=ro&immutable=1" if immutable else "?mode=ro" if read_only else "")


def artifact_path(digest: str) -> str:
    """Where the artifact with this pixel hash lives, relative to the run folder (content-addressed)."""
    return f"artifacts/{digest[:2]}/{digest}.png"


_compact_json = json_text_encoder(sort_keys=True, separators=(",", ":"))


def _dumps(obj: Any) -> str:
    return redacted_json(obj, _compact_json)


def _request_dumps(request: Any, text: str | None) -> str:
    """``_dumps(request)``, from ``text`` when that is ``request``'s compact sorted JSON already: the same
    encoder, so the same text, unless it holds a lone surrogate (then encoded again, escaped, as _dumps does)."""
    if text is None or not utf8_text(text):
        return _dumps(request)
    return redacted_json(request, lambda obj: text if obj is request else _compact_json(obj))


class RunStore(GroupCommit):
    """Thread-safe handle on a run folder's store."""

    def __init__(self, folder: str | os.PathLike, *, existing: bool = False, read_only: bool = False,
                 group_commit: float = 0.0, untouched: bool = False) -> None:
        """Open (or create) the store in ``folder``; ``existing=True`` (resume, report) requires a store
        that holds a run; ``read_only=True`` (merge's shards) never writes to it; ``group_commit`` (seconds;
        the runner's store: :data:`GROUP_COMMIT_S`) lets answers and samples written on a running event loop
        within that long of the last commit wait for one commit together (:meth:`_write`); ``untouched=True``
        (``--dry-run``) reads it read-only without making a file beside it: no ``-wal``/``-shm`` where there is
        no WAL file (then nothing is in one), read-only through the existing ones where there is."""
        self._init_group_commit(group_commit)
        self.folder = Path(folder)
        self.artifact_dir = self.folder / "artifacts"
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
        self._check_file(existing)
        try:
            # a URI, so that a shard is opened (and attached by absorb) read-only
            # ... and immutable where nothing is in a WAL file and either nothing may be made beside it (--dry-run)
            # or nothing can be (a read-only folder: SQLite could not make the -shm file and refuses to open it)
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
                self._db.executescript(SCHEMA)
        except StoreError:
            self._db.close()
            raise
        except (sqlite3.Error, OSError) as exc:
            self._db.close()
            raise store_error(self.path, exc) from None

    def _check_file(self, existing: bool) -> None:
        """Refuse an empty or non-SQLite file before SQLite sees it: SQLite would treat a 0-byte file as a new,
        empty store, and a resume would silently redo every call."""
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a folder, not a run store; move it aside and start the run again "
                             "with --overwrite")
        try:
            with open(self.path, "rb") as fh:
                head = fh.read(len(_SQLITE_HEADER))
        except FileNotFoundError:
            if existing:
                if not self.folder.exists():  # mistyped: missing, not some other folder
                    raise StoreError(f"{self.folder}: no such folder") from None
                raise StoreError(f"{self.folder} is not a run folder (no {DB_NAME})") from None
            return
        except OSError as exc:
            raise store_error(self.path, exc) from None
        if not head:
            raise StoreError(f"{self.path} is empty (0 bytes), so the run's journal is lost; start the run again "
                             "with --overwrite")
        if head != _SQLITE_HEADER:
            raise StoreError(f"{self.path} is not an SQLite database (overwritten or damaged); move it aside and "
                             "start the run again with --overwrite")

    def close(self) -> None:
        """Commit the open group of writes (if any) and close; a commit that failed is raised after closing."""
        self._stop_committer()  # outside the lock: the committer may be waiting for it
        with self._lock:
            try:
                self.commit()
            finally:
                self._db.close()
            self._raise_failed_commit()  # the last group's commit failed in its timer

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            try:
                return self._db.execute(sql, args)
            except (sqlite3.DatabaseError, OSError) as exc:  # damaged pages, full disk, read-only
                raise store_error(self.path, exc) from None

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except (sqlite3.DatabaseError, OSError) as exc:
                raise store_error(self.path, exc) from None

    def _row(self, sql: str, args: tuple = ()) -> tuple | None:
        rows = self._rows(sql, args)
        return rows[0] if rows else None

    # ------------------------------------------------------------------ meta
    def set_meta(self, key: str, value: Any) -> None:
        self._exec("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, _dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self._row("SELECT value FROM meta WHERE key = ?", (key,))
        if not row:
            return default
        try:
            return json.loads(row[0])
        except (TypeError, ValueError):
            what = "run spec" if key == "spec" else f"run's {key!r} record"
            raise StoreError(f"{self.path}: the stored {what} is damaged (not JSON), so the run cannot be rebuilt "
                             "from it; start the run again with --overwrite (cached answers are lost) or in a new "
                             "folder") from None

    # ----------------------------------------------------------------- calls
    def get_call(self, key: str) -> dict[str, Any] | None:
        """The cached response for ``key``, or None (errors are never served).  A response that does not parse
        is a miss: logged once, and marked failed so that the new answer replaces it."""
        row = self._row("SELECT response FROM calls WHERE key = ? AND status = 'ok'", (key,))
        if not row:
            return None
        try:
            return json.loads(row[0])
        except (TypeError, ValueError):
            if key not in self._damaged_keys:
                self._damaged_keys.add(key)
                log.warning("%s: the cached answer of call %s is damaged (not JSON); calling the model again",
                            self.path, key[:16])
            if not self.read_only:
                self._exec("UPDATE calls SET status = 'error', error_type = 'damaged', error_message = "
                           "'the stored answer was not JSON' WHERE key = ? AND status = 'ok'", (key,))
            return None

    def put_call(
        self,
        key: str,
        *,
        role: str,
        model: str,
        request: Any,
        response: Any,
        attempts: int,
        input_tokens: int = 0,
        output_tokens: int = 0,
        duration_s: float | None = None,
        request_text: str | None = None,
    ) -> None:
        """Store an answer; ``request_text``: ``request`` already as compact sorted JSON (its call key's,
        run/calls.py), kept as it is when it is valid UTF-8 instead of encoded again."""
        # First writer wins: a stored answer is never replaced (an earlier error record is).
        self._write(
            "INSERT INTO calls(key, role, model, request, status, response, attempts, "
            "input_tokens, output_tokens, duration_s, created_at) VALUES (?, ?, ?, ?, 'ok', ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET status = 'ok', response = excluded.response, "
            "attempts = excluded.attempts, input_tokens = excluded.input_tokens, "
            "output_tokens = excluded.output_tokens, duration_s = excluded.duration_s, error_type = NULL, "
            "error_message = NULL, created_at = excluded.created_at WHERE calls.status = 'error'",
            (key, role, model, _request_dumps(request, request_text), _dumps(response), attempts, input_tokens,
             output_tokens, duration_s, time.time()),
        )

    def put_call_error(self, key: str, *, role: str, model: str, request: Any, error_type: str,
                       message: str, attempts: int) -> None:
        # An error never overwrites a stored answer; it only updates an earlier error.
        self._write(
            "INSERT INTO calls(key, role, model, request, status, error_type, error_message, "
            "attempts, created_at) VALUES (?, ?, ?, ?, 'error', ?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET error_type = excluded.error_type, "
            "error_message = excluded.error_message, attempts = excluded.attempts, "
            "created_at = excluded.created_at WHERE calls.status = 'error'",
            (key, role, model, _dumps(request), error_type, printable(redact(message)), attempts, time.time()),
        )

    def call_stats(self) -> dict[str, Any]:
        rows = self._rows(
            "SELECT model, status, COUNT(*), SUM(attempts), SUM(input_tokens), SUM(output_tokens) "
            "FROM calls GROUP BY model, status"
        )
        out: dict[str, Any] = {}
        for model, status, n, attempts, tin, tout in rows:
            entry = out.setdefault(model, {"ok": 0, "error": 0, "attempts": 0, "input_tokens": 0, "output_tokens": 0})
            entry[status] = n
            entry["attempts"] += attempts or 0
            entry["input_tokens"] += tin or 0
            entry["output_tokens"] += tout or 0
        return out

    # --------------------------------------------------------------- samples
    def sample_status(self, task: str) -> dict[str, str]:
        rows = self._rows("SELECT sample_id, status FROM samples WHERE task = ?", (task,))
        return dict(rows)

    def put_sample(self, task: str, sample_id: str, seq: int, result: Any) -> None:
        # First writer wins: a finished sample is never replaced (an earlier failure is).
        self._write(
            "INSERT INTO samples(task, sample_id, seq, status, result, updated_at) VALUES (?, ?, ?, 'done', ?, ?) "
            "ON CONFLICT(task, sample_id) DO UPDATE SET status = 'done', result = excluded.result, "
            "error_type = NULL, error_message = NULL, updated_at = excluded.updated_at "
            "WHERE samples.status = 'error'",
            (task, sample_id, seq, _dumps(result), time.time()),
        )

    def put_sample_error(self, task: str, sample_id: str, seq: int, error_type: str, message: str,
                         partial: Any = None) -> None:
        self._write(
            "INSERT INTO samples(task, sample_id, seq, status, result, error_type, error_message, "
            "updated_at) VALUES (?, ?, ?, 'error', ?, ?, ?, ?) "
            "ON CONFLICT(task, sample_id) DO UPDATE SET result = excluded.result, "
            "error_type = excluded.error_type, error_message = excluded.error_message, "
            "updated_at = excluded.updated_at WHERE samples.status = 'error'",
            (task, sample_id, seq, _dumps(partial) if partial is not None else None, error_type,
             printable(redact(message)), time.time()),
        )

    def clear_failed(self, task: str | None = None) -> int:
        """Forget failed samples (and failed calls) so that they run again."""
        with self._lock:
            if task is None:
                n = self._exec("DELETE FROM samples WHERE status = 'error'").rowcount
            else:
                n = self._exec("DELETE FROM samples WHERE status = 'error' AND task = ?", (task,)).rowcount
            self._exec("DELETE FROM calls WHERE status = 'error'")
        return n

    def iter_samples(self, task: str | None = None) -> Iterator[dict[str, Any]]:
        sql = "SELECT task, sample_id, seq, status, result, error_type, error_message FROM samples"
        args: tuple = ()
        if task is not None:
            sql += " WHERE task = ?"
            args = (task,)
        sql += " ORDER BY task, seq, sample_id"
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
        """The rows of ``sql`` a chunk at a time (a cursor, not ``fetchall``): a million samples are never in
        memory at once.  The lock is held per chunk, so other threads' writes go on between chunks."""
        with self._lock:
            try:
                cur = self._db.execute(sql, args)
            except (sqlite3.DatabaseError, OSError) as exc:
                raise store_error(self.path, exc) from None
        try:
            while True:
                with self._lock:
                    try:
                        rows = cur.fetchmany(chunk)
                    except (sqlite3.DatabaseError, OSError) as exc:
                        raise store_error(self.path, exc) from None
                if not rows:
                    return
                yield from rows
        finally:
            cur.close()

    # ------------------------------------------------------------- artifacts
    def put_image(self, img: Image.Image) -> str:
        """Save ``img`` losslessly under ``artifacts/``; return its path relative to the run folder."""
        digest = image_hash(img)
        rel = Path(artifact_path(digest))
        target = self.folder / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            # PNG level 1, as sent to a model: the bytes are then the ones a request with this image sends
            # (transport_bytes keeps them), so a perturbed image is encoded once, not once here and once to send
            data = (transport_bytes(img, digest, "PNG") if img.mode == "RGB" else
                    encode_image(img, "PNG", compress_level=TRANSPORT_PNG_LEVEL))
            tmp.write_bytes(data)
            os.replace(tmp, target)  # atomic: a killed run never leaves half a PNG
        self._exec(
            "INSERT OR IGNORE INTO artifacts(sha256, path, width, height, created_at) VALUES (?, ?, ?, ?, ?)",
            (digest, rel.as_posix(), img.width, img.height, time.time()),
        )
        return rel.as_posix()

    def image_path(self, rel: str) -> Path:
        return self.folder / rel

    def put_artifact_bytes(self, rel: str, data: bytes) -> None:
        """Save an artifact another process made (a Ray worker's PNG), at its content-addressed path."""
        digest = Path(rel).stem
        if rel != artifact_path(digest) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"not an artifact path: {rel!r}")
        target = self.folder / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        with Image.open(target) as img:
            size = img.size
        self._exec(
            "INSERT OR IGNORE INTO artifacts(sha256, path, width, height, created_at) VALUES (?, ?, ?, ?, ?)",
            (digest, rel, size[0], size[1], time.time()),
        )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything written inside lands together or not at all (the Ray executor commits a sample's
        calls and its journal row in one transaction)."""
        with self._lock:
            self.commit()
            self._exec("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._exec("ROLLBACK")
                raise
            self._exec("COMMIT")

    # ----------------------------------------------------------------- merge
    # --------------------------------------------------------------- batches
    def journal_batch(self, batch_id: str, provider: str, model: str, items: list[tuple[str, str, Any]]) -> None:
        """Record a submitted provider batch and its items (key, role, request) in one transaction, before
        it is polled: a run killed while it is in flight re-attaches to it (run/batch.py)."""
        with self._lock:
            self.commit()
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.execute("INSERT OR REPLACE INTO batches(batch_id, provider, model, status, created_at) "
                                     "VALUES (?, ?, ?, 'open', ?)", (batch_id, provider, model, time.time()))
                    self._db.executemany("INSERT OR REPLACE INTO batch_items(batch_id, key, role, request) "
                                         "VALUES (?, ?, ?, ?)",
                                         [(batch_id, k, role, _dumps(req)) for k, role, req in items])
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            except (sqlite3.DatabaseError, OSError) as exc:
                raise store_error(self.path, exc) from None

    def open_batches(self, model: str) -> list[tuple[str, list[tuple[str, str, Any]]]]:
        """The model's journaled batches that have not been read back: (batch id, [(key, role, request)])."""
        out = []
        for (bid,) in self._rows("SELECT batch_id FROM batches WHERE model = ? AND status = 'open' "
                                 "ORDER BY created_at", (model,)):
            items = [(k, role, json.loads(req)) for k, role, req in
                     self._rows("SELECT key, role, request FROM batch_items WHERE batch_id = ?", (bid,))]
            out.append((bid, items))
        return out

    def open_batch_keys(self, model: str) -> set[str]:
        """The keys of the model's open journaled batches (requests not read)."""
        return {k for (k,) in self._rows("SELECT i.key FROM batch_items i JOIN batches b ON b.batch_id = i.batch_id "
                                         "WHERE b.model = ? AND b.status = 'open'", (model,))}

    def end_batch(self, batch_id: str) -> None:
        self._exec("UPDATE batches SET status = 'ended' WHERE batch_id = ?", (batch_id,))

    def absorb(self, other: "RunStore") -> dict[str, int]:
        """Union ``other``'s calls, samples and artifacts into this store (``vlmcheck merge``).

        Calls and artifacts are content-addressed (the key, the pixel hash): a row already here is kept.  A
        finished sample wins over a failed one, as in :meth:`put_sample`; two finished copies of one sample
        keep the first.  Idempotent: absorbing the same store again changes nothing."""
        import shutil

        counts = {}
        with self._lock:
            self.commit()
            try:
                self._db.execute("ATTACH DATABASE ? AS other",
                                 (_uri(other.path, True, getattr(other, "immutable", False)),))
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    counts["calls"] = self._db.execute(
                        "INSERT OR IGNORE INTO calls SELECT * FROM other.calls").rowcount
                    counts["samples"] = self._db.execute(
                        "INSERT INTO samples SELECT * FROM other.samples WHERE true "
                        "ON CONFLICT(task, sample_id) DO UPDATE SET status = excluded.status, "
                        "result = excluded.result, error_type = excluded.error_type, "
                        "error_message = excluded.error_message, updated_at = excluded.updated_at "
                        "WHERE samples.status = 'error' AND excluded.status = 'done'").rowcount
                    counts["artifacts"] = self._db.execute(
                        "INSERT OR IGNORE INTO artifacts SELECT * FROM other.artifacts").rowcount
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                finally:
                    self._db.execute("DETACH DATABASE other")
            except (sqlite3.DatabaseError, OSError) as exc:
                raise store_error(self.path, exc) from None
        for (rel,) in other._rows("SELECT path FROM artifacts"):
            src, dest = other.folder / rel, self.folder / rel
            if src.is_file() and not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp = dest.with_suffix(f".tmp{os.getpid()}")
                shutil.copyfile(src, tmp)
                os.replace(tmp, dest)
        return counts
