"""ChEF scenarios: loaders that turn local files into items ``{id, image, question, options, answer (index), meta}``
(the kinds and their fields: docs/methods.md, "Scenarios").  The JSONL kinds (:data:`URL_KINDS`) also read a file at
an fsspec URL; every other source form is read by the dataset layer and made into items by
:func:`vlmcheck.methods.records.chef_items`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ...core import remote
from ...core.dataset_files import within_window
from ...core.files import iter_jsonl_objects, jsonl_lines
from ...core.inputs import dataset_path
from ...datasets import DatasetFormError, load
from ..records import chef_items, dataset_for, for_limit

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # option labels: CIFAR-10 needs ten


#: the scenario kinds made for one benchmark: its item rule holds on any source that names no other (datasets/)
BENCHMARK_OF_KIND = {"scienceqa": "scienceqa", "mmbench": "mmbench"}

#: the scenario kinds whose data file may be at a URL (a JSONL naming its images)
URL_KINDS = ("mc", "scienceqa", "pope", "classification", "retrieval")


def _jsonl(path: Path | str) -> list[dict[str, Any]]:
    if remote.is_url(path):
        return [json.loads(line) for _, line in jsonl_lines(remote.read_text(str(path), "scenario file"))]
    # streamed: under --limit N's row window (core/dataset_files.first_rows) the rows it needs only
    return [row for _, row in within_window(iter_jsonl_objects(path, "scenario file", empty_ok=True))]


def _resolve(path: Path | str, image: str | None) -> str | None:
    """An image named in the data file ``path``, relative to the file's folder (or folder URL)."""
    if remote.is_url(path):
        return dataset_path(remote.parent(str(path)), image) if image else None
    return resolve_image(path.parent, image)


def _item(path: Path, i: int, r: dict[str, Any], question: str, options: list[str], answer: int,
          meta: dict[str, Any], image: Any = None) -> dict[str, Any]:
    """An item of row ``r`` (the ``i``-th) of the data file ``path``; ``image``: a required ``r["image"]``."""
    return {"id": str(r.get("id", i)), "image": _resolve(path, r.get("image") if image is None else image),
            "question": question, "options": options, "answer": answer, "meta": meta}


def _answer_index(answer: Any, options: list[str]) -> int:
    if isinstance(answer, int):
        return answer
    a = str(answer).strip()
    if len(a) == 1 and a.upper() in LETTERS[:len(options)]:
        return LETTERS.index(a.upper())
    if a in options:
        return options.index(a)
    raise ValueError(f"answer {answer!r} is not an option letter, index or option text")


def load_mc(path: Path, **_) -> list[dict[str, Any]]:
    skip = ("id", "image", "question", "options", "answer")
    return [_item(path, i, r, r["question"], list(r["options"]), _answer_index(r["answer"], list(r["options"])),
                  {k: v for k, v in r.items() if k not in skip}) for i, r in enumerate(_jsonl(path))]


def load_scienceqa(path: Path, **_) -> list[dict[str, Any]]:
    return [_item(path, i, r, f"Context: {r['hint']}\n{r['question']}" if r.get("hint") else r["question"],
                  list(r["choices"]), int(r["answer"]), {}) for i, r in enumerate(_jsonl(path))]


def load_pope(path: Path, **_) -> list[dict[str, Any]]:
    return [_item(path, i, r, r["question"], ["Yes", "No"], 0 if str(r["answer"]).strip().lower() == "yes" else 1,
                  {"pope": True}, image=r["image"]) for i, r in enumerate(_jsonl(path))]


def load_classification(path: Path, question: str = "What is the category of the image?", **_) -> list[dict]:
    rows = _jsonl(path)
    pool = sorted({r["label"] for r in rows})
    return [_item(path, i, r, question, pool, pool.index(r["label"]), {}, image=r["image"]) for i, r in enumerate(rows)]


def load_retrieval(path: Path, **options) -> list[dict]:
    """Caption retrieval from a JSONL of image, caption (see :func:`retrieval_items`)."""
    return retrieval_items([{**r, "image": _resolve(path, r["image"])} for r in _jsonl(path)], **options)


