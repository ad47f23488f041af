"""A run's data pinned in its spec by what is there, not by the path as typed (often relative to where the user
stood): per data field, the real path and a fingerprint of the content, compared by a resume (docs/usage.md,
"The same data, by content").
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from ..core import remote

#: the task spec fields that name data (every method's)
DATA_FIELDS = ("data", "cases", "pairs")
#: a data file inside a folder is hashed whole; any other (an image) by its size and first 4 KiB, one read each: a
#: 100,000-image folder costs 100,000 small reads at the start of a run, not its gigabytes
_TEXT = {".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".txt", ".yaml", ".yml", ".parquet"}
_HEAD = 4096


def _split(value: str) -> tuple[str, str]:
    """(``NAME:`` prefix or "", the path): a benchmark or form name before the path stays as typed
    (docs/datasets.md)."""
    from ..datasets import parse_source

    try:
        _, _, rest = parse_source(value)
    except Exception:  # noqa: BLE001 - an unreadable registry: the whole text is the path
        rest = value
    return value[:len(value) - len(rest)], rest


def _is_local(value: Any) -> bool:
    if not isinstance(value, str) or not value.strip():
        return False
    rest = _split(value)[1]
    return bool(rest.strip()) and not rest.startswith("hfds:") and not remote.is_url(rest)


def fingerprint(value: str) -> str:
    """The content fingerprint of a data path (module docstring); the text itself for a URL or hfds: name."""
    h = hashlib.sha256()
    if not _is_local(value):
        h.update(b"name\0" + value.encode("utf-8", "surrogatepass"))
        return h.hexdigest()[:32]
    prefix, rest = _split(value)
    h.update(prefix.encode("utf-8", "surrogatepass") + b"\0")
    path = Path(rest)
    if path.is_file():
        h.update(b"file\0")
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    elif path.is_dir():
        h.update(b"folder\0")
        for root, dirs, files in os.walk(path, followlinks=True):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(f for f in files if not f.startswith(".")):
                full = Path(root) / name
                try:
                    size = full.stat().st_size
                    with open(full, "rb") as fh:
                        whole = full.suffix.lower() in _TEXT
                        head = (hashlib.file_digest(fh, "sha256") if whole else hashlib.sha256(fh.read(_HEAD))).digest()
                except OSError:
                    continue  # unreadable: the run's own reads say why, per sample
                rel = full.relative_to(path).as_posix()
                h.update(rel.encode("utf-8", "surrogatepass") + b"\0" + str(size).encode() + b"\0" + head)
    else:
        h.update(b"missing\0" + rest.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def data_pins(task_spec: Any) -> dict[str, dict[str, str]]:
    """Per data field of ``task_spec``: {"path" (as typed), "real" (for a local path), "fingerprint"}."""
    if not isinstance(task_spec, dict):
        return {}
    pins = {}
    for field in DATA_FIELDS:
        value = task_spec.get(field)
        if not isinstance(value, str) or not value.strip():
            continue
        pin = {"path": value, "fingerprint": fingerprint(value)}
        if _is_local(value):
            prefix, rest = _split(value)
            pin["real"] = prefix + os.path.realpath(rest)
        pins[field] = pin
    return pins


def without_data_paths(task_spec: Any, pins: dict[str, Any] | None) -> Any:
    """``task_spec`` with its pinned data paths left out (their fingerprints are compared instead)."""
    if not pins or not isinstance(task_spec, dict):
        return task_spec
    return {k: ("<pinned>" if k in pins else v) for k, v in task_spec.items()}


def data_difference(previous: dict[str, Any], spec: dict[str, Any]) -> str | None:
    """Why the data of ``spec`` is not the data the run in ``previous`` read (one phrase), or None."""
    before, now = previous.get("data") or {}, spec.get("data") or {}
    for field, pin in before.items():
        if isinstance(pin, dict) and field in now and pin.get("fingerprint") != now[field].get("fingerprint"):
            where = now[field].get("real") or now[field].get("path")
            return (f"its {field} {now[field].get('path')!r} ({where}) is not the data the run read "
                    f"({pin.get('real') or pin.get('path')}, fingerprint {str(pin.get('fingerprint'))[:12]})")
    return None


def resolve_recorded(task_spec: dict[str, Any], pins: dict[str, Any] | None) -> dict[str, Any]:
    """``task_spec`` with each relative data path replaced by its recorded real path where that still exists:
    ``vlmcheck resume`` finds the run's own data from any folder."""
    out = dict(task_spec)
    for field, pin in (pins or {}).items():
        typed, real = out.get(field), pin.get("real") if isinstance(pin, dict) else None
        if isinstance(typed, str) and _is_local(typed) and isinstance(real, str) and \
                _split(real)[0] == _split(typed)[0] and os.path.exists(_split(real)[1]):
            out[field] = real
    return out
