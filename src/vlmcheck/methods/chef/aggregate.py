"""ChEF's cross-scenario columns (``chef aggregate``; docs/methods.md, "Across scenarios"): the weighted "Avg.",
Table 8's overall calibration score and section F's seed variance.
"""

from __future__ import annotations

from functools import reduce
from pathlib import Path
from typing import Any

from ...core.files import InputFileError, read_results


def _at(*path: str) -> Any:
    """What reads results.json's metrics at ``path`` (None where a step is missing)."""
    return lambda m: reduce(lambda node, key: (node or {}).get(key), path, m)


# desideratum -> [(column, how to read it from results.json's metrics)]
COLUMNS: dict[str, list[tuple[str, Any]]] = {
    "calibration": [("accuracy", _at("accuracy")), ("ece", _at("ece"))],
    "instruction_following": [("acc", _at("settings", "original", "accuracy")), ("acc_vm", _at("acc_vm")),
                              ("mr", _at("mr_weighted"))],
    "robustness": [("acc", _at("settings", "original", "accuracy")),
                   ("acc_crp", _at("settings", "corrupt:both", "accuracy")), ("rrm", _at("rrm", "both"))],
    "icl": [("riam", _at("riam")), ("acc_0shot", _at("settings", "shots=0", "accuracy"))],
    "hallucination": [("accuracy", _at("pope", "accuracy")), ("f1", _at("pope", "f1"))],
    "language": [("score", _at("language", "score"))],
    # a turn scenario's own accuracy where it has one (Omnibenchmark's WeightedACC, VOC2012's grounding)
    "accuracy": [("accuracy", lambda m: m[_turn_metric(m)] if _turn_metric(m) in m
                  else next(iter(m["settings"].values()), {}).get("accuracy"))],
}


def _turn_metric(m: dict[str, Any]) -> str | None:
    """The turn scenario's own metric; runs made before ``turn_metric`` named it in ``headline``."""
    old = m.get("headline")
    return m.get("turn_metric") or (old if isinstance(old, str) else None)


def _load(folder: Path) -> dict[str, Any]:
    res = read_results(folder, need_samples=False)
    if res["task"] != "chef":
        raise InputFileError(f"{folder}: not a ChEF run; chef aggregate takes `vlmcheck chef run` folders")
    return res


def _task_spec(res: dict[str, Any]) -> dict[str, Any]:
    return (res.get("spec") or {}).get("task_spec") or {}


def _scenario(res: dict[str, Any]) -> str:
    ts = _task_spec(res)
    recipe = ts.get("recipe") or {}
    kind = ((recipe.get("scenario") or {}).get("type")) or "?"
    data = ts.get("data") or (recipe.get("scenario") or {}).get("path")
    return f"{kind}:{Path(data).stem}" if data else kind


def _weighted(rows: list[dict[str, Any]], column: str) -> float | None:
    pairs = [(r["n"], r[column]) for r in rows if r.get(column) is not None and r["n"]]
    total = sum(n for n, _ in pairs)
    return sum(n * v for n, v in pairs) / total if total else None


def aggregate(runs: list[str | Path]) -> dict[str, Any]:
    if not runs:
        raise InputFileError("give ChEF run folders to aggregate")
    loaded = [(Path(r), _load(Path(r))) for r in runs]
    kinds = {res["metrics"].get("desideratum") for _, res in loaded}
    if len(kinds) != 1:
        raise InputFileError(f"the runs measure different desiderata ({', '.join(sorted(map(str, kinds)))}); "
                             "aggregate one desideratum at a time")
    desideratum = kinds.pop()
    from ...core.spec import identity_of

    models = {identity_of(str(_task_spec(res).get("vlm"))) for _, res in loaded}
    if len(models) != 1:
        raise InputFileError(f"the runs are of different models ({', '.join(sorted(models))}); aggregate one "
                             "model's runs at a time")
    columns = COLUMNS.get(desideratum, COLUMNS["accuracy"])
    rows = []
    for folder, res in loaded:
        m = res["metrics"]
        seed = _task_spec(res).get("seed", (res.get("spec") or {}).get("seed"))
        row: dict[str, Any] = {"run": str(folder), "scenario": _scenario(res), "recipe": m.get("recipe"),
                               "seed": seed, "n": m.get("n") or 0}
        for name, read in columns:
            try:
                row[name] = read(m)
            except (KeyError, TypeError, AttributeError):
                row[name] = None
        rows.append(row)
    avg = {name: _weighted(rows, name) for name, _ in columns}
    out: dict[str, Any] = {"desideratum": desideratum, "model": models.pop(), "columns": [c for c, _ in columns],
                           "rows": rows, "avg": {**avg, "n": sum(r["n"] for r in rows)}}
    if desideratum == "calibration" and avg.get("ece") is not None:
        out["overall"] = 1 - avg["ece"]  # Table 8
    # section F: the same recipe and scenario under several seeds
    main = columns[0][0]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["scenario"], str(r["recipe"])), []).append(r)
    seeds = []
    for (scenario, recipe), members in groups.items():
        vals = [(m["seed"], m[main]) for m in members if m[main] is not None]
        if len({s for s, _ in vals}) > 1:
            mean = sum(v for _, v in vals) / len(vals)
            seeds.append({"scenario": scenario, "recipe": recipe, "column": main, "mean": mean,
                          "deviation": {str(s): abs(v - mean) for s, v in vals}})
    if seeds:
        out["seed_variance"] = seeds
    return out
