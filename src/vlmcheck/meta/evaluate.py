"""Meta-evaluation (docs/world.md): do annotation-free metrics rank describers by their true error?

A family of ``ref:describer`` models of increasing error (``level``) runs GenCeption (GC@T), VHExpansion on the
world's yes/no questions (POPE-rule and symmetric accuracy) and CAST on world scene pairs (the mean off-diagonal
top-5 consistency: statements made in one modality, judged in another) on the same scenes; Kendall's tau
between level and metric, sign-adjusted so that 1.0 means the metric ranks the models exactly by quality.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from ..core.files import write_text_atomic
from ..api import run_task
from ..run.runner import RunOptions
from ..world.make import make_world, make_world_pairs

DEFAULT_LEVELS = (0.0, 0.05, 0.1, 0.2, 0.4)


def meta_evaluate(out: str | Path, n: int = 50, levels=DEFAULT_LEVELS, seed: int = 0, T: int = 3,
                  progress: bool = False) -> dict[str, Any]:
    out = Path(out)
    world = out / "world"
    make_world(world, n=n, seed=seed)
    pairs = make_world_pairs(out / "pairs", n=max(6, n // 2), seed=seed)
    from ..methods.cast import CastSpec, CastTask
    from ..methods.genception import GenCeptionSpec, GenCeptionTask
    from ..methods.vhexpansion import VHExpansionTask, VHXSpec

    table: dict[str, dict[str, float]] = {}
    opts = RunOptions(overwrite=True, progress=progress)
    for lv in levels:
        spec = f"ref:describer?level={lv}&seed={seed}"
        task = GenCeptionTask(GenCeptionSpec(vlm=spec, generator="ref:renderer", encoder="ref:effnet",
                                             data=str(world), T=T, seed=seed))
        gc = run_task(task, out / f"genception-level{lv}", opts).results["metrics"][f"GC@{T}"]["score"]
        vhx = VHExpansionTask(VHXSpec(vlm=spec, cases=str(world), perturb=[], seed=seed))
        orig = run_task(vhx, out / f"vhexpansion-level{lv}", opts).results["metrics"]["variants"]["original"]
        cast = run_task(CastTask(CastSpec(vlm=spec, pairs=str(pairs), seed=seed)), out / f"cast-level{lv}",
                        opts).results["metrics"]["topk"]["top5"]["mean"]
        off = [cast[g][v]["score"] for g in cast for v in cast[g] if g != v and cast[g][v]["score"] is not None]
        table[str(lv)] = {f"GC@{T}": gc, "pope_accuracy": orig["accuracy"],
                          "symmetric_accuracy": orig["symmetric_accuracy"],
                          "cast_cross_modal_consistency": float(np.mean(off))}
    # higher metric = better model = lower error level
    taus = {m: float(-kendalltau(levels, [table[str(lv)][m] for lv in levels]).statistic)
            for m in next(iter(table.values()))}
    result = {"n_scenes": n, "levels": list(levels), "table": table, "kendall_tau": taus}
    write_text_atomic(out / "meta.json", json.dumps(result, indent=2))
    return result
