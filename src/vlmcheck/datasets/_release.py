"""Helpers shared by the original-release readers: one sentence per file that cannot be read, JSON and CSV read
with that sentence, and the cheap detection tests (a file name, a file's first bytes)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Callable

from ..core import dataset_files
from ..core.files import InputFileError
from .base import Dataset, DatasetFormError


def refuse(path: str | Path, expected: str) -> DatasetFormError:
    """The one sentence for a file that cannot be read as its form: the file, and what was expected there."""
    return DatasetFormError(f"{path}: expected {expected}")


def found(path: str | Path, ds: Dataset, expected: str, what: str = "", none: str = "none") -> Dataset:
    """``ds``, or the refusal of a release none of whose rows made an item: ``expected``, how many ``what`` were
    left out and the first reason."""
    if not ds.records:
        first = ds.skipped[0][1] if ds.skipped else none
        raise refuse(path, f"{expected} ({len(ds.skipped)} {what}left out, e.g. {first})")
    return ds


def once(path: str | Path, rule: str) -> Callable[..., None]:
    """A check that each of a file's ids comes once (``rule``: "one line per id"): ``check(id, said, where)``
    refuses the file where ``id`` was met before, ``said`` naming it as the sentence shows it."""
    seen: set[str] = set()

    def check(key: str, said: str, where: str = "") -> None:
        if key in seen:
            raise refuse(path, f"{rule} ({said} is repeated{where})")
        seen.add(key)
    return check


def reason(path: str | Path, exc: BaseException) -> str:
    """An error's message without the file name it starts with (the sentence names the file once)."""
    msg = str(exc)
    return msg[len(f"{path}: "):] if msg.startswith(f"{path}: ") else (getattr(exc, "strerror", None) or msg)


def text(path: Path, expected: str, confined: bool = True) -> str:
    """A release file's text under the rule for dataset files (``confined=False``: a file named in an option)."""
    try:
        return dataset_files.read_text(path, dataset_files.current_root.get() if confined else None, "dataset file")
    except (InputFileError, OSError) as exc:
        raise refuse(path, f"{expected} ({reason(path, exc)})") from None


def json_file(path: Path, expected: str, confined: bool = True) -> Any:
    raw = text(path, expected, confined)
    try:
        return dataset_files.parse_json(raw, str(path))
    except InputFileError as exc:
        raise refuse(path, f"{expected} ({reason(path, exc)})") from None
    except ValueError as exc:
        raise refuse(path, f"{expected} (not JSON: {exc.msg} at line {exc.lineno})") from None


def json_lines(path: Path, expected: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of a JSON Lines file whatever its suffix (POPE names them .json)."""
    out = []
    window = dataset_files.row_window.get()
    for n, line in enumerate(_lines(path, expected), 1):
        if not line.strip():
            continue
        if window is not None and window.full(len(out)):
            break
        try:
            row = dataset_files.parse_json(line, f"line {n}")
        except InputFileError as exc:
            raise refuse(path, f"{expected} ({exc})") from None
        except ValueError as exc:
            raise refuse(path, f"{expected} (line {n} is not JSON: {exc.msg})") from None
        if not isinstance(row, dict):
            raise refuse(path, f"{expected} (line {n} is a JSON {type(row).__name__}, not an object)")
        out.append((n, row))
    if not out:
        raise refuse(path, f"{expected} (the file is empty)")
    return out


def _lines(path: Path, expected: str):
    """A JSON Lines file's lines, streamed under the rule for dataset files (each line within the field cap)."""
    cap = dataset_files.limits().field_bytes
    try:
        with dataset_files.open_file(path, dataset_files.current_root.get(), "dataset file") as raw:
            fh = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
            for n, line in enumerate(iter(lambda: fh.readline(cap + 1), ""), 1):
                if len(line) > cap:
                    raise refuse(path, f"{expected} (line {n} is longer than the {cap} characters a line may hold; "
                                       f"raise it with {dataset_files.ENV['field_bytes'][0]}=MB)")
                yield line
    except UnicodeDecodeError as exc:
        raise refuse(path, f"{expected} (not UTF-8 text: {exc.reason})") from None
    except (InputFileError, OSError) as exc:
        raise refuse(path, f"{expected} ({reason(path, exc)})") from None


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


def named_file(path: Path, names: tuple[str, ...]) -> Path | None:
    """The release file of ``names`` that ``path`` is or holds, else None."""
    if path.is_file():
        return path if path.name in names else None
    return next((path / n for n in names if (path / n).is_file()), None)


def inner(path: Path, name: str) -> Path:
    """``path``'s sub-folder ``name`` where the release unpacks into one, else ``path``."""
    return path / name if (path / name).is_dir() else path


def head(path: Path, n: int = 512) -> bytes:
    """A file's first bytes, for detection (never the whole file)."""
    try:
        with dataset_files.open_file(path) as fh:  # a FIFO or device is never opened, even to detect a form
            return fh.read(n)
    except (OSError, InputFileError):
        return b""


def first_json_keys(path: Path) -> set[str]:
    """The keys of a JSON Lines file's first object, read from its first line only ('' when it is not one)."""
    line = head(path, 4096).split(b"\n", 1)[0]
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return set()
    return set(row) if isinstance(row, dict) else set()


def image_in(folder: Path, stem: str, suffixes: tuple[str, ...] = (".jpg", ".jpeg", ".png")) -> Path | None:
    return next((p for s in suffixes if (p := folder / f"{stem}{s}").is_file()), None)
