"""Before and after fine-tuning (VHExpansion Tables 7 and 8; docs/methods.md, "Before/after"): accuracy and symmetric
accuracy per dataset and image variant of two VHExpansion runs on the cases both finished, each difference with
the paired test and interval of ``vlmcheck compare`` (Holm over the table); ``general`` pairs of runs of any method
side by side by their headline metric (Table 8's general ability).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.files import InputFileError, JsonlRecords, read_results
from ..methods.compare import compare_two
from ..methods.vhx_cases import require_vhx_run
from ..metrics.decisions import holm
from ..metrics.signflip import holm_levels
from ..run.labels import run_labels


def done_records(folder: Path) -> list[dict[str, Any]]:
    """The finished samples' records of a run folder's samples.jsonl."""
    return [r for r in JsonlRecords(folder / "samples.jsonl") if r.get("status") == "done"]


def _run(folder: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    return read_results(folder), {r["sample_id"]: r["result"] for r in done_records(folder)}


def dataset_of(result: dict[str, Any], default: str = "cases") -> str:
    """The dataset a case comes from: its own ``dataset`` or ``source`` field, else ``default``."""
    meta = result.get("meta") or {}
    for key in ("dataset", "source"):
        if isinstance(meta.get(key), str) and meta[key]:
            return meta[key]
    return default


def _units(results: dict[str, dict[str, Any]], ids: list[str],
           pooled: bool) -> dict[tuple[str, str, str], dict[str, tuple]]:
    """(dataset, variant, metric) -> {case id: (right or not, its image, None)}: what the paired test reads."""
    out: dict[tuple[str, str, str], dict[str, tuple]] = {}
    for sid in ids:
        r = results[sid]
        # its dataset's rows, and "all" where the cases come from several datasets (with one, "all" would repeat
        # its rows: each test counted twice in Holm, two intervals for one difference)
        datasets = (dataset_of(r), "all") if pooled else (dataset_of(r),)
        for variant, v in r["variants"].items():
            for ds in datasets:
                out.setdefault((ds, variant, "accuracy"), {})[sid] = (float(v["correct"]), str(r.get("image")), None)
                if "neg_correct" in v:
                    out.setdefault((ds, variant, "symmetric_accuracy"), {})[sid] = (
                        float(v["correct"] and v["neg_correct"]), str(r.get("image")), None)
    return out


def _table(units: dict[tuple[str, str, str], dict[str, tuple]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(dataset, variant) -> n, accuracy, symmetric accuracy (VHExpansion Def. 3) and its number of pairs."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (ds, variant, metric), cases in units.items():
        row = out.setdefault((ds, variant), {"symmetric_accuracy": None, "n_pairs": 0})
        mean = sum(value for value, _, _ in cases.values()) / len(cases)
        if metric == "accuracy":
            row.update(n=len(cases), accuracy=mean)
        else:
            row.update(symmetric_accuracy=mean, n_pairs=len(cases))
    return out


def compare_vhx(before: str | Path, after: str | Path,
                general: list[tuple[str | Path, str | Path]] = ()) -> dict[str, Any]:
    before, after = Path(before), Path(after)
    res_b, done_b = _run(before)
    res_a, done_a = _run(after)
    for folder, res in ((before, res_b), (after, res_a)):
        require_vhx_run(res, folder, "vhx compare takes two VHExpansion runs (pass other methods' runs with "
                                     "--general BEFORE AFTER)")
    ids = [sid for sid in done_b if sid in done_a]
    if not ids:
        raise InputFileError(f"{before} and {after} share no finished case; run both on the same cases file "
                             "(the held-out heldout.jsonl of `vhx dataset`)")
    pooled = any(len({dataset_of(done[sid]) for sid in ids}) > 1 for done in (done_b, done_a))
    units_b, units_a = _units(done_b, ids, pooled), _units(done_a, ids, pooled)
    table_b, table_a = _table(units_b), _table(units_a)
    rows = []
    units: dict[int, tuple] = {}
    for key in sorted(set(table_b) | set(table_a), key=lambda k: (k[0] == "all", k[0], k[1] != "original", k[1])):
        b, a = table_b.get(key, {}), table_a.get(key, {})
        row: dict[str, Any] = {"dataset": key[0], "variant": key[1], "n": b.get("n") or a.get("n")}
        for metric in ("accuracy", "symmetric_accuracy"):
            vb, va = b.get(metric), a.get(metric)
            row[metric] = {"before": vb, "after": va,
                           "delta": va - vb if vb is not None and va is not None else None}
            ua, ub = units_a.get((*key, metric)), units_b.get((*key, metric))
            if ua and ub:  # the paired test of `vlmcheck compare`: after minus before, clustered by image
                c = compare_two(ua, ub, "accuracy")
                row[metric].update(ci95=c["ci95"], p_value=c["p_value"], test=c["test"], n_paired=c["n_paired"])
                units[id(row[metric])] = (ua, ub)
        rows.append(row)
    tested = [row[m] for row in rows for m in ("accuracy", "symmetric_accuracy") if row[m].get("p_value") is not None]
    ps = [c["p_value"] for c in tested]
    for cell, p, level in zip(tested, holm(ps), holm_levels(ps)):
        # the interval at the level of the cell's Holm step, so it excludes 0 exactly when the Holm p <= 0.05
        cell.update(p_holm=p, ci95=compare_two(*units[id(cell)], "accuracy", level=level)["ci95"],
                    ci_level=1 - level, separated=bool(p <= 0.05))
    # the names people read (run/labels.py), told apart where they would read the same (an adapter's parameter)
    shown_b, shown_a = run_labels([(res_b, before), (res_a, after)])
    out: dict[str, Any] = {
        "before": {"run": str(before), "model": shown_b},
        "after": {"run": str(after), "model": shown_a},
        "cases": {"compared": len(ids), "only_before": len(done_b) - len(ids),
                  "only_after": len(done_a) - len(ids)},
        "datasets": sorted({r["dataset"] for r in rows} - {"all"}), "rows": rows, "general": []}
    if general:
        from ..methods.headline import headline, headline_of

        for gb, ga in general:
            rb, _ = _run(Path(gb))
            ra, _ = _run(Path(ga))
            for run, res in ((gb, rb), (ga, ra)):
                if headline_of(res).get("not_measured"):
                    raise InputFileError(f"--general {run}: {headline_of(res)['not_measured']}")
            (name_b, vb), (name_a, va) = headline(rb), headline(ra)
            if rb.get("task") != ra.get("task") or name_b != name_a:
                raise InputFileError(f"--general {gb} {ga}: the two runs measure different things "
                                     f"({rb.get('task')} {name_b} vs {ra.get('task')} {name_a})")
            out["general"].append({"task": rb.get("task"), "metric": name_b, "before_run": str(gb),
                                   "after_run": str(ga), "before": vb, "after": va,
                                   "delta": va - vb if vb is not None and va is not None else None})
    return out
