"""Where GenCeption's headline is defined: GC@T (eq. 3) scores what the generator drew from each description, so
it is a measurement only where the generator drew images that differ (docs/methods.md, "When a headline is
measured")."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..metrics.measured import not_measured


class Drawn:
    """Folded a step at a time, in constant memory: whether the run's descriptions differ and whether the images
    the generator returned for them do."""

    def __init__(self) -> None:
        self.first: tuple[str, str] | None = None  # (description, image) hashes of the first step seen
        self.said_differ = self.drawn_differ = False
        self.steps = 0

    def add(self, steps: list[dict[str, Any]]) -> None:
        for st in steps:
            said = hashlib.sha256(str(st.get("description")).encode("utf-8", "surrogatepass")).hexdigest()
            drawn = st.get("image_sha256") or ""
            self.steps += 1
            if self.first is None:
                self.first = (said, drawn)
                continue
            self.said_differ = self.said_differ or said != self.first[0]
            self.drawn_differ = self.drawn_differ or drawn != self.first[1]

    def unmeasured(self, S: np.ndarray, seed_images: int, T: int) -> dict[str, Any] | None:
        """None where GC@T is a measurement; else what the summary holds in its place (the headline not measured,
        with the reason, and the mean s(t) per step): where the generator returned one image for different
        descriptions, or every s(t) (``S``, a row per scored chain) of two or more seed images is one value below
        1 (docs/methods.md, "When a headline is measured"); identical scores of 1 are perfect chains."""
        if self.said_differ and not self.drawn_differ:
            why = (f"the generator returned one and the same image for all {self.steps} descriptions of this run "
                   "(they differ), so s(t) compares each seed image with that one image, not with what the model "
                   "said")
        elif seed_images > 1 and S.size and np.ptp(S) == 0 and S.flat[0] < 1:
            why = (f"every s(t) is {S.flat[0]:.4f} on all {seed_images} seed images, so the scores do not depend "
                   "on the image: they measure the generator or the encoder, not the describer")
        else:
            return None
        return {"s_mean": [float(x) for x in S.mean(axis=0)], "headline": not_measured(f"GC@{T}", why)}
