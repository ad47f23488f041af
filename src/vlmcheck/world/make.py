"""``vlmcheck world make`` and ``world pairs``: world datasets every method can read (layout: docs/world.md).

Questions come from the ground truth: for each scene a yes-question and a no-question (VHExpansion, POPE-style
scoring) and a four-option question (ChEF's world scenario), all in the scene's category. Everything is a
function of ``seed``. Written whole or not at all (core/files.py ``staged_folder``), ``manifest.jsonl`` last.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from ..core.files import staged_folder, write_bytes_atomic, write_text_atomic
from ..core.images import encode_image
from .scene import (BACKGROUNDS, CATEGORIES, COLORS, POSITIONS, SHAPES, Scene, SceneObject, describe_scene,
                    generate_scene, number_word, object_box, plural, position_name, random_object, render_scene,
                    shifted)
from .ref_models import article
from .answering import evaluate


def _yn(question: str, answer: bool, kind: str) -> dict:
    return {"type": "yesno", "kind": kind, "question": question, "answer": "yes" if answer else "no"}


def _mc(question: str, correct: str, distractors: list[str], rng: np.random.Generator, kind: str) -> dict:
    options = [correct] + [d for d in dict.fromkeys(distractors) if d != correct][:3]
    options = [options[i] for i in rng.permutation(len(options))]
    return {"type": "mc", "kind": kind, "question": question, "options": options,
            "answer": chr(ord("A") + options.index(correct)), "answer_text": correct}


def _absent_kind(scene: Scene, rng: np.random.Generator) -> tuple[str, str]:
    present = {(o.color, o.shape) for o in scene.objects}
    while True:
        c, s = str(rng.choice(COLORS)), str(rng.choice(SHAPES))
        if (c, s) not in present:
            return c, s


def scene_questions(scene: Scene, rng: np.random.Generator) -> list[dict]:
    cat = scene.category or "existence"
    qs: list[dict] = []
    objs = scene.objects
    # the asked-about object is unique in colour and shape, so "the red star" means one thing
    kinds = [(x.color, x.shape) for x in objs]
    unique = [x for x in objs if kinds.count((x.color, x.shape)) == 1] or objs
    o = unique[int(rng.integers(len(unique)))] if unique else None
    if cat in ("existence", "shape") or (cat in CATEGORIES[:5] and o is None):
        if o is not None:
            qs.append(_yn(f"Is there {article(o.color)} {o.color} {o.shape} in the image?", True, "existence"))
        c, s = _absent_kind(scene, rng)
        qs.append(_yn(f"Is there {article(c)} {c} {s} in the image?", False, "existence"))
        if o is not None and cat == "shape":
            qs.append(_mc(f"What shape is the {o.color} object in the {o.position}?", o.shape,
                          list(rng.permutation([x for x in SHAPES if x != o.shape])), rng, "shape"))
        elif o is not None:
            qs.append(_mc("Which of these objects is in the image?", f"{o.color} {o.shape}",
                          [" ".join(_absent_kind(scene, rng)) for _ in range(6)], rng, "existence"))
    elif cat == "count":
        (c, s), n = max(Counter((x.color, x.shape) for x in objs).items(), key=lambda kv: kv[1])
        wrong = n + int(rng.choice([-1, 1])) if n > 2 else n + 1  # never "one ... circles"
        qs.append(_yn(f"Are there {number_word(n)} {c} {plural(s)} in the image?", True, "count"))
        qs.append(_yn(f"Are there {number_word(wrong)} {c} {plural(s)} in the image?", False, "count"))
        qs.append(_mc(f"How many {c} {plural(s)} are there in the image?", str(n),
                      [str(max(n + d, 0)) for d in (-2, -1, 1, 2, 3) if n + d >= 0], rng, "count"))
    elif cat == "position":
        other = [p for p in POSITIONS if p != o.position]
        wrong = str(rng.choice(other))
        qs.append(_yn(f"Is the {o.color} {o.shape} in the {o.position} of the image?", True, "position"))
        qs.append(_yn(f"Is the {o.color} {o.shape} in the {wrong} of the image?", False, "position"))
        qs.append(_mc(f"Where is the {o.color} {o.shape}?", o.position, list(rng.permutation(other)), rng,
                      "position"))
    elif cat == "color":
        wrong = str(rng.choice([c for c in COLORS if c != o.color]))
        qs.append(_yn(f"Is there {article(o.color)} {o.color} {o.shape} in the {o.position} of the image?", True,
                      "color"))
        qs.append(_yn(f"Is there {article(wrong)} {wrong} {o.shape} in the {o.position} of the image?", False, "color"))
        qs.append(_mc(f"What color is the {o.shape} in the {o.position}?", o.color,
                      list(rng.permutation([c for c in COLORS if c != o.color])), rng, "color"))
    elif cat == "ocr":
        fake = _fake_text(scene.text or "", rng)
        qs.append(_yn(f'Is the text "{scene.text}" written in the image?', True, "ocr"))
        qs.append(_yn(f'Is the text "{fake}" written in the image?', False, "ocr"))
        qs.append(_mc("What does the text in the image say?", scene.text or "",
                      [_fake_text(scene.text or "", rng) for _ in range(6)], rng, "ocr"))
    elif cat in ("numerical", "code"):
        value = evaluate(scene.text or "")
        what = "the calculation" if cat == "numerical" else "the code"
        verb = "equal" if cat == "numerical" else "output"
        v = int(value) if value is not None else 0
        wrong = v + int(rng.choice([-2, -1, 1, 2]))
        qs.append(_yn(f"Does the result of {what} in the image {verb} {v}?", True, cat))
        qs.append(_yn(f"Does the result of {what} in the image {verb} {wrong}?", False, cat))
        qs.append(_mc(f"What is the result of {what} written in the image?", str(v),
                      [str(v + d) for d in rng.permutation([-3, -2, -1, 1, 2, 3])], rng, cat))
    return qs


def _fake_text(text: str, rng: np.random.Generator) -> str:
    chars = list(text)
    idx = [i for i, ch in enumerate(chars) if ch.isalnum()]
    if not idx:
        return text + "x"
    i = int(rng.choice(idx))
    chars[i] = shifted(chars[i], int(rng.integers(1, 10 if chars[i].isdigit() else 26)))
    return "".join(chars)


def make_world(out: str | Path, n: int = 200, seed: int = 0, size: int = 384,
               categories: tuple[str, ...] = CATEGORIES) -> Path:
    """Write ``n`` scenes (categories in turn) under ``out``; returns the manifest path."""
    with staged_folder(out) as folder:
        _make_world(folder, n, seed, size, categories)
    return Path(out) / "manifest.jsonl"


def _make_world(out: Path, n: int, seed: int, size: int, categories: tuple[str, ...]) -> None:
    (out / "scenes").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        cat = categories[i % len(categories)]
        rng = np.random.default_rng([seed, i])
        scene = generate_scene(rng, cat)
        sid = f"{cat}-{i:04d}"
        img_rel = f"images/{cat}/{sid}.png"
        (out / "images" / cat).mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(out / img_rel, encode_image(render_scene(scene, size), "PNG"))
        write_text_atomic(out / "scenes" / f"{sid}.json", scene.model_dump_json(indent=1))
        rows.append({"id": sid, "image": img_rel, "category": cat, "description": describe_scene(scene),
                     "scene": scene.model_dump(), "questions": scene_questions(scene, rng)})
    # object annotations in the POPE builder's format: objects named "<colour> <shape>", in reading order
    write_text_atomic(out / "objects.jsonl", _lines([{"image": r["image"], "objects": list(dict.fromkeys(
        f"{o['color']} {o['shape']}" for o in sorted(r["scene"]["objects"], key=lambda o: (o["row"], o["col"]))))}
        for r in rows]))
    _write_turn_sets(out, rows, n, seed, size)
    # the dataset's declared name: what benchmark its categories belong to (methods/leaderboard.py)
    write_text_atomic(out / "dataset.json", json.dumps({"name": "world", "n": n, "seed": seed, "size": size}) + "\n")
    write_text_atomic(out / "README.txt",
                      f"vlmcheck reference world: {n} scenes, seed {seed}, {size}x{size} px.\n"
                      "manifest.jsonl: id, image, category, description (canonical), scene (ground truth), "
                      "questions.\n")
    write_text_atomic(out / "manifest.jsonl", _lines(rows))  # last: the file that makes the folder a world


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _write_turn_sets(out: Path, rows: list[dict], n: int, seed: int, size: int) -> None:
    """Data for ChEF's counting (a scene's most frequent shape and its count, FSC147's question form),
    detection (objects labelled by shape, boxes as fractions of the image side) and hierarchical scenarios
    (single-object scenes with the chain [shape, "colour shape"], and the world's tree), as their loaders read."""
    counting, detection = [], []
    for r in rows:
        scene = Scene.model_validate(r["scene"])
        if not scene.objects:
            continue
        counts = Counter(o.shape for o in scene.objects)
        shape = max(sorted(counts), key=lambda k: counts[k])
        counting.append({"id": r["id"], "image": r["image"], "object": plural(shape), "count": counts[shape]})
        detection.append({"id": r["id"], "image": r["image"], "objects": [
            {"label": o.shape, "bbox": [round(x, 4) for x in object_box(o)]}
            for o in sorted(scene.objects, key=lambda o: (o.row, o.col))]})
    write_text_atomic(out / "counting.jsonl", _lines(counting))
    write_text_atomic(out / "detection.jsonl", _lines(detection))
    hier = out / "hierarchy"
    (hier / "images").mkdir(parents=True, exist_ok=True)
    items = []
    for i in range(max(6, n // 2)):
        rng = np.random.default_rng([seed, 20_000 + i])
        obj = SceneObject(shape=str(rng.choice(SHAPES)), color=str(rng.choice(COLORS)), size="large", row=1, col=1)
        scene = Scene(background=str(rng.choice(list(BACKGROUNDS))), objects=[obj])
        sid = f"single-{i:04d}"
        write_bytes_atomic(hier / "images" / f"{sid}.png", encode_image(render_scene(scene, size), "PNG"))
        items.append({"id": sid, "image": f"images/{sid}.png", "chain": [obj.shape, f"{obj.color} {obj.shape}"]})
    write_text_atomic(hier / "items.jsonl", _lines(items))
    tree = {"object": list(SHAPES), **{s: [f"{c} {s}" for c in COLORS] for s in SHAPES}}
    write_text_atomic(hier / "tree.json", json.dumps(tree, indent=1))


def make_world_pairs(out: str | Path, n: int = 20, seed: int = 0, size: int = 384) -> Path:
    """Pairs of scenes that share some objects (for CAST); writes images and ``pairs.jsonl``.

    Scene B keeps one to three of scene A's objects (same shape, colour, size and cell), replaces the others
    with random objects and keeps A's background half of the time.
    """
    with staged_folder(out) as folder:
        _make_world_pairs(folder, n, seed, size)
    return Path(out) / "pairs.jsonl"


def _make_world_pairs(out: Path, n: int, seed: int, size: int) -> None:
    (out / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        rng = np.random.default_rng([seed, 10_000 + i])
        a = generate_scene(rng, str(rng.choice(["existence", "color", "position", "shape"])))
        while len(a.objects) < 3:
            a = generate_scene(rng, "existence")
        keep_n = int(rng.integers(1, 4))
        keep = [a.objects[j] for j in rng.choice(len(a.objects), size=keep_n, replace=False)]
        b = Scene(background=a.background if rng.random() < 0.5 else str(rng.choice(list(BACKGROUNDS))),
                  objects=list(keep))
        free = b.free_cells()
        for j in rng.choice(len(free), size=min(len(free), int(rng.integers(1, 4))), replace=False):
            r, c = free[j]
            b.objects.append(random_object(rng, r, c))
        b.objects.sort(key=lambda o: (o.row, o.col))
        sides = {}
        for name, scene in (("a", a), ("b", b)):
            sid = f"pair{i:03d}-{name}"
            write_bytes_atomic(out / "images" / f"{sid}.png", encode_image(render_scene(scene, size), "PNG"))
            sides[name] = {"id": sid, "image": f"images/{sid}.png", "description": describe_scene(scene),
                           "scene": scene.model_dump()}
        rows.append({"id": f"pair{i:03d}", **sides, "shared_objects": keep_n})
    write_text_atomic(out / "pairs.jsonl", _lines(rows))  # last: the file that makes the folder a dataset


__all__ = ["make_world", "make_world_pairs", "scene_questions", "position_name"]
