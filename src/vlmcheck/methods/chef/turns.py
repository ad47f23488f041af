"""ChEF's turn scenarios (Table 5, D.2; their data, pools and departures from the authors' code: docs/methods.md,
"Turn scenarios").  An item carries ``turns``, each one PPL question about the image: ``{role, prompt, template,
options, values, answer, accept, label}`` - ``options`` fill ``template``, ``values`` are what the metric reads,
``accept`` the option indices that count as right.  Prompts and templates are the authors' (``ChEF/instruction/``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from ...core.dataset_files import DatasetFileError, parse_json, read_bytes, read_text
from ...core.files import JsonlRecords
from . import metrics as M

COUNT_TEMPLATE = "{option}"
DETECT_PROMPTS = (
    "The image shows",
    "Give all the bounding boxes of {prefix} in the image. The bounding box should be represented as "
    "[x1, y1, x2, y2] with floating numbers indicating the coordinates of the object in a normalized range of "
    "0-1. These values correspond to the top left x, top left y, bottom right x, and bottom right y.",
)
DETECT_TEMPLATES = ("The image shows {option}", "It is located at the bbox {option}")
HIER_PROMPTS = (
    "What is the fine-grained category label for the object in this image?",
    "As the coarse-grained category label for this image is {prefix}, what is the fine-grained category label "
    "for this image?",
)
HIER_TEMPLATE = "The fine-grained category label for this image is {option}"


def _rng(seed: int, item_id: str) -> np.random.Generator:
    from ...perturb.compose import sample_seed

    return np.random.default_rng(sample_seed(seed, item_id))


def _turn(role: str, prompt: str, template: str, values: list, answer: int, rng: np.random.Generator,
          fmt=str, label: str | None = None, accept=None) -> dict[str, Any]:
    """A turn with its options shuffled; ``accept(value) -> bool`` marks the other right answers."""
    order = [int(i) for i in rng.permutation(len(values))]
    vals = [values[i] for i in order]
    ans = order.index(answer)
    ok = sorted({ans} | ({i for i, v in enumerate(vals) if accept(v)} if accept else set()))
    return {"role": role, "prompt": prompt, "template": template, "options": [fmt(v) for v in vals],
            "values": vals, "answer": ans, "accept": ok, "label": label}


def _item(item_id: str, image: str | None, turns: list[dict], task: str, **meta) -> dict[str, Any]:
    first = turns[0]
    return {"id": item_id, "image": image, "question": first["prompt"], "options": first["options"],
            "answer": first["answer"], "turns": turns, "meta": {"task": task, **meta}}


def resolve_image(base: Path, image: str | None) -> str | None:
    """``image`` relative to ``base`` unless absolute (pathlib's join keeps an absolute one); None for no image."""
    return str(base / image) if image else None


def _json(path: Path, root: Path | None = None) -> Any:
    """A JSON file under the rule for dataset files (core/dataset_files.py; ``root``: the folder it must stay in)."""
    return parse_json(read_text(path, root), str(path))


def _xml(path: Path, root: Path) -> Any:
    """An annotation's XML under the same rule; a DOCTYPE (entities nested or naming files) is never parsed."""
    data = read_bytes(path, root, "annotation")
    if b"<!DOCTYPE" in data:
        raise DatasetFileError(f"{path}: an annotation declaring a DOCTYPE (entities are never expanded)")
    try:
        return ET.fromstring(data)
    except ET.ParseError as exc:
        raise DatasetFileError(f"{path}: not XML ({exc})") from None


def _records(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".json":
        data = _json(path)
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of records")
        return data
    return list(JsonlRecords(path))


def count_pool(gt: int, width: int = 2, same_decade: bool = False) -> list[int]:
    """The ground truth +- ``width``, from 0 up.  ``same_decade``: the authors' variant, where a number of
    another tens digit is replaced by the next number beyond the other end of the range."""
    nums = list(range(max(0, gt - width), gt + width + 1))
    if not same_decade:
        return nums
    out, right, left = [], 1, 1
    for n in nums:
        if n // 10 == gt // 10:
            out.append(n)
        elif n // 10 < gt // 10:
            out.append(nums[-1] + right)
            right += 1
        else:
            out.append(nums[0] - left)
            left += 1
    return out


def load_counting(path: Path, split: str = "test", **options) -> list[dict[str, Any]]:
    """Counting: JSONL/JSON records ``{image, count | num, question | query | object}``, or the FSC147 folder."""
    if not path.is_dir():
        return counting_items(_records(path), path.parent, **options)
    ann = _json(path / "annotation_FSC147_384.json", path)
    classes = dict(line.split("\t", 1) for line in read_text(path / "ImageClasses_FSC147.txt", path).splitlines()
                   if "\t" in line)
    rows = [{"id": n, "image": f"images_384_VarV2/{n}", "count": len(ann[n]["points"]), "object": classes[n].strip()}
            for n in _json(path / "Train_Test_Val_FSC_147.json", path)[split]]
    return counting_items(rows, path, **options)


def counting_items(rows: list[dict], base: Path, width: int = 2, same_decade: bool = False, seed: int = 0,
                   **_) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(rows):
        gt = int(r["count"] if "count" in r else r["num"])
        q = r.get("question") or r.get("query") or f"How many {r['object']} are there in this image?"
        iid = str(r.get("id", i))
        pool = count_pool(gt, width, same_decade)
        turn = _turn("count", q, COUNT_TEMPLATE, pool, pool.index(gt), _rng(seed, iid))
        out.append(_item(iid, resolve_image(base, r["image"]), [turn], "counting", count=gt))
    return out


def article(name: str) -> str:
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def format_box(box) -> str:
    """The authors' box text: two decimals, one trailing zero dropped ("0.50" -> "0.5")."""
    return "[" + ", ".join(f"{x:.2f}".removesuffix("0") for x in box) + "]"


def _scaled_translated(box, rng: np.random.Generator) -> list[float]:
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    s = rng.uniform(0.5, 1.5)
    nw, nh = w * s, h * s
    nx1, ny1 = x1 + (w - nw) / 2, y1 + (h - nh) / 2
    tx, ty = rng.uniform(-w / 2, w / 2), rng.uniform(-h / 2, h / 2)
    return [max(0.0, nx1 + tx), max(0.0, ny1 + ty), min(1.0, nx1 + nw + tx), min(1.0, ny1 + nh + ty)]


def _random_box(rng: np.random.Generator) -> list[float]:
    cx, cy, w, h = rng.uniform(0, 1, size=4)
    return [max(0.0, cx - w / 2), max(0.0, cy - h / 2), min(1.0, cx + w / 2), min(1.0, cy + h / 2)]


def negative_boxes(gt_boxes: list, all_boxes: list, k: int, rng: np.random.Generator) -> list[list[float]]:
    """``k`` wrong boxes for a class: scaled/translated copies of the image's boxes (3 tries each), then
    random boxes, each with IoU <= 0.5 against every box of the class."""
    def ok(b) -> bool:
        return b[2] > b[0] and b[3] > b[1] and all(M.iou(g, b) <= 0.5 for g in gt_boxes)

    cands = [b for box in all_boxes for b in (_scaled_translated(box, rng) for _ in range(3)) if ok(b)]
    tries = 0
    while len(cands) < k and tries < 10_000:
        b = _random_box(rng)
        tries += 1
        if ok(b):
            cands.append(b)
    return [cands[i] for i in rng.permutation(len(cands))[:k]]


def _voc_rows(folder: Path, split: str) -> list[dict[str, Any]]:
    """The public VOC2012 layout: ``ImageSets/Main/<split>.txt``, ``Annotations/*.xml``, ``JPEGImages/``."""
    names = read_text(folder / "ImageSets" / "Main" / f"{split}.txt", folder).split()
    rows = []
    for n in names:
        root = _xml(folder / "Annotations" / f"{n}.xml", folder)
        w, h = float(root.findtext("size/width")), float(root.findtext("size/height"))
        objs = []
        for o in root.iter("object"):
            bb = o.find("bndbox")
            x1, y1, x2, y2 = (float(bb.findtext(k)) for k in ("xmin", "ymin", "xmax", "ymax"))
            objs.append({"label": o.findtext("name").strip(), "bbox": [x1 / w, y1 / h, x2 / w, y2 / h]})
        rows.append({"id": n, "image": f"JPEGImages/{n}.jpg", "objects": objs})
    return rows


def load_detection(path: Path, split: str = "val", **options) -> list[dict]:
    """Detection: JSONL/JSON records ``{image, objects | object: [{label, bbox}]}`` (boxes as fractions of the
    image size), or the VOC2012 folder."""
    rows, base = (_voc_rows(path, split), path) if path.is_dir() else (_records(path), path.parent)
    return detection_items(rows, base, **options)


def detection_items(rows: list[dict], base: Path, negatives: int = 3, seed: int = 0, **_) -> list[dict[str, Any]]:
    rows = [{**r, "objects": r.get("objects", r.get("object", []))} for r in rows]
    classes = sorted({o["label"] for r in rows for o in r["objects"]})
    out = []
    for i, r in enumerate(rows):
        iid = str(r.get("id", i))
        objs = [(o["label"], [float(x) for x in o["bbox"]]) for o in r["objects"]]
        if not objs:
            continue
        rng = _rng(seed, iid)
        labels = list(dict.fromkeys(lab for lab, _ in objs))
        absent = [c for c in classes if c not in labels]
        turns = []
        for lab in labels:
            others = [absent[j] for j in rng.permutation(len(absent))[:negatives]]
            turns.append(_turn("category", DETECT_PROMPTS[0], DETECT_TEMPLATES[0], [lab] + others, 0, rng,
                               fmt=article, label=lab))
        for lab in labels:
            gts = [b for l2, b in objs if l2 == lab]
            for gt in gts:
                negs = negative_boxes(gts, [b for _, b in objs], negatives, rng)
                turns.append(_turn("box", DETECT_PROMPTS[1].format(prefix=lab), DETECT_TEMPLATES[1], [gt] + negs,
                                   0, rng, fmt=format_box, label=lab,
                                   accept=lambda b, gts=gts: any(M.iou(g, b) > 0.5 for g in gts)))
        out.append(_item(iid, resolve_image(base, r["image"]), turns, "detection",
                         objects=[{"label": lab, "bbox": b} for lab, b in objs]))
    return out


class CategoryTree:
    """Siblings of a category: from a Bamboo tree file (``id2name``, ``father2child``, ``child2father``), a
    ``{parent: [children]}`` mapping, or - with no file - the tree the items' chains imply."""

    def __init__(self, chains: list[list[str]], tree: dict | None = None) -> None:
        self.children: dict[str | None, list[str]] = {}
        self.parent: dict[str, str | None] = {}
        if tree and "father2child" in tree:
            id2name = tree["id2name"]
            name2id = {n: k for k, names in id2name.items() for n in names}
            canon = {k: names[0] for k, names in id2name.items() if names and name2id.get(names[0]) == k}
            for f, kids in tree["father2child"].items():
                self.children[canon.get(f, f)] = [canon[c] for c in kids if c in canon]
            for c, fathers in tree.get("child2father", {}).items():
                if c in canon and fathers:
                    self.parent[canon[c]] = canon.get(fathers[0], fathers[0])
        elif tree:
            for p, kids in tree.items():
                self.children[p] = list(kids)
                for k in kids:
                    self.parent[k] = p
        else:
            for chain in chains:
                for prev, name in zip([None, *chain], chain):
                    kids = self.children.setdefault(prev, [])
                    if name not in kids:
                        kids.append(name)
                    self.parent.setdefault(name, prev)

    def siblings(self, name: str, parent: str | None) -> list[str]:
        p = parent if parent is not None else self.parent.get(name)
        return [c for c in self.children.get(p, []) if c != name]


def load_hierarchical(path: Path, tree: str | None = None, **options) -> list[dict]:
    """Hierarchical classification: JSONL/JSON records ``{image, chain: [coarse, ..., fine]}`` with ``tree`` the
    Bamboo tree file or a ``{parent: [children]}`` JSON; or a folder holding ``items.jsonl`` and ``tree.json``."""
    if path.is_dir():
        tree = tree or (str((path / "tree.json").resolve()) if (path / "tree.json").is_file() else None)
        path = path / "items.jsonl"
    return hierarchy_items(_records(path), path.parent, tree, **options)


def hierarchy_items(rows: list[dict], base: Path, tree: str | None = None, negatives: int = 3, seed: int = 0,
                    **_) -> list[dict[str, Any]]:
    chains = [list(r["chain"]) for r in rows]
    # a file the user named (relative to the data's folder unless absolute): not confined
    cats = CategoryTree(chains, _json(base / tree) if tree else None)
    out = []
    for i, (r, chain) in enumerate(zip(rows, chains)):
        iid = str(r.get("id", i))
        rng = _rng(seed, iid)
        turns = []
        for lv, name in enumerate(chain):
            parent = chain[lv - 1] if lv else None
            sib = cats.siblings(name, parent)
            others = [sib[j] for j in rng.permutation(len(sib))[:negatives]]
            prompt = HIER_PROMPTS[0] if lv == 0 else HIER_PROMPTS[1].format(prefix=parent)
            turns.append(_turn(f"level{lv + 1}", prompt, HIER_TEMPLATE, [name] + others, 0, rng, label=name))
        out.append(_item(iid, resolve_image(base, r["image"]), turns, "hierarchical", chain=chain,
                         **({"realm": r["realm_name"]} if "realm_name" in r else {})))
    return out


def load_turns(path: Path, **_) -> list[dict[str, Any]]:
    """Generic multi-turn PPL: JSONL records ``{image, turns: [{prompt, options, answer (index or text),
    template = "{option}"}]}``; options keep their order."""
    return turn_items(list(JsonlRecords(path)), path.parent)


def turn_items(rows: list[dict], base: Path, **_) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(rows):
        iid = str(r.get("id", i))
        turns = []
        for k, t in enumerate(r["turns"]):
            opts = [str(o) for o in t["options"]]
            a = t["answer"]
            ans = a if isinstance(a, int) else opts.index(str(a))
            turns.append({"role": t.get("role", f"turn{k + 1}"), "prompt": t["prompt"],
                          "template": t.get("template", "{option}"), "options": opts, "values": opts,
                          "answer": ans, "accept": [ans], "label": t.get("label")})
        out.append(_item(iid, resolve_image(base, r.get("image")), turns, "turns"))
    return out


LOADERS = {"counting": load_counting, "detection": load_detection, "hierarchical": load_hierarchical,
           "turns": load_turns}
#: the same scenarios from rows (a Hugging Face dataset's columns named as the JSONL records' keys)
FROM_ROWS = {"counting": counting_items, "detection": detection_items, "hierarchical": hierarchy_items,
             "turns": turn_items}


def summarize_turns(results: list[dict[str, Any]], task: str) -> dict[str, Any]:
    """Per-role accuracy, and the scenario's own metric, of ``results``: per item ``{"turns": [...], "meta": ...}``."""
    by_role: dict[str, list[bool]] = {}
    for r in results:
        for t in r["turns"]:
            by_role.setdefault(t["role"], []).append(t["correct"])
    out: dict[str, Any] = {"turn_accuracy": {k: float(np.mean(v)) for k, v in by_role.items()},
                           "turns": int(sum(len(v) for v in by_role.values()))}
    if task == "hierarchical":
        out["weighted_accuracy"] = M.weighted_accuracy([[t["correct"] for t in r["turns"]] for r in results])
        out["turn_metric"] = "weighted_accuracy"
    elif task == "detection":
        out["detection"] = M.detection_scores([{
            "categories": [(t["label"], t["values"][t["pred"]]) for t in r["turns"] if t["role"] == "category"],
            "boxes": [(t["label"], t["values"][t["pred"]]) for t in r["turns"] if t["role"] == "box"],
            "gt": [(o["label"], o["bbox"]) for o in r["meta"]["objects"]]} for r in results])
        out["grounding_accuracy"] = out["detection"]["grounding_acc"]  # = mAP@0.5 in the authors' metric
        out["turn_metric"] = "grounding_accuracy"
    return out
