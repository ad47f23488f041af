"""Progress for anything that takes more than a few seconds: on a terminal a rich bar; elsewhere (SLURM logs, CI)
a plain line every ``every`` seconds (default 5, or ``VLMCHECK_PROGRESS_EVERY``) and one at the end, e.g.
``[genception] 120/500 (24%) 3.1/s failed 2 elapsed 0:00:39 ETA 0:02:03`` (rich's own non-terminal mode prints only
at the end, leaving a batch job's log silent for hours).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    def __init__(self, label: str, total: int, done: int = 0, enabled: bool = True, every: float | None = None,
                 stream=None, plain: bool = False, quiet_if_fast: bool = False) -> None:
        """``plain``: lines even on a terminal (for work inside a run, whose bar is already live);
        ``quiet_if_fast``: no closing line unless a periodic one was printed."""
        self.label, self.total, self.done, self.failed, self.enabled = label, total, done, 0, enabled
        self.stream = stream or sys.stderr
        self.every = every if every is not None else float(os.environ.get("VLMCHECK_PROGRESS_EVERY", "5"))
        self._start_done, self._t0, self._bar = done, time.monotonic(), None
        self._last, self._quiet_if_fast, self._printed = self._t0, quiet_if_fast, False
        if enabled and not plain and getattr(self.stream, "isatty", lambda: False)():
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
        elif self.enabled and self.done > self._start_done and (self._printed or not self._quiet_if_fast):
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
        self._printed = True
        print(self.line(), file=self.stream, flush=True)


def track(items: Iterable[T], label: str, enabled: bool = True) -> Iterator[T]:
    items = list(items)
    with Progress(label, len(items), enabled=enabled) as p:
        for item in items:
            yield item
            p.advance()


@contextlib.contextmanager
def loading(label: str, after: float = 2.0, stream=None) -> Iterator[None]:
    """``with loading("hf:llava-..."):`` - says what is loading when it takes more than ``after`` seconds (a
    line when it starts to take long, one when it is ready), and nothing for a quick load."""
    stream, t0, state, said = stream or sys.stderr, time.monotonic(), "failed", threading.Event()

    def say() -> None:
        said.set()
        print(f"[load] {label} ...", file=stream, flush=True)

    timer = threading.Timer(after, say)
    timer.daemon = True
    timer.start()
    try:
        yield
        state = "ready"
    finally:
        timer.cancel()
        if said.is_set():
            print(f"[load] {label} {state} in {time.monotonic() - t0:.1f} s", file=stream, flush=True)
