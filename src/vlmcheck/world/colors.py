"""Named colours and nearest-colour naming, shared by the reference models."""

from __future__ import annotations

import numpy as np
from PIL import Image

#: The eight named object colours of the reference world (RGB).
NAMED_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (240, 220, 40),
    "orange": (245, 140, 30),
    "purple": (140, 60, 190),
    "pink": (245, 130, 190),
    "brown": (130, 80, 40),
}
#: Neutral tones used for backgrounds and for describing photographs.
NEUTRAL_COLORS: dict[str, tuple[int, int, int]] = {
    "white": (250, 250, 250),
    "black": (15, 15, 15),
    "gray": (128, 128, 128),
}
ALL_COLORS = {**NAMED_COLORS, **NEUTRAL_COLORS}


def dominant_colors(img: Image.Image, k: int = 3, min_share: float = 0.08) -> list[tuple[str, float]]:
    """Named colours covering the largest shares of the image (on a 64x64 thumbnail)."""
    arr = np.asarray(img.convert("RGB").resize((64, 64), Image.BILINEAR), dtype=np.float32).reshape(-1, 3)
    names = list(ALL_COLORS)
    ref = np.array([ALL_COLORS[n] for n in names], dtype=np.float32)
    idx = ((arr[:, None, :] - ref[None]) ** 2).sum(-1).argmin(1)
    share = np.bincount(idx, minlength=len(names)) / len(idx)
    order = np.argsort(-share)
    return [(names[i], float(share[i])) for i in order[:k] if share[i] >= min_share]
