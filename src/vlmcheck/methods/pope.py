"""POPE (Li et al., 2023): balanced yes/no object-existence questions from object annotations.

Positives are an image's first three annotated objects; each gets one absent object as its negative, ``random``,
``popular`` or ``adversarial`` (co-occurring).  "Is there {} in the image?" takes its article per object ("an
apple"): the template is never rewritten (the authors' replace-based "an" variant produced "imange").
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..core.files import jsonl_lines

TEMPLATE = "Is there {article} {obj} in the image?"
SPLITS = ("random", "popular", "adversarial")


def question(obj: str) -> str:
    return TEMPLATE.format(article="an" if obj[:1].lower() in "aeiou" else "a", obj=obj)


def load_annotations(path: str | Path) -> list[dict[str, Any]]:
    """[{image, objects}] from COCO instances JSON or JSONL (image, objects)."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        coco = json.loads(path.read_text())
        names = {c["id"]: c["name"] for c in coco["categories"]}
        files = {im["id"]: im["file_name"] for im in coco["images"]}
        objs: dict[int, list[str]] = {i: [] for i in files}
        for ann in coco["annotations"]:
            name = names[ann["category_id"]]
            if name not in objs[ann["image_id"]]:
                objs[ann["image_id"]].append(name)
        return [{"image": files[i], "objects": o} for i, o in objs.items() if o]
    rows = []
    for n, line in jsonl_lines(path.read_text(encoding="utf-8")):
        if line:
            row = json.loads(line)
            if not isinstance(row.get("image"), str) or not isinstance(row.get("objects"), list):
                raise ValueError(f"{path}:{n}: needs 'image' and a list 'objects'")
            rows.append({"image": row["image"], "objects": list(dict.fromkeys(row["objects"]))})
    return rows


def build_pope(annotations: list[dict[str, Any]], split: str = "random", n_images: int = 500, per_image: int = 3,
               seed: int = 0) -> list[dict[str, Any]]:
    """POPE's three splits, as its code builds them from ``n_images`` sampled images with at least ``per_image``
    objects (the vocabulary, popularity and co-occurrence counts from those only); ties, and an adversarial
    positive that co-occurs with no absent object, fall back to a seeded random choice."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}")
    rng = np.random.default_rng(seed)
    eligible = [a for a in annotations if len(a["objects"]) >= per_image]
    if not eligible:
        raise ValueError(f"no image has {per_image} annotated objects")
    order = rng.permutation(len(eligible))[:n_images]
    chosen = [eligible[i] for i in sorted(order)]
    vocab = sorted({o for a in chosen for o in a["objects"]})
    freq = Counter(o for a in chosen for o in a["objects"])
    co: dict[str, Counter] = {}
    for a in chosen:
        for o in a["objects"]:
            co.setdefault(o, Counter()).update(x for x in a["objects"] if x != o)

    def best(candidates: list[str], score) -> str:
        top = max(score(o) for o in candidates)
        tied = [o for o in candidates if score(o) == top]
        return tied[int(rng.integers(len(tied)))] if len(tied) > 1 else tied[0]

    cases = []
    for a in chosen:
        present = set(a["objects"])
        used: set[str] = set()
        for pos in a["objects"][:per_image]:
            absent = [o for o in vocab if o not in present and o not in used]
            if not absent:
                raise ValueError(f"{a['image']}: no absent object left to ask about")
            counts = freq if split == "popular" else co.get(pos, Counter())  # every vocabulary object has a freq
            if split == "random" or not any(counts[o] for o in absent):  # adversarial: no co-occurring absent one
                neg = absent[int(rng.integers(len(absent)))]
            else:
                neg = best(absent, lambda o: counts[o])
            used.add(neg)
            for obj, ans in ((pos, "yes"), (neg, "no")):
                cases.append({"id": f"{Path(a['image']).stem}-{len(cases)}", "image": a["image"],
                              "question": question(obj), "answer": ans, "object": obj, "split": split,
                              "positive": pos})
    return cases


def write_pope_cases(annotations: str | Path, split: str, out: str | Path, n_images: int = 500, seed: int = 0,
                     images: str | Path | None = None) -> tuple[int, int]:
    """Build a POPE split and write it to ``out`` as VHExpansion cases (JSONL), image paths relative to ``out``'s
    folder as ``vhx run`` resolves them; returns (cases written, cases whose image lies outside that folder).
    ``images``: the folder of the images (COCO: val2014/), default beside the annotations."""
    import os

    from ..core.files import InputFileError, write_text_atomic

    annotations, out = Path(annotations), Path(out)
    cases = build_pope(load_annotations(annotations), split, n_images=n_images, seed=seed)
    folder = Path(images) if images else annotations.parent
    missing = [c["image"] for c in cases if not (folder / c["image"]).is_file()]
    if missing:
        raise InputFileError(f"{len(set(missing))} images of the split are not in {folder} (e.g. {missing[0]}); pass "
                             "--images with the folder that holds them (COCO: val2014/)")
    out.parent.mkdir(parents=True, exist_ok=True)
    outside = 0
    for c in cases:
        rel = os.path.relpath(os.path.realpath(folder / c["image"]), os.path.realpath(out.parent))
        outside += rel.startswith("..")
        c["image"] = rel
    write_text_atomic(out, "".join(json.dumps(c) + "\n" for c in cases))
    return len(cases), outside
