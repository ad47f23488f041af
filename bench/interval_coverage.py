"""Coverage of GenCeption's and ChEF's headline intervals at small n (issue 48, what was left):
``python bench/decisions.py --coverage`` runs this.

Synthetic data whose truth is known by construction, fed to the very functions a run reports with:

- GenCeption (``methods/genception._score``: the mean of category means, the bootstrap within categories):
  unequal categories, two of them holding one image (sizes in ``GC_SIZES``), or none (``GC_SIZES_2``); GC per image
  = mu_c - 0.5 e g + N(0, sd_c), g ~ U(0.5, 1.5), e = 0.1, mu_c evenly in [0.3, 0.6], sd_c evenly in
  [0.05, 0.15] (unequal spreads: a one-image category borrows the spread of all images); the truth is
  mean(mu_c) - 0.05 (the categories fixed, as a benchmark fixes them).
- ChEF, one item per image or 4 items per image (clustered by image): an item is right in the original setting
  when u >= 0.2 h and under corruption when u >= 0.4 h (u ~ U(0, 1), so the two are correlated), h the image's
  difficulty 2 Beta(2, 2) times, with 4 items a picture, the item's U(0.75, 1.25); 4 options (chance 0.25).
  Truth: accuracy 0.8, corrupted 0.6, RRM = (0.6 - 0.25) / (0.8 - 0.25) x 100 = 63.64.  Measured: the cluster
  bootstrap of ChEF's ratios (``methods/chef/headline._boot``) on RRM and on the original accuracy (a mean, as
  the judge's score is), and the clustered Wilson interval its accuracy headline uses.

Each cell: before (the plain percentile interval of the very resamples the run's function drew; for RRM, the
expanded percentile interval it reported until the bound) -> after (the interval the run reports now: for RRM
below 15 images, ``methods/chef/headline.rrm_bound``, a labelled unbounded one counted as holding the truth).  Goal: coverage 0.93-0.97 (a labelled bound may cover more).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from vlmcheck.methods.chef.headline import _boot, _rrm_both, rrm_headline
from vlmcheck.methods.chef.items import Items, unit_counts
from vlmcheck.methods.genception import _score
from vlmcheck.metrics.decisions import proportion_interval_counts
from vlmcheck.metrics.stats import bootstrap_ci_strata

SIZES = (6, 10, 20, 30, 60)
#: images per category: two one-image categories, the rest unequal
GC_SIZES = {6: [1, 1, 2, 2], 10: [1, 1, 2, 3, 3], 20: [1, 1, 3, 6, 9], 30: [1, 1, 4, 10, 14],
            60: [1, 1, 8, 20, 30]}
#: the same without one-image categories (the smallest holds 2)
GC_SIZES_2 = {6: [2, 4], 10: [2, 3, 5], 20: [2, 3, 6, 9], 30: [2, 4, 10, 14], 60: [2, 8, 20, 30]}
RRM_TRUTH = (0.6 - 0.25) / (0.8 - 0.25) * 100


def gc_data(sizes: list[int], rng: np.random.Generator) -> tuple[np.ndarray, list[str], float]:
    n, k = sum(sizes), len(sizes)
    mu, sd = np.linspace(0.3, 0.6, k), np.linspace(0.05, 0.15, k)
    cats = [f"c{c}" for c, s in enumerate(sizes) for _ in range(s)]
    idx = np.array([int(c[1:]) for c in cats])
    v = mu[idx] - 0.05 * rng.uniform(0.5, 1.5, n) + rng.normal(0, sd[idx])
    return v, cats, float(mu.mean() - 0.05)


def chef_items(n_images: int, per_image: int, rng: np.random.Generator) -> Items:
    h = np.repeat(2 * rng.beta(2, 2, n_images), per_image)
    if per_image > 1:
        h = h * rng.uniform(0.75, 1.25, h.size)  # 0.4 h stays <= 1: the truths below hold exactly
    u = rng.random(h.size)
    units = np.repeat(np.arange(n_images), per_image)
    cols = {name: {"correct": u >= cut * h, "pred": np.zeros(h.size, dtype=np.int64)}
            for name, cut in (("original", 0.2), ("corrupt:both", 0.4))}
    m = h.size
    return Items(units, [f"i{i}" for i in range(n_images)], np.full(m, 4.0), ["original", "corrupt:both"], cols, -1,
                 np.full(m, -1), np.zeros(m, dtype=bool))


def coverage(draw: Callable[[np.random.Generator], tuple[list, float]], draws: int, seed: int) -> list[float]:
    """Per interval a draw returns (several: before and after, from the same resamples), the share of ``draws``
    datasets whose interval holds the truth."""
    rng = np.random.default_rng(seed)
    hits = None
    for _ in range(draws):
        cis, truth = draw(rng)
        got = [int(ci is not None and bool(ci[0] <= truth <= ci[1])) for ci in cis]  # numpy bools add as "or"
        hits = got if hits is None else [h + g for h, g in zip(hits, got)]
    return [h / draws for h in hits]


def plain(reps: list[float], alpha: float = 0.05) -> list[float]:
    """The plain percentile interval of the replicates (what the headlines used before)."""
    return [float(np.quantile(reps, alpha / 2)), float(np.quantile(reps, 1 - alpha / 2))]


def rows(draws: int, gc_rows: bool = True, per_image: tuple[int, ...] = (1, 4),
         figures: tuple[str, ...] = ("rrm", "accuracy", "wilson"), sizes: tuple[int, ...] = SIZES):
    """(label, [(before, after) per size]); before: the plain percentile interval of the same resamples."""
    for one_image in (True, False) if gc_rows else ():
        sizes = GC_SIZES if one_image else GC_SIZES_2

        def gc(n, sizes=sizes):
            def one(rng):
                v, cats, truth = gc_data(sizes[n], rng)
                return [bootstrap_ci_strata(v, cats, seed=0), _score(v, cats, seed=0)["ci95"]], truth
            return one

        label = "2 of one image" if one_image else "2-30 images each"
        yield (f"GenCeption GC, unequal categories, {label}", [coverage(gc(n), draws, n) for n in sizes])
    for per in per_image:
        label = "one item per image" if per == 1 else "4 items per image"

        def boot(n, stat, truth, per=per, bounded=False):
            def one(rng):
                it = chef_items(n, per, rng)
                value, reps = stat(it), []

                def recorded(sub):
                    v = stat(sub)
                    reps.append(v)
                    return v

                if stat is _rrm_both:  # before: the expanded percentile bootstrap the run reported until now;
                    # after: as the run reports RRM now (below 15 images the bound, labelled)
                    before = _boot(it, "x", value, stat, seed=0)["ci95"]
                    entry = rrm_headline(it, value, 0, boot=lambda *a, **k: {"ci95": before, "interval": {}})
                    after = entry["ci95"]
                    if after is None and str(entry["interval"].get("method")).startswith("unbounded"):
                        after = [-np.inf, np.inf]  # a labelled unbounded interval holds the truth
                    return [before, after], truth
                else:
                    after = _boot(it, "x", value, recorded, seed=0, bounded=bounded)["ci95"]
                reps = [r for r in reps if r is not None and np.isfinite(r)]
                return [plain(reps) if reps else None, after], truth
            return one

        def wilson(n, per=per):
            def one(rng):
                it = chef_items(n, per, rng)
                ci = proportion_interval_counts(*unit_counts(it.units, it.cols["original"]["correct"]), "image")[0]
                return [ci, ci], 0.8
            return one

        accuracy = lambda it: float(np.mean(it.cols["original"]["correct"]))  # noqa: E731
        if "rrm" in figures:
            yield (f"ChEF RRM (bootstrap -> bound < 15 images), {label}",
                   [coverage(boot(n, _rrm_both, RRM_TRUTH), draws, n) for n in sizes])
        if "accuracy" in figures:
            yield (f"ChEF accuracy by cluster bootstrap, {label}",
                   [coverage(boot(n, accuracy, 0.8), draws, n) for n in sizes])
        if "bounded" in figures:  # as a [0, 1] figure (1 - ECE, WeightedACC, mAP) is read: the bound where the
            # resamples have no spread (every image right) or there are 5 images or fewer
            yield (f"ChEF accuracy by cluster bootstrap read as a [0, 1] figure, {label}",
                   [coverage(boot(n, accuracy, 0.8, bounded=True), draws, n) for n in sizes])
        if "wilson" in figures:
            yield (f"ChEF accuracy, clustered Wilson (unchanged), {label}",
                   [coverage(wilson(n), draws, n) for n in sizes])


def main(draws: int = 300, gc_rows: bool = True, per_image: tuple[int, ...] = (1, 4),
         figures: tuple[str, ...] = ("rrm", "accuracy", "wilson"), sizes: tuple[int, ...] = SIZES) -> None:
    started = time.perf_counter()
    print(f"headline interval coverage, {draws} datasets a cell, before (plain percentile) -> after (the run's "
          "interval now), from the same resamples (goal 0.93-0.97)")
    print(f"{'interval':<60} " + " ".join(f"{f'{n} units':>13}" for n in sizes))
    for label, cells in rows(draws, gc_rows, per_image, figures, sizes):
        print(f"{label:<60} " + " ".join(f"{b:>6.3f}->{a:.3f}" for b, a in cells), flush=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
