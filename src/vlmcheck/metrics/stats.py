"""Shared statistics: cosine similarity and bootstrap confidence intervals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    if denom == 0:
        raise ValueError("cosine of a zero vector is undefined")
    return float(a @ b / denom)


def bootstrap_ci(values, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of resampled ``values``."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return (float(x[0]), float(x[0])) if x.size else (float("nan"), float("nan"))
    idx = np.random.default_rng(seed).integers(0, x.size, size=(n_boot, x.size))
    return _percentiles(x[idx].mean(axis=1), level)


def _percentiles(stats: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(lo), float(hi)


def _strata(values, strata) -> list[np.ndarray]:
    """``values`` split by ``strata`` (one key per value), strata in order of first appearance."""
    x = np.asarray(values, dtype=float)
    keys = list(strata)
    if x.size != len(keys):
        raise ValueError("one stratum per value is needed")
    return [x[[i for i, k in enumerate(keys) if k == key]] for key in dict.fromkeys(keys)]


def bootstrap_ci_strata(values, strata, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of stratum means (:func:`mean_of_means`), resampling within every
    stratum, each resampled mean rescaled about its own by sqrt(n_c / (n_c - 1)) (Rao and Wu, 1988); a stratum of
    one value is moved by a residual drawn from all values around their grand mean (docs/methods.md, GenCeption)."""
    groups = _strata(values, strata)
    if not groups:
        return (float("nan"), float("nan"))
    allv = np.concatenate(groups)
    rng = np.random.default_rng(seed)
    resid = (allv - allv.mean()) * (np.sqrt(allv.size / (allv.size - 1)) if allv.size > 1 else 0.0)
    cols = []
    for g in groups:
        if g.size > 1:
            cols.append(g.mean() + np.sqrt(g.size / (g.size - 1))
                        * (g[rng.integers(0, g.size, size=(n_boot, g.size))].mean(axis=1) - g.mean()))
        else:
            cols.append(g[0] + resid[rng.integers(0, resid.size, size=n_boot)])
    return _percentiles(np.stack(cols, axis=1).mean(axis=1), level)


def strata_level(values, strata, level: float = 0.95) -> float:
    """The level at which :func:`bootstrap_ci_strata`'s interval is the expanded percentile one: 1 - 2
    Phi(-t_{df, (1 + level)/2}), df the Welch-Satterthwaite df of sum_c s_c^2 / n_c (a one-image stratum: all
    values' spread, on N - 1 df); ``level`` itself when no stratum has spread."""
    from statistics import NormalDist

    from scipy.stats import t

    groups = _strata(values, strata)
    allv = np.concatenate(groups) if groups else np.zeros(0)
    if allv.size < 2:
        return level
    s2_all = float(allv.var(ddof=1))
    a = np.array([g.var(ddof=1) / g.size if g.size > 1 else s2_all for g in groups])
    dfs = np.array([g.size - 1 if g.size > 1 else allv.size - 1 for g in groups], dtype=float)
    if a.sum() <= 0:
        return level
    df = float(a.sum() ** 2 / (a ** 2 / dfs).sum())
    return 1 - 2 * NormalDist().cdf(-float(t.ppf((1 + level) / 2, df)))


def mean_of_means(values, strata) -> float:
    """Mean over strata of the within-stratum mean, every stratum weighing the same: GenCeption's overall
    MMECeption score over categories (v1 section 3.1, v2 Tables 2 and 4 "Overall Mean"), not the mean over images."""
    groups = _strata(values, strata)
    if not groups:
        raise ValueError("mean_of_means of no values")
    return float(np.mean([g.mean() for g in groups]))


def gc_at(similarities, t: int | None = None) -> float:
    """GenCeption's GC@T (eq. 3): sum_t t*s(t) / sum_t t over t = 1..T, over the first ``t`` (default all) of
    [s(1), ..., s(T')].  Fewer than ``t`` terms is an error (the authors' code normalised over fewer terms)."""
    s = np.asarray(similarities, dtype=float)
    t = len(s) if t is None else t
    if t < 1 or len(s) < t:
        raise ValueError(f"GC@{t} needs {t} similarities, got {len(s)}")
    w = np.arange(1, t + 1, dtype=float)
    return float((w * s[:t]).sum() / w.sum())


