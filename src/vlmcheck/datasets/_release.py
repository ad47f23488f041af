"""Helpers shared by the original-release readers: one sentence per file that cannot be read, JSON and CSV read
with that sentence, and the cheap detection tests (a file name, a file's first bytes)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..core.files import InputFileError, read_text_input
from .base import DatasetFormError


def refuse(path: str | Path, expected: str) -> DatasetFormError:
    """The one sentence for a file that cannot be read as its form: the file, and what was expected there."""
    return DatasetFormError(f"{path}: expected {expected}")


def text(path: Path, expected: str) -> str:
    try:
        return read_text_input(path, "dataset file")
    except (InputFileError, OSError) as exc:
        msg = str(exc)
        msg = msg[len(f"{path}: "):] if msg.startswith(f"{path}: ") else (getattr(exc, "strerror", None) or msg)
        raise refuse(path, f"{expected} ({msg})") from None


def json_file(path: Path, expected: str) -> Any:
    raw = text(path, expected)
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise refuse(path, f"{expected} (not JSON: {exc.msg} at line {exc.lineno})") from None


def json_lines(path: Path, expected: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of a JSON Lines file whatever its suffix (POPE names them .json)."""
    out = []
    for n, line in enumerate(text(path, expected).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise refuse(path, f"{expected} (line {n} is not JSON: {exc.msg})") from None
        if not isinstance(row, dict):
            raise refuse(path, f"{expected} (line {n} is a JSON {type(row).__name__}, not an object)")
        out.append((n, row))
    if not out:
        raise refuse(path, f"{expected} (the file is empty)")
    return out


def csv_rows(path: Path, expected: str, required: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of a CSV file with headers stripped; every header of ``required`` must be there."""
    rows = list(csv.DictReader(io.StringIO(text(path, expected), newline="")))
    rows = [{(k or "").strip(): (v or "").strip() for k, v in r.items()} for r in rows]
    if not rows:
        raise refuse(path, f"{expected} (no rows)")
    missing = [c for c in required if c not in rows[0]]
    if missing:
        raise refuse(path, f"{expected} (missing column(s) {', '.join(missing)}; found {', '.join(rows[0])})")
    return rows


def head(path: Path, n: int = 512) -> bytes:
    """A file's first bytes, for detection (never the whole file)."""
    try:
        with path.open("rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def first_json_keys(path: Path) -> set[str]:
    """The keys of a JSON Lines file's first object, read from its first line only ('' when it is not one)."""
    line = head(path, 4096).split(b"\n", 1)[0]
    try:
        row = json.loads(line)
    except ValueError:
        return set()
    return set(row) if isinstance(row, dict) else set()


def image_in(folder: Path, stem: str, suffixes: tuple[str, ...] = (".jpg", ".jpeg", ".png")) -> Path | None:
    for s in suffixes:
        p = folder / f"{stem}{s}"
        if p.is_file():
            return p
    return None
