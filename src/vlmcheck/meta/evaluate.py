"""Meta-evaluation: do annotation-free metrics rank describers by their true error?

Builds a family of ``ref:describer`` models of increasing error (``level``),
runs each available metric on the same world scenes, and reports Kendall's
tau between the error level and the metric, sign-adjusted so that 1.0 means
the metric ranks the models exactly by quality.

Metrics so far, each from its method's own task: GenCeption GC@3
(ref:renderer, ref:effnet); from VHExpansion on the world's yes/no questions,
accuracy with POPE's answer rule and symmetric accuracy over (question,
negated question) pairs with negations from ``ref:negator``; from CAST on
world scene pairs that share objects, the mean of the off-diagonal cells of
the top-5 consistency matrix (statements generated in one modality and
judged in another).
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
    for lv in levels:
        spec = f"ref:describer?level={lv}&seed={seed}"
        task = GenCeptionTask(GenCeptionSpec(vlm=spec, generator="ref:renderer", encoder="ref:effnet",
                                             data=str(world), T=T, seed=seed))
        res = run_task(task, out / f"genception-level{lv}", RunOptions(overwrite=True, progress=progress))
        row = {f"GC@{T}": res.results["metrics"][f"GC@{T}"]["score"]}
        vhx = VHExpansionTask(VHXSpec(vlm=spec, cases=str(world), perturb=[], seed=seed))
        orig = run_task(vhx, out / f"vhexpansion-level{lv}", RunOptions(overwrite=True, progress=progress)
                        ).results["metrics"]["variants"]["original"]
        row["pope_accuracy"] = orig["accuracy"]
        row["symmetric_accuracy"] = orig["symmetric_accuracy"]
        cast = run_task(CastTask(CastSpec(vlm=spec, pairs=str(pairs), seed=seed)), out / f"cast-level{lv}",
                        RunOptions(overwrite=True, progress=progress)).results["metrics"]["topk"]["top5"]["mean"]
        off = [cast[g][v]["score"] for g in cast for v in cast[g] if g != v and cast[g][v]["score"] is not None]
        row["cast_cross_modal_consistency"] = float(np.mean(off))
        table[str(lv)] = row
    metrics = list(next(iter(table.values())))
    taus = {}
    for m in metrics:
        vals = [table[str(lv)][m] for lv in levels]
        tau = kendalltau(levels, vals).statistic
        taus[m] = float(-tau)  # higher metric = better model = lower error level
    result = {"n_scenes": n, "levels": list(levels), "table": table, "kendall_tau": taus}
    write_text_atomic(out / "meta.json", json.dumps(result, indent=2))
    return result
