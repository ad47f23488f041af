"""Coverage of CAST's headline interval at few scene pairs (``methods/cast_scores.headline_of_codes``, the function
a run reports it with), and of the candidate intervals it could use.

    python bench/cast_coverage.py [--datasets 400] [--sizes 6,8,10,12,15,20,30]

Synthetic verdict codes whose truth is known: pair i has an effect b_i ~ N(0, tau) on the logit of its
confirmation rate (mean rate about 0.85, cells offset by up to +/- 0.4 on the logit); its three generations write
1-3 statements each, fewer where b_i is high (so a pair's weight in the pooled ratio is tied to its rate and the
pooled headline differs from the mean of pair shares); each statement has its own effect N(0, 0.5) shared by its
validations and formats; 5 % of verdicts unreadable.  The truth is the headline of 400,000 pairs drawn alike (its
Monte Carlo error about 1e-4).  Per cell: coverage over datasets, with its Monte Carlo error.  "reported": the
interval a run reports (the jackknife over pairs on the logit scale, t on pairs - 1 df; a labelled Wilson bound
on 5 pairs or fewer or where it is undefined); the Wilson bound on the pairs at every n covered 1.000 (too wide
to use beyond those cases).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vlmcheck.methods.cast_scores import (  # noqa: E402
    CONFIRMED, CROSS_CELLS, FORMATS, MODALITIES, PARSED, UNPARSED, _counts, headline_of_codes, headline_of_sums)

SIZES = (6, 8, 10, 12, 15, 20, 30)
OFFSET = np.linspace(-0.4, 0.4, 9).reshape(3, 3)  # per (generation, validation) cell, on the logit


def draw(n: int, tau: float, rng: np.random.Generator, mu: float = 1.8, b: np.ndarray | None = None) -> np.ndarray:
    """Verdict codes of ``n`` pairs, shape (n, 3, 3, 3, 3); ``b`` the pairs' effects where given (two models on
    the same pairs share them: bench/plan_power_cast.py)."""
    b = rng.normal(0.0, tau, n) if b is None else b
    # statements per generation: 1 + Binomial(2, sigmoid(-b)): better pairs write fewer
    s = 1 + rng.binomial(2, 1 / (1 + np.exp(b)), size=(3, n)).T  # (n, 3)
    e = rng.normal(0.0, 0.5, size=(n, 3, 1, 1, 3))  # per statement, shared by its validations and formats
    logit = mu + b[:, None, None, None, None] + OFFSET[None, :, :, None, None] + e
    rate = 1 / (1 + np.exp(-logit))
    u = rng.random((n, 3, 3, 3, 3))
    codes = np.where(u < rate, CONFIRMED, PARSED).astype(np.int8)
    codes[rng.random((n, 3, 3, 3, 3)) < 0.05] = UNPARSED
    present = np.arange(3)[None, None, :] < s[:, :, None]  # (n, generation, position)
    return np.where(present[:, :, None, None, :], codes, 0).astype(np.int8)


def sums(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pair, the (confirming, parsed) verdicts of each cross-modal cell and format, in headline_of_sums' order."""
    c = np.stack([_counts(codes, g, v, f, range(3)) for g, v in CROSS_CELLS for f in FORMATS], 1)  # (n, K, 3)
    return c[..., 0], c[..., 1]


def truth(tau: float, seed: int = 123) -> float:
    rng = np.random.default_rng(seed)
    num = den = 0.0
    for _ in range(20):
        n_, d_ = sums(draw(20_000, tau, rng))
        num, den = num + n_.sum(0), den + d_.sum(0)
    return float(headline_of_sums(num, den))


def candidates(codes: np.ndarray, seed: int) -> dict[str, tuple[float, float]]:
    """Alternatives beside the run's own: the cluster bootstrap's expanded percentile interval over pairs (what
    the headline reported before), and the jackknife t interval on the headline's own scale."""
    from scipy.stats import t

    from vlmcheck.metrics.clusters import resampled_sums
    from vlmcheck.metrics.decisions import expanded_percentile

    num, den = sums(codes)
    n = len(codes)
    H = float(headline_of_sums(num.sum(0), den.sum(0)))
    boot = resampled_sums(np.concatenate([num, den], 1), seed, 2000)
    k = num.shape[1]
    reps = headline_of_sums(boot[:, :k], boot[:, k:])
    boot_ci = tuple(expanded_percentile(reps[~np.isnan(reps)], n))
    q = float(t.ppf(0.975, n - 1))
    # jackknife: the headline without each pair
    loo = np.array([float(headline_of_sums(num.sum(0) - num[i], den.sum(0) - den[i])) for i in range(n)])
    se_j = math.sqrt((n - 1) / n * ((loo - loo.mean()) ** 2).sum())
    return {"bootstrap, expanded percentile (before)": boot_ci, "jackknife t, headline's scale": (H - q * se_j, H + q * se_j)}


def main(datasets: int, sizes: tuple[int, ...], taus=(0.5, 1.0, 1.5)) -> None:
    rng = np.random.default_rng(0)
    names = ["reported", "bootstrap, expanded percentile (before)", "jackknife t, headline's scale"]
    print("| pair effect sd | truth | interval | " + " | ".join(str(n) for n in sizes) + " |")
    print("|---|---|---|" + "---|" * len(sizes))
    for tau in taus:
        t0 = time.time()
        true = truth(tau)
        hits = {k: {n: 0 for n in sizes} for k in names}
        bound = {n: 0 for n in sizes}
        for n in sizes:
            for _ in range(datasets):
                codes = draw(n, tau, rng)
                h = headline_of_codes(codes)
                lo, hi = h["ci95"]
                hits["reported"][n] += lo <= true <= hi
                bound[n] += "bound" in h["interval"]["method"]
                for k, (lo, hi) in candidates(codes, int(rng.integers(1 << 30))).items():
                    hits[k][n] += lo <= true <= hi
        for k in names:
            cells = []
            for n in sizes:
                c = hits[k][n] / datasets
                cells.append(f"{c:.3f} ± {math.sqrt(c * (1 - c) / datasets):.3f}")
            print(f"| {tau:.1f} | {true:.4f} | {k} | " + " | ".join(cells) + " |", flush=True)
        print(f"| {tau:.1f} | {true:.4f} | reported as a bound (share of datasets) | "
              + " | ".join(f"{bound[n] / datasets:.3f}" for n in sizes) + " |", flush=True)
        print(f"<!-- tau {tau}: {time.time() - t0:.0f} s -->", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=int, default=400)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = ap.parse_args()
    main(args.datasets, tuple(int(x) for x in args.sizes.split(",")))
