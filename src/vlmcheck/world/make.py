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
from .scene import (BACKGROUNDS, CATEGORIES, COLORS, POSITIONS, SHAPES, VISUAL_CATEGORIES, Scene, SceneObject,
                    describe_scene, generate_scene, number_word, object_box, plural, position_name, random_object,
                    render_scene, shifted)
from .ref_models import article
from .answering import evaluate


def _yes_no(ask: str, right: object, wrong: object, kind: str) -> list[dict]:
    """``ask`` filled with the right value (answer yes; left out when None) and with a wrong one (answer no)."""
    return [{"type": "yesno", "kind": kind, "question": ask.format(value), "answer": answer}
            for value, answer in ((right, "yes"), (wrong, "no")) if value is not None]


def _mc(question: str, correct: str, distractors: list[str], kind: str, rng: np.random.Generator) -> dict:
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
    """A yes-question and a no-question (``ask`` about the right and about a wrong value) and a four-option
    question (``mc``: question, answer, distractors, kind), all in the scene's category."""
    cat = yn_kind = scene.category or "existence"
    # the asked-about object is unique in colour and shape, so "the red star" means one thing
    kinds = [(x.color, x.shape) for x in scene.objects]
    unique = [x for x in scene.objects if kinds.count((x.color, x.shape)) == 1] or scene.objects
    o = unique[int(rng.integers(len(unique)))] if unique else None
    mc = None
    if cat in ("existence", "shape") or (cat in VISUAL_CATEGORIES and o is None):
        c, s = _absent_kind(scene, rng)
        ask, yn_kind, wrong = "Is there {} in the image?", "existence", f"{article(c)} {c} {s}"
        right = f"{article(o.color)} {o.color} {o.shape}" if o is not None else None
        if o is not None and cat == "shape":
            mc = (f"What shape is the {o.color} object in the {o.position}?", o.shape,
                  list(rng.permutation([x for x in SHAPES if x != o.shape])), "shape")
        elif o is not None:
            mc = ("Which of these objects is in the image?", f"{o.color} {o.shape}",
                  [" ".join(_absent_kind(scene, rng)) for _ in range(6)], "existence")
    elif cat == "count":
        (c, s), n = max(Counter(kinds).items(), key=lambda kv: kv[1])
        wrong = n + int(rng.choice([-1, 1])) if n > 2 else n + 1  # never "one ... circles"
        ask, right, wrong = f"Are there {{}} {c} {plural(s)} in the image?", number_word(n), number_word(wrong)
        mc = (f"How many {c} {plural(s)} are there in the image?", str(n),
              [str(max(n + d, 0)) for d in (-2, -1, 1, 2, 3) if n + d >= 0], cat)
    elif cat == "position":
        other = [p for p in POSITIONS if p != o.position]
        ask, right, wrong = f"Is the {o.color} {o.shape} in the {{}} of the image?", o.position, str(rng.choice(other))
        mc = (f"Where is the {o.color} {o.shape}?", o.position, list(rng.permutation(other)), cat)
    elif cat == "color":
        others = [c for c in COLORS if c != o.color]
        wrong = str(rng.choice(others))
        ask = f"Is there {{}} {o.shape} in the {o.position} of the image?"
        right, wrong = f"{article(o.color)} {o.color}", f"{article(wrong)} {wrong}"
        mc = (f"What color is the {o.shape} in the {o.position}?", o.color, list(rng.permutation(others)), cat)
    elif cat == "ocr":
        ask, right, wrong = 'Is the text "{}" written in the image?', scene.text, _fake_text(scene.text or "", rng)
        mc = ("What does the text in the image say?", scene.text or "",
              [_fake_text(scene.text or "", rng) for _ in range(6)], cat)
    else:  # numerical, code (generate_scene makes no other category)
        value = evaluate(scene.text or "")
        what, verb = ("the calculation", "equal") if cat == "numerical" else ("the code", "output")
        right = int(value) if value is not None else 0
        ask, wrong = f"Does the result of {what} in the image {verb} {{}}?", right + int(rng.choice([-2, -1, 1, 2]))
        mc = (f"What is the result of {what} written in the image?", str(right),
              [str(right + d) for d in rng.permutation([-3, -2, -1, 1, 2, 3])], cat)
    return _yes_no(ask, right, wrong, yn_kind) + ([_mc(*mc, rng)] if mc else [])


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
        (folder / "scenes").mkdir(parents=True, exist_ok=True)
        rows = []
        for i in range(n):
            cat = categories[i % len(categories)]
            rng = np.random.default_rng([seed, i])
            scene = generate_scene(rng, cat)
            sid = f"{cat}-{i:04d}"
            img_rel = f"images/{cat}/{sid}.png"
            (folder / "images" / cat).mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(folder / img_rel, encode_image(render_scene(scene, size), "PNG"))
            write_text_atomic(folder / "scenes" / f"{sid}.json", scene.model_dump_json(indent=1))
            rows.append({"id": sid, "image": img_rel, "category": cat, "description": describe_scene(scene),
                         "scene": scene.model_dump(), "questions": scene_questions(scene, rng)})
        # object annotations in the POPE builder's format: objects named "<colour> <shape>", in reading order
        write_text_atomic(folder / "objects.jsonl", _lines([{"image": r["image"], "objects": list(dict.fromkeys(
            f"{o['color']} {o['shape']}" for o in sorted(r["scene"]["objects"], key=lambda o: (o["row"], o["col"])))
        )} for r in rows]))
        _write_turn_sets(folder, rows, n, seed, size)
        # the dataset's declared name: what benchmark its categories belong to (methods/leaderboard.py)
        write_text_atomic(folder / "dataset.json",
                          json.dumps({"name": "world", "n": n, "seed": seed, "size": size}) + "\n")
        write_text_atomic(folder / "README.txt",
                          f"vlmcheck reference world: {n} scenes, seed {seed}, {size}x{size} px.\n"
                          "manifest.jsonl: id, image, category, description (canonical), scene (ground truth), "
                          "questions.\n")
        write_text_atomic(folder / "manifest.jsonl", _lines(rows))  # last: the file that makes the folder a world
    return Path(out) / "manifest.jsonl"


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
        (folder / "images").mkdir(parents=True, exist_ok=True)
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
                write_bytes_atomic(folder / "images" / f"{sid}.png", encode_image(render_scene(scene, size), "PNG"))
                sides[name] = {"id": sid, "image": f"images/{sid}.png", "description": describe_scene(scene),
                               "scene": scene.model_dump()}
            rows.append({"id": f"pair{i:03d}", **sides, "shared_objects": keep_n})
        write_text_atomic(folder / "pairs.jsonl", _lines(rows))  # last: the file that makes the folder a dataset
    return Path(out) / "pairs.jsonl"


__all__ = ["make_world", "make_world_pairs", "scene_questions", "position_name"]
