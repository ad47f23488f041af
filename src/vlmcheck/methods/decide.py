"""Which model leads, by how much, and which it cannot be separated from (the report's first screen, the
leaderboards): runs grouped by method, headline and recipe (two ChEF recipes measure different things), ordered
on the samples all share, every pair tested by :mod:`vlmcheck.methods.compare` (Holm over the group's pairs).  A
method with no per-sample outcome (a ratio such as RRM) is compared from the runs' own intervals (z-tests).
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

from ..core.files import read_results
from ..metrics.decisions import Z95, holm
from ..metrics.signflip import holm_levels
from ..run.labels import run_labels
from .compare import ALPHA, pairwise, unit_values
from .headline import headline_of

#: what a group's comparison may fail with: said in one sentence, the other groups stay
_FAILS = (OSError, ValueError, KeyError, TypeError, ArithmeticError, IndexError)


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _unpaired(members: list[dict[str, Any]]) -> dict[str, Any]:
    """Leader and margins from each run's own headline interval (no per-sample outcomes): z-tests of the
    differences as if the runs were independent, Holm over the pairs with the leader."""
    members.sort(key=lambda m: -m["headline"]["value"])
    se = [None if m["headline"].get("ci95") is None else (m["headline"]["ci95"][1] - m["headline"]["ci95"][0])
          / (2 * Z95) for m in members]
    rows, ses = [], []
    for k, m in enumerate(members[1:], 1):
        d = members[0]["headline"]["value"] - m["headline"]["value"]
        s = math.hypot(se[0], se[k]) if se[0] is not None and se[k] is not None else None
        ses.append(s)
        rows.append({"model": m["model"], "run": str(m["folder"]), "value": m["headline"]["value"],
                     "difference": d, "p_value": None if not s else 2 * (1 - NormalDist().cdf(abs(d) / s)),
                     "test": "unpaired z-test from the two runs' intervals (no per-sample outcomes)",
                     "p_holm": None, "separated": False, "ci95": None})
    tested = [(r, s) for r, s in zip(rows, ses) if r["p_value"] is not None]
    ps = [r["p_value"] for r, _ in tested]
    for (r, s), ph, level in zip(tested, holm(ps), holm_levels(ps, ALPHA)):
        z = NormalDist().inv_cdf(1 - level / 2)
        r.update(p_holm=ph, separated=bool(ph <= ALPHA), ci95=[r["difference"] - z * s, r["difference"] + z * s],
                 ci_level=1 - level)
    return {"members": members, "against": rows, "n_shared": None, "n_left_out": None,
            "values": [m["headline"]["value"] for m in members]}


def _paired(members: list[dict[str, Any]], units: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    res = pairwise(units, metric)
    values = res["values"]
    # nothing shared: ordered by the runs' own headlines, nothing tested
    by = values if res["n_shared"] else [m["headline"]["value"] for m in members]
    order = sorted(range(len(members)), key=lambda i: -by[i])
    lead = order[0]
    by_pair = {(r["i"], r["j"]): r for r in res["pairs"]}
    rows = []
    for k in order[1:]:
        r = dict(by_pair.get((lead, k)) or by_pair[(k, lead)])
        if (r["i"], r["j"]) != (lead, k) and r.get("difference") is not None:  # the leader minus this run
            r["difference"] = -r["difference"]
            r["ci95"] = [-r["ci95"][1], -r["ci95"][0]]
            if "discordant" in r:
                r["discordant"] = {"a_only": r["discordant"]["b_only"], "b_only": r["discordant"]["a_only"]}
        for key in ("i", "j", "left_out", "effect_size"):
            r.pop(key, None)
        rows.append({"model": members[k]["model"], "run": str(members[k]["folder"]), "value": values[k],
                     "headline_value": members[k]["headline"]["value"], **r})
    left = sum(x["only_here"] for x in res["left_out"]) + (res["left_out"][0]["different_source"]
                                                            * len(members) if res["left_out"] else 0)
    return {"members": [members[i] for i in order], "against": rows, "n_shared": res["n_shared"],
            "n_left_out": left, "values": [values[i] for i in order],
            "left_out_by_model": {members[i]["model"]: res["left_out"][i]["only_here"] for i in order}}


def _sentence(row: dict[str, Any]) -> str:
    r = row["runner_up"]
    where = ("" if row["n_shared"] is None else
             f" on the {row['n_shared']} samples all its runs share ({row['n_left_out']} left out)")
    if row["n_shared"] == 0:
        return (f"the runs share no finished sample ({row['n_left_out']} left out), so no leader "
                f"is named; {row['leader']} has the best own headline, {_f(row['headline']['value'])}.")
    if r.get("difference") is not None and abs(r["difference"]) < 1e-12 and row["n_shared"]:
        level = [row["leader"]] + [a["model"] for a in row["against"] if a.get("difference") is not None
                                   and abs(a["difference"]) < 1e-12]
        names = ", ".join(level[:-1]) + " and " + level[-1]
        return (f"{names} are level on {row['metric']} at {_f(row['value'])}{where}: no model leads "
                "(difference 0).")
    head = f"{row['leader']} leads on {row['metric']} with {_f(row['value'])}{where}, {r['model']} {_f(r['value'])}"
    if r.get("difference") is None or r.get("p_holm") is None:
        return head + f"; no test of the margin ({r.get('note') or 'no interval'}): cannot be separated."
    level = round(100 * (r.get("ci_level") or 0.95), 1)
    margin = (f"; margin {_f(r['difference'])} ({level:g}% CI {_f(r['ci95'][0])} to {_f(r['ci95'][1])}; "
              f"{r['test']}, p {_p(r['p_value'])}, Holm p {_p(r['p_holm'])})")
    if row["n_shared"] == 1:
        return head + margin + ": one shared sample, so they cannot be separated."
    return head + margin + (": separated." if r["separated"] else ": cannot be separated.")


def _group(task: str, name: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    units = [unit_values(m["folder"])[2].get(name) for m in members]
    out = _paired(members, units, name) if all(units) else _unpaired(members)
    lead, against = out["members"][0], out["against"]
    row = {"method": task, "metric": name, "leader": lead["model"], "run": str(lead["folder"]),
           "value": out["values"][0], "headline": {"value": lead["headline"]["value"],
                                                   "ci95": lead["headline"].get("ci95")},
           "ci95": lead["headline"].get("ci95"), "runner_up": against[0], "against": against,
           "separated": bool(against[0].get("separated")), "n_shared": out["n_shared"],
           "n_left_out": out["n_left_out"], "left_out_by_model": out.get("left_out_by_model"),
           "tied_with": [a["model"] for a in against if not a.get("separated")]}
    row["sentence"] = _sentence(row)
    return row


def decide(runs: list[str | Path]) -> list[dict[str, Any]]:
    """The decision rows, one per method group of two or more runs with a headline value: ``method``,
    ``metric``, ``leader`` and its ``run``, ``value`` (on the shared samples; ``headline``, ``ci95``: its run's
    own), ``runner_up`` and ``against`` (every other model, best first, with the ``difference`` leader minus it,
    its ``ci95`` at ``ci_level``, ``p_value``, ``p_holm``, ``test``, ``separated``, ``note``), ``separated``,
    ``n_shared`` (None when compared from intervals), ``n_left_out``, ``tied_with`` and ``sentence``.  A group
    whose comparison failed is ``{"method", "metric", "error"}``, the reason in one sentence."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        folder = Path(r)
        res = read_results(folder, need_samples=False)
        h = headline_of(res)
        if h.get("value") is None:
            continue
        recipe = str((res.get("metrics") or {}).get("recipe") or "")
        groups.setdefault((res["task"], h["name"], recipe), []).append(
            {"folder": folder, "results": res, "headline": h})
    out = []
    for (task, name, recipe), members in groups.items():
        if len(members) < 2:
            continue
        for m, shown in zip(members, run_labels((m.pop("results"), m["folder"]) for m in members)):
            m["model"] = shown
        label = task + (f" ({recipe})" if recipe else "")
        try:
            out.append(_group(label, name, members))
        except _FAILS as exc:
            out.append({"method": label, "metric": name,
                        "error": f"{label}: the comparison of its {len(members)} runs failed ({exc})."})
    out.sort(key=lambda g: g["method"])
    return out
