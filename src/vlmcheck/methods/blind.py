"""The blind control: the same questions asked with the image withheld, and how much of a score needs the image.

A blind request carries no image, or a uniform grey image of the same size for a model that requires one (the
record says which); it is cached like any other call.  ``vision_gain`` is the sighted score minus the blind one on
the same items, with a 95 % interval from a cluster bootstrap of the paired per-item differences.
"""

from __future__ import annotations

from typing import Any

from PIL import Image

from ..metrics.clusters import UnitSums, Units
from ..metrics.decisions import cluster_bootstrap_mean_sums, proportion_interval_counts, widen_degenerate

GREY = (128, 128, 128)


def withheld(image: Any, model: Any) -> tuple[list[Any], str]:
    """(the image parts of the blind request, what it carried: "no image" or "grey image WxH")."""
    caps = getattr(model, "capabilities", None)
    if caps is None or getattr(caps, "text_only", True) or image is None:
        return [], "no image"
    grey = Image.new("RGB", image.size, GREY)
    return [grey], f"grey image {image.size[0]}x{image.size[1]}"


def vision_gain(per: UnitSums) -> dict[str, Any]:
    """Mean of sighted minus blind (each 1 right, 0 wrong) over paired items, with its clustered interval, from
    the sighted (column 0) and blind (column 1) answers folded per unit."""
    if not per.n:
        return {"difference": None, "ci95": None}
    sums, sizes = per.sums(0) - per.sums(1), per.sizes()
    value = float(sums.sum() / sizes.sum())
    ci, widened = widen_degenerate(list(cluster_bootstrap_mean_sums(sums, sizes)), value, per.n_units,
                                   low=-1.0, high=1.0)
    return {"difference": value, "ci95": ci, "n": per.n, "n_units": per.n_units,
            "method": ("wilson bound (every item the same difference)" if widened else
                       "cluster bootstrap of the paired differences")}


def blind_block_sums(per: UnitSums, unit: str, metric: str = "accuracy") -> dict[str, Any]:
    """results.json's ``blind`` block for one metric: its blind value and interval, the share of items right
    blind, and the vision gain, from the sighted (column 0) and blind (column 1) answers folded per unit."""
    if not per.n:  # nothing to compare (no blind answer could be read)
        return {metric: None, f"{metric}_ci95": None, "share_right_blind": None, "n": 0,
                "vision_gain": {"difference": None, "ci95": None}}
    ci, how = proportion_interval_counts(per.sums(1), per.sizes(), unit)
    share = float(per.sums(1).sum() / per.n)
    return {metric: share, f"{metric}_ci95": ci, "interval": how, "share_right_blind": share,
            "vision_gain": vision_gain(per)}


class VHXBlind:
    """VHExpansion's blind control folded one case at a time: accuracy and symmetric accuracy asked blind, and
    the vision gain (sighted original minus blind, paired by case, clustered by source image)."""

    def __init__(self, units: Units) -> None:
        self.acc = UnitSums(2, units)  # per source image: sighted and blind answers right
        self.sym = UnitSums(2, units)  # the same for both the question and its negation right
        self.requests: set[str] = set()
        self.n = 0

    def add(self, r: dict[str, Any]) -> None:
        vs = r["variants"]
        if "blind" not in vs or "original" not in vs:
            return
        seen, blind, unit = vs["original"], vs["blind"], str(r.get("image"))
        self.n += 1
        self.acc.add(unit, float(seen["correct"]), float(blind["correct"]))
        # what the blind requests carried: "no image", or "grey image" for a model that requires one
        self.requests.add("no image" if blind["params"]["image"] == "no image" else "grey image")
        if "neg_correct" in blind and "neg_correct" in seen:
            self.sym.add(unit, float(bool(seen["correct"] and seen["neg_correct"])),
                         float(bool(blind["correct"] and blind["neg_correct"])))

    def result(self) -> dict[str, Any]:
        out = blind_block_sums(self.acc, "source image")
        out["request"] = sorted(self.requests)
        if self.sym.n:
            block = blind_block_sums(self.sym, "source image", "symmetric_accuracy")
            out.update({k: block[k] for k in ("symmetric_accuracy", "symmetric_accuracy_ci95")})
            out["vision_gain_symmetric"] = block["vision_gain"]
        out["n"] = self.n
        return out
