"""Leaderboards across GenCeption runs: ranks, MMECeption "GC rank", GC_FID ranking, correlations.

Every model score is the run's mean of its category means (MMECeption's "Overall Mean"); the overall rank is
taken on it recomputed on the images every run scored, the quantity ``compare`` and the report's decisions
compare.  GC rank is v1 Table 2's (its columns GC@1, GC@3, GC@5; weights the benchmark's category counts; ties
share the best rank): docs/methods.md, "GenCeption".
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..run.labels import run_labels
from ..metrics.stats import correlations, frechet_distance, gc_at, ranks
from .genception import MME_ALIASES, MME_TEXTUAL, MME_VISUAL, WORLD_TEXTUAL, WORLD_VISUAL, _norm, category_group
from .headline import not_measured_reason

#: Categories per group of each benchmark: the GC rank weights.
BENCHMARK_GROUPS = {"MME": {"visual": len(MME_VISUAL), "textual": len(MME_TEXTUAL)},
                    "world": {"visual": len(WORLD_VISUAL), "textual": len(WORLD_TEXTUAL)}}
_MME = {_norm(c) for c in MME_VISUAL + MME_TEXTUAL} | set(MME_ALIASES)
_WORLD = {_norm(c) for c in WORLD_VISUAL + WORLD_TEXTUAL}


def benchmark_weights(categories, declared: str | None = None) -> tuple[str, dict[str, int]]:
    """(benchmark name, categories per group): the benchmark the runs' dataset declares, else MME or the world
    where every category belongs to it, else the distinct categories of each group across the runs."""
    for name in BENCHMARK_GROUPS:
        if declared and _norm(declared) == _norm(name):
            return name, BENCHMARK_GROUPS[name]
    cats = {_norm(c) for c in categories}
    if cats and cats <= _WORLD and not cats <= _MME:
        return "world", BENCHMARK_GROUPS["world"]
    if cats and cats <= _MME:
        return "MME", BENCHMARK_GROUPS["MME"]
    counts = Counter(map(category_group, categories))
    return "categories of these runs", {"visual": counts["visual"], "textual": counts["textual"]}


#: the GC@t columns v1 Table 2 ranks on (GC@2 and GC@4 are not among them)
GC_RANK_COLUMNS = (1, 3, 5)


def gc_rank_columns(group_scores: dict[str, dict[str, dict[int, float]]], group: str) -> list[int]:
    """The paper's columns (GC@1, GC@3, GC@5) that every model has in ``group``."""
    have = [set(g.get(group, {})) for g in group_scores.values()]
    return [t for t in GC_RANK_COLUMNS if have and all(t in h for h in have)]


def gc_rank(group_scores: dict[str, dict[str, dict[int, float]]], weights: dict[str, int]) -> dict[str, dict]:
    """Per model, the mean rank in each group and the weighted GC rank (v1 Table 2), from
    ``group_scores[model][group][t]``, the group mean of GC@t, on :func:`gc_rank_columns`."""
    out: dict[str, dict[str, float]] = {m: {} for m in group_scores}
    for group in ("visual", "textual"):
        columns = gc_rank_columns(group_scores, group)
        per_col = [ranks({m: g[group][t] for m, g in group_scores.items()}) for t in columns]
        for m in group_scores:
            out[m][f"rank_{group}"] = float(np.mean([r[m] for r in per_col]))
    total = weights["visual"] + weights["textual"]
    for m, r in out.items():
        r["gc_rank"] = (weights["visual"] * r["rank_visual"] + weights["textual"] * r["rank_textual"]) / total
    return out


def load_run(folder: str | Path) -> dict[str, Any]:
    from ..core.files import read_results

    path = Path(folder) / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no results.json (is it a finished run folder?)")
    res = read_results(folder, need_samples=False)  # a damaged file: one sentence
    if res.get("task") != "genception":
        raise ValueError(f"{folder}: a {res.get('task')!r} run, not genception")
    return res


def _score(m: dict[str, Any], key: str) -> float | None:
    return (m.get(key) or {}).get("score")


