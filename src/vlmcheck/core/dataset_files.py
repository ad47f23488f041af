"""One rule for every file a dataset reader opens, text as images (docs/usage.md "Limits on dataset files"): a
regular file (:func:`vlmcheck.core.files.stat_regular`, checked again after opening), inside the dataset the user
named unless the run allows outside paths (:func:`vlmcheck.core.inputs.confine`), within a size cap where it is
read whole; inside a file, bounded fields, JSON nesting, rows and images per item (:data:`ENV`).

A run that asked for its first N samples (``--limit N``) reads the first N rows of a streamed file
(:func:`first_rows`), and more only where those rows give fewer than N samples (:func:`read_samples`).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, TypeVar

from .files import InputFileError, open_regular, read_upto, stat_regular

MB = 1024 * 1024


class DatasetFileError(InputFileError):
    """A dataset file that breaks the rule: one sentence naming the file."""


#: limit -> (environment variable, default, unit); the variable's value is in the unit (MB for sizes)
ENV = {
    "text_bytes": ("VLMCHECK_MAX_TEXT_MB", 1024, MB),
    "field_bytes": ("VLMCHECK_MAX_FIELD_MB", 64, MB),
    "json_depth": ("VLMCHECK_MAX_JSON_DEPTH", 64, 1),
    "rows": ("VLMCHECK_MAX_ROWS", 10_000_000, 1),
    "images_per_item": ("VLMCHECK_MAX_IMAGES_PER_ITEM", 64, 1),
}


@dataclass(frozen=True)
class Limits:
    text_bytes: int
    field_bytes: int
    json_depth: int
    rows: int
    images_per_item: int


def limits() -> Limits:
    """The limits now (each read from its environment variable, else its default)."""
    values = {}
    for name, (var, default, unit) in ENV.items():
        raw = os.environ.get(var, "").strip()
        try:
            value = float(raw) if raw else default
        except ValueError:
            raise DatasetFileError(f"{var}={raw!r}: not a number") from None
        if value <= 0:
            raise DatasetFileError(f"{var}={raw!r}: must be above 0")
        values[name] = int(value * unit)
    return Limits(**values)


def _size(n: int) -> str:
    return f"{n / MB:g} MB" if n >= MB else f"{n} bytes"


def check_file(path: str | os.PathLike, root: str | os.PathLike | None = None, what: str = "dataset file",
               max_bytes: int | None = None) -> None:
    """A :class:`DatasetFileError` unless ``path`` is a regular file inside ``root`` (unless the run allows
    outside paths) no larger than ``max_bytes`` (None: no size cap, for a file streamed a row at a time)."""
    from . import inputs
    from .images import BadImageError

    st = stat_regular(path, f"a {what}", DatasetFileError, missing=f"no such {what}")
    if root is not None:
        try:
            policy = inputs.active_policy.get()
            inputs.confine(path, root, policy.allow_outside, policy.dirs)
        except BadImageError as exc:
            raise DatasetFileError(str(exc).replace("read images outside it", f"read a {what} outside it")) from None
    if max_bytes is not None and st.st_size > max_bytes:
        var = ENV["text_bytes"][0]
        raise DatasetFileError(f"{path}: {st.st_size} bytes exceeds the {_size(max_bytes)} limit on a {what} read "
                               f"whole (raise it with {var}=MB)")


def open_file(path: str | os.PathLike, root: str | os.PathLike | None = None, what: str = "dataset file",
              max_bytes: int | None = None) -> BinaryIO:
    """``path`` opened for reading in binary, under :func:`check_file`'s rule (a stream the caller closes)."""
    check_file(path, root, what, max_bytes)
    fd, fst = open_regular(path, f"a {what}", DatasetFileError)
    try:
        if max_bytes is not None and fst.st_size > max_bytes:  # grown since the check
            raise DatasetFileError(f"{path}: {fst.st_size} bytes exceeds the {_size(max_bytes)} limit on a {what}")
        if hasattr(os, "set_blocking"):  # not on Windows before Python 3.12
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, root: str | os.PathLike | None = None, what: str = "dataset file",
               max_bytes: int | None = None) -> bytes:
    """The bytes of ``path`` under the rule, read whole within ``max_bytes`` (default: the ``text_bytes`` limit);
    a file that grows past the cap while read is refused too."""
    cap = limits().text_bytes if max_bytes is None else max_bytes
    with open_file(path, root, what, cap) as fh:
        data = read_upto(fh.fileno(), os.fstat(fh.fileno()).st_size, cap)
    if len(data) > cap:
        raise DatasetFileError(f"{path}: more than the {_size(cap)} limit on a {what}")
    return data


