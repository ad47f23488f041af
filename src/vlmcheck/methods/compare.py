"""Paired comparison of runs of one method (``vlmcheck compare RUN_A RUN_B ... --json``).

Runs are paired on the samples both finished (the sample id, and the seed image's pixel hash where the
samples record one); the others are counted and left out with the reason.  For each headline metric, per
unit of the method: the difference (A minus B), a 95 % interval of it (a bootstrap of the paired differences,
resampling the sampled unit: the source image for VHExpansion, else the sample), a p-value - McNemar's exact
test where each unit has one binary answer, a paired permutation test of the mean difference otherwise - and
an effect size (the difference of proportions; Cohen's d_z for means).  Three or more runs: every pair, with
Holm-adjusted p-values over all the comparisons.

Unit values per method: describe - keyword recall per image; GenCeption - GC@T per image; VHExpansion -
right or wrong per case (original image), and both the question and its negation right (symmetric); ChEF -
right or wrong per item in the standard setting; CAST - the share of a pair's Top-3 statements judged to hold
in the other modalities (every cross-modal cell and format pooled per pair; the headline pools over pairs).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np

from ..core.files import SampleRecords, read_results
from ..metrics.decisions import cluster_bootstrap_mean, holm, mcnemar_exact, paired_permutation_p

#: metric name -> whether its unit value is one binary answer (McNemar) or a number (permutation)
_BINARY = {"accuracy", "symmetric accuracy"}


def _cast_unit(r: dict[str, Any], k: int = 3) -> float | None:
    hits = []
    for g, entry in r.get("generation", {}).items():
        for st in entry.get("statements", [])[:k]:
            for cell, verdict in st.get("verdicts", {}).items():
                if cell.split("|")[0] != g and verdict.get("verdict") is not None:
                    hits.append(float(verdict["verdict"]))
    return float(np.mean(hits)) if hits else None


def unit_values(folder: str | Path) -> tuple[str, str, dict[str, dict[str, tuple[float, str, str | None]]]]:
    """(method, model, {metric: {sample id: (value, cluster, source hash)}}) of a finished run."""
    info = read_results(folder)
    task, spec = info["task"], (info.get("spec") or {}).get("task_spec") or {}
    model = spec.get("vlm") or str(folder)
    metrics: dict[str, dict[str, tuple[float, str, str | None]]] = {}

    def put(metric: str, sid: str, value: Any, cluster: str, source: str | None = None) -> None:
        if value is not None:
            metrics.setdefault(metric, {})[sid] = (float(value), cluster, source)

    T = (info.get("metrics") or {}).get("T")
    for rec in SampleRecords(Path(folder) / "samples.jsonl"):  # a line at a time, each record checked
        if rec.get("status") != "done":
            continue
        sid, r = rec["sample_id"], rec.get("result") or {}
        source = r.get("image_sha256")
        if task == "genception" and r.get("complete"):
            put(f"GC@{T}", sid, (r.get("gc") or {}).get(f"GC@{T}"), sid, source)
        elif task == "describe":
            put("keyword recall", sid, r.get("keyword_recall"), sid, source)
        elif task == "vhexpansion":
            v = (r.get("variants") or {}).get("original") or {}
            image = str(r.get("image"))
            put("accuracy", sid, v.get("correct"), image)
            if "neg_correct" in v:
                put("symmetric accuracy", sid, bool(v.get("correct")) and bool(v["neg_correct"]), image)
        elif task == "chef":
            st = (r.get("settings") or {}).get("standard") or next(iter((r.get("settings") or {}).values()), {})
            put("accuracy", sid, st.get("correct"), sid)
        elif task == "cast":
            put("CAST Top-3 cross-modal consistency", sid, _cast_unit(r), sid)
    return task, model, metrics


def _pair(a: dict[str, tuple], b: dict[str, tuple]) -> tuple[list[str], dict[str, int]]:
    both = [s for s in a if s in b]
    left = {"only_in_a": sum(s not in b for s in a), "only_in_b": sum(s not in a for s in b), "different_source": 0}
    keep = []
    for s in both:
        sa, sb = a[s][2], b[s][2]
        if sa and sb and sa != sb:
            left["different_source"] += 1
        else:
            keep.append(s)
    return keep, left


def compare_two(a: dict[str, tuple], b: dict[str, tuple], metric: str) -> dict[str, Any]:
    keep, left = _pair(a, b)
    out: dict[str, Any] = {"metric": metric, "n_paired": len(keep), "n_left_out": sum(left.values()),
                           "left_out": left}
    if not keep:
        return {**out, "difference": None, "ci95": None, "p_value": None, "test": None}
    x = np.array([a[s][0] for s in keep])
    y = np.array([b[s][0] for s in keep])
    d = x - y
    out["difference"] = float(d.mean())
    out["ci95"] = list(cluster_bootstrap_mean(d, [a[s][1] for s in keep], n_boot=4000))
    if metric in _BINARY:
        b_only = int(((x == 1) & (y == 0)).sum())
        c_only = int(((x == 0) & (y == 1)).sum())
        out.update(p_value=mcnemar_exact(b_only, c_only), test="McNemar exact",
                   discordant={"a_only": b_only, "b_only": c_only},
                   effect_size={"name": "difference of proportions", "value": float(d.mean())})
    else:
        sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
        out.update(p_value=paired_permutation_p(x, y), test="paired permutation (sign flips)",
                   effect_size={"name": "Cohen's d_z", "value": float(d.mean() / sd) if sd > 0 else 0.0})
    return out


def compare_runs(runs: list[str | Path]) -> dict[str, Any]:
    """Every pair of ``runs`` (one method), every headline metric: see the module docstring."""
    loaded = [(Path(r), *unit_values(r)) for r in runs]
    methods = {t for _, t, _, _ in loaded}
    if len(methods) != 1:
        raise ValueError(f"compare runs of one method; these are {', '.join(sorted(methods))}")
    comparisons = []
    for (fa, _, ma, va), (fb, _, mb, vb) in itertools.combinations(loaded, 2):
        for metric in va:
            if metric in vb:
                comparisons.append({**compare_two(va[metric], vb[metric], metric), "a": ma, "b": mb,
                                    "run_a": str(fa), "run_b": str(fb)})
    tested = [c for c in comparisons if c["p_value"] is not None]
    for c, p in zip(tested, holm([c["p_value"] for c in tested])):
        c["p_holm"] = p
    return {"method": methods.pop(), "comparisons": comparisons}