def leaderboard(runs: list[str | Path], external_csv: str | Path | None = None) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    setups, declared = set(), set()
    unmeasured: dict[str, str] = {}  # model -> why its GC@T is not a measurement: left out of the ranks
    loaded = [(folder, load_run(folder)) for folder in runs]
    for (folder, res), label in zip(loaded, run_labels((res, folder) for folder, res in loaded)):
        ts = res["spec"]["task_spec"]
        m = res["metrics"]
        T = m["T"]
        setups.add((ts["generator"], ts["encoder"], T))
        why = not_measured_reason(res)
        if why:
            unmeasured[label] = why
            continue
        declared.add(m.get("dataset"))
        key = f"GC@{T}"
        rows[label] = {  # by the name people read; the full spec beside it
            "run": str(folder), "spec": ts["vlm"], key: _score(m, key), "ci95": (m.get(key) or {}).get("ci95"),
            "GC@1": _score(m, "GC@1"), f"s@{T}_unweighted": _score(m, f"s@{T}_unweighted"),
            f"GC_FID@{T}": m.get(f"GC_FID@{T}"), "image_mean": (m.get(key) or {}).get("image_mean"),
            "refusal_rate": m.get("refusal_rate"), "scored": m["chains"]["scored"], "failed": m["chains"]["failed"],
            "non_refused": _score(m, f"{key}_non_refused"), "penalised": _score(m, f"{key}_penalised"),
            "by_category": {c: v[key] for c, v in m.get("by_category", {}).items()},
            "groups": {g: {t: v[f"GC@{t}"] for t in range(1, T + 1)} for g, v in m.get("groups", {}).items()},
        }
    if len(setups) > 1:
        raise ValueError("runs differ in generator, encoder or T; a leaderboard needs the same setup: "
                         + "; ".join(map(str, sorted(setups))))
    (generator, encoder, T), = setups
    key = f"GC@{T}"
    shared = _on_shared_images(rows, key)
    # ranked on the images every run scored, as compare and the report's decisions compare them; a run's own
    # score on all its images stays beside (the runs' own scores rank only where no image is shared)
    rank_on = "on_shared" if shared["n"] else key
    overall = ranks({m: r[rank_on] for m, r in rows.items() if r.get(rank_on) is not None})
    for m, r in rows.items():
        r["rank"] = overall.get(m)
    cats = sorted({c for r in rows.values() for c in r["by_category"]})
    bench, weights = benchmark_weights(cats, declared.pop() if len(declared) == 1 else None)
    grouped = {m: r["groups"] for m, r in rows.items()}
    if rows and all(set(g) == {"visual", "textual"} for g in grouped.values()) and all(weights.values()):
        for m, extra in gc_rank(grouped, weights).items():
            rows[m].update(extra)
    out: dict[str, Any] = {"generator": generator, "encoder": encoder, "T": T, "metric": key,
                           "score": "mean of category means", "shared": shared,
                           "ranked_on": (f"the {shared['n']} images every run scored" if shared["n"]
                                         else "each run's own images (no image scored by every run)"),
                           "gc_rank_weights": {"benchmark": bench, **weights},
                           "gc_rank_columns": {g: [f"GC@{t}" for t in gc_rank_columns(grouped, g)]
                                               for g in ("visual", "textual")},
                           "models": dict(sorted(rows.items(), key=lambda kv: kv[1]["rank"] or 1e9)),
                           "category_ranks": {c: ranks({m: r["by_category"][c] for m, r in rows.items()
                                                        if c in r["by_category"]}) for c in cats}}
    if unmeasured:
        out["not_measured"] = unmeasured
    out["fid_common"] = _fid_on_common_images(rows, T)
    fid_key = f"GC_FID@{T}_common" if out["fid_common"].get("n", 0) >= 2 else f"GC_FID@{T}"
    out["fid_ranking"] = {**_fid_agreement(rows, key, fid_key), "on": fid_key}
    if external_csv:
        out["correlations"] = external_correlations(rows, [("GC@1", "GC@1"), (key, key),
                                                           (f"s@{T}", f"s@{T}_unweighted")], external_csv)
    return out


def _on_shared_images(rows: dict[str, dict[str, Any]], key: str) -> dict[str, Any]:
    """:func:`~.compare.pairwise` over the runs: each model's ``on_shared`` (GC@T on the images every scored run
    scored) and ``tied_with`` (the models it cannot be separated from); returns the number of those images and
    each model's left out.  A run that scored no chain takes no part."""
    from ..core.files import InputFileError
    from .compare import pairwise, unit_values

    for m in rows:
        rows[m].update(tied_with=[], on_shared=None)
    try:
        units = {m: unit_values(r["run"])[2].get(key, {}) for m, r in rows.items()}
    except (InputFileError, OSError):  # a run without its samples: no paired test, no ties to report
        return {"n": 0, "note": "a run's samples could not be read: ranked on each run's own images"}
    names = [m for m in rows if units[m]]
    if len(names) < 2:
        return {"n": 0}
    res = pairwise([units[m] for m in names], key)
    for m, v in zip(names, res["values"]):
        rows[m]["on_shared"] = v
    out = {"n": res["n_shared"], "left_out": {m: lo["only_here"] + lo["different_source"]
                                              for m, lo in zip(names, res["left_out"])}}
    if not res["n_shared"]:
        return out
    for r in res["pairs"]:
        if not r.get("separated"):
            a, b = names[r["i"]], names[r["j"]]
            rows[a]["tied_with"].append(b)
            rows[b]["tied_with"].append(a)
    return out


def _chains(folder: str | Path, T: int) -> dict[tuple[str, str], dict[str, Any]]:
    """A run's complete chains by (image id, seed image hash): X0's embedding and each step's."""
    from ..core.files import JsonlRecords

    out: dict[tuple[str, str], dict[str, Any]] = {}
    path = Path(folder) / "samples.jsonl"
    if not path.is_file():  # a results.json alone (a run copied without its samples): no common FID
        return out
    for rec in JsonlRecords(path):
        r = rec.get("result") or {}
        if rec.get("status") == "done" and r.get("complete") and len(r.get("steps", [])) >= T:
            out[(str(r.get("image")), str(r.get("image_sha256")))] = r
    return out


def _fid_on_common_images(rows: dict[str, dict[str, Any]], T: int) -> dict[str, Any]:
    """GC_FID@T of every model on the seed images every model completed (a Frechet distance is biased by n)."""
    chains = {m: _chains(r["run"], T) for m, r in rows.items()}
    common = set.intersection(*(set(c) for c in chains.values())) if chains else set()
    out: dict[str, Any] = {"n": len(common), "images": "seed images every model completed (id and pixel hash)"}
    if len(common) < 2:
        out["warning"] = "fewer than two images completed by every model: no common GC_FID"
        return out
    keys = sorted(common)
    for m, c in chains.items():
        x0 = np.array([c[k]["embedding0"] for k in keys], dtype=np.float64)
        fids = [frechet_distance(x0, np.array([c[k]["steps"][t]["embedding"] for k in keys], dtype=np.float64))
                for t in range(T)]
        rows[m][f"GC_FID@{T}_common"] = gc_at(fids, T)
        rows[m]["fid_n"] = len(chains[m])
    return out


def _fid_agreement(rows: dict[str, dict[str, Any]], key: str, fid_key: str) -> dict[str, Any]:
    """Ranking by GC_FID@T (lower is better) beside the cosine ranking, and whether they agree (v2 claims so)."""
    models = [m for m, r in rows.items() if r[key] is not None and r[fid_key] is not None]
    if len(models) < 2:
        return {"note": f"needs at least two runs with {fid_key}"}
    fid_ranks = ranks({m: rows[m][fid_key] for m in models}, higher_is_better=False)
    cos_ranks = ranks({m: rows[m][key] for m in models})
    from scipy.stats import kendalltau

    tau = kendalltau([cos_ranks[m] for m in models], [fid_ranks[m] for m in models])[0]
    return {"ranks": fid_ranks, "cosine_ranks": cos_ranks, "same_order": fid_ranks == cos_ranks,
            "kendall_tau": None if np.isnan(tau) else float(tau)}


def external_correlations(rows: dict[str, dict[str, Any]], metrics: list[tuple[str, str]],
                          csv_path: str | Path) -> dict[str, Any]:
    """Pearson/Spearman/Kendall (with p-values) of each of our metrics against each external benchmark
    (CSV: model, benchmark, score); v2 Table 3 uses GC@1, GC@T and the unweighted s(T)."""
    table: dict[str, dict[str, float]] = {}
    with open(csv_path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"model", "benchmark", "score"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{csv_path}: missing column(s) {sorted(missing)}; expected model, benchmark, score")
        for n, row in enumerate(reader, 2):
            try:
                table.setdefault(row["benchmark"], {})[row["model"]] = float(row["score"])
            except (TypeError, ValueError):
                raise ValueError(f"{csv_path}:{n}: score {row['score']!r} is not a number") from None
    out: dict[str, Any] = {}
    for bench, scores in sorted(table.items()):
        out[bench] = {}
        for label, field in metrics:
            # the CSV names a model by its label or by its full spec
            named = {m: m if m in scores else rows[m].get("spec") for m in rows}
            models = [m for m in rows if named[m] in scores and rows[m][field] is not None]
            out[bench][label] = correlations([rows[m][field] for m in models], [scores[named[m]] for m in models])
            out[bench][label]["models"] = models
    return out


def write_leaderboard(runs: list[str | Path], path: str | Path, external_csv: str | Path | None = None
                      ) -> dict[str, Any]:
    from ..core.files import write_text_atomic

    board = leaderboard(runs, external_csv)
    write_text_atomic(path, json.dumps(board, indent=2))
    return board
