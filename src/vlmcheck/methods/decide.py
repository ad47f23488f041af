"""Which model leads, by how much, and which it cannot be separated from (issue 34 item 5): the decision a
report's first screen and a leaderboard's "tied with" column show.

Runs are grouped by method and headline metric (a ChEF group also by recipe: two recipes measure different
things).  Within a group the runs are ordered by their headline; the leader is compared with every other run:
paired on the samples both finished where the headline is a mean of per-unit values (the machinery of
``vlmcheck compare``: a cluster bootstrap of the paired differences), otherwise - a ratio such as RRM, which has
no per-unit value - from the two runs' own intervals as if independent (wider than a paired interval: it can only
call a difference too small, never too large).  A run "cannot be separated" from the leader when the 95 %
interval of the difference contains 0.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..core.files import read_results
from ..metrics.decisions import Z95
from .compare import compare_two, unit_values
from .headline import headline_of

#: headline name -> the per-unit metric of ``unit_values`` that averages to it
_UNIT_METRIC = {"POPE accuracy": "accuracy", "accuracy": "accuracy"}


def _model(res: dict[str, Any], folder: Path) -> str:
    return str(((res.get("spec") or {}).get("task_spec") or {}).get("vlm") or folder.name)


def _unpaired(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    if a["ci95"] is None or b["ci95"] is None or a["value"] is None or b["value"] is None:
        return None
    se = math.hypot((a["ci95"][1] - a["ci95"][0]) / (2 * Z95), (b["ci95"][1] - b["ci95"][0]) / (2 * Z95))
    d = a["value"] - b["value"]
    return {"difference": d, "ci95": [d - Z95 * se, d + Z95 * se], "test": "unpaired, from the two intervals"}


def _difference(lead: dict[str, Any], other: dict[str, Any]) -> dict[str, Any] | None:
    name = lead["headline"]["name"]
    metric = _UNIT_METRIC.get(name, name)
    ua, ub = lead["units"].get(metric), other["units"].get(metric)
    if ua and ub:
        c = compare_two(ua, ub, metric)
        if c["difference"] is not None:
            return {"difference": c["difference"], "ci95": c["ci95"], "p_value": c["p_value"],
                    "test": f"paired on {c['n_paired']} samples, {c['test']}", "n_paired": c["n_paired"],
                    "n_left_out": c["n_left_out"]}
    return _unpaired(lead["headline"], other["headline"])


def decide(runs: list[str | Path]) -> list[dict[str, Any]]:
    """Per group of two or more comparable runs: the leader, its margin over the runner-up with the interval of
    that difference, and the models whose difference from the leader is not significant at 95 %."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        folder = Path(r)
        res = read_results(folder, need_samples=False)
        h = headline_of(res)
        if h.get("value") is None:
            continue
        recipe = str((res.get("metrics") or {}).get("recipe") or "") if res.get("task") == "chef" else ""
        groups.setdefault((res["task"], h["name"], recipe), []).append(
            {"folder": folder, "model": _model(res, folder), "headline": h})
    out = []
    for (task, name, recipe), members in groups.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda m: -m["headline"]["value"])
        for m in members:
            m["units"] = unit_values(m["folder"])[2]
        lead = members[0]
        against = []
        for other in members[1:]:
            d = _difference(lead, other)
            tied = d is None or d["ci95"][0] <= 0 <= d["ci95"][1]
            against.append({"model": other["model"], "run": str(other["folder"]), "value": other["headline"]["value"],
                            "tied": tied, **(d or {"difference": None, "ci95": None, "test": "no interval"})})
        out.append({"method": task + (f" ({recipe})" if recipe else ""), "metric": name,
                    "leader": lead["model"], "run": str(lead["folder"]), "value": lead["headline"]["value"],
                    "ci95": lead["headline"].get("ci95"), "runner_up": against[0],
                    "tied_with": [a["model"] for a in against if a["tied"]], "against": against})
    out.sort(key=lambda g: g["method"])
    return out
