"""The report's decisions: the first screen's "who leads, by how much, tied with whom" and the leaderboards by
method, each row saying whether it can be separated from the leader (:mod:`vlmcheck.methods.decide`)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from ..methods.decide import decide


def decisions_view(folders: list[Path]) -> list[dict[str, Any]]:
    """:func:`~vlmcheck.methods.decide.decide` over the report's runs; a run whose results cannot be read
    leaves one sentence, never a failed report."""
    try:
        return decide(folders)
    except (OSError, ValueError, KeyError) as exc:  # a damaged run: the report still shows everything else
        return [{"error": f"No decisions: a run's results could not be read ({exc})."}]


def unmeasured(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs the decisions leave out because their headline is not a measurement, each with its reason."""
    return [{"model": (v["spec"].get("task_spec") or {}).get("vlm", v["name"]), "run": v["name"], "task": v["task"],
             "metric": v["headline"][0], "reason": v["not_measured"]} for v in views if v.get("not_measured")]


def _standing(decisions: list[dict[str, Any]]) -> dict[str, str]:
    """run folder -> "leader", "behind the leader by D [lo, hi], Holm p P" (separated), "cannot be separated from
    the leader (difference D [lo, hi], Holm p P)" or "level with the leader" (the leader minus this run on the
    shared samples, its interval at its Holm level and the Holm p)."""
    out: dict[str, str] = {}
    for d in decisions:
        if "run" not in d:
            continue
        out[d["run"]] = "leader"
        for a in d["against"]:
            ci, diff = a.get("ci95"), a.get("difference")
            tested = diff is not None and ci and a.get("p_holm") is not None
            figures = f"{diff:.4f} [{ci[0]:.4f}, {ci[1]:.4f}], Holm p {a['p_holm']:.3g}" if tested else ""
            if diff is not None and abs(diff) < 1e-12 and d.get("n_shared"):
                out[a["run"]] = "level with the leader (difference 0)"
                out[d["run"]] = "level with the next"
            elif a.get("separated"):
                out[a["run"]] = "behind the leader" + (f" by {figures}" if figures else "")
            else:
                out[a["run"]] = "cannot be separated from the leader" + (f" (difference {figures})" if figures else "")
    return out


def leaderboards(views: list[dict[str, Any]], decisions: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """One table per method (and per ChEF desideratum) with two or more runs: each run's model and headline
    metric with its CI, best first (every headline is higher-is-better), and its standing against the leader.
    Where the runs were compared on the samples they share, ``value`` is the headline on those samples (the
    margins are its differences) and, where that differs from the run's own, ``own_value`` and ``n_shared``."""
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
                 "not_measured": v.get("not_measured"),
                 "n": (v.get("counts") or {}).get("done"), "standing": standing.get(v["name"], "")}
                for v in members]
        # the decision's order where there is one (leader first, on the samples the runs share), else by value
        rank, shared = {}, {}
        for dd in decisions:
            if "run" in dd:
                rank.update({dd["run"]: 0, **{a["run"]: i for i, a in enumerate(dd["against"], 1)}})
                if dd.get("n_shared"):  # the value the margins are differences of: on the shared samples
                    shared.update({dd["run"]: (dd["value"], dd["n_shared"]),
                                   **{a["run"]: (a["value"], dd["n_shared"]) for a in dd["against"]}})
        for r in rows:
            if r["run"] in shared and shared[r["run"]][0] is not None:
                value, n = shared[r["run"]]
                if r["value"] is None or abs(value - r["value"]) > 5e-5:  # the run's own headline beside
                    r.update(own_value=r["value"], n_shared=n)
                r["value"] = value
        rows.sort(key=lambda r: (rank.get(r["run"], len(rank)),
                                 -(r["value"] if r["value"] is not None else float("-inf"))))
        ranks = itertools.count(1)
        for r in rows:  # a headline that is not a measurement has no rank
            r["rank"] = "-" if r["not_measured"] else next(ranks)
        out.append({"method": key, "rows": rows})
    return out
