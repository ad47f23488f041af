"""A small real-photo dataset from scikit-image's bundled images.

Each photo gets human-chosen keywords (what a person would mention first), so
a describer's keyword recall can be scored.  ``include_broken`` adds a zero-byte
file and a truncated PNG to show per-sample error handling.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

# name -> keywords; "a|b" means either word counts.
PHOTOS: dict[str, list[str]] = {
    "astronaut": ["astronaut|person|woman|man", "flag|suit"],
    "chelsea": ["cat|kitten"],
    "coffee": ["coffee|espresso|cup"],
    "rocket": ["rocket|missile|projectile"],
    "camera": ["camera|tripod", "man|person|photographer"],
    "clock": ["clock"],
    "coins": ["coin|coins"],
    "horse": ["horse"],
    "colorwheel": ["wheel|circle|disc"],
    "logo": ["logo|symbol"],
    "text": ["text|letters|writing"],
    "retina": ["eye|retina"],
}


def _load(name: str) -> Image.Image:
    import skimage.data

    arr = getattr(skimage.data, name)()
    if arr.dtype == bool:
        arr = arr.astype(np.uint8) * 255
    return Image.fromarray(arr)


def make_photo_dataset(out: str | Path, include_broken: bool = False) -> Path:
    """Write the photos (in their original modes: RGBA, greyscale, 1-bit...) and a manifest."""
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for name, keywords in PHOTOS.items():
        path = out / "images" / f"{name}.png"
        _load(name).save(path)
        rows.append({"id": name, "image": f"images/{name}.png", "keywords": keywords, "category": "photo"})
    if include_broken:
        (out / "images" / "empty.png").write_bytes(b"")
        buf = io.BytesIO()
        _load("coffee").save(buf, format="PNG")
        (out / "images" / "truncated.png").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 3])
        rows.append({"id": "empty", "image": "images/empty.png", "keywords": ["anything"], "category": "broken"})
        rows.append({"id": "truncated", "image": "images/truncated.png", "keywords": ["coffee"],
                     "category": "broken"})
    manifest = out / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest
