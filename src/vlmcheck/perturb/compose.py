"""ChEF's composite image corruption (supplementary Table 1): categories in a fixed order, per category one random
method or all of them, each at a random severity; the whole chain is drawn from one seed and returned as data, so
:func:`apply_chain` regenerates the corrupted image exactly.
"""

from __future__ import annotations

import hashlib

import numpy as np
from PIL import Image

from .image import CORRUPTIONS, corrupt

#: the categories in ChEF's order, each applying one random method or all of them in turn
IMAGE_STRATEGY = {"noise": "random", "blur": "random", "weather": "random", "digital": "random",
                  "other": "sequential"}


def sample_seed(seed: int, sample_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{sample_id}".encode()).digest()[:8], "little")


def composite_chain(seed: int) -> list[dict]:
    """The list of {name, category, severity, seed} steps for one sample."""
    rng = np.random.default_rng(seed)
    chain = []
    for cat, strategy in IMAGE_STRATEGY.items():
        methods = [n for n, c in CORRUPTIONS.items() if c.category == cat]
        picked = methods if strategy == "sequential" else [methods[int(rng.integers(len(methods)))]]
        for name in picked:
            chain.append({"name": name, "category": cat, "severity": int(rng.integers(1, 6)),
                          "seed": int(rng.integers(2 ** 31))})
    return chain


def apply_chain(img: Image.Image, chain: list[dict]) -> Image.Image:
    for step in chain:
        img = corrupt(img, step["name"], step["severity"], step["seed"])
    return img
