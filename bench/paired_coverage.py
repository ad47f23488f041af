"""Coverage of `compare`'s interval of a paired difference of binary answers, and of the clustered share.

    python bench/paired_coverage.py            # exact coverage, one answer a unit (enumeration), ~1 min
    python bench/paired_coverage.py --clustered [--datasets 400]   # simulated, several answers a unit
    python bench/paired_coverage.py --share --datasets 4000       # the clustered share alone, ~2 min

One answer a unit: every table (b right under A only, c under B only, of n) is enumerated, its interval made by
the function `compare` reports with (metrics/signflip.paired_decision + decision_interval: Agresti-Min made to
agree with the exact McNemar test: the hull of Tango's and Agresti-Min's intervals, holding 0 where the test does not reject), and the coverage of the true difference p_b - p_c is the sum of the
multinomial probabilities of the tables whose interval holds it - exact, no Monte Carlo.  The table gives, per
n, the smallest coverage over a grid of (p_b, p_c): one-way (p_c = 0: only one run errs where the other is
right, the world's layout) and two-way (both).

Several answers a unit (--clustered): units of 4 or 12 answers whose right/wrong under A and B share a unit
effect (a unit's error rate under A v ~ Beta with mean 0.15 and intra-unit correlation 0.1 or 1/3, under B
min(1, 2 v): shares 0.85 and about 0.70), one-way (B right implies A right) or two-way; the
difference's interval as `compare` makes it (the hull on the effective counts, t on units - 1 df), and the
clustered Wilson share of one run (metrics/decisions.wilson_clustered); coverage over datasets with its Monte
Carlo error.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scipy.special import gammaln  # noqa: E402

from vlmcheck.metrics.decisions import wilson_clustered  # noqa: E402
from vlmcheck.metrics.paired import paired_interval  # noqa: E402
from vlmcheck.metrics.signflip import decision_interval, paired_decision  # noqa: E402

SIZES = (8, 10, 12, 15, 20, 30, 40, 60)


def table_intervals(n: int, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (b, c) with b + c <= n and its interval, as compare makes it for one answer a unit."""
    bs, cs, los, his = [], [], [], []
    w = np.full(n, 1.0 / n)
    for b in range(n + 1):
        for c in range(n + 1 - b):
            d = np.r_[np.full(b, 1.0), np.full(c, -1.0), np.zeros(n - b - c)] / n
            dec = paired_decision(d, w, (-1.0, 1.0), binary=True, single_answers=True, counts=(b, c, n))
            (lo, hi), _ = decision_interval(dec, alpha)
            bs.append(b), cs.append(c), los.append(lo), his.append(hi)
    return np.array(bs), np.array(cs), np.array(los), np.array(his)


def coverage(n: int, tabs, pb: float, pc: float) -> float:
    b, c, lo, hi = tabs
    r = n - b - c
    with np.errstate(divide="ignore"):
        logp = (gammaln(n + 1) - gammaln(b + 1) - gammaln(c + 1) - gammaln(r + 1)
                + np.where(b > 0, b * np.log(max(pb, 1e-300)), 0.0) + np.where(c > 0, c * np.log(max(pc, 1e-300)), 0.0)
                + np.where(r > 0, r * np.log(max(1 - pb - pc, 1e-300)), 0.0))
    prob = np.exp(logp)
    if pb == 0:
        prob[b > 0] = 0
    if pc == 0:
        prob[c > 0] = 0
    truth = pb - pc
    hold = (lo <= truth + 1e-12) & (truth - 1e-12 <= hi)
    return float(prob[hold].sum())


def exact_table() -> None:
    one_way = [(pb, 0.0) for pb in np.round(np.arange(0.0025, 0.7, 0.0025), 4)]
    grid = np.round(np.arange(0.01, 0.7, 0.02), 3)
    two_way = [(pb, pc) for pb in grid for pc in grid if pb + pc <= 0.95]
    print("| units | one-way, smallest | (at p_b) | one-way, mean | two-way, smallest | (at p_b, p_c) | "
          "two-way, mean | tables where the test rejects but the hull holds 0 |")
    print("|---|---|---|---|---|---|---|---|")
    for n in SIZES:
        t0 = time.time()
        tabs = table_intervals(n)
        ow = [coverage(n, tabs, pb, pc) for pb, pc in one_way]
        tw = [coverage(n, tabs, pb, pc) for pb, pc in two_way]
        i, j = int(np.argmin(ow)), int(np.argmin(tw))
        # how often the agreement rule had to cut the interval short of 0 (the test rejects, the hull holds 0)
        cut = sum(1 for b, c, lo, hi in zip(*tabs) if (lambda a: a[0] <= 0 <= a[1])(paired_interval(b, c, n))
                  and not lo <= 0 <= hi)
        print(f"| {n} | {min(ow):.3f} | {one_way[i][0]:.2f} | {np.mean(ow):.3f} | {min(tw):.3f} | "
              f"{two_way[j][0]:.2f}, {two_way[j][1]:.2f} | {np.mean(tw):.3f} | {cut} |", flush=True)
        del t0


