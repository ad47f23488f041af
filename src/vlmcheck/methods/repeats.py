"""Repeats for every method: a sample's whole procedure run ``repeats`` times at a temperature, each repeat with
its own generation seed.  Repeat 0 is the sample's record; repeats 1.. go into its ``repeats`` list (without
embeddings).  The summary gives the headline per repeat (``values``, ``mean``, population ``std``, as
VHExpansion's Table 6e/6f) beside the headline, which pools every repeat with its unit.  A run without repeats
sends no seed or temperature, so its cache keys are unchanged.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import numpy as np

from pydantic import BaseModel, Field

from ..core.roles import GenerationConfig

_BULKY = ("embedding",)


class RepeatsSpec(BaseModel):
    """The spec fields CAST and VHExpansion share: each sample run ``repeats`` times at ``temperature``, and the
    blind control (methods/blind.py; what each method asks blind: docs/methods.md)."""

    repeats: int = Field(1, ge=1)
    temperature: float = Field(0.0, ge=0.0)
    blind: bool = False


def generation_config(max_tokens: int, repeats: int, temperature: float, repeat: int, base_seed: int = 0,
                      seed_always: bool = False) -> GenerationConfig:
    """The config of one repeat: seed ``base_seed + repeat`` and the temperature where repeats or a temperature
    were asked for (``seed_always``: the method always sent its seed, as GenCeption does)."""
    if repeats > 1 or temperature > 0 or seed_always:
        return GenerationConfig(max_tokens=max_tokens, temperature=temperature, seed=base_seed + repeat)
    return GenerationConfig(max_tokens=max_tokens)


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if not str(k).startswith(_BULKY)}
    if isinstance(obj, list):
        return [_strip(x) for x in obj]
    return obj


async def repeated(once: Callable[[int], Awaitable[dict[str, Any]]], repeats: int) -> dict[str, Any]:
    """Repeat 0's record, with repeats 1.. (each ``once(k)``) in its ``repeats`` list."""
    record = await once(0)
    if repeats > 1:
        record["repeats"] = [{**_strip(await once(k)), "repeat": k} for k in range(1, repeats)]
    return record


def per_repeat(results: list[dict[str, Any]], repeats: int) -> list[list[dict[str, Any]]]:
    """The results of each repeat (repeat 0: the records themselves)."""
    return [[r if k == 0 else r["repeats"][k - 1] for r in results if k == 0 or len(r.get("repeats", ())) >= k]
            for k in range(repeats)]


def spread(values: list[float | None], temperature: float) -> dict[str, Any]:
    vals = [float(v) for v in values if v is not None]
    return {"n": len(values), "temperature": temperature, "values": [None if v is None else float(v) for v in values],
            "mean": float(np.mean(vals)) if vals else None, "std": float(np.std(vals)) if vals else None}
