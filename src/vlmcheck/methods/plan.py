"""How many samples a comparison needs (``vlmcheck plan --pilot RUN [--pilot RUN_B] --delta D``).

From one pilot run: the spread of its per-unit values (``methods/compare.unit_values``) gives the n per run that
detects a difference ``delta`` between two independent runs of that spread, and the minimum detectable
difference at the pilot's own n.  From two pilot runs of one method: the spread of their paired differences,
which their correlation makes smaller than two independent spreads, gives the n of common samples.  Two-sided
at ``alpha``, with ``power`` (normal approximation: ``metrics/decisions.py``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..metrics.decisions import mde, n_for_difference
from .compare import _pair, unit_values


def plan(pilots: list[str | Path], delta: float, power: float = 0.8, alpha: float = 0.05) -> dict[str, Any]:
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise ValueError("power and alpha lie strictly between 0 and 1")
    if delta <= 0:
        raise ValueError(f"--delta {delta}: give the difference to detect, above 0")
    if not 1 <= len(pilots) <= 2:
        raise ValueError("give one pilot run, or two pilot runs of one method")
    loaded = [unit_values(p) for p in pilots]
    if len({t for t, _, _ in loaded}) != 1:
        raise ValueError("the pilot runs are of different methods")
    out: dict[str, Any] = {"method": loaded[0][0], "delta": delta, "power": power, "alpha": alpha, "metrics": []}
    for metric, values in loaded[0][2].items():
        x = np.array([v[0] for v in values.values()])
        row: dict[str, Any] = {"metric": metric, "pilot_n": len(x)}
        if len(x) < 2:
            row["warning"] = "fewer than two units in the pilot"
            out["metrics"].append(row)
            continue
        sd = float(x.std(ddof=1))
        row.update(sd=sd, mde_at_pilot_n=mde(math.sqrt(2) * sd, len(x), alpha, power),
                   n_per_run_independent=n_for_difference(math.sqrt(2) * sd, delta, alpha, power) if sd > 0 else 2)
        if len(loaded) == 2 and metric in loaded[1][2]:
            other = loaded[1][2][metric]
            keep, _ = _pair(values, other)
            if len(keep) >= 2:
                a = np.array([values[s][0] for s in keep])
                b = np.array([other[s][0] for s in keep])
                sd_diff = float((a - b).std(ddof=1))
                corr = float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else None
                row.update(paired_n=len(keep), sd_difference=sd_diff, correlation=corr,
                           observed_difference=float((a - b).mean()),
                           n_paired=n_for_difference(sd_diff, delta, alpha, power) if sd_diff > 0 else 2)
        out["metrics"].append(row)
    return out