def frechet_distance(x: np.ndarray, y: np.ndarray) -> float:
    """Frechet distance between Gaussians fitted to two feature sets (rows = samples): ||mu_x - mu_y||^2 +
    Tr(C_x + C_y - 2 (C_x C_y)^(1/2)), as in FID (torchmetrics' FID wants images and a module; tested against it)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape[0] < 2 or y.shape[0] < 2:
        raise ValueError("a Frechet distance needs at least two samples per set")
    mu1, mu2 = x.mean(0), y.mean(0)
    xc, yc = x - mu1, y - mu2
    k1, k2 = x.shape[0] - 1, y.shape[0] - 1
    tr1, tr2 = float((xc ** 2).sum() / k1), float((yc ** 2).sum() / k2)
    d = float(((mu1 - mu2) ** 2).sum() + tr1 + tr2 - 2 * _trace_sqrt_product(xc, yc, k1, k2))
    return max(d, 0.0)  # round-off can leave a tiny negative for identical sets


def _trace_sqrt_product(xc: np.ndarray, yc: np.ndarray, k1: int, k2: int) -> float:
    """Tr((C_x C_y)^(1/2)) for C_x = xc^T xc / k1, C_y = yc^T yc / k2, without ``scipy.linalg.sqrtm`` (inexact on
    singular products): with fewer samples than dimensions, the singular values of xc yc^T / sqrt(k1 k2)."""
    if max(xc.shape[0], yc.shape[0]) < xc.shape[1]:
        return float(np.linalg.svd(xc @ yc.T / np.sqrt(k1 * k2), compute_uv=False).sum())
    return _trace_root(xc.T @ xc / k1, yc.T @ yc / k2)


def _trace_root(c1: np.ndarray, c2: np.ndarray) -> float:
    """Tr((C_1 C_2)^(1/2)): the square roots of the eigenvalues of the symmetric C_1^(1/2) C_2 C_1^(1/2), summed."""
    w, v = np.linalg.eigh(c1)
    root = (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(root @ c2 @ root), 0.0, None)).sum())


@dataclass(eq=False)  # a set of rows is itself, never equal to another
class FeatureSet:
    """Feature rows added one at a time, for :func:`frechet_between`: kept as rows while no more than dimensions
    (:func:`frechet_distance`'s exact few-samples path), as moments beyond (d x d numbers, not a million rows)."""

    n: int = 0
    rows: list[np.ndarray] | None = field(default_factory=list)
    total: np.ndarray | None = None
    outer: np.ndarray | None = None

    @property
    def dim(self) -> int:
        return int(self.total.size if self.total is not None else self.rows[0].size) if self.n else 0

    def add(self, x: Any) -> None:
        x = np.asarray(x, dtype=np.float64).ravel()
        self.n += 1
        if self.rows is not None:
            self.rows.append(x)
            if len(self.rows) > x.size:  # more rows than dimensions: moments from now on
                (self.total, self.outer), self.rows = self._sums(), None
            return
        self.total += x
        self.outer += np.outer(x, x)

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance (divisor n - 1)."""
        total, outer = self._sums() if self.rows is not None else (self.total, self.outer)
        mu = total / self.n
        return mu, (outer - self.n * np.outer(mu, mu)) / (self.n - 1)

    def _sums(self) -> tuple[np.ndarray, np.ndarray]:
        m = np.array(self.rows)
        return m.sum(0), m.T @ m


def frechet_between(a: FeatureSet, b: FeatureSet) -> float:
    """:func:`frechet_distance` of two :class:`FeatureSet` s: from their rows where both still have them, else
    from their moments (the same formula as its many-samples path)."""
    if a.n < 2 or b.n < 2:
        raise ValueError("a Frechet distance needs at least two samples per set")
    if a.rows is not None and b.rows is not None:
        return frechet_distance(np.array(a.rows), np.array(b.rows))
    (mu1, c1), (mu2, c2) = a.moments(), b.moments()
    return max(float(((mu1 - mu2) ** 2).sum() + np.trace(c1) + np.trace(c2) - 2 * _trace_root(c1, c2)), 0.0)


def correlations(x, y) -> dict[str, float]:
    """Pearson, Spearman and Kendall correlation of two paired sequences, each with its two-sided p-value."""
    from scipy import stats

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    out: dict[str, float] = {"n": int(x.size)}
    defined = x.size >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0  # undefined for fewer than 3 points or a constant
    for name, fn in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        res = fn(x, y) if defined else (float("nan"), float("nan"))
        out[name], out[f"{name}_p"] = float(res[0]), float(res[1])
    return out


def ranks(scores: dict[str, float], higher_is_better: bool = True) -> dict[str, float]:
    """Rank 1 = best; tied entries share the best rank of their group (1, 2, 2, 4), as the
    GenCeption tables print them ("5, 5, 7")."""
    from scipy.stats import rankdata

    names = list(scores)
    vals = np.array([scores[n] for n in names], dtype=float)
    r = rankdata(-vals if higher_is_better else vals, method="min")
    return {n: float(v) for n, v in zip(names, r)}


#: above this share of a setting's answers that POPE's rule could not read (``core.answers.read_yes_no``: None), the
#: run warns (terminal, report, results.json): POPE's rule then scores them "yes" by default, so the accuracy says
#: more about the rule than the model (docs/methods.md)
UNREAD_WARN_SHARE = 0.10


def symmetric_accuracy(pairs) -> float:
    """Share of (correct_original, correct_negated) pairs answered correctly both times (VHExpansion Def. 3)."""
    pairs = list(pairs)
    return sum(1 for a, b in pairs if a and b) / len(pairs) if pairs else float("nan")


def iou(a, b) -> float:
    """Intersection over union of two [x1, y1, x2, y2] boxes."""
    iw = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    ih = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
