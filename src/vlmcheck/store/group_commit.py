"""When a run's writes commit: each at once, or, under load, several in one commit (group commit), for the rows
every sample writes (its calls' answers and its journal row); every other write of the store commits at once."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
import threading
import time
from typing import Any

from .errors import StoreError, store_error

#: A run's store commits the answers and samples written within this many seconds of its last commit together:
#: a sample's rows touch five pages, which samples sharing a commit share, and each commit costs the loop's thread
#: CPU (docs/benchmarks.md, "API throughput").  50 ms is the latency of the fastest APIs, so what a SIGKILL loses
#: in the open group is at most about what it loses in flight anyway.
GROUP_COMMIT_S = 0.05


def _running_loop() -> Any:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class GroupCommit:
    """Group commit for a store with ``_db``, ``_lock``, ``_exec`` and ``path`` (RunStore).  A group opens only on
    a running event loop; a thread of its own commits it ``group_commit`` seconds after it opened (wall time),
    unless a write that finds it overdue, :meth:`commit` or the store's close does first."""

    _db: sqlite3.Connection
    _lock: Any
    path: Any
    _exec: Any
    _group: Any = None  # True while a group of writes is open
    _group_opened = 0.0
    _last_commit = 0.0
    _failed: StoreError | None = None  # a group's commit that failed in its timer, raised at the next write
    _due: float | None = None
    # a thread, not a timer of the event loop, which would wait as long as the loop is busy
    _committer: threading.Thread | None = None
    _closing = False
    # when the committer's wait ends (inf: it waits to be told); only a write that opens a group due earlier
    # wakes it: after a commit it looks again one ``group_commit`` later unwoken, so a fast run's loop does
    # not pay a futex wake under the GIL at every group
    _wake_at = math.inf

    def _init_group_commit(self, seconds: float) -> None:
        self.group_commit = seconds
        self._wake = threading.Condition(threading.Lock())

    def _start_committer(self) -> None:
        if self._committer is None or not self._committer.is_alive():
            self._committer = threading.Thread(target=self._commit_when_due, name="vlmcheck-group-commit",
                                               daemon=True)
            self._committer.start()

    def _commit_when_due(self) -> None:
        linger = False  # just committed: the next group, if one opens soon, is looked for without being told
        while True:
            with self._wake:  # never held while taking the store's lock: no lock-order cycle with _write
                while not self._closing and (self._due is None or self._due > time.monotonic()):
                    if self._due is not None:
                        self._wake_at = self._due
                    elif linger:
                        linger = False
                        self._wake_at = time.monotonic() + self.group_commit
                    else:
                        self._wake_at = math.inf
                    self._wake.wait(None if self._wake_at == math.inf
                                    else max(0.0, self._wake_at - time.monotonic()))
                if self._closing:
                    return
                self._due = None
            try:
                self.commit()
            except StoreError as exc:  # raised by the run's next write or by close, never lost in the loop's log
                self._failed = exc
            linger = True

    def _stop_committer(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        if self._committer is not None and self._committer is not threading.current_thread():
            self._committer.join(timeout=5)

    def _raise_failed_commit(self) -> None:
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed

    def _write(self, sql: str, args: tuple) -> None:
        """One answer's or sample's row, committed at once unless it comes within ``group_commit`` seconds of the
        last commit (the class docstring); a commit that fails in the timer (a full disk) is raised by the next
        write or by close, and a resume runs the group's samples again."""
        if not self.group_commit:
            self._exec(sql, args)
            return
        with self._lock:
            self._raise_failed_commit()
            now = time.monotonic()
            if self._group is None:
                if self._db.in_transaction:  # inside an explicit transaction (transaction()): part of it
                    self._exec(sql, args)
                    return
                loop = _running_loop()
                if loop is None or now - self._last_commit >= self.group_commit:
                    self._exec(sql, args)
                    self._last_commit = now
                    return
                self._exec("BEGIN IMMEDIATE")
                self._group = True
                self._group_opened = now
                self._start_committer()
                with self._wake:
                    self._due = now + self.group_commit
                    if self._due < self._wake_at:  # else its wait ends in time, or it looks before it next waits
                        self._wake.notify()
            self._exec(sql, args)
            if now - self._group_opened >= self.group_commit:  # the loop did not turn in time
                self.commit()

    def commit(self) -> None:
        """Commit the open group of writes now (nothing to do when none is open)."""
        with self._lock:
            if self._group is None:
                return
            self._group = None
            try:
                self._db.execute("COMMIT")
            except (sqlite3.DatabaseError, OSError) as exc:  # a full disk, a failing one
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise store_error(self.path, exc) from None
            finally:
                self._last_commit = time.monotonic()
