"""The report's decisions: the first screen's "who leads, by how much, tied with whom" and the leaderboards by
method, each row saying whether it can be separated from the leader (:mod:`vlmcheck.methods.decide`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..methods.decide import decide


def decisions_view(folders: list[Path]) -> list[dict[str, Any]]:
    """:func:`~vlmcheck.methods.decide.decide` over the report's runs: the list of per-method decision rows
    documented there (each with its ``sentence``; a failed group is ``{"method", "error"}``).  A run whose
    results cannot be read leaves one sentence, never a failed report."""
    try:
        return decide(folders)
    except (OSError, ValueError, KeyError) as exc:  # a damaged run: the report still shows everything else
        return [{"error": f"No decisions: a run's results could not be read ({exc})."}]


def _standing(decisions: list[dict[str, Any]]) -> dict[str, str]:
    """run folder -> "leader", "cannot be separated from the leader ..." or "behind the leader by D [lo, hi] ..."
    (the leader minus this run on the shared samples, its interval at its Holm level and the Holm p)."""
    out: dict[str, str] = {}
    for d in decisions:
        if "run" not in d:
            continue
        out[d["run"]] = "leader"
        for a in d["against"]:
            ci = a.get("ci95")
            gap = (f" by {a['difference']:.4f} [{ci[0]:.4f}, {ci[1]:.4f}], Holm p {a['p_holm']:.3g}"
                   if a.get("difference") is not None and ci and a.get("p_holm") is not None else "")
            out[a["run"]] = ("behind the leader" if a.get("separated") else "cannot be separated from the leader") + gap
    return out


def leaderboards(views: list[dict[str, Any]], decisions: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """One table per method (and per ChEF desideratum) with two or more runs: each run's model and headline
    metric with its CI, best first (every headline is higher-is-better), and its standing against the leader."""
    standing = _standing(list(decisions))
    groups: dict[str, list[dict[str, Any]]] = {}
    for v in views:
        key = v["task"]
        m = json.loads(v["metrics_json"]) if '"desideratum"' in v["metrics_json"] else {}
        d = m.get("desideratum")
        if d:  # a method of several desiderata (ChEF): one table per desideratum, and per recipe for accuracy
            # (accuracy recipes measure different things: counts, boxes, chains)
            key = f"{v['task']}: {d}" if d != "accuracy" else f"{v['task']}: accuracy ({m.get('recipe', '?')})"
        groups.setdefault(key, []).append(v)
    out = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        rows = [{"model": v.get("label") or v["name"], "run": v["name"],
                 "metric": v["headline"][0], "value": v["headline"][1], "ci": v["ci"],
                 "n": (v.get("counts") or {}).get("done"), "standing": standing.get(v["name"], "")}
                for v in members]
        # the decision's order where there is one (leader first, on the samples the runs share), else by value
        rank = {}
        for dd in decisions:
            if "run" in dd:
                rank.update({dd["run"]: 0, **{a["run"]: i for i, a in enumerate(dd["against"], 1)}})
        rows.sort(key=lambda r: (rank.get(r["run"], len(rank)),
                                 -(r["value"] if r["value"] is not None else float("-inf"))))
        for rank, r in enumerate(rows, 1):
            r["rank"] = rank
        out.append({"method": key, "rows": rows})
    return out
