"""A run folder: its lock (one writer), its marker, and what ``--overwrite`` and ``merge`` may delete in it (the
run's own files, never a user's)."""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager, suppress
from pathlib import Path

from .._version import __version__
from ..core.files import broken_link, write_text_atomic
from ..store.db import DB_NAME


class RunFolderExists(RuntimeError):
    pass


class RunFolderInUse(RunFolderExists):
    """Another live process holds the run folder's lock."""


LOCK_NAME = ".vlmcheck.lock"
MARKER = ".vlmcheck-run"  # written into every run folder when its store is made
#: what a run folder holds: ``--overwrite`` and ``merge`` delete these and nothing else
RUN_FILES = frozenset({LOCK_NAME, MARKER, DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}-journal",
                       "results.json", "samples.jsonl", "report.html", "report_files", "artifacts"})


@contextmanager
def lock_file(path: Path, what: Path):
    """Hold an exclusive ``flock`` on ``path`` while the block runs (the kernel releases it when the process dies,
    ``kill -9`` included); a second process gets :class:`RunFolderInUse` naming the holder's PID and ``what``."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; runs are not guarded there
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # named by the folder the user gave, not by the lock file they never saw
        if exc.errno is None:
            raise
        raise type(exc)(exc.errno, exc.strerror, str(what)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise RunFolderInUse(f"run folder in use by PID {holder}: {what}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def folder_lock(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    with lock_file(folder / LOCK_NAME, folder):
        yield


def check_folder(folder: str | os.PathLike) -> Path:
    """``folder`` as a Path; one sentence where no run can use it: an empty path, a broken link, a file."""
    if not str(folder).strip():
        raise RunFolderExists("the run folder is empty (an unset variable?); give a folder")
    folder = Path(folder)
    if broken_link(folder):
        raise RunFolderExists(broken_link(folder))
    if folder.exists() and not folder.is_dir():
        raise RunFolderExists(f"{folder} is a file, not a run folder")
    return folder


def mark_run_folder(folder: Path) -> None:
    """Say that ``folder`` holds a vlmcheck run (what ``--overwrite`` may empty)."""
    marker = folder / MARKER
    if not marker.exists():
        write_text_atomic(marker, json.dumps({"vlmcheck": __version__}) + "\n")


def check_replaceable(folder: Path) -> None:
    """Refuse (one sentence) a folder that holds anything but a vlmcheck run's own files: ``--overwrite`` and
    ``merge`` never delete a user's files."""
    others = sorted(p.name for p in folder.iterdir()
                    if p.name not in RUN_FILES and not (p.name.startswith(".") and p.name.endswith(".tmp")))
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise RunFolderExists(f"{folder} holds files that are not a vlmcheck run's ({shown}); --overwrite deletes "
                              "only a run folder: choose another folder")


def _empty_run_folder(folder: Path) -> None:
    """Remove a run's own files from ``folder`` (all but the lock we hold), after :func:`check_replaceable`."""
    check_replaceable(folder)
    for child in folder.iterdir():
        if child.name == LOCK_NAME:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def leave_nothing(folder: Path, existed: bool) -> None:
    """A run refused before its store was made leaves no run folder behind (its lock file, and the folder it
    made): the same command, corrected, starts afresh without --resume or --overwrite."""
    with suppress(OSError):  # another process made something there meanwhile: it is left as it is
        if folder.is_dir() and {p.name for p in folder.iterdir()} == {LOCK_NAME}:
            (folder / LOCK_NAME).unlink(missing_ok=True)
            if not existed:
                folder.rmdir()
