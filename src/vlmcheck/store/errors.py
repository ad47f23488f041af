"""The run store's one error: :class:`StoreError`, one sentence that names the file and what to do; and the
check of a store's file before SQLite opens it (:func:`check_store_file`)."""

from __future__ import annotations

import errno
from pathlib import Path

_SQLITE_HEADER = b"SQLite format 3\x00"
_DISK_FULL = (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC))


class StoreError(RuntimeError):
    """A run store that cannot be opened, read or written; the message says which file and what to do."""


def store_error(path: Path, exc: BaseException) -> StoreError:
    """One sentence for an SQLite or OS error on the store at ``path``."""
    text = str(exc).lower()
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL or "disk is full" in text or "file too large" in text:
        return StoreError(f"{path}: the disk is full; free some space and continue with `vlmcheck resume "
                          f"{path.parent}` (finished samples are kept)")
    if "disk i/o error" in text:  # SQLITE_IOERR: a write the disk refused (a file size limit, a failing disk)
        return StoreError(f"{path}: the disk refused a write (disk I/O error: is it full or failing?); free space or "
                          f"check the disk, then continue with `vlmcheck resume {path.parent}`")
    if (isinstance(exc, PermissionError) or "readonly" in text or "read-only" in text
            or "unable to open" in text or "permission" in text):
        return StoreError(f"{path}: cannot write there (read-only folder or file); fix the permissions or copy the "
                          "run folder somewhere writable")
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StoreError(f"{path} is damaged ({reason}); move it aside and start the run again with --overwrite")


def check_store_file(path: Path, existing: bool) -> None:
    """Refuse an empty or non-SQLite file before SQLite sees it: SQLite would treat a 0-byte file as a new,
    empty store, and a resume would silently redo every call."""
    if path.is_dir():
        raise StoreError(f"{path} is a folder, not a run store; move it aside and start the run again with --overwrite")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_SQLITE_HEADER))
    except FileNotFoundError:
        if existing:
            if not path.parent.exists():  # mistyped: missing, not some other folder
                raise StoreError(f"{path.parent}: no such folder") from None
            raise StoreError(f"{path.parent} is not a run folder (no {path.name})") from None
        return
    except OSError as exc:
        raise store_error(path, exc) from None
    if not head:
        raise StoreError(f"{path} is empty (0 bytes), so the run's journal is lost; start the run again "
                         "with --overwrite")
    if head != _SQLITE_HEADER:
        raise StoreError(f"{path} is not an SQLite database (overwritten or damaged); move it aside and "
                         "start the run again with --overwrite")
