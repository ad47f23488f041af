"""The decision screen on ground truth (issue 48 item 6): ``python bench/decisions.py --screen`` runs this.

Synthetic worlds whose truth is known by construction, fed to the very functions the report's first screen,
``compare`` and the headline intervals use (``methods/compare.pairwise``, ``metrics/decisions.proportion_interval``,
``methods/genception._score``).  Four kinds of per-sample outcome, as the methods declare them:

- ``one answer per image``: binary, each image a unit (POPE / VHExpansion with one case per image); unit
  difficulty h ~ 2 Beta(2, 2) (mean 1): P(wrong) = e h;
- ``4 answers per image``: binary, clustered; P(wrong) = e h_image u_question, u ~ U(0.5, 1.5);
- ``GenCeption, unequal categories``: GC per image = mu_category - 0.5 e g_image + N(0, 0.15), 8 categories of
  which 4 hold one image; the headline the mean of category means (categories fixed, as a benchmark fixes them);
- ``CAST pair shares``: k of 9 verdicts hold, each with probability 1 - e h_pair.

e is the model's error level.  Models of one level share the units' latent difficulty and answer
independently given it: under "equal models" the outcomes are exchangeable within each unit - an exact null.
Measured, per kind: the false-positive rate of "separated" on the screen (the leader on the shared samples
separated from any other model after Holm) under exact nulls of 2 and 3 equal models, of 3 equal models whose
runs each miss a random 20 % of units (partial overlap); power (e = 0.1 vs 0.3: separated, right leader); the
coverage of the margin's interval (A - B, truth 0.2 for the binary and CAST kinds, 0.1 for GenCeption); and the
coverage of the headline intervals at 1, 2, 3 and 10 units.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from vlmcheck.methods.compare import pairwise
from vlmcheck.metrics.decisions import proportion_interval
from vlmcheck.methods.genception import _score
from vlmcheck.metrics.stats import mean_of_means
from vlmcheck.run.task import Outcome

KINDS = ("one answer per image", "4 answers per image", "GenCeption, unequal categories", "CAST pair shares")
TRUE_DIFF = {"one answer per image": 0.2, "4 answers per image": 0.2, "GenCeption, unequal categories": 0.1,
             "CAST pair shares": 0.2}


def world(kind: str, n: int, rng: np.random.Generator) -> dict[str, Any]:
    """The units' latent state, shared by every model."""
    if kind == "GenCeption, unequal categories":
        sizes = [1, 1, 1, 1] + [max(1, (n - 4) // 4 + (i < (n - 4) % 4)) for i in range(4)]
        cats = [f"c{c}" for c, s in enumerate(sizes) for _ in range(s)]
        mu = np.linspace(0.3, 0.7, 8)
        return {"cats": cats, "mu": np.array([mu[int(c[1:])] for c in cats]),
                "g": rng.uniform(0.5, 1.5, len(cats))}
    h = 2 * rng.beta(2, 2, n)
    if kind == "4 answers per image":
        return {"h": np.repeat(h, 4), "u": rng.uniform(0.5, 1.5, 4 * n), "image": np.repeat(np.arange(n), 4)}
    return {"h": h}


def run(kind: str, w: dict[str, Any], e: float, rng: np.random.Generator, keep: float = 1.0) -> dict[str, Outcome]:
    """One model's outcomes on the world ``w`` at error level ``e``; each unit kept with probability ``keep``."""
    if kind == "GenCeption, unequal categories":
        v = np.clip(w["mu"] - 0.5 * e * w["g"] + rng.normal(0, 0.15, len(w["g"])), -1, 1)
        out = {f"s{i}": Outcome(float(x), f"i{i}", stratum=c, low=-1.0, high=1.0)
               for i, (x, c) in enumerate(zip(v, w["cats"]))}
        units = {s: s for s in out}
    elif kind == "4 answers per image":
        right = rng.random(len(w["h"])) >= e * w["h"] * w["u"]
        out = {f"s{i}": Outcome(float(r), f"i{w['image'][i]}", binary=True) for i, r in enumerate(right)}
        units = {s: o.unit for s, o in out.items()}
    elif kind == "CAST pair shares":
        k = rng.binomial(9, 1 - e * w["h"])
        out = {f"s{i}": Outcome(float(x) / 9, f"p{i}") for i, x in enumerate(k)}
        units = {s: s for s in out}
    else:
        right = rng.random(len(w["h"])) >= e * w["h"]
        out = {f"s{i}": Outcome(float(r), f"i{i}", binary=True) for i, r in enumerate(right)}
        units = {s: s for s in out}
    if keep < 1.0:
        kept = {u for u in set(units.values()) if rng.random() < keep}
        out = {s: o for s, o in out.items() if units[s] in kept}
    return out


def screen(runs: list[dict[str, Outcome]], intervals: bool = False) -> dict[str, Any]:
    """What the first screen decides: the leader on the shared samples and whether it is separated from any."""
    res = pairwise(runs, "m", intervals=intervals)
    if res["n_shared"] == 0:
        return {"leader": None, "separated": False, "res": res}
    lead = int(np.argmax(res["values"]))
    seps = [r["separated"] for r in res["pairs"] if lead in (r["i"], r["j"])]
    return {"leader": lead, "separated": any(seps), "res": res}


def headline_coverage(kind: str, units: int, draws: int, rng: np.random.Generator) -> float | None:
    """Coverage of the headline's own 95 % interval (the function a run uses) of the population value, e = 0.1."""
    hits = 0
    for _ in range(draws):
        w = world(kind, units, rng)
        o = run(kind, w, 0.1, rng)
        if kind == "GenCeption, unequal categories":
            v = np.array([x.value for x in o.values()])
            cats = [x.stratum for x in o.values()]
            lo, hi = _score(v, cats, seed=0)["ci95"]  # the run's own interval (expanded percentile)
            truth = float(np.mean(np.linspace(0.3, 0.7, 8))) - 0.05  # the categories are fixed by the benchmark
        else:
            if kind == "CAST pair shares":
                return None  # CAST's headline pools verdicts over pairs with its own bootstrap (methods/cast_scores)
            ci, _ = proportion_interval([x.value for x in o.values()], [x.unit for x in o.values()], "image")
            lo, hi = ci
            truth = 0.9  # E[1 - e h u] = 1 - 0.1
        hits += lo <= truth <= hi
    return hits / draws


def main(draws: int = 200, n: int = 20) -> None:
    started = time.perf_counter()
    rng = np.random.default_rng(48)
    print(f"decision screen on synthetic ground truth: {draws} datasets per cell, {n} units "
          "(GenCeption: 8 categories, 4 of one image)")
    print(f"{'kind':<32} {'FP 2 equal':>10} {'FP 3 equal':>10} {'FP 3 partial':>12} {'power':>6} "
          f"{'margin cover':>12}")
    for kind in KINDS:
        fp2 = fp3 = fp3p = pw = cov = 0
        for _ in range(draws):
            w = world(kind, n, rng)
            fp2 += screen([run(kind, w, 0.1, rng) for _ in range(2)])["separated"]
            fp3 += screen([run(kind, w, 0.1, rng) for _ in range(3)])["separated"]
            fp3p += screen([run(kind, w, 0.1, rng, keep=0.8) for _ in range(3)])["separated"]
            s = screen([run(kind, w, 0.1, rng), run(kind, w, 0.3, rng)], intervals=True)
            pw += s["separated"] and s["leader"] == 0
            (pair,) = s["res"]["pairs"]
            cov += pair["ci95"][0] <= TRUE_DIFF[kind] <= pair["ci95"][1]
        print(f"{kind:<32} {fp2 / draws:>10.3f} {fp3 / draws:>10.3f} {fp3p / draws:>12.3f} {pw / draws:>6.3f} "
              f"{cov / draws:>12.3f}", flush=True)
    print("\nheadline intervals: coverage of the population value (goal >= 0.95 at small n: a bound may cover more)")
    print(f"{'kind':<48} " + " ".join(f"{f'{u} units':>9}" for u in (1, 2, 3, 10)))
    for kind in KINDS[:3]:
        sizes = (1, 2, 3, 10) if kind != "GenCeption, unequal categories" else (5, 6, 7, 12)
        cells = [headline_coverage(kind, u, draws, rng) for u in sizes]
        label = kind if kind != "GenCeption, unequal categories" else kind + " (5,6,7,12 images)"
        print(f"{label:<48} " + " ".join(f"{c:>9.3f}" if c is not None else f"{'-':>9}" for c in cells), flush=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