def retrieval_items(rows: list[dict[str, Any]], k: int = 4, seed: int = 0,
                    question: str = "Which caption describes the image?", negatives: str = "random", **_
                    ) -> list[dict]:
    """Caption retrieval: each image's caption among ``k - 1`` negatives, the most ``similar`` captions by
    sentence-embedding inner product (ChEF D.2: "based on BERT similarity"; all-MiniLM-L6-v2) or ``random`` ones."""
    rng = np.random.default_rng(seed)
    if negatives not in ("random", "similar"):
        raise ValueError(f"negatives={negatives!r}: use random or similar")
    sims = None
    if negatives == "similar":
        from ..cast import sentence_embeddings

        emb = sentence_embeddings([r["caption"] for r in rows])
        sims = emb @ emb.T
    out = []
    for i, r in enumerate(rows):
        others = [j for j in range(len(rows)) if j != i and rows[j]["caption"] != r["caption"]]
        if sims is not None:  # most similar first; ties by position
            chosen = sorted(others, key=lambda j: (-float(sims[i, j]), j))[:k - 1]
        else:
            chosen = [others[j] for j in rng.choice(len(others), size=min(k - 1, len(others)), replace=False)]
        opts = [rows[j]["caption"] for j in chosen] + [r["caption"]]
        opts = [opts[p] for p in rng.permutation(len(opts))]
        out.append({"id": str(r.get("id", i)), "image": r["image"], "question": question, "options": opts,
                    "answer": opts.index(r["caption"]), "meta": {"negatives": negatives},
                    **({"root": r["root"]} if r.get("root") else {})})
    return out


def load_mmbench(path: Path, circular: bool = False, **_) -> list[dict]:
    """MMBench's VLMEvalKit TSV, read by the dataset layer (datasets/vlmeval_tsv.py; docs/methods.md, "MMBench")."""
    try:
        ds = load(str(path), benchmark="mmbench", form="vlmeval-tsv")
    except DatasetFormError as exc:
        raise ValueError(str(exc)) from None
    return chef_items(ds, "mmbench", circular=circular, turn_rows=TURN_ROWS, retrieval_items=retrieval_items)


def load_world(path: Path, **_) -> list[dict]:
    manifest = path / "manifest.jsonl" if path.is_dir() else path
    return [{"id": f"{r['id']}-mc", "image": _resolve(manifest, r["image"]), "question": q["question"],
             "options": q["options"], "answer": LETTERS.index(q["answer"]), "meta": {"category": r["category"]}}
            for r in _jsonl(manifest) for q in r["questions"] if q["type"] == "mc"]


from .turns import FROM_ROWS as TURN_ROWS, LOADERS as TURN_LOADERS, resolve_image  # noqa: E402

#: the record kind each scenario makes its items of (datasets.RECORD_KINDS; `vlmcheck list`)
READS = {"mc": "multiple choice", "scienceqa": "multiple choice", "mmbench": "multiple choice", "pope": "yes/no",
         "classification": "classes", "retrieval": "captions", "world": "images", "counting": "counts",
         "detection": "boxes", "hierarchical": "hierarchy", "turns": "turns"}

LOADERS = {"mc": load_mc, "scienceqa": load_scienceqa, "pope": load_pope, "classification": load_classification,
           "retrieval": load_retrieval, "mmbench": load_mmbench, "world": load_world, **TURN_LOADERS}


#: the scenario kinds whose items are their rows', one item (or one per rotation) per row in order: their first N
#: items come from the first rows (the others draw options, candidates or turns from all rows)
ROW_KINDS = ("mc", "scienceqa", "pope", "mmbench")


def load_scenario(kind: str, path: str | Path, **options) -> list[dict[str, Any]]:
    if kind not in LOADERS:
        raise ValueError(f"unknown scenario {kind!r}; known: {', '.join(LOADERS)}")
    return for_limit(lambda: _load_scenario(kind, path, **options))  # --limit N: the rows it needs


def _load_scenario(kind: str, path: str | Path, **options) -> list[dict[str, Any]]:
    if kind != "world":
        # hfds:, a Hub or save_to_disk folder, a VLMEvalKit TSV, a release (datasets/); read as the benchmark the
        # scenario is made for where the source names none
        ds = dataset_for(path, BENCHMARK_OF_KIND.get(kind))
        if ds is not None:
            return chef_items(ds, kind, turn_rows=TURN_ROWS, retrieval_items=retrieval_items, **options)
    url = remote.is_url(path)
    if url and kind not in URL_KINDS:
        raise ValueError(f"scenario {kind!r} reads local files; a URL works with {', '.join(URL_KINDS)}")
    # relative or absolute, the same items (images named from the data's folder)
    path = str(path) if url else Path(path).absolute()
    items = LOADERS[kind](path, **options)
    if not items:  # an empty file is an error, never a run of nothing that exits 0
        raise ValueError(f"{path}: no {kind} items in it")
    # images stay inside the scenario's folder or folder URL (core/inputs.py)
    root = remote.parent(path) if url else str(path if path.is_dir() else path.parent)
    for it in items:
        it.setdefault("root", root)
    return items
