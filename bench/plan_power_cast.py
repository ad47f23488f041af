"""Does `vlmcheck plan`'s n for a CAST comparison achieve its stated power with the test `compare` runs?

    python bench/plan_power_cast.py [--pilots 40] [--datasets 300] [--sizes 10,20,40]   # ~8 min, loaded 2 cores
    (the table in docs/world.md: --pilots 20 --datasets 200 --no-true-n, ~4 min)

Two models' verdict codes on the same scene pairs, drawn as bench/cast_coverage.py draws them (pair effect
b_i ~ N(0, tau) on the logit, statements per generation tied to it, a per-statement effect, 5 % unreadable):
the pair effect is shared by the two models, everything else drawn for each; the models differ in their mean
logit, set so that their headlines (methods/cast_scores.headline_of_sums of 400,000 pairs) are 0.50 and 0.65.
Each pilot (both models on ``size`` pairs) is planned by methods/plan.plan_metric (the function behind
`vlmcheck plan --pilot A --pilot B`) for the true difference at power 0.80, alpha 0.05; then ``datasets``
fresh datasets of plan's n pairs are compared by methods/compare.pairwise (what `vlmcheck compare` runs: for
CAST the swap test of whole pairs, the pooled headline recomputed, metrics/pooled.py), and the share in which
it separates the models in the true direction is that pilot's achieved power (simulated once for each n that
some pilot's plan gives, on ``datasets`` datasets).  Per cell: the mean over pilots with its Monte Carlo error
(the pilots' spread over sqrt(pilots) and the datasets' binomial error), the share of pilots under 0.70, and
plan's n (median, 10-90 % of pilots).  "true n": the fewest pairs
at which the swap test reaches 0.80 (bisection on 600 datasets a size, common random numbers).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cast_coverage import draw, sums  # noqa: E402

from vlmcheck.methods.cast_scores import headline_of_sums  # noqa: E402
from vlmcheck.methods.compare import pairwise  # noqa: E402
from vlmcheck.methods.plan import plan_metric  # noqa: E402
from vlmcheck.metrics.pooled import pooled_decision  # noqa: E402
from vlmcheck.run.task import Outcome  # noqa: E402

METRIC = "CAST Top-3 cross-modal consistency"
TARGETS = (0.50, 0.65)


def headline(tau: float, mu: float, pairs: int, seed: int = 123) -> float:
    num, den = sums(draw(pairs, tau, np.random.default_rng(seed), mu))
    return float(headline_of_sums(num.sum(0), den.sum(0)))


def calibrate(tau: float, target: float) -> float:
    """The mean logit whose headline is ``target`` (secant steps on 50,000 pairs, common random numbers)."""
    x0, x1 = 0.0, 1.0
    f0, f1 = headline(tau, x0, 50_000) - target, headline(tau, x1, 50_000) - target
    for _ in range(8):
        if abs(f1) < 2e-4:
            break
        x0, x1, f0 = x1, x1 - f1 * (x1 - x0) / (f1 - f0), f1
        f1 = headline(tau, x1, 50_000) - target
    return x1


def pair_draw(n: int, tau: float, mus: tuple[float, float], rng: np.random.Generator):
    """Per-pair (num, den) counts of models A and B on ``n`` shared pairs, each (n, K)."""
    b = rng.normal(0.0, tau, n)
    out = []
    for mu in mus:  # the pair's effect shared; statements, their effects and verdicts each model's own
        sub = np.random.default_rng(int(rng.integers(1 << 62)))
        out.append(sums(draw(n, tau, sub, mu, b=b)))
    return out


def runs(counts) -> list[dict[str, Outcome]]:
    """The {sample id: Outcome} of each model, as methods/outcomes._cast declares a CAST pair's."""
    res = []
    for num, den in counts:
        c = np.stack([num, den], -1)  # (n, K, 2)
        share = np.divide(num.sum(1), den.sum(1), out=np.zeros(len(num)), where=den.sum(1) > 0)
        res.append({f"p{i}": Outcome(float(share[i]), f"p{i}", counts=c[i], pooled=headline_of_sums)
                    for i in range(len(c))})
    return res


