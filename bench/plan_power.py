"""Does `vlmcheck plan`'s n achieve its stated power with the test `compare` runs?

    python bench/plan_power.py [--datasets 400]      # ~2-4 min on a loaded 2-core CPU
    python bench/plan_power.py --pilots 20 --datasets 400   # how plan's n varies over pilots of 15-120 units

Two models' answers per unit share a unit effect: a unit's error rate under A is v ~ Beta (mean 0.15, intra-unit
correlation rho), under B min(1, 2 v) (shares 0.85 and about 0.70); within a unit, answers under A and B share
their chance either wholly (one-way: B right implies A right) or half the time (two-way).  A pilot of the given
units is drawn, `plan` (methods/plan.plan_metric, the function behind `vlmcheck plan` with two pilots) gives
the paired n for delta = the true difference at power 0.8, and then datasets of that many samples (whole units)
are drawn from the same model and compared with `compare`'s procedure (methods/compare.pairwise): the share
where it separates the two is the achieved power, with its Monte Carlo error.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vlmcheck.methods.compare import pairwise  # noqa: E402
from vlmcheck.methods.plan import plan_metric  # noqa: E402
from vlmcheck.run.task import Outcome  # noqa: E402

PA, PB = 0.85, 0.70


def draw(rng: np.random.Generator, units: int, per: int, rho: float, layout: str) -> tuple[dict, dict]:
    """Two runs' outcomes ({sample id: Outcome}) on ``units`` units of ``per`` answers."""
    s = (1 - rho) / rho
    v = np.repeat(rng.beta((1 - PA) * s, PA * s, size=units), per)
    z = rng.random(units * per)
    z2 = z if layout == "one-way" else np.where(rng.random(units * per) < 0.5, z, rng.random(units * per))
    xa = (z >= v).astype(float)
    xb = (z2 >= np.minimum(1.0, v * (1 - PB) / (1 - PA))).astype(float)
    names = [f"u{i // per}" for i in range(units * per)]
    a = {f"s{i}": Outcome(float(x), u, None, binary=True) for i, (x, u) in enumerate(zip(xa, names))}
    b = {f"s{i}": Outcome(float(x), u, None, binary=True) for i, (x, u) in enumerate(zip(xb, names))}
    return a, b


def truth(rho: float) -> float:
    s = (1 - rho) / rho
    v = np.random.default_rng(1).beta((1 - PA) * s, PA * s, size=2_000_000)
    return PA - (1 - float(np.minimum(1.0, v * (1 - PB) / (1 - PA)).mean()))


def achieved(rng: np.random.Generator, units: int, per: int, rho: float, layout: str, datasets: int) -> float:
    hits = 0
    for _ in range(datasets):
        a, b = draw(rng, units, per, rho, layout)
        row = pairwise([a, b], "acc", intervals=False)["pairs"][0]
        hits += bool(row["separated"]) and row["difference"] > 0
    return hits / datasets


def main(datasets: int) -> None:
    rng = np.random.default_rng(0)
    print("| answers a unit | intra-unit correlation | layout | pilot units | paired test planned | plan's n "
          "(samples) | units | achieved power | +/- |")
    print("|---|---|---|---|---|---|---|---|---|")
    cases = [(6, 1 / 3, "one-way", 30)] * 3 + [(6, 1 / 3, "two-way", 30)] * 3 + [(6, 1 / 3, "one-way", 200)] + \
        [(1, 1 / 3, "one-way", 100)] * 2 + [(1, 1 / 3, "two-way", 100)] * 2 + [(12, 0.1, "two-way", 30)] * 2
    for per, rho, layout, pilot_units in cases:  # repeated rows: another pilot drawn from the same model
        delta = truth(rho)
        a, b = draw(rng, pilot_units, per, rho, layout)
        row = plan_metric("acc", a, b, delta, 0.8, 0.05)
        n = row["n_paired"]
        units = math.ceil(n / per)
        p = achieved(rng, units, per, rho, layout, datasets)
        print(f"| {per} | {rho:.2f} | {layout} | {pilot_units} | {row['paired_test'].split(':')[0]} | {n} | {units} | {p:.3f} | "
              f"{math.sqrt(p * (1 - p) / datasets):.3f} |", flush=True)


def power_at(rng: np.random.Generator, units: int, per: int, rho: float, layout: str, datasets: int) -> float:
    """:func:`achieved` without the whole procedure: compare's clustered McNemar is the exact sign-flip test of
    the units' integer sums (A-only minus B-only answers; metrics/paired._integer_p, checked against
    metrics/signflip.p_at_zero by a test), all datasets at once."""
    from vlmcheck.metrics.paired import _integer_p

    s = (1 - rho) / rho  # draw's model, every dataset at once
    v = np.repeat(rng.beta((1 - PA) * s, PA * s, size=(datasets, units)), per, axis=1)
    z = rng.random(v.shape)
    z2 = z if layout == "one-way" else np.where(rng.random(v.shape) < 0.5, z, rng.random(v.shape))
    xa = (z >= v).astype(np.int64)
    xb = (z2 >= np.minimum(1.0, v * (1 - PB) / (1 - PA))).astype(np.int64)
    D = (xa - xb).reshape(datasets, units, per).sum(2)
    return float(((_integer_p(D) <= 0.05) & (D.sum(1) > 0)).mean())


def pilots(count: int, datasets: int, sizes=(15, 30, 60, 120), per: int = 6, rho: float = 1 / 3,
           layout: str = "two-way") -> None:
    """How plan's n varies with the pilot: ``count`` pilots of each size from one model, each planned, and the
    power the test reaches at each plan's n (``datasets`` datasets each); the n that truly gives 0.80 beside."""
    rng = np.random.default_rng(7)
    delta = truth(rho)
    lo, hi = 5, 200  # the fewest units at which the test reaches 0.80 (bisection; common random numbers)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(np.random.default_rng(1), mid, per, rho, layout, 4000) >= 0.8 else (mid, hi)
    target = hi
    print(f"{per} answers a unit, ICC {rho:.2f}, {layout}: 0.80 power needs {target} units "
          f"({target * per} samples; 4,000 datasets a size)")
    print("| pilot units | plan's units: median | 10-90 % of pilots | achieved power: mean | lowest | "
          "pilots under 0.70 | printed range holds the true n |")
    print("|---|---|---|---|---|---|---|")
    for size in sizes:
        got, pw, held = [], [], 0
        for _ in range(count):
            a, b = draw(rng, size, per, rho, layout)
            row = plan_metric("acc", a, b, delta, 0.8, 0.05)
            u = math.ceil(row["n_paired"] / per)
            lo, hi = (math.ceil(x / per) if x is not None else None for x in row["n_paired_range"])
            got.append(u)
            pw.append(power_at(rng, u, per, rho, layout, datasets))
            held += lo is not None and hi is not None and lo <= target <= hi
        got, pw = np.array(got), np.array(pw)
        print(f"| {size} | {int(np.median(got))} | {int(np.quantile(got, 0.1))}-{int(np.quantile(got, 0.9))} | "
              f"{pw.mean():.3f} | {pw.min():.3f} | {(pw < 0.7).mean():.2f} | {held / count:.2f} |", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=int, default=400)
    ap.add_argument("--pilots", type=int, default=0,
                    help="instead: this many pilots of 15-120 units each, plan's n and its power per pilot")
    args = ap.parse_args()
    if args.pilots:
        pilots(args.pilots, args.datasets)
    else:
        main(args.datasets)
