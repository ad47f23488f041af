"""A TSV's rows as ``csv.DictReader(fh, delimiter="\\t")`` gives them, read in memory bounded by the field cap.

``csv`` builds each field in a buffer of four bytes a character that doubles as it grows (a 53 MB base64 image
cost 7.7 times its size).  Here a line is read as bytes, decoded once and split on its tabs, and no frame keeps
a line once its fields are handed on (under three times the field).  A line whose quotes are not plain (a tab
or line break inside quotes, text after a closing quote) is parsed by ``csv`` itself, so every row reads as
``csv`` reads it (tests/test_hardening_bounded_reads.py compares them).
"""

from __future__ import annotations

import csv
import functools
import itertools
import re
from typing import Any, BinaryIO, Iterator

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")


def _unquoted(piece: str) -> str | None:
    """A field as ``csv`` reads it where that is plain to see (no quote at its start, or quoted whole with its
    inner quotes doubled), else None."""
    if not piece.startswith('"'):
        return piece  # a quote inside an unquoted field is kept as it is, as csv keeps it
    inner = piece[1:-1]
    if len(piece) < 2 or not piece.endswith('"') or '"' in inner.replace('""', ""):
        return None
    return inner.replace('""', '"')


class TsvRows:
    """``csv.DictReader(io.TextIOWrapper(raw, "utf-8-sig", newline=""), delimiter="\\t")`` with each field at
    most ``field_bytes``: ``fieldnames``, ``line_num`` and its rows (a short row's missing keys None, a long
    row's extra fields under the key None).  A field or line over the cap raises ``csv.Error("field larger
    than field limit")`` as ``csv`` does; bytes that are not UTF-8 raise ``UnicodeDecodeError``."""

    def __init__(self, raw: BinaryIO, field_bytes: int) -> None:
        self.raw, self.cap, self.line_num = raw, field_bytes, 0
        self._limit = field_bytes + 2  # a line's bytes: one field and its line break until the header is read
        self._lines = self._read_lines()
        self._pieces = self._read_pieces()

    def _read_lines(self) -> Iterator[bytes]:
        while True:
            held = [self.raw.readline(self._limit + 1)]
            if not held[0]:
                return
            if len(held[0]) > self._limit:
                raise csv.Error(f"field larger than field limit ({self.cap})")
            self.line_num += 1
            yield held.pop()  # no reference kept here while the line is decoded and split

    def _read_pieces(self) -> Iterator[tuple[str, str]]:
        """(text, line break) of each line as ``open(newline="")`` splits them, decoded without a copy."""
        for line in self._lines:
            enc = "utf-8-sig" if self.line_num == 1 else "utf-8"
            end = 2 if line.endswith(b"\r\n") else 1 if line.endswith(b"\n") else 0
            if line.find(b"\r", 0, len(line) - end) != -1:  # a bare CR ends a line too (rare: split as text)
                text = str(line, enc)
                del line
                for piece in _LINE.findall(text):
                    if piece:
                        yield piece.rstrip("\r\n"), piece[len(piece.rstrip("\r\n")):]
                continue
            view = memoryview(line)
            held = [str(view[:len(line) - end], enc)]
            view.release()
            del view, line
            # popped as it is yielded: this frame keeps no reference to a line while its fields are used
            yield held.pop(), "\r\n"[2 - end:] if end else ""

    def _record(self, header: bool = False) -> list[str] | None:
        for body, end in self._pieces:
            if not body:
                if header:
                    return []  # DictReader takes a blank first line as no column names
                continue  # a blank line holds no row (csv's reader gives [], DictReader skips it)
            if '"' in body:
                fields = [_unquoted(p) for p in body.split("\t")]
                if None in fields:  # quoted across tabs or lines, or text after a closing quote: csv's own
                    lines = itertools.chain([body + end], (b + e for b, e in self._pieces))
                    got = next(csv.reader(lines, delimiter="\t"), None)
                    if got == [] and not header:
                        continue
                    return got
            else:
                fields = body.split("\t")
            del body
            if any(len(f) > self.cap for f in fields):
                raise csv.Error(f"field larger than field limit ({self.cap})")
            return fields  # type: ignore[return-value]
        return None

    @functools.cached_property
    def fieldnames(self) -> list[str] | None:
        names = self._record(header=True)
        if names:
            self._limit = self.cap * len(names) + 2
        return names

    def __iter__(self) -> Iterator[dict[Any, Any]]:
        names = self.fieldnames
        if names is None:
            return
        while (fields := self._record()) is not None:
            row: dict[Any, Any] = dict(zip(names, fields))
            if len(fields) > len(names):
                row[None] = fields[len(names):]
            for k in names[len(fields):]:
                row[k] = None
            yield row
