"""Meta-evaluation: do annotation-free metrics rank describers by their true error?

Builds a family of ``ref:describer`` models of increasing error (``level``),
runs each available metric on the same world scenes, and reports Kendall's
tau between the error level and the metric, sign-adjusted so that 1.0 means
the metric ranks the models exactly by quality.

Metrics so far: GenCeption GC@3 (ref:renderer, ref:effnet), yes/no accuracy
with POPE's answer rule, and symmetric accuracy over (question, negated
question) pairs with negations from ``ref:negator`` (VHExpansion's metric).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from ..core.images import load_image
from ..core.messages import Message
from ..core.roles import GenerationConfig
from ..core.spec import load_model
from ..metrics.stats import pope_answer, symmetric_accuracy
from ..run.runner import RunOptions, run_task
from .make import make_world
from .negator import check_negation, negate_question

DEFAULT_LEVELS = (0.0, 0.05, 0.1, 0.2, 0.4)


async def _yes_no_scores(spec: str, rows: list[dict[str, Any]], world: Path) -> dict[str, float]:
    model = load_model(spec, "vlm")
    cfg = GenerationConfig(max_tokens=16)
    correct, pairs = [], []
    for r in rows:
        img = load_image(world / r["image"])
        for q in r["questions"]:
            if q["type"] != "yesno":
                continue
            neg = negate_question(q["question"])
            a = pope_answer((await model.generate([Message.user(img, q["question"])], cfg)).text)
            ok = a == q["answer"]
            correct.append(ok)
            if neg and check_negation(q["question"], neg)["ok"]:
                b = pope_answer((await model.generate([Message.user(img, neg)], cfg)).text)
                pairs.append((ok, b != q["answer"]))
    return {"pope_accuracy": float(np.mean(correct)), "symmetric_accuracy": symmetric_accuracy(pairs)}


def meta_evaluate(out: str | Path, n: int = 50, levels=DEFAULT_LEVELS, seed: int = 0, T: int = 3,
                  progress: bool = False) -> dict[str, Any]:
    out = Path(out)
    world = out / "world"
    manifest = make_world(world, n=n, seed=seed)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    from ..methods.genception import GenCeptionSpec, GenCeptionTask

    table: dict[str, dict[str, float]] = {}
    for lv in levels:
        spec = f"ref:describer?level={lv}&seed={seed}"
        task = GenCeptionTask(GenCeptionSpec(vlm=spec, generator="ref:renderer", encoder="ref:effnet",
                                             data=str(world), T=T, seed=seed))
        res = run_task(task, out / f"genception-level{lv}", RunOptions(overwrite=True, progress=progress))
        row = {f"GC@{T}": res.results["metrics"][f"GC@{T}"]["mean"]}
        row.update(asyncio.run(_yes_no_scores(spec, rows, world)))
        table[str(lv)] = row
    metrics = list(next(iter(table.values())))
    taus = {}
    for m in metrics:
        vals = [table[str(lv)][m] for lv in levels]
        tau = kendalltau(levels, vals).statistic
        taus[m] = float(-tau)  # higher metric = better model = lower error level
    result = {"n_scenes": n, "levels": list(levels), "table": table, "kendall_tau": taus}
    (out / "meta.json").write_text(json.dumps(result, indent=2))
    return result
