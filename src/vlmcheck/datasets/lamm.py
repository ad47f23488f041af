"""LAMM's benchmark meta files, which ChEF reads (github.com/OpenGVLab/LAMM, src/ChEF/scenario/):
``<root>/meta_file/<Task>_<Dataset>.json``, a JSON list of items with ``image`` and the task's fields (``query``,
``gt_choice``/``gt_choices``, ``label``, ``sentences``, ``num``, ``object``, ``chain``, ...).  ``image`` is
relative to the root, the folder ABOVE ``meta_file/``, as LAMM joins it.  One record per item, id
``<meta file stem>/<id or index>``, category the stem; the query is kept as LAMM wrote it (docs/methods.md)."""

from __future__ import annotations

from pathlib import Path

from ._release import found, json_file, once, refuse
from .base import Benchmark, Dataset, Record, benchmarks, register_benchmark, register_form

for _name in ("fsc147", "voc2012"):  # ChEF's counting and detection data, read from LAMM's meta files only
    register_benchmark(Benchmark(_name))


def _root_and_files(path: Path) -> tuple[Path, list[Path]]:
    if path.is_file():
        return path.parent.parent, [path]
    meta = path / "meta_file"
    return path, sorted(meta.glob("*.json")) if meta.is_dir() else []


def detect(path: Path) -> bool:
    if path.is_file():
        return path.parent.name == "meta_file" and path.suffix == ".json"
    return bool(_root_and_files(path)[1])


@register_form("lamm", detect=detect, benchmarks=("lamm",),
               schema="github.com/OpenGVLab/LAMM src/ChEF/scenario/*_dataset.py "
                      "(<root>/meta_file/<Task>_<Dataset>.json)",
               carries=('images', 'multiple choice', 'yes/no', 'classes', 'counts', 'boxes', 'captions', 'turns'))
def read(path: Path, *, benchmark: str | None = None, **_) -> Dataset:
    root, files = _root_and_files(path)
    if not files:
        raise refuse(path, "LAMM's data root with meta_file/<Task>_<Dataset>.json")
    ds = Dataset("lamm", "lamm", str(path), [])
    for f in files:
        items = json_file(f, "a LAMM meta file (a JSON list of items with an image)")
        if not isinstance(items, list):
            raise refuse(f, "a LAMM meta file (a JSON list of items with an image)")
        task, _, name = f.stem.partition("_")
        # the benchmark the meta file holds (VQA_ScienceQA.json: ScienceQA), whose official figure its items count
        # toward (datasets/official.py)
        bench = (name or task).replace("-", "").replace("_", "").lower()
        bench = bench if bench in benchmarks() else None
        unique = once(f, "one item per id")
        for i, it in enumerate(items):
            rid = f"{f.stem}/{it.get('id', i) if isinstance(it, dict) else i}"
            if not isinstance(it, dict) or not isinstance(it.get("image"), str):
                ds.skipped.append((rid, "needs an image"))
                continue
            unique(rid, rid)
            img = root / it["image"]
            if not img.is_file():
                ds.skipped.append((rid, f"image {it['image']} not under the data root {root}"))
                continue
            # every field of the item stays in meta: ChEF's turn scenarios read LAMM's own keys (num, object, query)
            rec = Record(id=rid, images=[str(img)], question=str(it["query"]) if it.get("query") else None,
                         category=f.stem, root=str(root),
                         meta={"task": task, "dataset": name or task, **({"benchmark": bench} if bench else {}),
                               **{k: v for k, v in it.items() if k not in ("image", "id")}})
            if isinstance(it.get("gt_choices"), list) and isinstance(it.get("gt_choice"), int):
                rec.options, rec.answer = [str(c) for c in it["gt_choices"]], it["gt_choice"]
            elif "label" in it:
                rec.answer = it["label"]
            elif "num" in it:
                rec.answer = it["num"]
            elif isinstance(it.get("sentences"), list) and it["sentences"]:
                rec.description, rec.meta["captions"] = str(it["sentences"][0]), list(it["sentences"])
            ds.records.append(rec)
    return found(path, ds, f"LAMM items whose images exist under the data root {root}")
