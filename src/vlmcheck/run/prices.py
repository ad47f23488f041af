"""Prices of model calls, for ``--dry-run`` estimates (run/estimate.py) and ``--max-cost`` (run/budget.py): a model
spec's ``?price_in=&price_out=`` (USD per 1M tokens), else the dated table in ``prices.json``; batch APIs at
half price; local and reference models cost nothing."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from ..core.spec import ModelSpec, SpecError, identity_of, registration
from .batch import BATCH_PRICE_FACTOR


@lru_cache(maxsize=1)
def builtin_prices() -> dict[str, Any]:
    return json.loads(resources.files("vlmcheck.run").joinpath("prices.json").read_text(encoding="utf-8"))


def _spec(model_id: str) -> ModelSpec | None:
    try:
        return ModelSpec.parse(model_id)
    except (SpecError, ValueError):
        return None


def prices_for(model_id: str) -> dict[str, Any] | None:
    """{"in", "out" (USD per 1M tokens), "image" (USD per generated image), "source", "batch_factor"} of a model,
    or None where no price is known (local and reference models)."""
    spec = _spec(model_id)
    if spec is None:
        return None
    factor = BATCH_PRICE_FACTOR if spec.get_bool("batch", False) else 1.0  # as the adapters read it
    if "price_in" in spec.params and "price_out" in spec.params:
        # get_float refuses text, NaN, infinity and negative prices with one sentence (a SpecError): a price
        # that would turn the cap off is an error, not a free model
        return {"in": spec.get_float("price_in", 0.0), "out": spec.get_float("price_out", 0.0), "image": None,
                "source": "the model spec", "batch_factor": factor}
    entry = registration(spec.provider)
    billing = entry.billing if entry else None  # the provider's registration says (models/__init__.py)
    if billing == "local":  # runs on the user's own machine: no bill
        return {"in": 0.0, "out": 0.0, "image": 0.0, "source": "local model", "batch_factor": 1.0}
    if billing is None:
        return None
    table = builtin_prices()
    rows = table["images" if billing == "images" else "tokens"]
    name = spec.name.lower().split("/")[-1]
    hit = next((k for k in sorted(rows, key=len, reverse=True) if name.startswith(k)), None)  # the longest prefix
    if hit is None:
        return None
    p_in, p_out, image = (0.0, 0.0, rows[hit]) if billing == "images" else (*rows[hit], None)
    return {"in": p_in, "out": p_out, "image": image, "source": f"prices.json ({table['collected']})",
            "batch_factor": factor}


def cost_of(model_id: str, input_tokens: float, output_tokens: float, images: int = 0) -> float | None:
    p = prices_for(model_id)
    if p is None:
        return None
    usd = (input_tokens * p["in"] + output_tokens * p["out"]) / 1e6 + images * (p["image"] or 0.0)
    return usd * p["batch_factor"]


def image_rule(model_id: str) -> str:
    spec = _spec(model_id)
    if spec is not None and spec.params.get("image_tokens") in ("openai", "anthropic", "gemini"):
        return spec.params["image_tokens"]
    entry = registration(spec.provider) if spec is not None else None
    return entry.image_tokens if entry else "openai"


def usage_with_cost(stats: dict[str, Any]) -> dict[str, Any]:
    """Add ``cost_usd`` where the model spec gives prices (``?price_in=2.5&price_out=10``, USD per 1M tokens) to
    the tokens the API reported; a batch API's calls (``?batch=1``) at the batch price (``batch_price_factor``)."""
    for model, entry in stats.items():
        try:
            p = prices_for(model)
        except SpecError:
            continue
        if p is not None and p["source"] == "the model spec":
            entry["cost_usd"] = round(cost_of(model, entry["input_tokens"], entry["output_tokens"]), 6)
            if p["batch_factor"] != 1.0:
                entry["batch_price_factor"] = p["batch_factor"]
    return stats


def by_identity(stats: dict[str, Any]) -> dict[str, Any]:
    """Usage per model identity: one model served by other endpoints, or moved, is one row (its placements in
    ``placements``), its counts and cost summed."""
    out: dict[str, Any] = {}
    for model, entry in stats.items():
        key = identity_of(model)
        if key not in out:
            out[key] = {**entry, "placements": [model]} if key != model else dict(entry)
            continue
        merged = out[key]
        merged.setdefault("placements", [key]).append(model)
        for k, v in entry.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "batch_price_factor":
                merged[k] = round(merged.get(k, 0) + v, 6) if isinstance(v, float) else merged.get(k, 0) + v
    return out
