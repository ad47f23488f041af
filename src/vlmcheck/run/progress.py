"""Progress for anything that takes more than a few seconds.

On a terminal: a rich bar with counts, failures, elapsed time and ETA.  Elsewhere
(SLURM logs, CI, ``nohup``): a plain line every ``every`` seconds (default 5, or
``VLMCHECK_PROGRESS_EVERY``) and one at the end, e.g.::

    [genception] 120/500 (24%) 3.1/s failed 2 elapsed 0:00:39 ETA 0:02:03

Rich's own non-terminal mode redraws nothing and prints only at the end, which
leaves a batch job's log silent for hours: that is why the plain lines are
written here.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    def __init__(self, label: str, total: int, done: int = 0, enabled: bool = True, every: float | None = None,
                 stream=None) -> None:
        self.label, self.total, self.done, self.failed = label, total, done, 0
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.every = every if every is not None else float(os.environ.get("VLMCHECK_PROGRESS_EVERY", "5"))
        self._start_done = done
        self._t0 = time.monotonic()
        self._last = self._t0
        self._bar = None
        if enabled and getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("failed {task.fields[failed]}"), TimeElapsedColumn(),
                                     TextColumn("ETA"), TimeRemainingColumn(), transient=False,
                                     console=Console(file=self.stream))
            self._id = self._bar.add_task(label, total=total, completed=done, failed=0)

    def __enter__(self) -> "Progress":
        if self._bar:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar:
            self._bar.stop()
        elif self.enabled and self.done > self._start_done:
            self._line()

    def advance(self, n: int = 1, failed: bool = False) -> None:
        self.done += n
        self.failed += int(failed)
        if self._bar:
            self._bar.update(self._id, advance=n, failed=self.failed)
        elif self.enabled and time.monotonic() - self._last >= self.every:
            self._line()

    def line(self) -> str:
        elapsed = time.monotonic() - self._t0
        new = self.done - self._start_done
        rate = new / elapsed if elapsed > 0 else 0.0
        eta = _clock((self.total - self.done) / rate) if rate > 0 else "?"
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        return (f"[{self.label}] {self.done}/{self.total}{pct} {rate:.1f}/s failed {self.failed} "
                f"elapsed {_clock(elapsed)} ETA {eta}")

    def _line(self) -> None:
        self._last = time.monotonic()
        print(self.line(), file=self.stream, flush=True)


def track(items: Iterable[T], label: str, total: int | None = None, enabled: bool = True) -> Iterator[T]:
    """Iterate over ``items`` with progress (see the module docstring)."""
    items = list(items) if total is None else items
    with Progress(label, total if total is not None else len(items), enabled=enabled) as p:  # type: ignore[arg-type]
        for item in items:
            yield item
            p.advance()
