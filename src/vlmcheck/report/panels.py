"""The report's per-run sections that a method's view names (``panels``, ``methods/views.py``) and its sections
over several runs (``together``): each reads the records it is given, chosen by the method's view, never by the
method's name.
"""

from __future__ import annotations

from typing import Any, Callable

from .charts import _cast_heatmaps, _s_curve, _svg, cast_k, reliability_figure
from .thumbs import _Thumbs
SHOWN_CHAINS = 30


def _genception(run: dict[str, Any], thumbs: _Thumbs) -> dict[str, Any]:
    """GenCeption's chains, worst first (failed ones, then by the last step's s(T) ascending), the first
    SHOWN_CHAINS of them, each step with a thumbnail and a full-size copy for the lightbox."""
    m = run["results"]["metrics"]
    folder = run["folder"]
    T = m.get("T", 0)
    rows = []
    for s in run["samples"]:
        r = s.get("result") or {}
        src = r.get("image_path")
        strip = [{"path": src, "s": None, "gc": None, "text": ""}]
        for st in r.get("steps", []):
            t = st["t"]
            strip.append({"path": folder / st["image"] if st.get("image") else None, "s": st.get("s"),
                          "gc": r.get("gc", {}).get(f"GC@{t}"), "text": st.get("description", "")})
        last = next((x["s"] for x in reversed(strip) if x["s"] is not None), None)
        refused = f"refused at t={r['refused_at']} (scored s = -1 from there)" if r.get("refused_at") else None
        rows.append({"id": s["sample_id"], "status": s["status"], "failed": s["status"] != "done" or
                     not r.get("complete", False), "category": r.get("category"), "s_last": last,
                     "score": r.get("gc", {}).get(f"GC@{T}"), "strip": strip,
                     "error": (s.get("error") or {}).get("message") or (r.get("stopped") or {}).get("reason")
                     or refused})
    rows.sort(key=lambda row: (not row["failed"], row["s_last"] if row["s_last"] is not None else -2.0))
    shown = rows[:SHOWN_CHAINS]
    for row in shown:
        for x in row["strip"]:
            path = x.pop("path")
            x["thumb"], x["full"] = thumbs(path), thumbs.full(path)
    return {"T": T, "rows": shown, "n": len(rows)}


def chef_settings(m: dict[str, Any]) -> dict[str, Any] | None:
    """Accuracy per setting (clean first, then each corruption) and ChEF's robustness figures: what a
    robustness headline is made of."""
    settings = m.get("settings") or {}
    if not settings:
        return None
    rows = [{"setting": k, "accuracy": v.get("accuracy"), "n": v.get("n"), "unread_share": v.get("unread_share")}
            for k, v in settings.items()]
    rows.sort(key=lambda r: (r["setting"] not in ("original", "standard", "clean"), r["setting"]))
    # which inferencer gave the numbers, and (generated answers) the share the parser could not read
    return {"rows": rows, "rrm": m.get("rrm"), "acc_random": m.get("acc_random"), "inferencer": m.get("inferencer"),
            "unread": bool(m.get("answers_generated")), "notes": [m[k] for k in ("inferencer_note", "calibration_note",
                                                                                   "unread_warning") if m.get(k)]}


def degenerate_note(v: dict[str, Any]) -> str | None:
    """Say when a VHExpansion variant's numbers come from one answer given to everything."""
    ratio = v.get("yes_ratio")
    if ratio is not None and (ratio >= 0.999 or ratio <= 0.001):
        return f"answered {'yes' if ratio >= 0.999 else 'no'} to every question"
    return None


def _chains(run: dict[str, Any], thumbs: _Thumbs) -> dict[str, Any]:
    return {"chains": _genception(run, thumbs), "categories": run["results"]["metrics"].get("by_category", {})}


def _heatmaps(run: dict[str, Any], thumbs: _Thumbs) -> dict[str, Any]:
    res = run["results"]
    return {"heatmaps": _cast_heatmaps(run), "heatmap_k": f"Top-{cast_k(res)}, as the headline",
            "cast_empty": res["metrics"].get("empty_reason")}


def _settings(run: dict[str, Any], thumbs: _Thumbs) -> dict[str, Any]:
    m = run["results"]["metrics"]
    bins = m.get("reliability")
    out = {"reliability": _svg(reliability_figure(bins)) if bins else None, "pope": m.get("pope"),
           "chef_settings": chef_settings(m)}
    if m.get("vanilla_accuracy") is not None:
        out["mmbench"] = {"vanilla": m["vanilla_accuracy"], "circular": m.get("circular_accuracy")}
    return out


def _variants(run: dict[str, Any], thumbs: _Thumbs) -> dict[str, Any]:
    m = run["results"]["metrics"]
    vhx = m.get("variants", {})
    return {"vhx": vhx, "vhx_notes": {name: degenerate_note(v) for name, v in vhx.items() if degenerate_note(v)},
            "vhx_unread": m.get("unread_warning")}


#: per-run sections: name -> (run, thumbs) -> the template's entries for the run
PANELS: dict[str, Callable[[dict[str, Any], _Thumbs], dict[str, Any]]] = {
    "chains": _chains, "heatmaps": _heatmaps, "settings": _settings, "variants": _variants}

#: sections over several runs: name -> runs -> the template's entry (by that name)
TOGETHER: dict[str, Callable[[list[dict[str, Any]]], Any]] = {"s_curve": _s_curve}


def variants_compare(views: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per model, accuracy and symmetric accuracy per variant (paper Tables 3-5 shape), over the runs whose
    ``variants`` section is filled; None for fewer than two."""
    runs = [v for v in views if v.get("vhx")]
    if len(runs) < 2:
        return None
    variants = list(dict.fromkeys(k for v in runs for k in v["vhx"]))
    return {"variants": variants, "rows": [
        {"model": v.get("label") or v["name"],
         "cells": [(v["vhx"].get(k) or {}).get("symmetric_accuracy") for k in variants],
         "acc": [(v["vhx"].get(k) or {}).get("accuracy") for k in variants],
         "new": sum((v["vhx"].get(k) or {}).get("new_vh_cases", 0) for k in variants)} for v in runs]}
