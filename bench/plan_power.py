"""Does `vlmcheck plan`'s n achieve its stated power with the test `compare` runs?

    python bench/plan_power.py [--datasets 400]      # ~2-4 min on a loaded 2-core CPU

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


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=int, default=400)
    main(ap.parse_args().datasets)
