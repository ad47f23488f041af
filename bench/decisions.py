"""Are vlmcheck's intervals and tests right?  Checked against the reference world (issue 34 item 6).

The world has describers of known error level.  For each annotation-free headline metric - GenCeption GC@3, CAST
Top-3, VHExpansion symmetric accuracy, POPE accuracy (ChEF hallucination), ChEF RRM - one "population" run per
describer: level 0.1 (seed 0), level 0.1 (seed 1: the same error rate, other errors) and level 0.3, each on
``--n-pop`` units.  Then, resampling datasets of sampled units (whole clusters: a VHExpansion image with its
cases, a POPE image with its questions) from those populations:

(a) coverage: the share of 95 % intervals, computed by the very function a run uses, that contain the
    population's value, over ``--draws`` datasets of ``--n`` units (goal 0.93-0.97); GenCeption's datasets are
    drawn stratified by category (a benchmark fixes how many images each category has, and GC@T is the mean of
    the category means);
(b) the false-positive rate of the paired comparison (``vlmcheck compare``'s test; for RRM, which has no per-unit
    value, the paired cluster bootstrap of the difference) between the two level-0.1 describers, and its power
    on level 0.1 against 0.3, at ``--n`` units (goal: false positives <= 0.05); (b2) the first screen's
    "separated" under exact nulls of 2 and 3 equal models (each answers every drawn unit as describer a or b
    at random, so the models are exchangeable within every unit);
(c) sample efficiency: the smallest n of a grid at which level 0.1 and 0.3 are separated (p < 0.05, the right
    way round) in 80 % of draws.

    python bench/decisions.py [--n-pop 96] [--draws 200] [--n 40]
    python bench/decisions.py --screen [--draws 200] [--n 20]   # the decision screen on synthetic ground truth

    python bench/decisions.py --coverage [--draws 300]        # GenCeption's and ChEF's intervals, 6-60 units

``--coverage`` runs bench/interval_coverage.py: the headline intervals before and after the expanded percentile.
``--screen`` (issue 48) runs bench/decision_screen.py instead: exact nulls of 2 and 3 equal models, partial
overlap, unequal categories, the false-positive rate of "separated", power and coverage, without model calls.

Populations are runs under bench/.decisions/ and resume (a second bench makes no model call).  Prints three
tables; docs/world.md keeps the figures of the last run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vlmcheck import RunOptions, run_task
from vlmcheck.core.files import JsonlRecords, write_text_atomic
from vlmcheck.methods.cast import CastSpec, CastTask, cast_headline
from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe
from vlmcheck.methods.chef.headline import _rrm_both, chef_headline
from vlmcheck.methods.chef.items import Items
from vlmcheck.methods.compare import compare_two, pairwise
from vlmcheck.methods.genception import GenCeptionSpec, GenCeptionTask, _score
from vlmcheck.methods.pope import build_pope, load_annotations
from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec
from vlmcheck.metrics.decisions import cluster_bootstrap, proportion_interval
from vlmcheck.metrics.stats import gc_at, mean_of_means
from vlmcheck.run.task import Outcome
from vlmcheck.world.make import make_world, make_world_pairs

MODELS = {"a": "ref:describer?level=0.1", "b": "ref:describer?level=0.1&seed=1", "c": "ref:describer?level=0.3"}
T = 3


# ----------------------------------------------------------------------------- populations (real runs)

def _run(task, folder: Path) -> list[dict[str, Any]]:
    run_task(task, folder, RunOptions(resume=True, progress=False, report=False))
    return [r for r in JsonlRecords(folder / "samples.jsonl") if r["status"] == "done"]


def populations(root: Path, n_pop: int) -> dict[str, dict[str, list[dict[str, Any]]]]:
    world, pairs, robust = root / "world", root / "pairs", root / "world-robust"
    if not (world / "objects.jsonl").exists():
        make_world(world, n=n_pop, seed=0)
    if not (robust / "objects.jsonl").exists():
        make_world(robust, n=n_pop, seed=1)
    pairs_file = make_world_pairs(root / "pairs", n=n_pop, seed=0) if not (pairs / "pairs.jsonl").exists() \
        else pairs / "pairs.jsonl"
    pope = world / "pope-adversarial.jsonl"
    if not pope.exists():
        cases = build_pope(load_annotations(world / "objects.jsonl"), "adversarial", n_images=n_pop, per_image=2)
        write_text_atomic(pope, "".join(json.dumps(c) + "\n" for c in cases))
    out: dict[str, dict[str, list]] = {m: {} for m in METRICS}
    for key, vlm in MODELS.items():
        out["GC@3"][key] = _run(GenCeptionTask(GenCeptionSpec(vlm=vlm, generator="ref:renderer", encoder="ref:effnet",
                                                              data=str(world), T=T)), root / "gc" / key)
        out["CAST Top-3"][key] = _run(CastTask(CastSpec(vlm=vlm, pairs=str(pairs_file))), root / "cast" / key)
        out["symmetric accuracy"][key] = _run(VHExpansionTask(VHXSpec(vlm=vlm, cases=str(world), perturb=[])),
                                              root / "vhx" / key)
        out["POPE accuracy"][key] = _run(ChefTask(ChefSpec(vlm=vlm, recipe=resolve_recipe("hallucination"),
                                                           data=str(pope))), root / "pope" / key)
        r = resolve_recipe("robustness")
        r.scenario.type = "world"
        out["RRM"][key] = _run(ChefTask(ChefSpec(vlm=f"{vlm}&robust=1", recipe=r, data=str(robust))),
                               root / "rrm" / key)
    return out


# ----------------------------------------------------------------------------- each metric as a run computes it

def _gc(rs):
    vals = np.array([gc_at(r["s"][:T], T) for r in rs])
    cats = [r.get("category") or "(none)" for r in rs]
    s = _score(vals, cats, seed=0)
    return s["score"], s["ci95"]


def _gc_value(rs):
    return mean_of_means(np.array([gc_at(r["s"][:T], T) for r in rs]), [r.get("category") or "(none)" for r in rs])


def _sym_hits(rs):
    return [float(v["correct"] and v["neg_correct"]) for v in (r["variants"]["original"] for r in rs)]


def _sym(rs):
    hits = _sym_hits(rs)
    return float(np.mean(hits)), proportion_interval(hits, [r["image"] for r in rs], "image")[0]


def _pope_hits(rs):
    return [float(next(iter(r["settings"].values()))["correct"]) for r in rs]


def _pope(rs):
    hits = _pope_hits(rs)
    return float(np.mean(hits)), proportion_interval(hits, [r["image"] for r in rs], "image")[0]


def _cast(rs):
    h = cast_headline(rs)
    return h["value"], h["ci95"]


def _rrm_value(rs):
    return _rrm_both(Items.of(rs))  # the run's function reads the items as columns


def _rrm(rs):
    value = _rrm_value(rs)
    h = chef_headline(rs, {"settings": {"original": {}}, "rrm": {"both": value}}, "robustness", 10, None)
    return value, h["ci95"]


def _cast_unit(r):
    from vlmcheck.methods.outcomes import cast_unit

    return cast_unit(r)


#: metric -> (value and interval of a list of results, its cluster, per-unit value or None, population value)
METRICS: dict[str, tuple[Callable, Callable, Callable | None, Callable]] = {
    "GC@3": (_gc, lambda r: r["image"], lambda r: gc_at(r["s"][:T], T), _gc_value),
    "CAST Top-3": (_cast, lambda r: r["a"] + "|" + r["b"], _cast_unit, lambda rs: _cast(rs)[0]),
    "symmetric accuracy": (_sym, lambda r: r["image"], lambda r: _sym_hits([r])[0], lambda rs: _sym(rs)[0]),
    "POPE accuracy": (_pope, lambda r: r["image"], lambda r: _pope_hits([r])[0], lambda rs: _pope(rs)[0]),
    "RRM": (_rrm, lambda r: r.get("image") or r["id"], None, _rrm_value),
}


# ----------------------------------------------------------------------------- resampling

def _clusters(records, cluster) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list] = {}
    for rec in records:
        out.setdefault(str(cluster(rec["result"])), []).append(rec)
    return out


def _draw(rng, keys: list[str], n: int, strata: dict[str, str] | None = None) -> list[str]:
    """``n`` clusters drawn with replacement; with ``strata`` (GenCeption's categories, fixed by the benchmark's
    design) each stratum gets its share of ``n`` (at least 2), as a benchmark of that size would hold."""
    if not strata:
        return [keys[i] for i in rng.integers(0, len(keys), size=n)]
    groups: dict[str, list[str]] = {}
    for k in keys:
        groups.setdefault(strata[k], []).append(k)
    out = []
    for members in groups.values():
        m = max(2, round(n * len(members) / len(keys)))
        out += [members[i] for i in rng.integers(0, len(members), size=m)]
    return out


def _results(groups, keys) -> list[dict[str, Any]]:
    return [rec["result"] for k in keys for rec in groups[k]]


def _stratum(metric: str, rec: dict[str, Any]) -> str | None:
    """GenCeption's headline is the mean of category means: its outcomes carry the category (compare weighs them
    so); the other headlines are means over samples."""
    return (rec["result"].get("category") or "(none)") if metric.startswith("GC@") else None


def _separated_under_null(metric: str, ga, gb, keys, k: int, rng) -> bool | None:
    """An exact null of ``k`` equal models built from the world's two level-0.1 describers: on each drawn unit,
    each model answers as a or as b, at random and independently (the models are exchangeable within every
    unit).  True when the first screen's rule (methods/compare.pairwise: the leader on the shared samples, Holm
    over the pairs) calls the leader separated from any other model; None for a metric without per-unit values."""
    unit = METRICS[metric][2]
    if unit is None:
        return None
    runs: list[dict[str, Outcome]] = [{} for _ in range(k)]
    for j, key in enumerate(keys):
        for m in range(k):
            for rec in (ga, gb)[int(rng.integers(0, 2))].get(key, []):
                v = unit(rec["result"])
                if v is not None:
                    runs[m][f"{j}:{rec['sample_id']}"] = Outcome(float(v), f"c{j}", None, _stratum(metric, rec))
    res = pairwise(runs, metric, intervals=False)
    if not res["n_shared"]:
        return False
    lead = int(np.argmax(res["values"]))
    return any(r["separated"] for r in res["pairs"] if lead in (r["i"], r["j"]))


def _paired_p(metric: str, ga, gb, keys, shift: float = 0.0) -> tuple[float, float]:
    """(difference a - b, p-value) of a paired comparison on the same drawn clusters; ``shift`` is added to b's
    values (a null centred on the population: b's population value made equal to a's)."""
    _, cluster, unit, value = METRICS[metric]
    if unit is not None:  # vlmcheck compare's test on the per-unit values
        ua, ub = {}, {}
        for j, k in enumerate(keys):
            for rec_a in ga[k]:
                sid = f"{j}:{rec_a['sample_id']}"
                rec_b = next((x for x in gb.get(k, []) if x["sample_id"] == rec_a["sample_id"]), None)
                va, vb = unit(rec_a["result"]), unit(rec_b["result"]) if rec_b else None
                if va is not None and vb is not None:
                    st = _stratum(metric, rec_a)
                    ua[sid] = Outcome(float(va), f"c{j}", None, st)
                    ub[sid] = Outcome(float(vb) + shift, f"c{j}", None, st)
        c = compare_two(ua, ub, "accuracy" if metric in ("symmetric accuracy", "POPE accuracy") else metric)
        return c["difference"] or 0.0, c["p_value"] if c["p_value"] is not None else 1.0
    # RRM: no per-unit value; the paired cluster bootstrap of the difference, "significant" when its 95 %
    # interval leaves out 0 (p reported as 0.01 or 1)
    both = [(ga[k], gb[k]) for k in keys if k in gb]

    def diff(draw):
        a = value([r["result"] for x, _ in draw for r in x])
        b = value([r["result"] for _, y in draw for r in y])
        return None if a is None or b is None else a - b - shift

    d = diff(both)
    ci, _ = cluster_bootstrap(both, [str(i) for i in range(len(both))], diff, n_boot=400)
    return (d or 0.0), (0.01 if ci and (ci[0] > 0 or ci[1] < 0) else 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-pop", type=int, default=96)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--n", type=int, default=40, help="units per resampled dataset for (a) and (b)")
    ap.add_argument("--root", default="bench/.decisions")
    ap.add_argument("--metrics", default=",".join(METRICS),
                    help="which metrics, comma-separated (RRM's paired bootstrap is the slow one)")
    ap.add_argument("--screen", action="store_true", help="the decision screen on synthetic ground truth")
    ap.add_argument("--coverage", action="store_true",
                    help="GenCeption's and ChEF's headline intervals at 6-60 units on synthetic ground truth")
    ap.add_argument("--sizes", default=None, help="with --coverage: units per dataset, comma-separated (6,10,20)")
    ap.add_argument("--figures", default=None,
                    help="with --coverage: ChEF rows, comma-separated from rrm,accuracy,bounded,wilson; "
                         "naming them leaves GenCeption's rows out")
    args = ap.parse_args()
    if args.coverage:
        import sys

        sys.path.insert(0, str(Path(__file__).parent))
        from interval_coverage import main as coverage_main

        kw = {}
        if args.sizes:
            kw["sizes"] = tuple(int(x) for x in args.sizes.split(","))
        if args.figures:
            kw.update(figures=tuple(args.figures.split(",")), gc_rows=False)
        coverage_main(args.draws if args.draws != 200 else 300, **kw)
        return
    if args.screen:
        import sys

        sys.path.insert(0, str(Path(__file__).parent))
        from decision_screen import main as screen_main

        screen_main(args.draws, args.n if args.n != 40 else 20)
        return
    started = time.perf_counter()
    pops = populations(Path(args.root), args.n_pop)
    print(f"populations ready in {time.perf_counter() - started:.0f} s ({args.n_pop} units per run)\n")
    rng = np.random.default_rng(0)
    grid = [n for n in (10, 20, 40, 80, 160, 320) if n <= 4 * args.n_pop]
    rows = []
    for metric, (interval, cluster, _, value) in METRICS.items():
        if metric not in args.metrics.split(","):
            continue
        ga, gb, gc = (_clusters(pops[metric][k], cluster) for k in "abc")
        keys = sorted(set(ga) & set(gb) & set(gc))
        truth = value(_results(ga, keys))
        truth_b, truth_c = value(_results(gb, keys)), value(_results(gc, keys))
        strata = ({k: ga[k][0]["result"].get("category") or "(none)" for k in keys} if metric.startswith("GC@")
                  else None)
        covered, fp, fp0, power, null2, null3 = 0, 0, 0, 0, 0, 0
        for _ in range(args.draws):
            draw = _draw(rng, keys, args.n, strata)
            sep2, sep3 = (_separated_under_null(metric, ga, gb, draw, k, rng) for k in (2, 3))
            null2, null3 = null2 + bool(sep2), null3 + bool(sep3)
            _, ci = interval(_results(ga, draw))
            covered += ci is not None and ci[0] <= truth <= ci[1]
            fp += _paired_p(metric, ga, gb, draw)[1] < 0.05
            if metric in ("GC@3", "CAST Top-3", "RRM"):  # continuous: also on a null centred exactly at 0
                fp0 += _paired_p(metric, ga, gb, draw, shift=truth - truth_b)[1] < 0.05
            d, p = _paired_p(metric, ga, gc, draw)
            power += p < 0.05 and d > 0
        need = None
        for n in grid:  # (c): the first n of the grid with 80 % power
            hits = 0
            for _ in range(max(50, args.draws // 4)):
                d, p = _paired_p(metric, ga, gc, _draw(rng, keys, n, strata))
                hits += p < 0.05 and d > 0
            if hits / max(50, args.draws // 4) >= 0.8:
                need = n
                break
        rows.append((metric, truth, covered / args.draws, fp / args.draws, power / args.draws, need, len(keys),
                     truth - truth_b, truth - truth_c,
                     fp0 / args.draws if metric in ("GC@3", "CAST Top-3", "RRM") else None,
                     None if sep2 is None else null2 / args.draws, None if sep3 is None else null3 / args.draws))
        print(f"{metric}: done ({time.perf_counter() - started:.0f} s)", flush=True)
    print(f"\n(a) coverage of 95 % intervals, {args.draws} datasets of {args.n} units (goal 0.93-0.97)")
    print(f"{'metric':<20} {'population value':>17} {'coverage':>9} {'ratio to 0.95':>14}")
    for m, truth, cov, *_ in rows:
        print(f"{m:<20} {truth:>17.4f} {cov:>9.3f} {cov / 0.95:>14.3f}")
    print(f"\n(b) paired comparison at {args.n} units, {args.draws} draws: false positives (level 0.1 seed 0 vs "
          "seed 1; goal <= 0.05) and power (0.1 vs 0.3)")
    print("(the two level-0.1 describers differ in which errors they make, so on a finite population their values "
          "differ a little: 'population a - b')")
    print("and, for the continuous metrics, on a null centred at 0 (b's values shifted by the population "
          "difference): 'centred'")
    print(f"{'metric':<20} {'false positives':>16} {'ratio to 0.05':>14} {'centred':>8} {'population a - b':>17} "
          f"{'power':>7} {'population a - c':>17}")
    for m, _, _, fp, pw, _, _, dab, dac, fp0, _, _ in rows:
        c = "-" if fp0 is None else f"{fp0:.3f}"
        print(f"{m:<20} {fp:>16.3f} {fp / 0.05:>14.2f} {c:>8} {dab:>17.4f} {pw:>7.3f} {dac:>17.4f}")
    print(f"\n(b2) the first screen's \"separated\" under exact nulls at {args.n} units, {args.draws} draws: 2 and 3 "
          "equal models, each answering every drawn unit as describer a or b at random (goal <= 0.05)")
    print(f"{'metric':<20} {'2 equal':>8} {'3 equal':>8}")
    for m, *_, n2, n3 in rows:
        print(f"{m:<20} {'-' if n2 is None else f'{n2:.3f}':>8} {'-' if n3 is None else f'{n3:.3f}':>8}")
    print(f"\n(c) sample efficiency: smallest n of {grid} separating level 0.1 from 0.3 in 80 % of draws")
    print(f"{'metric':<20} {'n':>6} {'units in population':>20}")
    for m, *_, need, units, _, _, _, _, _ in rows:
        print(f"{m:<20} {need if need else '> ' + str(grid[-1]):>6} {units:>20}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
