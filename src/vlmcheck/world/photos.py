"""A small real-photo dataset from scikit-image's bundled images.

Each photo gets human-chosen keywords (what a person would mention first), so
a describer's keyword recall can be scored.  ``include_broken`` adds a zero-byte
file and a truncated PNG to show per-sample error handling.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from ..core.files import staged_folder, write_bytes_atomic, write_text_atomic
from ..core.images import encode_image

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
    """Write the photos (in their original modes: RGBA, greyscale, 1-bit...) and a manifest, whole or not at all
    (as ``world make``: core/files.py ``staged_folder``, each file by temp file and rename, the manifest last)."""
    rows = [{"id": name, "image": f"images/{name}.png", "keywords": keywords, "category": "photo"}
            for name, keywords in PHOTOS.items()]
    if include_broken:
        rows += [{"id": "empty", "image": "images/empty.png", "keywords": ["anything"], "category": "broken"},
                 {"id": "truncated", "image": "images/truncated.png", "keywords": ["coffee"], "category": "broken"}]
    with staged_folder(out) as folder:
        (folder / "images").mkdir(parents=True, exist_ok=True)
        for name in PHOTOS:
            write_bytes_atomic(folder / "images" / f"{name}.png", encode_image(_load(name), "PNG"))
        if include_broken:
            write_bytes_atomic(folder / "images" / "empty.png", b"")  # broken on purpose: each fails its own sample
            coffee = encode_image(_load("coffee"), "PNG")
            write_bytes_atomic(folder / "images" / "truncated.png", coffee[: len(coffee) // 3])
        write_text_atomic(folder / "manifest.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return Path(out) / "manifest.jsonl"
