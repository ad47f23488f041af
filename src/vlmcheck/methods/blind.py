"""The blind control (issue 35): the same questions asked with the image withheld, and how much of a score
needs the image.

A model that answers without an image (``Capabilities.text_only``, the default) gets a text-only request; one
that requires an image gets a uniform grey image of the same size, and the record says which.  Blind requests go
through the session like any other call: cached, and a rerun makes none.

``vision_gain`` is the sighted score minus the blind one on the same items, with a 95 % interval from a cluster
bootstrap of the paired per-item differences (resampling the sampled unit, as every interval of issue 34).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from PIL import Image

from ..metrics.decisions import cluster_bootstrap_mean, proportion_interval, widen_degenerate

GREY = (128, 128, 128)


def withheld(image: Any, model: Any) -> tuple[list[Any], str]:
    """(the image parts of the blind request, what it carried: "no image" or "grey image WxH")."""
    caps = getattr(model, "capabilities", None)
    if caps is None or getattr(caps, "text_only", True) or image is None:
        return [], "no image"
    grey = Image.new("RGB", image.size, GREY)
    return [grey], f"grey image {image.size[0]}x{image.size[1]}"


def vision_gain(sighted: Sequence[float], blind: Sequence[float], units: Sequence[str]) -> dict[str, Any]:
    """Mean of sighted minus blind (each 1 right, 0 wrong) over paired items, with its clustered interval."""
    d = np.asarray(sighted, dtype=float) - np.asarray(blind, dtype=float)
    if not len(d):
        return {"difference": None, "ci95": None}
    value = float(d.mean())
    ci, widened = widen_degenerate(list(cluster_bootstrap_mean(d, list(units))), value, len(set(units)),
                                   low=-1.0, high=1.0)
    return {"difference": value, "ci95": ci, "n": int(len(d)), "n_units": len(set(units)),
            "method": ("wilson bound (every item the same difference)" if widened else
                       "cluster bootstrap of the paired differences")}


def blind_block(sighted: Sequence[float], blind: Sequence[float], units: Sequence[str], unit: str,
                metric: str = "accuracy") -> dict[str, Any]:
    """results.json's ``blind`` block for one metric: its blind value and interval, the share of items right
    blind, and the vision gain."""
    if not len(blind):  # nothing to compare (no blind answer could be read)
        return {metric: None, f"{metric}_ci95": None, "share_right_blind": None, "n": 0,
                "vision_gain": {"difference": None, "ci95": None}}
    ci, how = proportion_interval(list(blind), list(units), unit)
    return {metric: float(np.mean(blind)) if len(blind) else None, f"{metric}_ci95": ci, "interval": how,
            "share_right_blind": float(np.mean(blind)) if len(blind) else None,
            "vision_gain": vision_gain(sighted, blind, units)}


def vhx_blind(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Beside the sighted headline: accuracy and symmetric accuracy asked blind, on the cases that have both, with
    the vision gain (sighted original minus blind, paired by case, clustered by source image) and the cases a
    model gets right without the image."""
    rs = [r for r in results if "blind" in r["variants"] and "original" in r["variants"]]
    units = [str(r.get("image")) for r in rs]
    sighted = [float(r["variants"]["original"]["correct"]) for r in rs]
    blind = [float(r["variants"]["blind"]["correct"]) for r in rs]
    out = blind_block(sighted, blind, units, "source image")
    # what the blind requests carried: "no image", or "grey image" for a model that requires one
    out["request"] = sorted({"no image" if r["variants"]["blind"]["params"]["image"] == "no image" else "grey image"
                             for r in rs})
    sym = [r for r in rs if "neg_correct" in r["variants"]["blind"] and "neg_correct" in r["variants"]["original"]]
    if sym:
        both = lambda v: float(v["correct"] and v["neg_correct"])  # noqa: E731
        block = blind_block([both(r["variants"]["original"]) for r in sym], [both(r["variants"]["blind"]) for r in sym],
                            [str(r.get("image")) for r in sym], "source image", "symmetric_accuracy")
        out["symmetric_accuracy"], out["symmetric_accuracy_ci95"] = block["symmetric_accuracy"], \
            block["symmetric_accuracy_ci95"]
        out["vision_gain_symmetric"] = block["vision_gain"]
    out["n"] = len(rs)
    return out
