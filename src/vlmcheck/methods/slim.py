"""What a method's summary keeps of each finished sample while ``results.json`` is made (issue 37 item 1).

``run/outputs.py`` streams a run's records from the store; a method whose summary needs every record at once
(bootstraps resample them) keeps, per record, only what its summary reads: the record without its free text
(raw answers, rationales, statements, questions) and artifact paths, which are most of its size with a real
model.  Each such method lists those fields and slims with :func:`slim_record` in its ``summary_record``; a
test per method checks that its summary of the slimmed records equals its summary of the full ones.
"""

from __future__ import annotations

from typing import Any

Path = tuple[str, ...]  # keys from the record's ``result``; "*" every key of a dict, "[]" every item of a list


def without(obj: Any, paths: list[Path]) -> Any:
    """A copy of ``obj`` without the fields at ``paths`` (copied only along them: ``obj`` is never changed)."""
    heads: dict[str, list[Path]] = {}
    dropped: set[str] = set()
    for p in paths:
        if len(p) == 1:
            dropped.add(p[0])
        else:
            heads.setdefault(p[0], []).append(p[1:])
    if isinstance(obj, list):
        inner = heads.get("[]")
        return [without(x, inner) for x in obj] if inner else obj
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        if k in dropped or "*" in dropped:
            continue
        sub = heads.get(k, []) + heads.get("*", [])
        out[k] = without(v, sub) if sub else v
    return out


def slim_record(rec: dict[str, Any], paths: list[Path]) -> dict[str, Any]:
    """A finished sample's record with its ``result`` (and its repeats') slimmed."""
    if not paths:
        return rec
    repeated = [("repeats", "[]", *p) for p in paths]
    return {**rec, "result": without(rec["result"], paths + repeated)}