def clustered_table(datasets: int, seed: int = 0) -> None:
    from vlmcheck.methods.compare import pairwise
    from vlmcheck.run.task import Outcome

    rng = np.random.default_rng(seed)
    print("| intra-unit correlation | units x answers | layout | difference interval covers | +/- | "
          "share of A (clustered Wilson) covers | +/- |")
    print("|---|---|---|---|---|---|---|")
    pa, pb_ = 0.85, 0.70
    for rho in (0.1, 1 / 3):
        s_ab = (1 - rho) / rho  # Beta(a, b) with a + b = (1 - rho) / rho: answers of a unit correlate rho
        big = rng.beta((1 - pa) * s_ab, pa * s_ab, size=1_000_000)
        truth_a = pa
        truth_b = 1 - float(np.minimum(1.0, big * (1 - pb_) / (1 - pa)).mean())  # +/- 0.0005
        for per in (4, 12):
            for m in (6,) + SIZES:
                for layout in ("one-way", "two-way"):
                    hits_d = hits_s = 0
                    for _ in range(datasets):
                        # a unit's error rate under A is v ~ Beta, under B min(1, 2 v); its answers share it
                        v = np.repeat(rng.beta((1 - pa) * s_ab, pa * s_ab, size=m), per)
                        z = rng.random(m * per)
                        if layout == "one-way":  # one uniform, two thresholds: B right implies A right
                            z2 = z
                        else:  # half of the answers' chances shared, half independent
                            z2 = np.where(rng.random(m * per) < 0.5, z, rng.random(m * per))
                        xa = (z >= v).astype(float)
                        xb = (z2 >= np.minimum(1.0, v * (1 - pb_) / (1 - pa))).astype(float)
                        units = [f"u{i // per}" for i in range(m * per)]
                        A = {f"s{i}": Outcome(float(x), u, None, binary=True) for i, (x, u) in enumerate(zip(xa, units))}
                        B = {f"s{i}": Outcome(float(x), u, None, binary=True) for i, (x, u) in enumerate(zip(xb, units))}
                        row = pairwise([A, B], "acc")["pairs"][0]
                        hits_d += row["ci95"][0] <= truth_a - truth_b <= row["ci95"][1]
                        lo, hi, _ = wilson_clustered(xa.reshape(m, per).sum(1), np.full(m, per))
                        hits_s += lo <= truth_a <= hi
                    cd, cs = hits_d / datasets, hits_s / datasets
                    print(f"| {rho:.2f} | {m} x {per} | {layout} | {cd:.3f} | {math.sqrt(cd * (1 - cd) / datasets):.3f} "
                          f"| {cs:.3f} | {math.sqrt(cs * (1 - cs) / datasets):.3f} |", flush=True)


def share_table(datasets: int, seed: int = 0) -> None:
    """The clustered Wilson share of one run alone (metrics/decisions.wilson_clustered), many datasets a cell:
    A's answers as in :func:`clustered_table` (units whose answers share an error rate v ~ Beta, mean 0.15)."""
    rng = np.random.default_rng(seed)
    pa = 0.85
    print("| clustered share | " + " | ".join(str(m) for m in (6,) + SIZES) + " |")
    print("|---|" + "---|" * (len(SIZES) + 1))
    for rho in (0.1, 1 / 3):
        s_ab = (1 - rho) / rho
        for per in (4, 12):
            cells = []
            for m in (6,) + SIZES:
                v = rng.beta((1 - pa) * s_ab, pa * s_ab, size=(datasets, m))
                k = rng.binomial(per, 1 - v)  # right answers per unit
                hits = 0
                for row in k:
                    lo, hi, _ = wilson_clustered(row, np.full(m, per))
                    hits += lo <= pa <= hi
                c = hits / datasets
                cells.append(f"{c:.3f} ± {math.sqrt(c * (1 - c) / datasets):.3f}")
            print(f"| ICC {rho:.2f}, {per} answers a unit | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clustered", action="store_true")
    ap.add_argument("--share", action="store_true", help="the clustered share alone, --datasets a cell")
    ap.add_argument("--datasets", type=int, default=400)
    args = ap.parse_args()
    if args.share:
        share_table(args.datasets)
    elif args.clustered:
        clustered_table(args.datasets)
    else:
        exact_table()
