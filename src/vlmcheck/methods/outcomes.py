"""The built-in methods' per-sample outcomes, what ``compare``, ``plan`` and the report's decisions test,
registered with :func:`vlmcheck.run.task.register_outcomes` so that none of them names a method (a new method
gives its task class a static ``decision_outcomes``: docs/architecture.md).  Each reader takes a finished
sample's result and the run's metrics; the metric named as the run's headline is the one the decisions compare.
"""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)

from ..run.task import Outcome, register_outcomes


def _describe(r: dict[str, Any], m: dict[str, Any]) -> dict[str, Outcome]:
    v = r.get("keyword_recall")
    return {} if v is None else {"keyword recall": Outcome(float(v), str(r.get("image") or ""),
                                                           r.get("image_sha256"))}


def _genception(r: dict[str, Any], m: dict[str, Any]) -> dict[str, Outcome]:
    T = m.get("T")
    v = (r.get("gc") or {}).get(f"GC@{T}")
    if not r.get("complete") or v is None:
        return {}
    return {f"GC@{T}": Outcome(float(v), str(r.get("image")), r.get("image_sha256"),
                               stratum=str(r.get("category") or "(none)"), low=-1.0, high=1.0)}


def _vhexpansion(r: dict[str, Any], m: dict[str, Any]) -> dict[str, Outcome]:
    v = (r.get("variants") or {}).get("original") or {}
    image = str(r.get("image"))
    out = {}
    if v.get("correct") is not None:
        out["accuracy"] = Outcome(float(bool(v["correct"])), image, binary=True)
    if "neg_correct" in v and v.get("correct") is not None:
        out["symmetric accuracy"] = Outcome(float(bool(v["correct"]) and bool(v["neg_correct"])), image,
                                            binary=True)
    return out


def _chef(r: dict[str, Any], m: dict[str, Any]) -> dict[str, Outcome]:
    st = (r.get("settings") or {}).get("standard") or next(iter((r.get("settings") or {}).values()), {})
    if st.get("correct") is None:
        return {}
    name = ((m.get("headline") or {}).get("name") if isinstance(m.get("headline"), dict) else None) or "accuracy"
    name = name if name in ("accuracy", "POPE accuracy") else "accuracy"
    unit = str(r.get("image") or r.get("item") or r.get("id") or "")
    return {name: Outcome(float(bool(st["correct"])), unit, r.get("image_sha256"), binary=True)}


def cast_unit(r: dict[str, Any], k: int = 3) -> float | None:
    hits = []
    for g, entry in (r.get("generation") or {}).items():
        for st in entry.get("statements", [])[:k]:
            for cell, verdict in st.get("verdicts", {}).items():
                if cell.split("|")[0] != g and verdict.get("verdict") is not None:
                    hits.append(float(verdict["verdict"]))
    return float(np.mean(hits)) if hits else None


def _cast(r: dict[str, Any], m: dict[str, Any]) -> dict[str, Outcome]:
    from .cast_scores import headline_of_sums, pair_counts

    v = cast_unit(r)
    # the headline pools verdicts per cell over pairs: compared as that ratio, recomputed on the shared pairs
    # (``value``, the pair's own share, is shown but never compared)
    return {} if v is None else {"CAST Top-3 cross-modal consistency": Outcome(
        v, "", counts=pair_counts(r, 3), pooled=headline_of_sums)}


for _name, _fn in (("describe", _describe), ("genception", _genception), ("vhexpansion", _vhexpansion),
                   ("chef", _chef), ("cast", _cast)):
    register_outcomes(_name, _fn)