def power(n: int, tau: float, mus, rng, datasets: int, sign: float, fast: bool = False) -> float:
    hits = 0
    for _ in range(datasets):
        counts = pair_draw(n, tau, mus, rng)
        if fast:  # the same test without building outcomes: the swap test pairwise calls for CAST
            a, b = (np.stack(c, -1) for c in counts)
            dec = pooled_decision(a, b, headline_of_sums)
            hits += dec["p_value"] <= 0.05 and np.sign(dec["difference"]) == sign
        else:
            row = pairwise(runs(counts), METRIC, intervals=False)["pairs"][0]
            hits += bool(row["separated"]) and np.sign(row["difference"]) == sign
    return hits / datasets


def true_n(tau: float, mus, sign: float, datasets: int = 600) -> int:
    lo, hi = 5, 80
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok = power(mid, tau, mus, np.random.default_rng(11), datasets, sign, fast=True) >= 0.8
        lo, hi = (lo, mid) if ok else (mid, hi)
    return hi


def main(pilots: int, datasets: int, sizes: tuple[int, ...], taus=(0.5, 1.0), find_true: bool = True) -> None:
    rng = np.random.default_rng(0)
    print("| pair effect sd | headlines (A, B) | true n (pairs) | pilot pairs | plan's n: median (10-90 %) | "
          "achieved power: mean | +/- | pilots under 0.70 |")
    print("|---|---|---|---|---|---|---|---|")
    for tau in taus:
        t0 = time.time()
        mus = tuple(calibrate(tau, t) for t in TARGETS)
        ha, hb = (headline(tau, mu, 400_000, seed=321) for mu in mus)
        delta, sign = abs(ha - hb), float(np.sign(ha - hb))
        tn = true_n(tau, mus, sign) if find_true else None
        curve: dict[int, float] = {}  # the power at n does not depend on the pilot: each n simulated once
        for size in sizes:
            ns = []
            for _ in range(pilots):
                a, b = runs(pair_draw(size, tau, mus, rng))
                ns.append(plan_metric(METRIC, a, b, delta, 0.8, 0.05)["n_paired"])
            for n in set(ns) - set(curve):
                curve[n] = power(n, tau, mus, np.random.default_rng(n), datasets, sign)
            ns, pw = np.array(ns), np.array([curve[n] for n in ns])
            # the pilots' spread over sqrt(pilots), and the curve's binomial error (shared by pilots at one n)
            err = math.sqrt(pw.var(ddof=1) / pilots + pw.mean() * (1 - pw.mean()) / datasets)
            print(f"| {tau:.1f} | {ha:.3f}, {hb:.3f} | {tn if tn is not None else '-'} | {size} | "
                  f"{int(np.median(ns))} ({int(np.quantile(ns, 0.1))}-{int(np.quantile(ns, 0.9))}) | "
                  f"{pw.mean():.3f} | {err:.3f} | {(pw < 0.7).mean():.2f} |", flush=True)
        print(f"<!-- tau {tau}: {time.time() - t0:.0f} s; power by n: "
              + ", ".join(f"{n} {curve[n]:.2f}" for n in sorted(curve)) + " -->", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pilots", type=int, default=40)
    ap.add_argument("--datasets", type=int, default=300)
    ap.add_argument("--sizes", default="10,20,40")
    ap.add_argument("--taus", default="0.5,1.0")
    ap.add_argument("--no-true-n", action="store_true")
    args = ap.parse_args()
    main(args.pilots, args.datasets, tuple(int(x) for x in args.sizes.split(",")),
         tuple(float(x) for x in args.taus.split(",")), not args.no_true_n)
