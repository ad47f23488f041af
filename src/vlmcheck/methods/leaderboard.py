"""Leaderboards across GenCeption runs: ranks, MMECeption "GC rank", correlations.

``GC rank`` (GenCeption v1, Table 2 footnote): rank the models on the
visual-intensive mean and on the textual-intensive mean, then average the two
ranks weighted by how many categories each group has (10/14 and 4/14 for
MME's 14 categories; 5/8 and 3/8 for the reference world).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from ..metrics.stats import correlations, ranks


def load_run(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no results.json (is it a finished run folder?)")
    res = json.loads(path.read_text())
    if res.get("task") != "genception":
        raise ValueError(f"{folder}: a {res.get('task')!r} run, not genception")
    return res


def leaderboard(runs: list[str | Path], external_csv: str | Path | None = None) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    setups = set()
    for folder in runs:
        res = load_run(folder)
        ts = res["spec"]["task_spec"]
        m = res["metrics"]
        T = m["T"]
        setups.add((ts["generator"], ts["encoder"], T))
        key = f"GC@{T}"
        model = ts["vlm"]
        rows[model] = {
            "run": str(folder), key: m.get(key, {}).get("mean"), "ci95": m.get(key, {}).get("ci95"),
            "complete": m["chains"]["complete"], "incomplete": m["chains"]["incomplete"],
            "by_category": {c: v[key] for c, v in m.get("by_category", {}).items()},
            "groups": {g: v[key] for g, v in m.get("groups", {}).items()},
            "group_sizes": {g: v["categories"] for g, v in m.get("groups", {}).items()},
        }
    if len(setups) > 1:
        raise ValueError("runs differ in generator, encoder or T; a leaderboard needs the same setup: "
                         + "; ".join(map(str, sorted(setups))))
    (generator, encoder, T), = setups
    key = f"GC@{T}"
    scored = {m: r[key] for m, r in rows.items() if r[key] is not None}
    overall = ranks(scored)
    group_ranks: dict[str, dict[str, float]] = {}
    for g in ("visual", "textual"):
        vals = {m: r["groups"][g] for m, r in rows.items() if g in r["groups"]}
        if len(vals) == len(rows) and vals:
            group_ranks[g] = ranks(vals)
    for m, r in rows.items():
        r["rank"] = overall.get(m)
        if len(group_ranks) == 2:
            nv, nt = r["group_sizes"]["visual"], r["group_sizes"]["textual"]
            r["rank_visual"], r["rank_textual"] = group_ranks["visual"][m], group_ranks["textual"][m]
            r["gc_rank"] = (nv * r["rank_visual"] + nt * r["rank_textual"]) / (nv + nt)
    cats = sorted({c for r in rows.values() for c in r["by_category"]})
    cat_ranks = {c: ranks({m: r["by_category"][c] for m, r in rows.items() if c in r["by_category"]})
                 for c in cats}
    out: dict[str, Any] = {"generator": generator, "encoder": encoder, "T": T, "metric": key,
                           "models": dict(sorted(rows.items(), key=lambda kv: kv[1]["rank"] or 1e9)),
                           "category_ranks": cat_ranks}
    if external_csv:
        out["correlations"] = external_correlations(rows, key, external_csv)
    return out


def external_correlations(rows: dict[str, dict[str, Any]], key: str, csv_path: str | Path) -> dict[str, Any]:
    """Pearson/Spearman/Kendall of GC@T against each external benchmark (CSV: model, benchmark, score)."""
    table: dict[str, dict[str, float]] = {}
    with open(csv_path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"model", "benchmark", "score"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{csv_path}: missing column(s) {sorted(missing)}; expected model, benchmark, score")
        for row in reader:
            table.setdefault(row["benchmark"], {})[row["model"]] = float(row["score"])
    out = {}
    for bench, scores in sorted(table.items()):
        models = [m for m in rows if m in scores and rows[m][key] is not None]
        out[bench] = correlations([rows[m][key] for m in models], [scores[m] for m in models])
        out[bench]["models"] = models
    return out
