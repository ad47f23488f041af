"""The run store's one error: :class:`StoreError`, one sentence that names the file and what to do."""

from __future__ import annotations

import errno
from pathlib import Path

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
