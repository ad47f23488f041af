"""Shared statistics: cosine similarity and bootstrap confidence intervals."""

from __future__ import annotations

from typing import Callable

import numpy as np


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    if denom == 0:
        raise ValueError("cosine of a zero vector is undefined")
    return float(a @ b / denom)


def bootstrap_ci(values, statistic: Callable[[np.ndarray], float] = np.mean, n_boot: int = 2000,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over resampled ``values``."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return (float("nan"), float("nan"))
    if x.size == 1:
        return (float(x[0]), float(x[0]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    stats = np.array([statistic(x[i]) for i in idx]) if statistic is not np.mean else x[idx].mean(axis=1)
    alpha = (1 - level) / 2
    return (float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha)))
