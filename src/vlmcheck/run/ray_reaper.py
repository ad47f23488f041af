"""No Ray process outlives the driver that started it, also after ``kill -9`` (docs/usage.md, "Ray"): once its
stdin closes, this watcher ends every process that still holds a file of that Ray session open.  Hand-written: no
library watches processes by what they hold open; ``/proc`` is Linux's, elsewhere the watcher does nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path


def session_processes(session_dir: str) -> list[int]:
    """The processes with a file under ``session_dir`` open (this one excluded)."""
    root = os.path.realpath(session_dir) + os.sep
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with suppress(OSError):  # gone, or another user's
                if any(_target(fd).startswith(root) for fd in (entry / "fd").iterdir()):
                    found.append(int(entry.name))
    return found


def _target(fd: Path) -> str:
    try:
        return os.readlink(fd)
    except OSError:  # closed meanwhile
        return ""


def _stop(pids: list[int], sig: int) -> None:
    for pid in pids:
        with suppress(OSError):  # gone already
            os.kill(pid, sig)


def watch(session_dir: str, grace_s: float = 2.0) -> None:
    sys.stdin.read()  # returns when the driver's end of the pipe closes
    time.sleep(grace_s)
    _stop(session_processes(session_dir), signal.SIGTERM)
    time.sleep(grace_s)
    _stop(session_processes(session_dir), signal.SIGKILL)


def start(session_dir: str | None) -> subprocess.Popen | None:
    """The watcher for ``session_dir``, or None where it cannot watch (no ``/proc``, no session dir)."""
    if not session_dir or not Path("/proc/self/fd").is_dir():
        return None
    return subprocess.Popen([sys.executable, "-m", "vlmcheck.run.ray_reaper", session_dir], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


if __name__ == "__main__":
    watch(sys.argv[1])