def read_text(path: str | os.PathLike, root: str | os.PathLike | None = None, what: str = "dataset file") -> str:
    """The UTF-8 text of ``path`` under the rule (a leading byte-order mark accepted)."""
    data = read_bytes(path, root, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetFileError(f"{path}: not UTF-8 text (byte {exc.start}); save the {what} as UTF-8") from None


def parse_json(text: str | bytes, label: str) -> Any:
    """``json.loads(text)`` nested no deeper than the ``json_depth`` limit, whether the parser's recursion stops
    it or the walk after it (so a value kept never sends a later walk past Python's recursion limit); else one
    sentence naming ``label``."""
    depth = limits().json_depth
    try:
        data = json.loads(text)
        deep = json_depth(data, depth) > depth
    except RecursionError:
        deep = True
    if deep:
        raise DatasetFileError(f"{label}: JSON nested deeper than the {depth} levels a dataset file may hold "
                               f"(raise it with {ENV['json_depth'][0]})")
    return data


def json_depth(data: Any, stop: int) -> int:
    """The nesting depth of a parsed JSON value (a scalar 0, ``[]`` 1), counted without recursion and given up
    once past ``stop``."""
    deepest, stack = 0, [(data, 1)] if isinstance(data, (dict, list)) else []
    while stack:
        value, d = stack.pop()
        if d > deepest:
            deepest = d
            if deepest > stop:
                return deepest
        for child in (value.values() if isinstance(value, dict) else value):
            if isinstance(child, (dict, list)):
                stack.append((child, d + 1))
    return deepest


current_root: ContextVar[str | None] = ContextVar("vlmcheck_dataset_root", default=None)


@contextmanager
def reading(source: str | os.PathLike) -> Iterator[Path]:
    """Inside this block :data:`current_root` is the folder a source's files must stay inside: the folder named,
    or the folder the named file really is in (a file the user names is read where its link points; what it
    refers to must stay beside it)."""
    root = Path(source) if Path(source).is_dir() else Path(os.path.realpath(source)).parent
    token = current_root.set(str(root))
    try:
        yield root
    finally:
        current_root.reset(token)


@dataclass
class RowWindow:
    """The rows a read may stop after (:func:`first_rows`); ``cut`` once a reader stopped with rows left."""

    rows: int
    cut: bool = False

    def full(self, taken: int) -> bool:
        """Whether a reader holding ``taken`` rows, with another row in hand, stops here (and marks the cut)."""
        self.cut = self.cut or taken >= self.rows
        return self.cut


#: the row window of :func:`first_rows`, or None: every row
row_window: ContextVar[RowWindow | None] = ContextVar("vlmcheck_row_window", default=None)


@contextmanager
def first_rows(n: int | None) -> Iterator[RowWindow | None]:
    """Inside this block the streamed readers (parquet and arrow shards, TSV, JSON Lines, workbooks) stop after
    ``n`` records (None: every row).  The caller checks ``window.cut`` and reads again whole where the records
    read do not give it the ``n`` samples it needs."""
    token = row_window.set(RowWindow(n) if n else None)
    try:
        yield row_window.get()
    finally:
        row_window.reset(token)


T = TypeVar("T")


def within_window(rows: Iterable[T]) -> Iterator[T]:
    """``rows`` (a reader's records, one per row) up to the row window's end (:func:`first_rows`)."""
    window = row_window.get()
    for taken, row in enumerate(rows):
        if window is not None and window.full(taken):
            return
        yield row


#: how many times a window too narrow for N samples is doubled before the whole dataset is read
WIDENINGS = 3


def read_samples(read: Callable[[], T], count: Callable[[T], int] = len) -> T:
    """``read()`` (a method's samples) under the row window of ``--limit N`` (:func:`first_rows`): where a reader
    stopped with rows left and the rows read give fewer than N samples (rows left out, an MMVP or CAST pair), the
    window is doubled and ``read()`` called again, up to :data:`WIDENINGS` times, then the whole dataset is read.
    The readers keep the dataset's order, so the samples are those a whole read gives first (a method whose
    samples do not follow its rows never sets a window: ``Task.samples_follow_rows``)."""
    window = row_window.get()
    if window is None:
        return read()
    rows = window.rows
    for _ in range(WIDENINGS + 1):
        with first_rows(rows) as wide:
            try:
                out = read()
            except InputFileError:
                if wide is None or not wide.cut:
                    raise
                # e.g. "no record has an answer" in the first rows: the rows after them may have
            else:
                if wide is None or not wide.cut or count(out) >= window.rows:
                    window.cut = wide is not None and wide.cut
                    return out
        rows *= 2
    with first_rows(None):
        window.cut = False
        return read()
